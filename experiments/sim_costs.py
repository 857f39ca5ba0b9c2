"""The stage costs of `jury simulate`: one readable YAML file (configs/simulate/costs.yaml), or fitted
to a `jury bench` output folder.

    costs = load_costs("configs/simulate/costs.yaml", ["learner.token_s=0.001"])
    costs = calibrate("runs/bench-20261125-101010")        # from bench.json and its runs' files

Each stage is a few numbers, so a user can read what the model assumes and change it:

    generation   a decode step of an engine takes step_s + seq_s·n seconds with n sequences
                 running (one token for each of them), or flop_seq_s·n where that is longer (the
                 FLOP-bound side, at large n), plus prefill_s for each group it starts (and, with
                 rebuild_kv_after_sync, the running sequences' KV again after an inflight sync);
                 completion lengths from `lengths` (fixed, lognormal, a ledger's values, or a run's
                 recorded groups by task index: trace)
    verifier     check_s per sample, plus gate_s per group (the gate's latency)
    learner      step_s per step plus token_s per trained token, per epoch, over num_ranks ranks
    sync         fixed_s + weight_bytes / bandwidth + one bucket_latency_s per bucket
    sharing      where roles share cores (one CPU machine), each runs slower while the other runs:
                 the learner at 1/(1 + learner) of its rate while a generator decodes, a generator
                 at 1/(1 + generator) of its rate while the learner trains (processor sharing)

The stage costs are each role alone; calibration fits them to the alone arms of a `jury bench`
folder and the sharing factors to how much slower each role ran inside its pipeline.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from jury.protocol.config import ConfigError


@dataclass(frozen=True)
class Lengths:
    """Completion tokens of one sample. `empirical` draws from `values` (a ledger's group means:
    each sample draws its own, so a group's spread is that of the groups, a stand-in). `trace`
    replays a run's groups: task index i gets the per-sample lengths recorded for index i (the
    same prompt in every arm of a bench, which the seed fixes), a task past the trace a recorded
    group drawn at random; a recorded group of another size gives its samples drawn with
    replacement. The trace keeps what the group means lose: the spread within a group, and the
    few samples that run to max_new_tokens, which set how long a drain waits."""

    kind: Literal["fixed", "lognormal", "empirical", "trace"] = "lognormal"
    tokens: int = 64          # fixed
    median: float = 40.0      # lognormal
    sigma: float = 0.8        # lognormal: the log's standard deviation (the tail)
    values: tuple[float, ...] = ()  # empirical
    groups: tuple[tuple[int, ...], ...] = ()  # trace: groups[i], the samples' lengths of task index i

    def draw(self, rng: random.Random, n: int, max_new_tokens: int, index: int = 0,
             min_new_tokens: int = 0) -> list[int]:
        if self.kind == "fixed":
            raw = [self.tokens] * n
        elif self.kind == "lognormal":
            raw = [rng.lognormvariate(math.log(self.median), self.sigma) for _ in range(n)]
        elif self.kind == "empirical":
            raw = [rng.choice(self.values) for _ in range(n)]
        else:
            group = self.groups[index] if index < len(self.groups) and self.groups[index] else \
                rng.choice([g for g in self.groups if g])
            raw = list(group) if len(group) == n else [rng.choice(group) for _ in range(n)]
        # the engine stops no sample before generator.min_new_tokens, nor lets one pass max_new_tokens
        return [min(max_new_tokens, max(1, min_new_tokens, round(x))) for x in raw]


@dataclass(frozen=True)
class Generation:
    step_s: float = 0.004     # a decode step's fixed cost (weights read once per step)
    seq_s: float = 0.0        # ... and per running sequence (its KV cache, its share of FLOPs)
    flop_seq_s: float = 0.0   # a step takes at least this per running sequence (FLOP-bound decode)
    prefill_s: float = 0.0    # per group started
    prompt_tokens: int = 128  # a prompt's tokens: the hardware formulas' prefill and context (sim_gpu.py)
    # after an inflight weight update: false, each running sequence keeps its KV cache (vLLM's
    # pause and reload, ours); true, the engine drops it and rebuilds it, a prefill of the prompt and
    # the tokens so far at prefill_s / prompt_tokens a token (AReaL's interruptible generation; the
    # attention over the longer context is not charged beyond the prompt's)
    rebuild_kv_after_sync: bool = False
    lengths: Lengths = field(default_factory=Lengths)
    # a mixture of experts: reading every routed expert's weights once takes expert_step_s, and a
    # step reads the share its sequences are routed to, 1 - (1 - expert_share)^n of them for n
    # sequences (expert_share: experts per token over experts; sim_gpu.ModelShape.experts_read)
    expert_step_s: float = 0.0
    expert_share: float = 0.0

    def decode_step_s(self, running: int) -> float:
        experts = self.expert_step_s * (1.0 - (1.0 - self.expert_share) ** running) if self.expert_step_s else 0.0
        return max(self.step_s + experts + self.seq_s * running, self.flop_seq_s * running)

    def prefill_experts_s(self, running: int, tokens: int) -> float:
        """A mixture's experts that `tokens` prefilled in a decode step of `running` sequences reach
        beyond those the step's decode reads: the weights are read once a step for all its tokens, so
        at low concurrency a prompt's tokens read most of the experts, and at high none more."""
        if not self.expert_step_s or tokens <= 0:
            return 0.0
        idle = 1.0 - self.expert_share
        return self.expert_step_s * (idle ** running - idle ** (running + tokens))


