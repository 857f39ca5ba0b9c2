"""Every message that crosses a queue, and the MessagePack codec that carries them.

One module, imported by every role; it needs only the standard library, msgpack and
numpy (torch only when a torch tensor is actually encoded or decoded).

Wire format: a multipart ZeroMQ message. Frame 0 is a MessagePack map
`{"t": type name, "f": fields}`; every array in the fields is replaced by an ext
record `(dtype, shape, frame index)` and its bytes travel as a frame of their own,
so token ids and log-probs are never pickled, never copied into the header, and
decode as zero-copy views. Decoding checks the type name against the registry
below and every field against its annotation: an unknown type, a missing or
unexpected field, a wrong type or a buffer of the wrong size is a `DecodeError`.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import msgpack
import numpy as np

WIRE_VERSION = 1
_ARRAY_EXT = 1
_NUMPY_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float16", "float32", "float64", "bool"}
_TORCH_DTYPES = {"torch.bfloat16", "torch.float16", "torch.float32", "torch.int32", "torch.int64"}


class DecodeError(ValueError):
    """A frame that is not a valid message of a known type."""


# ── the kinds a field may take (the codec refuses any other value) ───────────
TaskKind = Literal["original", "diversify"]  # DeRL: a dataset prompt, or one with a proof plan to avoid
FinishReason = Literal["stop", "length", "abort", "error", "repetition"]  # vLLM's, as str(FinishReason)
VerdictKind = Literal["correct", "incorrect", "no_answer", "inconclusive", "timeout", "error"]
GateOutcomeKind = Literal["proved", "inconclusive"]  # the proof gate about the majority answer


# ── messages ────────────────────────────────────────────────────────────────
@dataclass
class PromptTask:
    """One problem to sample a group for. Filled by the feeder."""
    task_id: str
    index: int                 # admission order; the learner consumes batch s = indices [s·B, (s+1)·B)
    prompt: str
    label: str | None          # ground truth; only label-reading reward schemes look at it
    source: str
    kind: TaskKind = "original"
    admitted_version: int = 0  # generator policy version when the feeder admitted it
    max_new_tokens: int = 0    # 0 = the generator's default
    # the bare statement, before any template: what LLM judges and teachers are shown (the prompt
    # may hold a template, a chat template, DeRL's plan); None where the feeder did not set it
    problem: str | None = None
    plan: str | None = None     # DeRL "diversify": the proof plan shown in the prompt
    # CoReward: the problem in other words (Co-rewarding-I's rewrite), rendered like `prompt`; the
    # generator samples G completions of each (Sample.view). None: one prompt, G samples
    rewrite: str | None = None

    @property
    def statement(self) -> str:
        """The problem as a verifier, gate or judge is shown it: the bare statement the feeder
        recorded, else the prompt as the policy saw it."""
        return self.problem if self.problem is not None else self.prompt


@dataclass
class Sample:
    """One completion. Filled by the generator (answer by the verifier)."""
    token_ids: np.ndarray      # (T,) int32, completion only
    logprobs: np.ndarray       # (T,) float32, behaviour log-prob of each sampled token
    text: str
    finish_reason: FinishReason
    answer: str | None = None
    # (T,) int32, the policy version that sampled each token; only under sync_mode "inflight",
    # where a sync can land mid-sample. Empty: every token is from the group's version_start
    token_versions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    view: int = 0  # which prompt it answers: 0 = task.prompt, 1 = task.rewrite (CoReward)


@dataclass
class RolloutGroup:
    """The G samples of one task. Filled by the generator."""
    task: PromptTask
    prompt_ids: np.ndarray     # (P,) int32
    samples: list[Sample]
    version_start: int         # generator policy version when generation started (inflight: its oldest token's)
    version_end: int           # ... and when the last sample finished (inflight: its newest token's)
    actor_id: str
    generate_s: float
    error: str | None = None   # set when the engine refused the task (e.g. prompt too long); samples is empty then
    t_generated: float = 0.0   # wall clock (time.time()) when the last sample finished
    # (P',) int32, the prompt ids of task.rewrite, which the samples of view 1 answer; empty without one
    rewrite_prompt_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))


@dataclass
class Verdict:
    """The verifier's decision about one sample."""
    kind: VerdictKind
    verifier: str
    latency_s: float
    cache_hit: bool = False


