"""The weight plane's two halves without an engine: learner/weight_sender.py broadcasting to
actors/weight_sync.py's worker extension.

Over gloo (two ranks in this process, one thread each), into a small model that loads as vLLM's
does (by name, ignoring what it does not know): buckets load as they arrive, in the engines'
dtype, into the model get_model() returns, and a name that loads nothing fails the sync.

NCCL cannot run on this machine, so its behaviour is checked against a small recording fake of
the c10d process-group API (broadcast -> Work with is_completed/wait, abort) whose collectives
complete a little after they are posted, as NCCL's do: the join sends one element, each bucket
waits for every receiver's readiness, the clock runs until the transfer completed, and a stuck
or unready peer aborts the group within the timeout.
"""
import threading
import time

import pytest
import torch

from jury.actors import weight_sync
from jury.actors.weight_sync import WeightReceiver
from jury.learner import weight_sender
from jury.learner.weight_sender import SyncAborted, WeightSender, abort_sync, drop_tied
from jury.protocol.messages import bucket_ready_key


class Model(torch.nn.Module):
    """Loads (name, tensor) pairs into its parameters by name, like vLLM's loader, which ignores a
    name it does not know (a `.bias` suffix, a rotary table); returns the names it loaded. Records,
    per load, the names and how many received buckets were alive."""

    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.a = torch.nn.Linear(16, 16, bias=False, dtype=dtype)
        self.b = torch.nn.Linear(16, 16, bias=False, dtype=dtype)
        self.c = torch.nn.Linear(16, 8, bias=False, dtype=dtype)
        self.loads = []
        self.group = None

    def load_weights(self, weights):
        params = dict(self.named_parameters())
        known = [(n, t) for n, t in weights if n in params]
        with torch.no_grad():
            for name, t in known:
                params[name].copy_(t)
        self.loads.append(([n for n, _ in weights], self.group.peak_buckets))
        return {n for n, _ in known}


class Runner:
    """vLLM's model runner as the extension sees it: on GPUs `.model` may be a CUDA-graph wrapper,
    get_model() the model itself."""

    def __init__(self, model):
        self.model = object()  # the wrapper: loading into it fails
        self._model = model
        self.model_config = type("ModelConfig", (), {"dtype": next(model.parameters()).dtype})()

    def get_model(self):
        return self._model


class Worker(WeightReceiver):
    def __init__(self, model):
        self.rank, self.device, self.model_runner = 0, torch.device("cpu"), Runner(model)


@pytest.fixture(autouse=True)
def no_vllm_reload(monkeypatch):
    """vLLM's layerwise-reload helpers work on vLLM's layers, not on this model: off here (the
    engine test in test_sync_modes.py runs them)."""
    monkeypatch.setattr(weight_sync, "_reloading", lambda model, config: _nothing())


class _nothing:
    def __enter__(self):
        return lambda: None  # release: nothing is held by a vLLM layer here

    def __exit__(self, *exc):
        return False


def _learner_weights():
    torch.manual_seed(0)
    return {k: v.clone() for k, v in Model().state_dict().items()}


def _sync(worker, weights, update, sender):
    """Join and sync over gloo: the sender in a thread, the worker here. Returns (ack, sent)."""
    model = worker.model_runner.get_model()
    out = {}
    t = threading.Thread(target=lambda: (sender.connect(), out.update(sent=sender.broadcast(update, weights))))
    t.start()
    joined = worker.jury_init_weight_group("127.0.0.1", sender.port, 2, 1, "gloo", timeout_s=30)
    model.group = worker._jury_group
    try:
        ack = worker.jury_receive_weights(update.version, update.names, update.dtypes, update.shapes, update.buckets)
    finally:
        t.join(timeout=30)
    return joined, ack, out.get("sent")


def test_each_bucket_loads_as_it_arrives_in_the_engines_dtype():
    weights = _learner_weights()  # fp32, as an fp32 learner holds them
    model = Model(torch.bfloat16)
    worker = Worker(model)
    sender = WeightSender("127.0.0.1", 2, timeout_s=30)
    # 1 KiB buckets of bf16: a (16, 16) weight is 512 bytes, so a and b share one, c has its own
    update = WeightSender.layout(list(weights.items()), version=1, bucket_bytes=1024, dtype="torch.bfloat16")
    assert update.buckets == [[0, 1], [2]] and set(update.dtypes) == {"torch.bfloat16"}
    joined, ack, sent = _sync(worker, weights, update, sender)
    assert joined == {"rank": 1, "dtype": "torch.bfloat16"}
    assert sent["bytes"] == sum(t.numel() * 2 for t in weights.values())  # bf16 on the wire: half of fp32
    # one load per bucket, with that bucket's tensors; never more than the bucket in hand alive
    assert [names for names, _ in model.loads] == [["a.weight", "b.weight"], ["c.weight"]]
    assert ack["peak_buckets"] == 1 and all(alive <= 1 for _, alive in model.loads)
    for name, t in weights.items():
        assert torch.equal(model.state_dict()[name], t.to(torch.bfloat16)), name