@dataclass(frozen=True)
class Verifier:
    # per sample, in one check process: a worker's verifier.pool_workers processes check that many at
    # once (each on a core of its own: the simulator does not charge them to the roles' cores)
    check_s: float = 0.001
    gate_s: float = 0.0       # per group (the proof gate's latency)


BASE_PASSES = 3.0  # a plain update's forward and backward, in forwards' worth of compute


@dataclass(frozen=True)
class Learner:
    step_s: float = 0.0       # per step: optimizer step, ZeRO communication
    token_s: float = 0.0005   # per trained token, per epoch, on one rank
    overhead_s: float = 0.0   # per step, after the sync: the driver's bookkeeping (neither wait, training nor sync)
    # the forwards' worth per token token_s is for (learner_passes: 3 for a plain forward and backward);
    # a run with others (a KL reference, a critic, gradient checkpointing, a proximal pass) scales it
    passes: float = BASE_PASSES


SELF_REWARDS = ("self_certainty", "entropy")  # scored by the learner in its once-per-batch forward


def train_passes(cfg) -> float:
    """The policy's forwards' worth of compute per trained position and epoch, as learner/update.py's
    train_shard runs them: the loss's forward and backward (3), one more with gradient checkpointing,
    the KL reference's forward in every micro-batch of every epoch (+1), and the once-per-batch forward
    spread over the epochs (+1/epochs), which the proximal log-probs (any correction, recompute_old)
    and the self-rewards' scores share. All of it shared by the ranks; the monitor's forward, which
    rank 0 runs alone, is monitor_passes."""
    lc = cfg.learner
    once = lc.recompute_proximal or cfg.verifier.reward in SELF_REWARDS
    return 3 + (1 if lc.gradient_checkpointing else 0) + (1 if lc.kl_coef > 0 else 0) + int(once) / lc.epochs


def monitor_passes(cfg) -> float:
    """The monitor's initial-KL forward (learner/learner.py: initial_kl over rank 0's own rows, no grad,
    the other ranks waiting) in forwards' worth per trained token of the whole batch and epoch:
    min(initial_kl_rows, rank 0's B·G/R rows) of the batch's B·G, once a step. Not divided by the ranks."""
    m, rows = cfg.monitor, cfg.batch_groups * cfg.generator.group_size
    if not (m.enabled and m.initial_kl_rows and rows):
        return 0.0
    own = math.ceil(rows / cfg.learner.num_ranks)
    return min(m.initial_kl_rows, own) / rows / cfg.learner.epochs


def critic_passes(cfg) -> float:
    """The critic's (advantage=gae, learner/critic.py): its values once per batch (+1/epochs) and its
    own forward and backward in every epoch (3, 4 with gradient checkpointing); 0 without one."""
    lc = cfg.learner
    if lc.advantage != "gae":
        return 0.0
    if lc.critic_model and lc.critic_model != cfg.model:
        raise ConfigError(f"learner.critic_model={lc.critic_model}: jury simulate prices the critic as the "
                          "policy's shape; another critic model is not modelled")
    return 3 + (1 if lc.gradient_checkpointing else 0) + 1 / lc.epochs


def learner_passes(cfg) -> float:
    """The forwards' worth per trained token and epoch of a run's learner that its ranks share: the
    policy's and the critic's (the monitor's, rank 0's alone, is monitor_passes)."""
    return train_passes(cfg) + critic_passes(cfg)


def measured_passes(cfg) -> float:
    """The passes a run's measured seconds a token took in, on one rank (a calibration's learner runs
    one; another count is outside it): the ones its ranks share and the monitor's."""
    return learner_passes(cfg) + monitor_passes(cfg)


@dataclass(frozen=True)
class Sharing:
    """How much slower a role runs while the other one runs beside it on the same cores: its rate
    is 1/(1 + factor) of its alone rate for as long as the other is busy, its alone rate otherwise.
    0 where each role has its own hardware (GPUs: experiments/sim_gpu.py).

    With `cores` (the machine's, > 0) the learner's rate comes from the cores instead (learner_rate):
    each busy engine's worker holds the cores vLLM pins it to, and the learner's threads share the
    cores left with the floating load of the busy engines (their schedulers and actors,
    `engine_load` cores each). The learner's OpenMP team goes at the pace of its threads' share, so
    a run with more learner threads or engines is priced by the same numbers."""

    learner: float = 0.0      # the learner, while one or more generators decode
    generator: float = 0.0    # each generator, while the learner trains
    # the layout of the run the factors were fitted to (0: not recorded): how the cores are shared
    # moves with the threads that want them, so a run with another layout is outside the calibration
    learner_threads: int = 0  # learner.threads
    generators: int = 0       # num_generators
    cores: int = 0            # the machine's cores; 0: no cores model, the learner's factor applies
    engine_load: float = 0.0  # with cores: the floating cores each busy engine keeps busy beside its pinned worker
    # with cores: how long an engine's worker keeps its cores after its last decode step (vLLM's CPU
    # worker spins waiting for its next message: busy_loop_s, 1 s)
    spin_s: float = 0.0

    def learner_rate(self, threads: int, engines: int, busy: int, spinning: int = 0) -> float:
        """The learner's speed against alone with `busy` of `engines` engines decoding and `spinning`
        more holding their cores after decoding (cores model). Each engine's worker is pinned to
        engine_cores of its own (vLLM's auto binding for one engine, cluster.placement.engine_cpu_binds
        for several); the learner's threads and the decoding engines' floating load share the rest,
        each thread at free / demand of a core, the team at that pace. Alone, the learner's threads
        have min(1, cores / threads) each."""
        if not busy and not spinning:
            return 1.0
        pinned = min(self.cores, (busy + spinning) * engine_cores(self.cores, engines))
        floating = threads + busy * self.engine_load
        free = self.cores - pinned
        share = min(1.0, free / floating) if free > 0 else self.cores / (pinned + floating)
        return min(1.0, share / min(1.0, self.cores / threads))

    def outside(self, learner_threads: int, generators: int) -> list[str]:
        """Why factors fitted at this layout do not carry to a run with this one (empty: they do, or
        there are none to carry, or the cores model prices the layout)."""
        if not (self.learner or self.generator) or self.cores:
            return []
        out = []
        if self.learner_threads and learner_threads != self.learner_threads:
            out.append(f"learner.threads={learner_threads}, the sharing factors fitted at {self.learner_threads}")
        if self.generators and generators != self.generators:
            out.append(f"num_generators={generators}, the sharing factors fitted at {self.generators}")
        return out