@dataclass
class ScoredGroup:
    """A group with its verdicts and rewards. Filled by a verifier worker."""
    group: RolloutGroup
    verdicts: list[Verdict]
    rewards: np.ndarray        # (G,) float32
    scheme: str
    majority_answer: str | None
    vote_share: float
    gate: GateOutcomeKind | None  # None: no gate was asked
    num_distinct: int
    verify_s: float
    worker_id: str = ""
    pass_rate: float = math.nan  # share of samples the label check called correct; NaN without a label
    # the reward scheme's counters for this group, named as metrics (e.g. "derl/judged_samples"):
    # the learner sums them over each trained batch into that step's metrics
    counts: dict[str, float] = field(default_factory=dict)
    t_verify_start: float = 0.0  # wall clock when the worker took the group (queue wait = this - t_generated)
    t_verified: float = 0.0      # ... and when it sent it on
    # set when the verifier could not score the group (after retries): the learner trains on no
    # sample of it (a group that could not be checked is never trained as reward 0)
    error: str | None = None
    # "learner": the scheme needs the policy's full distribution (self_certainty, entropy); the
    # rewards here are a placeholder and the learner scores the group in its forward
    scored_on: Literal["verifier", "learner"] = "verifier"
    # the label check's verdict on the majority answer (a sample of it): a shadow fact for the
    # reward-hacking monitor (spurious consensus), never read by a reward. None: no label or no majority
    majority_verdict: VerdictKind | None = None


@dataclass
class WeightUpdate:
    """The one control message of a weight sync: what the broadcast buckets hold."""
    version: int
    names: list[str]
    dtypes: list[str]          # torch dtype names, e.g. "torch.float32"
    shapes: list[list[int]]
    buckets: list[list[int]]   # indices into names, one list per broadcast


def bucket_ready_key(version: int, bucket: int, rank: int) -> str:
    """The weight group's store key a receiver sets once it is ready for bucket `bucket` of the sync
    to `version`. The sender waits for every receiver's before it broadcasts that bucket: a receiver
    that died then fails a bounded wait, instead of leaving an NCCL broadcast that never completes."""
    return f"jury/v{version}/b{bucket}/r{rank}"


def poll_sleeps(first_s: float, most_s: float):
    """The weight plane's sleeps between looks at something about to happen (a receiver's ready key,
    a broadcast's completion): `first_s`, doubling, up to `most_s`. A bucket's wait is often under a
    millisecond; a fixed 10 ms sleep made each of a sync's buckets cost 10 ms (benchmarks/
    weight_sync_gpu.py), which this bounds at about twice the wait."""
    pause = first_s
    while True:
        yield pause
        pause = min(most_s, 2 * pause)


def sync_abort_key(version: int) -> str:
    """The weight group's store key the driver sets when a member failed during the sync to
    `version` (a generator, or its engine, died): the sender and every live receiver stop waiting
    for the dead one at once and fail the sync, instead of each waiting out sync_timeout_s."""
    return f"jury/v{version}/abort"


@dataclass
class Shutdown:
    """Stop after the current item; nothing after it is read."""
    reason: str = ""


@dataclass
class LedgerRow:
    """One trained group: which policy made it, which step trained it, what it was worth and
    where its wall-clock life went. Filled by the learner; a line of ledger.jsonl."""
    task_id: str
    index: int
    step: int
    kind: TaskKind
    source: str
    admitted_version: int
    version_start: int
    version_end: int
    staleness: int               # step - version_start
    generator: str
    verifier: str
    length: float                # mean completion tokens
    reward: float                # mean reward
    pass_rate: float
    majority_answer: str | None
    error: str | None            # the generator refused the task, or the verifier could not score it
    generate_s: float
    verify_wait_s: float         # generated -> a verifier took it
    verify_s: float
    learner_wait_s: float        # verified -> trained
    verify_share: float          # the verifier's share of the group's life (generation start -> training)
    arrived: float               # wall clock it reached the learner
    trained: float               # ... and when its batch was trained
    tokens_by_version: dict[str, int]  # policy version -> tokens it sampled (JSON keys are strings)


@dataclass
class CorrectSample:
    """The first sample of a trained group that the label check called correct (DeRL's plan
    store keeps one chain of thought per problem, so one per group is enough)."""
    index: int
    kind: TaskKind
    text: str
    answer: str | None