def test_a_bucket_whose_tensors_are_held_stays_alive_but_no_third():
    """Without the copy-out of what vLLM's layers hold (weight_sync._release_buckets, which the real
    engine test exercises), a loader that keeps the last bucket's tensors keeps that bucket alive
    while the next arrives: two, never a third, since the next load lets the first go."""
    weights = _learner_weights()
    model = Model()
    held, load = [], model.load_weights

    def load_holding(weights):  # keeps the last bucket's tensors until the next load
        held[:] = [t for _, t in weights]
        return load(weights)

    model.load_weights = load_holding
    worker = Worker(model)
    update = WeightSender.layout(list(weights.items()), version=1, bucket_bytes=1)  # a bucket per tensor
    _, ack, _ = _sync(worker, weights, update, WeightSender("127.0.0.1", 2, timeout_s=30))
    assert len(update.buckets) == 3 and ack["peak_buckets"] == 2


def test_a_name_that_loads_nothing_fails_the_sync():
    # the learner's b.weight under another name, which the loader ignores as an unknown .bias:
    # b would keep its old weights
    weights = {("b.bias" if k == "b.weight" else k): v for k, v in _learner_weights().items()}
    model = Model()
    worker = Worker(model)
    update = WeightSender.layout(list(weights.items()), version=1)
    with pytest.raises(RuntimeError, match=r"version 1: 1 parameter\(s\) .* got no weights .*\['b\.weight'\]"):
        _sync(worker, weights, update, WeightSender("127.0.0.1", 2, timeout_s=30))


def test_tied_weights_are_sent_once_under_their_first_name():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
               num_key_value_heads=2)
    tied = LlamaForCausalLM(LlamaConfig(**cfg, tie_word_embeddings=True))
    names = [n for n, _ in drop_tied(tied, list(tied.state_dict().items()))]
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names
    assert "lm_head.weight" in tied.state_dict()  # what was sent before: the embedding twice
    untied = LlamaForCausalLM(LlamaConfig(**cfg, tie_word_embeddings=False))
    assert [n for n, _ in drop_tied(untied, list(untied.state_dict().items()))] == list(untied.state_dict())


# ── NCCL's behaviour, against a recording fake ──

class Work:
    """A posted collective that completes `delay_s` after it was posted (never, for None); wait()
    returns at once, as NCCL's does (it only orders the CUDA stream)."""

    def __init__(self, delay_s):
        self.done_at = None if delay_s is None else time.monotonic() + delay_s

    def is_completed(self):
        return self.done_at is not None and time.monotonic() >= self.done_at

    def wait(self):
        return True


class RecordingGroup:
    def __init__(self, delay_s=0.05):
        self.calls, self.delay_s = [], delay_s

    def broadcast(self, tensors, opts):
        self.calls.append(("broadcast", tensors[0].numel(), opts.rootRank))
        return Work(self.delay_s)

    def abort(self):
        self.calls.append(("abort",))


@pytest.fixture
def group(monkeypatch):
    g = RecordingGroup()
    monkeypatch.setattr(weight_sender, "new_group", lambda *args: g)
    return g


def _ready(sender, update, ranks):
    for b in range(len(update.buckets)):
        for r in ranks:
            sender.store.set(bucket_ready_key(update.version, b, r), "")


def test_the_join_sends_one_element(group):
    sender = WeightSender("127.0.0.1", 3, backend="gloo", timeout_s=5)
    sender.connect()
    assert group.calls == [("broadcast", 1, 0)]


def test_the_clock_runs_until_each_bucket_arrived(group):
    weights = _learner_weights()
    sender = WeightSender("127.0.0.1", 3, timeout_s=5)
    sender.connect()
    update = WeightSender.layout(list(weights.items()), version=2, bucket_bytes=1)
    _ready(sender, update, ranks=[1, 2])
    sent = sender.broadcast(update, weights)
    assert [c[0] for c in group.calls] == ["broadcast"] * 4  # the join, then the 3 buckets
    assert sent["broadcast_s"] >= 3 * group.delay_s, sent  # not the enqueue: the transfer


def test_no_bucket_is_broadcast_to_a_receiver_that_is_not_ready(group):
    weights = _learner_weights()
    sender = WeightSender("127.0.0.1", 3, timeout_s=0.5)
    sender.connect()
    update = WeightSender.layout(list(weights.items()), version=2, bucket_bytes=1)
    _ready(sender, update, ranks=[1])  # rank 2 died before it got there
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"receiver rank\(s\) \[2\] not ready for bucket 0"):
        sender.broadcast(update, weights)
    assert time.monotonic() - t0 < 5
    assert group.calls == [("broadcast", 1, 0), ("abort",)]  # nothing posted that could hang