VLLM_CPU_SPIN_S = 1.0  # vLLM's CPU worker: SpinCondition's busy_loop_s (docs/results.md, "What takes the cores")


def engine_spin_s(run_dir: Path) -> float:
    """How long a run's CPU engines held their cores after decoding: none where its generators ran
    the model inside the engine core (actors/cpu_engine.py; their `engine_inline` counter in its
    last metrics row), vLLM's worker's spin where they did not, or where the run predates the
    counter (every run before that change used vLLM's two processes)."""
    inline = [v for k, v in _last_metrics(run_dir).items() if k.endswith("/engine_inline")]
    return 0.0 if inline and all(inline) else VLLM_CPU_SPIN_S


def with_cores(sharing: Sharing, cores: int, threads: int, engines: int, spin_s: float = VLLM_CPU_SPIN_S) -> Sharing:
    """The cores model fitted to the same run as `sharing`'s factors: the engine_load with which
    learner_rate, all `engines` busy beside `threads` learner threads, is the learner factor's
    1/(1 + learner). `spin_s`: how long an engine keeps its cores after decoding (engine_spin_s of
    the run). Unchanged where the engines' workers leave no core free (nothing to fit)."""
    pinned = min(cores, engines * engine_cores(cores, engines))
    if cores - pinned <= 0:
        return sharing
    share = min(1.0, cores / threads) / (1 + sharing.learner)  # each learner thread's part of a core, engines busy
    load = max(0.0, ((cores - pinned) / share - threads) / engines)
    return dataclasses.replace(sharing, cores=cores, engine_load=load, spin_s=spin_s)