@dataclass
class StepResult:
    """The learner's answer to "train step s" (or to a hold). Filled by the learner.

    `missing` non-empty: the batch's groups with these admission indices did not arrive in
    time and nothing was trained; the driver repairs workers, re-sends them and asks again.
    `refill` non-empty (dynamic sampling): the batch has too few groups with signal; nothing was
    trained, the driver admits these refill slots (Feeder.admit_refills) and asks again. Under
    continuous admission these are flat groups instead, each freeing its place for a new task
    (Feeder.refill_places); a step that is done trains at the next call.
    `dropped` (continuous admission, over_budget=drop): groups found past max_staleness, never to
    be trained; the driver takes them off the feeder's ledger and admits new tasks in their place.
    Set with `missing` too: a drop while the learner waits frees budget it may be waiting on.
    `filtered` (dynamic sampling under continuous admission, with the trained batch): the step's
    flat groups, never to be trained; the driver takes them off the feeder's ledger.
    """
    step: int
    missing: list[int] = field(default_factory=list)
    refill: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    filtered: list[int] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)  # learner/*, reward/*, staleness/*, ...
    staleness_hist: dict[str, int] = field(default_factory=dict)  # staleness -> groups
    verdicts: dict[str, int] = field(default_factory=dict)        # verdict kind -> samples
    ledger: list[LedgerRow] = field(default_factory=list)
    correct: list[CorrectSample] = field(default_factory=list)

    def row(self) -> dict:
        """The step's metrics as one metrics.jsonl row (histograms nested under their names)."""
        return {**self.metrics, "staleness/hist": dict(self.staleness_hist), "verifier/verdicts": dict(self.verdicts)}


MESSAGE_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (PromptTask, Sample, RolloutGroup, Verdict, ScoredGroup, WeightUpdate, Shutdown,
                LedgerRow, CorrectSample, StepResult)
}
Message = Union[PromptTask, RolloutGroup, ScoredGroup, WeightUpdate, Shutdown, StepResult]


# ── encoding ────────────────────────────────────────────────────────────────
def encode(msg: Any) -> list:
    """A message as frames: [header, buffer, buffer, ...]."""
    name = type(msg).__name__
    if MESSAGE_TYPES.get(name) is not type(msg):
        raise TypeError(f"not a message type: {type(msg)!r}")
    buffers: list = []

    def default(obj):
        if isinstance(obj, np.ndarray):
            if obj.dtype.name not in _NUMPY_DTYPES:
                raise TypeError(f"array dtype {obj.dtype} cannot travel")
            arr = np.ascontiguousarray(obj)
            buffers.append(memoryview(arr).cast("B") if arr.size else b"")
            return msgpack.ExtType(_ARRAY_EXT, msgpack.packb([arr.dtype.name, list(arr.shape), len(buffers)]))
        if type(obj).__module__ == "torch" and type(obj).__name__ in ("Tensor", "Parameter"):
            dtype = str(obj.dtype)
            if dtype not in _TORCH_DTYPES:
                raise TypeError(f"tensor dtype {dtype} cannot travel")
            t = obj.detach().cpu().contiguous()
            raw = t.view(-1).view(__import__("torch").uint8).numpy() if t.numel() else np.empty(0, np.uint8)
            buffers.append(memoryview(raw).cast("B") if raw.size else b"")
            return msgpack.ExtType(_ARRAY_EXT, msgpack.packb([dtype, list(t.shape), len(buffers)]))
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        raise TypeError(f"cannot encode {type(obj)!r}")

    fields = {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)}
    header = msgpack.packb({"t": name, "v": WIRE_VERSION, "f": fields}, default=default, use_bin_type=True)
    return [header, *buffers]