def test_a_receiver_ready_soon_costs_the_sender_little_waiting(group, monkeypatch):
    """A receiver that posts its ready key while the sender waits is seen within about twice the wait,
    not at the next of fixed 10 ms looks: with those, each bucket of a sync paid ~10 ms (14 small
    buckets over gloo: 92-147 ms a sync, against 29-32 ms since; benchmarks/weight_sync_gpu.py)."""
    weights = _learner_weights()
    sender = WeightSender("127.0.0.1", 2, timeout_s=5)
    sender.connect()
    update = WeightSender.layout(list(weights.items()), version=2, bucket_bytes=1)
    slept, real_sleep = [], time.sleep

    def sleep(s):  # the receiver posts bucket b's key at the sender's fourth look for it
        slept.append(s)
        if len(slept) % 3 == 0:
            sender.store.set(bucket_ready_key(update.version, len(slept) // 3 - 1, 1), "")
        real_sleep(s)

    monkeypatch.setattr(weight_sender.time, "sleep", sleep)
    group.delay_s = 0
    sender.broadcast(update, weights)
    assert len(update.buckets) == 3 and len(slept) >= 9
    waits = [sum(slept[i:i + 3]) for i in range(0, 9, 3)]  # the ready waits' sleeps, bucket by bucket
    assert all(w < 0.002 for w in waits), waits


def test_a_broadcast_that_never_completes_aborts_the_group(group):
    weights = _learner_weights()
    sender = WeightSender("127.0.0.1", 2, timeout_s=0.5)
    sender.connect()
    group.delay_s = None  # the peer died inside the collective
    update = WeightSender.layout(list(weights.items()), version=2)
    _ready(sender, update, ranks=[1])
    with pytest.raises(TimeoutError, match="bucket 0 of version 2 did not complete in 0s; the group was aborted"):
        sender.broadcast(update, weights)
    assert group.calls[-1] == ("abort",) and sender.pg is None


def test_a_receiver_aborts_its_group_when_a_bucket_never_completes(monkeypatch):
    g = RecordingGroup(delay_s=None)
    monkeypatch.setattr(weight_sync, "_new_group", lambda *args: g)
    sender = WeightSender("127.0.0.1", 2, timeout_s=5)  # only its store: the receiver's group is the fake
    worker = Worker(Model())
    with pytest.raises(TimeoutError, match="rank 1: the join's first broadcast did not complete"):
        worker.jury_init_weight_group("127.0.0.1", sender.port, 2, 1, "gloo", timeout_s=0.3)
    assert g.calls == [("broadcast", 1, 0), ("abort",)]
    assert worker.jury_abort_weight_group() is False  # nothing left to abort


def test_the_drivers_abort_ends_a_wait_for_a_receiver_that_died(group):
    """Rank 2's engine died before it was ready: the driver sets the sync's abort key, and the
    sender stops waiting at once instead of after its bound, with nothing broadcast."""
    weights = _learner_weights()
    sender = WeightSender("127.0.0.1", 3, timeout_s=60)
    sender.connect()
    update = WeightSender.layout(list(weights.items()), version=2, bucket_bytes=1)
    _ready(sender, update, ranks=[1])
    threading.Timer(0.3, abort_sync, ("127.0.0.1", sender.port, 2)).start()
    t0 = time.monotonic()
    with pytest.raises(SyncAborted, match="weight sync to version 2: aborted by the driver"):
        sender.broadcast(update, weights)
    assert time.monotonic() - t0 < 10
    assert group.calls == [("broadcast", 1, 0), ("abort",)]


def test_the_drivers_abort_ends_a_broadcast_stuck_on_a_dead_peer(group):
    weights = _learner_weights()
    sender = WeightSender("127.0.0.1", 2, timeout_s=60)
    sender.connect()
    group.delay_s = None  # the peer died inside the collective
    update = WeightSender.layout(list(weights.items()), version=3)
    _ready(sender, update, ranks=[1])
    abort_sync("127.0.0.1", sender.port, 3)
    with pytest.raises(SyncAborted):
        sender.broadcast(update, weights)
    assert group.calls[-1] == ("abort",) and sender.pg is None


def test_a_receiver_leaves_a_bucket_the_driver_aborted(monkeypatch):
    """A live generator's worker waits inside bucket 0 for a sender that will not send (another
    generator died): the abort key ends its wait, and its group is aborted."""
    g = RecordingGroup(delay_s=0)
    monkeypatch.setattr(weight_sync, "_new_group", lambda *args: g)
    sender = WeightSender("127.0.0.1", 2, timeout_s=60)
    worker = Worker(Model())
    worker.jury_init_weight_group("127.0.0.1", sender.port, 2, 1, "gloo", timeout_s=60)
    g.delay_s = None  # the buckets never arrive
    abort_sync("127.0.0.1", sender.port, 5)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="rank 1: bucket 0 of version 5 aborted by the driver"):
        list(worker._jury_group.buckets(5, ["torch.float32"], [[2]], [[0]]))
    assert time.monotonic() - t0 < 10
    assert g.calls[-1] == ("abort",)