def machine_cores() -> int:
    """The cores this process may run on (what the pipeline splits among its CPU engines)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def engine_cores(cores: int, engines: int) -> int:
    """The cores each CPU engine's worker is pinned to on a machine of `cores`: vLLM's auto binding
    gives one engine all but the last; several get max(1, (cores - engines) // engines) each
    (cluster.placement.engine_cpu_binds, which leaves one core an engine to the rest)."""
    return max(1, (cores - engines) // engines)


@dataclass(frozen=True)
class Sync:
    fixed_s: float = 0.05
    weight_bytes: float = 0.0
    bandwidth_bytes_per_s: float = 1e9
    bucket_latency_s: float = 0.0

    def seconds(self, bucket_mb: int) -> float:
        buckets = math.ceil(self.weight_bytes / (bucket_mb * 2**20)) if self.weight_bytes else 0
        return self.fixed_s + self.weight_bytes / self.bandwidth_bytes_per_s + buckets * self.bucket_latency_s


@dataclass(frozen=True)
class Costs:
    generation: Generation = field(default_factory=Generation)
    verifier: Verifier = field(default_factory=Verifier)
    learner: Learner = field(default_factory=Learner)
    sync: Sync = field(default_factory=Sync)
    sharing: Sharing = field(default_factory=Sharing)
    # where the numbers come from: "stated" (a costs file, the defaults: round numbers, tied to no run),
    # "calibration" (fitted to a jury bench folder) or "hardware" (the GPU formulas, for this config)
    source: str = "stated"
    # the settings of the run a calibration fitted these costs to, ((key, value), ...): the costs hold
    # for that model (another is refused) and, for the rest, a run that differs is outside the
    # calibration (the simulator says which: Simulation.outside_calibration). Empty: not fitted
    calibrated_at: tuple = ()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def costs_from_dict(d: dict) -> Costs:
    """Nested dict (the YAML) -> Costs; an unknown key is refused by its dotted name."""
    def build(cls, data: dict, where: str):
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ConfigError(f"costs: unknown key {where}{unknown[0]} (known: {', '.join(names)})")
        kwargs = {}
        for k, v in data.items():
            factory = names[k].default_factory
            section = factory if factory is not dataclasses.MISSING and dataclasses.is_dataclass(factory) else None
            if section is not None and not (isinstance(v, dict) or v is None):
                raise ConfigError(f"costs: {where}{k} must be a mapping of its costs, got {v!r}")
            sub = section
            if k in ("values", "groups", "calibrated_at") and not (
                    isinstance(v, (list, tuple)) and (k == "values" or all(isinstance(x, (list, tuple)) for x in v))):
                shape = "a list of numbers" if k == "values" else "a list of lists"
                raise ConfigError(f"costs: {where}{k} must be {shape}, got {v!r}")
            default = names[k].default
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                v = _as_number(v)  # YAML 1.1 reads 3e9 (no dot) as a string
            if k in ("values", "groups"):  # YAML 1.1 reads 3e2 as a string inside a list too
                v = [_as_number(x) for x in v] if k == "values" else [[_as_number(x) for x in g] for g in v]
            kwargs[k] = build(sub, v or {}, f"{where}{k}.") if sub else \
                tuple(v) if k == "values" else tuple(tuple(g) for g in v) if k == "groups" else \
                tuple(tuple(kv) for kv in v) if k == "calibrated_at" else v
        return cls(**kwargs)

    costs = build(Costs, d, "")
    _check(costs)
    return costs


def _as_number(x):
    """A string YAML 1.1 left unread ("3e2") as its number; anything else as it is (checked after)."""
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            pass
    return x


def _check(costs: Costs):
    """A cost below zero, a length kind unknown or without its values: refused with the key's name."""
    def walk(node, where):
        for f in dataclasses.fields(node):
            value, name = getattr(node, f.name), f"{where}{f.name}"
            default = f.default if f.default is not dataclasses.MISSING else None
            if dataclasses.is_dataclass(value):
                walk(value, name + ".")
            elif isinstance(default, bool):
                if not isinstance(value, bool):
                    raise ConfigError(f"costs: {name} must be true or false, got {value!r}")
            elif isinstance(default, (int, float)):  # a number field: YAML may hand in a string ("abc", "inf")
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0 and
                                                                                          math.isfinite(value)):
                    raise ConfigError(f"costs: {name} must be a finite number >= 0, got {value!r}")

    walk(costs, "")
    lengths = costs.generation.lengths
    if lengths.kind not in ("fixed", "lognormal", "empirical", "trace"):
        raise ConfigError("costs: generation.lengths.kind must be fixed, lognormal, empirical or trace, "
                          f"got {lengths.kind!r}")
    if lengths.kind == "empirical" and not lengths.values:
        raise ConfigError("costs: generation.lengths.values is empty (kind empirical draws from it)")
    if lengths.kind == "trace" and not any(lengths.groups):
        raise ConfigError("costs: generation.lengths.groups is empty (kind trace replays it)")
    for key, values in (("groups", [n for g in lengths.groups for n in g]), ("values", lengths.values)):
        bad = [n for n in values if isinstance(n, bool) or not isinstance(n, (int, float)) or not 0 <= n < math.inf]
        if bad:
            raise ConfigError(f"costs: generation.lengths.{key} holds {bad[0]!r}: each length is a number of "
                              "tokens >= 0")
    if lengths.kind == "lognormal" and not lengths.median > 0:
        raise ConfigError(f"costs: generation.lengths.median must be > 0 (a lognormal's median), got {lengths.median!r}")
    if isinstance(costs.sharing.cores, bool) or costs.sharing.cores != int(costs.sharing.cores):
        raise ConfigError(f"costs: sharing.cores must be a whole number of cores, got {costs.sharing.cores!r}")
    if costs.sync.bandwidth_bytes_per_s <= 0:
        raise ConfigError("costs: sync.bandwidth_bytes_per_s must be > 0")
    if any(len(kv) != 2 or not isinstance(kv[0], str) for kv in costs.calibrated_at):
        raise ConfigError(f"costs: calibrated_at must be a list of [setting, value] pairs, got {costs.calibrated_at!r}")
    if costs.source not in ("stated", "calibration", "hardware"):
        raise ConfigError(f"costs: source must be stated, calibration or hardware, got {costs.source!r}")
    if costs.learner.passes <= 0:
        raise ConfigError("costs: learner.passes must be > 0 (a forward and backward is 3)")

    g = costs.generation
    if g.expert_share > 1 or (g.expert_step_s and not g.expert_share):
        raise ConfigError(f"costs: generation.expert_share must be in (0, 1] with generation.expert_step_s > 0 (the "
                          f"experts a token is routed to, over the experts), got {g.expert_share!r}")


def load_costs(path: str | None, overrides: list[str] = ()) -> Costs:
    """The YAML file (None: the defaults above), then `a.b=value` overrides (YAML values)."""
    if path:
        from jury.protocol.config_load import read_yaml

        return costs_from_dict(_overridden(read_yaml(path), overrides))  # broken YAML: named
    return costs_from_dict(_overridden({}, overrides))


def with_overrides(costs: Costs, overrides: list[str]) -> Costs:
    """`a.b=value` overrides on costs already built (after a calibration: a user's word is last)."""
    return costs_from_dict(_overridden(costs.to_dict(), overrides))


def _overridden(data: dict, overrides: list[str]) -> dict:
    for o in overrides:
        key, _, value = o.partition("=")
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    return data


def run_folder(bench_dir: Path, recorded: str) -> Path:
    """A run folder bench.json names: the one of that name beside bench.json (`jury bench` writes its
    runs there), else the path as written. Beside first: a copied or moved bench must not read the
    runs of the folder it was copied from, which may still exist (outside audit)."""
    p = Path(recorded)
    if p.exists() and p.resolve() == Path(bench_dir).resolve():  # a run folder read as its own bench
        return p
    beside = Path(bench_dir) / p.name
    return beside if beside.exists() else p


def _ledger_lengths(run_dir: Path) -> tuple[float, ...]:
    path = run_dir / "ledger.jsonl"
    from jury.cluster.metrics import read_jsonl

    values = []
    for rows in read_jsonl(path):  # a torn last line skipped, as every reader does
        for row in rows if isinstance(rows, list) else [rows]:
            if row.get("error") is None and row.get("length") is not None:  # a group of 0 tokens counts
                values.append(float(row["length"]))
    if not values:
        raise ValueError(f"{path}: no group lengths")
    return tuple(values)