def decode(frames: list) -> Any:
    """Frames back into a message; anything malformed raises DecodeError."""
    if not frames:
        raise DecodeError("empty message")
    bufs = [memoryview(f.buffer if hasattr(f, "buffer") else f) for f in frames[1:]]

    def ext_hook(code, data):
        if code != _ARRAY_EXT:
            raise DecodeError(f"unknown ext type {code}")
        try:
            dtype, shape, index = msgpack.unpackb(data)
        except Exception as e:
            raise DecodeError(f"bad array record: {e}") from None
        return _array(dtype, shape, index, bufs)

    try:
        head = msgpack.unpackb(memoryview(frames[0].buffer if hasattr(frames[0], "buffer") else frames[0]),
                               ext_hook=ext_hook, raw=False, strict_map_key=True)
    except DecodeError:
        raise
    except Exception as e:
        raise DecodeError(f"header is not MessagePack: {type(e).__name__}: {e}") from None
    if not isinstance(head, dict) or set(head) != {"t", "v", "f"}:
        raise DecodeError("header must be a map with keys t, v, f")
    if head["v"] != WIRE_VERSION:
        raise DecodeError(f"wire version {head['v']!r}, expected {WIRE_VERSION}")
    cls = MESSAGE_TYPES.get(head["t"]) if isinstance(head["t"], str) else None
    if cls is None:
        raise DecodeError(f"unknown message type {head['t']!r}")
    return _build(cls, head["f"], head["t"])


def _array(dtype, shape, index, bufs):
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise DecodeError(f"bad array shape {shape!r}")
    if not (isinstance(index, int) and 1 <= index <= len(bufs)):
        raise DecodeError(f"array refers to frame {index!r}, message has {len(bufs)} buffers")
    buf, n = bufs[index - 1], math.prod(shape)
    if dtype in _NUMPY_DTYPES:
        item = np.dtype(dtype).itemsize
        if len(buf) != n * item:
            raise DecodeError(f"array {dtype}{shape} needs {n * item} bytes, frame has {len(buf)}")
        return np.frombuffer(buf, dtype=dtype).reshape(shape)
    if dtype in _TORCH_DTYPES:
        import torch

        tdtype = getattr(torch, dtype.split(".", 1)[1])
        item = torch.empty(0, dtype=tdtype).element_size()
        if len(buf) != n * item:
            raise DecodeError(f"tensor {dtype}{shape} needs {n * item} bytes, frame has {len(buf)}")
        if n == 0:
            return torch.empty(shape, dtype=tdtype)
        return torch.frombuffer(bytearray(buf), dtype=tdtype).reshape(shape)
    raise DecodeError(f"array dtype {dtype!r} not allowed")


@functools.cache
def _schema(cls):
    """Fields and resolved annotations of a message class (resolving them is slow; do it once)."""
    return {f.name: f for f in dataclasses.fields(cls)}, typing.get_type_hints(cls)


def _build(cls, fields, path):
    if not isinstance(fields, dict):
        raise DecodeError(f"{path}: expected a map of fields, got {type(fields).__name__}")
    known, hints = _schema(cls)
    extra = set(fields) - set(known)
    if extra:
        raise DecodeError(f"{path}: unexpected fields {sorted(extra)}")
    values = {}
    for name, f in known.items():
        if name not in fields:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DecodeError(f"{path}: missing field {name!r}")
            continue
        values[name] = _coerce(fields[name], hints[name], f"{path}.{name}")
    return cls(**values)


def _coerce(value, hint, path):
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        for arm in typing.get_args(hint):
            try:
                return _coerce(value, arm, path)
            except DecodeError:
                continue
        raise DecodeError(f"{path}: {type(value).__name__} is not {hint}")
    if origin is Literal:
        if value in typing.get_args(hint) and type(value) in {type(a) for a in typing.get_args(hint)}:
            return value
        raise DecodeError(f"{path}: {value!r} is not one of {list(typing.get_args(hint))}")
    if hint is type(None):
        if value is None:
            return None
        raise DecodeError(f"{path}: expected None")
    if origin is list:
        if not isinstance(value, list):
            raise DecodeError(f"{path}: expected a list, got {type(value).__name__}")
        (arm,) = typing.get_args(hint)
        return [_coerce(v, arm, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise DecodeError(f"{path}: expected a map, got {type(value).__name__}")
        karm, varm = typing.get_args(hint)
        return {_coerce(k, karm, path): _coerce(v, varm, f"{path}[{k!r}]") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, path)
    if hint is np.ndarray:
        if isinstance(value, np.ndarray) or type(value).__module__ == "torch":
            return value
        raise DecodeError(f"{path}: expected an array, got {type(value).__name__}")
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool) and type(value) is hint:
        return value
    raise DecodeError(f"{path}: expected {getattr(hint, '__name__', hint)}, got {type(value).__name__}")