def _recorded_lengths(run_dir: Path) -> Lengths | None:
    """The run's recorded groups (record/, what `jury bench` runs write) as a trace by task index;
    None without a record. Only trained groups are recorded: an index never trained (dropped, or
    past the last step) stays empty and draws a recorded group instead."""
    from jury.protocol.record import read_record

    files = sorted((run_dir / "record").glob("step-*.msgpack"))
    by_index: dict[int, tuple[int, ...]] = {}
    for f in files:
        for scored in read_record(str(f)):
            by_index[scored.group.task.index] = tuple(len(s.token_ids) for s in scored.group.samples)
    if not by_index:
        return None
    return Lengths(kind="trace", groups=tuple(by_index.get(i, ()) for i in range(max(by_index) + 1)))


def _bench_report(folder: Path) -> dict:
    """bench.json of a `jury bench` folder; of a finished `jury train` run folder, a report of one
    end-to-end run and no alone arm (run_report)."""
    path = folder / "bench.json"
    if not path.is_file() and (folder / "config.yaml").is_file() and (folder / "metrics.jsonl").is_file():
        return run_report(folder)
    if not path.is_file():
        raise ConfigError(f"--calibration {folder}: no bench.json there, nor a run's config.yaml and metrics.jsonl; "
                          "give a folder `jury bench` wrote (runs/bench-...) or a finished `jury train` run")
    try:
        report = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"--calibration {path}: not a JSON file `jury bench` wrote ({e})") from None
    if not isinstance(report, dict) or not isinstance(report.get("config"), dict):
        raise ConfigError(f"--calibration {path}: no \"config\" section (a `jury bench` report has its settings "
                          "there, and its runs under end_to_end/...)")
    return report


_RUN_REPORTS: dict[tuple[str, float], dict] = {}


def run_report(run_dir: Path) -> dict:
    """A `jury train` run folder read as a bench of one run: its timed steps summarised as `jury bench`
    summarises an end-to-end run (bench_rows.run_summary), named "max_staleness=K" (",MODE" added under a
    sync mode other than drain, the default), with no alone arm. calibrate then takes each role's
    cost as it ran in this run (the sharing factors 0: with nothing measured alone, the run's
    contention is in its costs, right for runs laid out like it), the decode line from its waits
    where it is synchronous with a record (record_groups=true) and else from its occupancy, its
    lengths from its record or ledger, and the check's cost from its verifiers' own counters (busy
    seconds over samples checked, as a worker's pool ran them). A run that evaluated or saved
    checkpoints between steps is refused: that time would be read as the driver's own."""
    key = (str(run_dir.resolve()), (run_dir / "metrics.jsonl").stat().st_mtime)
    if key not in _RUN_REPORTS:
        from jury.experiments.bench_rows import WARMUP_STEPS, run_summary

        cfg = _run_config(run_dir)
        if not (run_dir / "occupancy.json").is_file():
            raise ConfigError(f"--calibration {run_dir}: no occupancy.json (a run writes it when it ends): "
                              "give a finished run")
        extra = [f"{k}={v}" for k, v in (("eval.every", cfg.eval.every), ("checkpoint_every", cfg.checkpoint_every))
                 if v]
        if extra:
            raise ConfigError(f"--calibration {run_dir}: the run evaluated or saved checkpoints between steps "
                              f"({', '.join(extra)}), whose time calibration would read as the pipeline's: "
                              "calibrate on a run without them (eval.every=0 checkpoint_every=0)")
        try:
            row = run_summary(cfg, run_dir)
        except (KeyError, ValueError, ZeroDivisionError) as e:
            raise ConfigError(f"--calibration {run_dir}: its metrics cannot be read as a run of more than "
                              f"{WARMUP_STEPS} steps ({type(e).__name__}: {e})") from None
        name = f"max_staleness={cfg.max_staleness}"
        if cfg.generator.sync_mode != "drain" and cfg.max_staleness:
            name += f",{cfg.generator.sync_mode}"
        report = {"config": {"staleness": [cfg.max_staleness], "arms": [], "run_folder": True},
                  f"end_to_end/{name}": row}
        last = _last_metrics(run_dir)
        busy = sum(v for k, v in last.items() if k.startswith("verifier") and k.endswith("/verify_s") and k[8:9].isdigit())
        samples = sum(v for k, v in last.items() if k.startswith("verifier") and k.endswith("/samples") and k[8:9].isdigit())
        if busy > 0 and samples > 0:  # a worker's pool checked `samples` in `busy` seconds, over the run
            report["verifier_only"] = {"samples_per_s": samples / busy, "measured_in": "the run's verifiers"}
        _RUN_REPORTS[key] = report
    return _RUN_REPORTS[key]


def calibrate(bench_dir: str, base: Costs | None = None) -> Costs:
    """Fit the costs to a `jury bench` folder (or a run folder: run_report): each role alone, and how
    much the roles slow each other where they share cores, from the calibration run (the bench's first max_staleness, its
    default settings) and the alone arms.

    Decode, from a synchronous calibration run (max_staleness 0) with its record: the learner
    waits, each step, for its batch generated and checked alone on the machine, all of the
    batch's sequences decoding from the start, so the wait is step_s·(longest completion) +
    seq_s·(all its tokens); least squares over the timed steps (_sync_decode_line) gives the
    engine's alone costs with every per-step cost of the pipeline in them, and the generator's
    sharing factor is 0 (a synchronous run says nothing of contention; generator_only, which runs
    every task at once, priced a token 2x cheaper on the chain task). Otherwise: each end-to-end
    run that threw no generation away (_discarded_work) gives one point, n the sequences running
    while the engine is busy
    (occupancy_mean over its busy share, 1 - idle) and the seconds per decode step, occupancy_mean /
    its tokens/s per generator (tokens/s is busy share · n / step(n)); two or more fit step_s +
    seq_s·n by least squares, one gives step_s alone. That is decode in the pipeline; alone it is
    generator_ratio times faster, the generator_only arm's tokens/s over the calibration run's
    tokens/s per busy generator. Learner: token_s alone is the learner_only arm's seconds per token;
    learner_ratio is the calibration run's train seconds per token over it. Sharing: ratio - 1 for
    each role, the factors if it overlapped the other role throughout; simulate.calibrated fits
    them to the calibration run's actual overlap. Without an alone arm in bench.json, that role's
    pipeline cost is taken as its alone cost (factor 0).
    Verifier: the verifier-only samples/s. Sync: the run with the least sync time (inflight's, when
    run: no drain in it). The driver's overhead a step: the calibration run's step less its wait,
    training and sync (_driver_overhead). Lengths: the calibration run's recorded groups as a trace by task index
    (Lengths); a run without a record, its ledger's group means."""
    base = base or Costs()
    folder = Path(bench_dir)
    report = _bench_report(folder)
    runs = _fitted_runs(folder, report)
    sync_run = runs[_calibration_key(runs, report)]
    gens = _num_generators(run_folder(folder, sync_run["run_dir"]))
    kept = {k: r for k, r in runs.items() if not _discarded_work(run_folder(folder, r["run_dir"]))}
    points = [(r["occupancy_mean"] / max(1e-9, 1 - r.get("idle/generator", 0.0)),
               r["occupancy_mean"] * gens / r["tokens_per_s"]) for r in (kept or runs).values()
              if r.get("occupancy_mean", 0) > 0 and r.get("tokens_per_s", 0) > 0]
    step_s, seq_s = _fit_line(points) if points else (base.generation.step_s, base.generation.seq_s)
    busy_tokens_per_s = sync_run["tokens_per_s"] / (gens * max(1e-9, 1 - sync_run.get("idle/generator", 0.0)))
    alone = report.get("generator_only", {}).get("tokens_per_s")
    generator_ratio = max(1.0, alone / busy_tokens_per_s) if alone and points else 1.0
    calibration_dir = run_folder(folder, sync_run["run_dir"])
    line = _sync_decode_line(calibration_dir)
    if line:  # the engine alone, measured: no ratio to divide by
        (step_s, seq_s), generator_ratio = line, 1.0
    # per trained token and epoch, as Learner.token_s is (the run's tokens are counted once a step;
    # its train seconds and learner_only's cover every epoch)
    epochs = run_epochs(calibration_dir)
    train_token_s = sync_run["learner_train_s"] / (sync_run["tokens_per_s"] * sync_run["step_s"]) / epochs
    alone = report.get("learner_only", {}).get("tokens_per_s")
    token_s = 1 / (alone * epochs) if alone else train_token_s
    learner_ratio = max(1.0, train_token_s / token_s)
    cal = _run_config(calibration_dir)
    if not cal.max_staleness and learner_ratio > 1:
        # a synchronous run trains while the engines wait: what slows its learner against learner_only
        # is the pipeline's other processes (the driver, Ray, the verifiers, the engines' idle loops),
        # there in every run whatever the overlap, not decoding beside it. It is the learner's cost in
        # the pipeline, and the sharing factors price only the overlap on top (with two learner
        # threads on two cores the run trained 1.30x its alone time: an OpenMP team stalls for any
        # thread that loses its core; one thread: 0.98x)
        token_s, learner_ratio = train_token_s, 1.0
    verifier_only = report.get("verifier_only", {})
    # per sample in one check process: the arm ran the worker's whole pool
    check_s = cal.verifier.pool_workers / verifier_only["samples_per_s"] if verifier_only.get("samples_per_s") \
        else base.verifier.check_s
    if not verifier_only.get("samples_per_s"):
        import sys

        where = f"{folder / 'bench.json'} has no verifier_only arm ({verifier_only.get('skipped', 'not run')})" \
            if (folder / "bench.json").is_file() else f"{folder} is a run whose verifiers counted no check"
        print(f"calibration: {where}: the check costs {check_s:g} s a sample as stated, not measured",
              file=sys.stderr)
    sync_s = min(r["sync_total_s"] for r in runs.values())
    overhead_s = _driver_overhead(sync_run)
    lengths = _recorded_lengths(calibration_dir)
    if lengths is None:
        import sys

        print(f"calibration: {calibration_dir} has no record/ (record_groups): completion lengths are drawn from "
              "its ledger's group means, which lose the spread within a group and the longest samples "
              "(docs/simulate.md, a worse fit)", file=sys.stderr)
        lengths = Lengths(kind="empirical", values=_ledger_lengths(calibration_dir))
    return Costs(generation=Generation(step_s / generator_ratio, seq_s / generator_ratio, lengths=lengths),
                 verifier=Verifier(check_s, base.verifier.gate_s),
                 learner=Learner(step_s=0.0, token_s=token_s, overhead_s=overhead_s, passes=measured_passes(cal)),
                 sync=Sync(fixed_s=sync_s), sharing=Sharing(learner_ratio - 1, generator_ratio - 1),
                 source="calibration", calibrated_at=calibration_settings(cal))


# what a calibration's costs are tied to: the model (its costs are that model's: another is refused),
# the task and the sampling (its completion lengths, replayed), and the settings that change the
# learner's or an engine's cost a token, or how they share the cores, in ways the simulator does not
# price on a CPU (how a micro-batch pads and vectorises, the optimizer steps a step, the number type,
# threads, ranks and their ZeRO traffic, engines, check processes); a run that differs is outside it
CALIBRATED_SETTINGS = ("model", "dataset", "data.template", "generator.max_new_tokens", "generator.temperature",
                       "generator.top_p", "generator.dtype", "num_generators", "learner.micro_batch",
                       "learner.minibatches", "learner.dtype", "learner.threads", "learner.num_ranks",
                       "learner.zero_stage", "verifier.pool_workers", "generator.tensor_parallel_size", "bucket_mb")


def setting(cfg, key: str):
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def calibration_settings(cfg) -> tuple:
    return tuple((key, setting(cfg, key)) for key in CALIBRATED_SETTINGS)


def _run_config(run_dir: Path):
    from jury.protocol.config_load import load_run_config

    return load_run_config(str(run_dir))


def _driver_overhead(run: dict) -> float:
    """A bench run's seconds a step outside the learner's wait, its training and the sync: what the
    driver does between steps (the roles' stats, metrics, the ledger). 0 for a row that lacks one of
    them (a bench from before they were reported)."""
    keys = ("step_s", "learner_wait_s", "learner_train_s", "sync_total_s")
    if not all(k in run for k in keys):
        return 0.0
    return max(0.0, run["step_s"] - run["learner_wait_s"] - run["learner_train_s"] - run["sync_total_s"])


def _sync_decode_line(run_dir: Path, warmup: int = 2) -> tuple[float, float] | None:
    """(step_s, seq_s) from a synchronous run: each timed step's generation (its learner/wait_s and
    the driver's bookkeeping before it, which the batch generates through) against its recorded
    batch's longest completion and total completion tokens, least squares through the origin,
    each coefficient kept >= 0; None unless the run is synchronous, has a record and 3 timed steps,
    and its one engine holds the whole batch at once (batch_groups·group_size <= max_num_seqs and
    batch_groups <= max_tasks_in_flight): otherwise sequences wait for a place, or the batch is split
    over engines, and the wait is not that line."""
    from jury.cluster.metrics import read_metrics
    from jury.protocol.config_load import load_run_config
    from jury.protocol.record import read_record

    config, metrics = run_dir / "config.yaml", run_dir / "metrics.jsonl"
    if not (config.exists() and metrics.exists()):
        return None
    cfg = load_run_config(str(run_dir))
    g = cfg.generator
    if cfg.max_staleness or cfg.num_generators != 1 or cfg.batch_groups * g.group_size > g.max_num_seqs \
            or cfg.batch_groups > g.max_tasks_in_flight:
        return None
    # the batch generates from its admission, at the end of the step before: through the driver's
    # bookkeeping (Learner.overhead_s: the row's step less its wait, training and sync) and the wait
    waits = {r["step"]: r["learner/wait_s"] + max(0.0, r.get("perf/step_s", 0.0) - r["learner/wait_s"]
                                                  - r.get("learner/train_s", 0.0) - r.get("sync/total_s", 0.0))
             for r in read_metrics(run_dir) if r.get("step", -1) >= warmup and "learner/wait_s" in r}
    points = []
    for step, wait in sorted(waits.items()):
        path = run_dir / "record" / f"step-{step:06d}.msgpack"
        if path.exists():
            lengths = [len(s.token_ids) for g in read_record(str(path)) for s in g.group.samples]
            points.append((max(lengths), sum(lengths), wait))
    if len(points) < 3:
        return None
    sxx = sum(x * x for x, _, _ in points)
    syy = sum(y * y for _, y, _ in points)
    sxy = sum(x * y for x, y, _ in points)
    sxw = sum(x * w for x, _, w in points)
    syw = sum(y * w for _, y, w in points)
    det = sxx * syy - sxy * sxy
    a, b = ((sxw * syy - syw * sxy) / det, (syw * sxx - sxw * sxy) / det) if det > 1e-12 else (-1.0, -1.0)
    if a < 0 or b < 0:  # one term alone, the better of the two
        a_only, b_only = (sxw / sxx, 0.0), (0.0, syw / syy)
        sse = lambda ab: sum((w - ab[0] * x - ab[1] * y) ** 2 for x, y, w in points)  # noqa: E731
        a, b = min(a_only, b_only, key=sse)
    return a, b


def _discarded_work(run_dir: Path) -> int:
    """Groups whose generation the run threw away: interrupted at a sync (sync_mode interrupt), or
    dropped past max_staleness. bench's tokens/s counts trained tokens only, so such a run's
    seconds per decode step would come out too long; the decode line is fitted without them (with
    all runs where every run discarded some)."""
    last = _last_metrics(run_dir)
    return (interrupted_groups(run_dir, last) or 0) + int(last.get("feeder/dropped_stale", 0))


def _last_metrics(run_dir: Path) -> dict:
    from jury.cluster.metrics import read_metrics

    rows = read_metrics(run_dir) if (run_dir / "metrics.jsonl").exists() else []
    return rows[-1] if rows else {}


def interrupted_groups(run_dir: Path, last: dict | None = None) -> int | None:
    """Groups a run's generators started over at a sync (sync_mode interrupt), over the whole run:
    the generators' counters in its last metrics row; None where that row has none (no metrics, or
    no generator answered for its stats then), not 0. A generator Ray restarted counts from 0 again."""
    last = _last_metrics(run_dir) if last is None else last
    counts = [v for k, v in last.items() if k.endswith("/interrupted")]
    return int(sum(counts)) if counts else None


def _fitted_runs(folder: Path, report: dict) -> dict[str, dict]:
    arms = tuple(f",{name}" for name in report["config"].get("arms", []))  # other settings: not fitted to
    runs = {k: v for k, v in report.items() if k.startswith("end_to_end/") and "run_dir" in v and not k.endswith(arms)}
    if not runs:
        raise ValueError(f"{folder / 'bench.json'}: no end-to-end run")
    return runs


def sharing_run(bench_dir: str, name: str, costs: Costs) -> tuple[Path, float, float]:
    """The bench run `name` (as `jury bench` names it, "max_staleness=1") to fit the sharing factors
    to, and how much slower than alone each role ran in it: (its folder, learner ratio, generator
    ratio). Learner: its train seconds per token over `costs`' alone token_s. Generator: the tokens
    the decode line says the engines would have made alone at the sequences they ran, bin by bin of
    the run's occupancy timeline (_alone_tokens), over the tokens the run made in the same span. Each
    ratio is at least 1.

    The synchronous calibration run hardly overlaps the roles, so factors fitted to it say little of
    an asynchronous run, where generation and training share the cores throughout (docs/results.md,
    the sim_predict tables): an asynchronous run of the same bench is the one to fit them to."""
    folder = Path(bench_dir)
    report = _bench_report(folder)
    runs = _fitted_runs(folder, report)
    key = f"end_to_end/{name}"
    if key not in runs:
        where = folder / "bench.json" if (folder / "bench.json").is_file() else folder
        raise ValueError(f"{where}: no end-to-end run {name!r} to fit the sharing to "
                         f"(it has {', '.join(k.removeprefix('end_to_end/') for k in runs)})")
    run = runs[key]
    run_dir = run_folder(folder, run["run_dir"])
    start, end = run["loop_start_s"], _last_metrics(run_dir)["time_s"]  # the timed loop, metrics.jsonl's clock
    made = max(1e-9, run["tokens_per_s"] * (end - start))
    generator_ratio = _alone_tokens(run_dir, start, end, costs.generation) / made
    learner_ratio = run["learner_train_s"] / (run["tokens_per_s"] * run["step_s"]) / run_epochs(run_dir) \
        / costs.learner.token_s
    return run_dir, max(1.0, learner_ratio), max(1.0, generator_ratio)


def asynchronous_runs(bench_dir: str) -> list[str]:
    """The end-to-end runs of a bench with its own settings (no --arm) and max_staleness above 0, by
    the names `jury bench` gives them ("max_staleness=1", "max_staleness=4,interrupt")."""
    folder = Path(bench_dir)
    runs = _fitted_runs(folder, _bench_report(folder))
    return [k.removeprefix("end_to_end/") for k, r in runs.items()
            if _setting(run_folder(folder, r["run_dir"]), "max_staleness", 0) > 0]


def _alone_tokens(run_dir: Path, start: float, end: float, g: Generation) -> float:
    """Tokens the engines would have decoded alone from `start` to `end` (occupancy.json's clock):
    each 0.1 s bin at the decode line's rate for the sequences running in it, n / decode_step_s(n),
    summed over bins and engines. Not the rate at the mean of n: the rate is concave in n, so an
    occupancy that swings within a step (a full batch, then a few long completions) made fewer tokens
    than its mean says (on the chain task's max_staleness=1 run 1.43x alone where the mean said 1.71x,
    which the fit read as a generator slowed eight-fold beside the learner)."""
    timelines = json.loads((run_dir / "occupancy.json").read_text())["generators"].values()
    return sum(t["bin_s"] * n / g.decode_step_s(n) for t in timelines
               for at, n in zip(t["t"], t["running"]) if start <= at < end and n > 0)


def _calibration_key(runs: dict[str, dict], report: dict) -> str:
    """The bench's first max_staleness with its default settings (else its first run)."""
    staleness = report["config"].get("staleness") or [None]
    key = f"end_to_end/max_staleness={staleness[0]}"
    return key if key in runs else next(iter(runs))


def calibration_run(bench_dir: str) -> Path:
    """The run folder calibrate fits to (its config.yaml is the run's)."""
    folder = Path(bench_dir)
    report = _bench_report(folder)
    runs = _fitted_runs(folder, report)
    return run_folder(folder, runs[_calibration_key(runs, report)]["run_dir"])


def _setting(run_dir: Path, key: str, default: int = 1) -> int:
    """A whole-number setting ("learner.epochs") of a run folder's config.yaml; `default` where the
    file or the key is missing (a bench folder written before the setting existed)."""
    path = run_dir / "config.yaml"
    from jury.protocol.config_load import read_yaml

    node = read_yaml(str(path)) if path.exists() else {}
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return default if node is None else int(node)


def run_epochs(run_dir: Path) -> int:
    """learner.epochs of a run folder (1 where its config.yaml does not say)."""
    return _setting(run_dir, "learner.epochs")


def _num_generators(run_dir: Path) -> int:
    return _setting(run_dir, "num_generators")


def _fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares s = a + b·n; b is kept >= 0 and a > 0 (a decode step never gets cheaper with
    more sequences); points at one n give a alone."""
    ns = [n for n, _ in points]
    mean_n, mean_s = sum(ns) / len(ns), sum(s for _, s in points) / len(points)
    var = sum((n - mean_n) ** 2 for n in ns)
    b = max(0.0, sum((n - mean_n) * (s - mean_s) for n, s in points) / var) if var > 1e-9 else 0.0
    a = mean_s - b * mean_n
    if a <= 0:  # the line through the mean would say a step is free: all of it per sequence instead
        return 1e-6, mean_s / mean_n
    return a, b
