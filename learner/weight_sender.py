"""The sending half of the weight plane: learner rank 0 broadcasts buckets.

Protocol of one sync (one control message, bucketed broadcast, version bumped only
after every engine acknowledged):
  1. the learner builds a WeightUpdate (names, dtypes, shapes, bucket layout);
  2. the driver sends it to every generator as one Ray call; each generator drains
     or pauses its engine and calls `jury_receive_weights` in its workers;
  3. at the same time the learner broadcasts the buckets in order: before each one it
     waits (bounded) until every receiver has posted in the group's store that it is ready
     for that bucket (protocol.messages.bucket_ready_key), so a dead receiver fails the
     sync with an error instead of hanging an NCCL broadcast until the watchdog kills us;
     a member that fails while the others wait (its engine died) makes the driver set the
     sync's abort key (protocol.messages.sync_abort_key), which every wait also watches:
     the sync fails in a fraction of a second, not after sync_timeout_s;
  4. the driver waits for every generator's acknowledgement, then bumps the version.

NCCL specifics: the group is created lazily by NCCL, so `connect` broadcasts one element (a
wrong interface or a closed port fails the join, not step 0); a broadcast's `wait()` only
orders the stream, so each bucket is polled until it completed (the clock then measures the
transfer), and a bucket that never completes aborts the group before NCCL's own, longer
timeout would. Recovery aborts the old group (`abort`) before a new one is formed.
"""
from __future__ import annotations

import contextlib
import math
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from jury.protocol.messages import WeightUpdate, bucket_ready_key, poll_sleeps, sync_abort_key

# Looks at a broadcast's completion and at the receivers' ready keys back off from FIRST_POLL_S
# (doubling) to these: a bucket on NVLink completes in a fraction of a millisecond
POLL_S = 0.001  # the longest sleep between looks at a broadcast's completion
STORE_POLL_S = 0.01  # the longest between looks at the store (receivers ready, the sync aborted): a round trip each
FIRST_POLL_S = 0.0001


class SyncAborted(RuntimeError):
    """The driver aborted this sync: another member of the weight group failed during it."""


def new_group(backend: str, store, rank: int, world_size: int, timeout: timedelta):
    """A standalone process group of the weight plane. NCCL's own timeout is set past ours, so
    that our bounded waits abort the group first: its watchdog would end the whole process."""
    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, world_size, timeout)
    opts = dist.ProcessGroupNCCL.Options()
    opts._timeout = 2 * timeout + timedelta(seconds=60)
    return dist.ProcessGroupNCCL(store, rank, world_size, opts)


class WeightSender:
    def __init__(self, host: str, world_size: int, backend: str = "gloo", port: int = 0, timeout_s: float = 300.0):
        """`timeout_s` bounds every wait of the group (forming it, each receiver's readiness, each
        broadcast): a receiver that never joins or stops taking part ends a sync with an error."""
        self.timeout = timedelta(seconds=timeout_s)
        self.store = dist.TCPStore(host, port, world_size, is_master=True, timeout=self.timeout,
                                   wait_for_workers=False)
        self.host, self.port, self.world_size, self.backend = host, self.store.port, world_size, backend
        self.device = torch.device("cpu") if backend == "gloo" else torch.device("cuda", torch.cuda.current_device())
        self.pg = None

    def connect(self):
        """Join the group as rank 0; returns once every receiver has joined and one element has
        gone through it (NCCL sets up its communicator at the first collective)."""
        self.pg = new_group(self.backend, self.store, 0, self.world_size, self.timeout)
        self._broadcast(torch.zeros(1, device=self.device), "the join's first broadcast")

    def abort(self):
        """Abort the group (a sync failed, or the plane is re-formed): frees a broadcast that waits
        on a dead peer. A new group needs a new WeightSender, with its own store, as cluster/pipeline.py's
        recovery makes: a group formed again on this store was seen to time out in its connect over
        gloo (while writing benchmarks/weight_sync_gpu.py)."""
        if self.pg is not None:
            self.pg.abort()
            self.pg = None

    @staticmethod
    def layout(named_params, version: int, bucket_bytes: int = 64 << 20, dtype: str | None = None) -> WeightUpdate:
        """Group consecutive tensors of one dtype into buckets of about `bucket_bytes`. `dtype`
        ("torch.bfloat16"): floating-point tensors are sent in the engines' dtype (an fp32 learner
        would otherwise send, and each engine hold, twice the bytes).

        A ZeRO-3 partitioned parameter is laid out by its full shape (`ds_shape`)."""
        names, dtypes, shapes, buckets = [], [], [], []
        current, current_bytes, current_dtype = [], 0, None
        for i, (name, p) in enumerate(named_params):
            shape = list(getattr(p, "ds_shape", p.shape))
            wire = _dtype(dtype) if dtype and p.dtype.is_floating_point else p.dtype
            names.append(name)
            dtypes.append(str(wire))
            shapes.append(shape)
            size = math.prod(shape) * wire.itemsize
            if current and (wire != current_dtype or current_bytes + size > bucket_bytes):
                buckets.append(current)
                current, current_bytes = [], 0
            current.append(i)
            current_bytes += size
            current_dtype = wire
        if current:
            buckets.append(current)
        return WeightUpdate(version=version, names=names, dtypes=dtypes, shapes=shapes, buckets=buckets)

    def broadcast(self, update: WeightUpdate, tensors: dict[str, torch.Tensor], gather=None) -> dict[str, float]:
        """Broadcast every bucket of `update` from rank 0. Returns timings and bytes.

        `gather(tensors)`, when given, is a context manager that makes partitioned tensors
        whole (ZeRO-3): entered per bucket, so only one bucket is ever gathered at a time.
        A failure aborts the group: the receivers' waits then fail too, and recovery forms a new one."""
        gather_s = broadcast_s = ready_s = 0.0
        nbytes = 0
        try:
            for b, bucket in enumerate(update.buckets):
                t0 = time.perf_counter()
                self._wait_ready(update.version, b)
                parts = [tensors[update.names[i]] for i in bucket]
                t1 = time.perf_counter()
                ready_s += t1 - t0
                with gather(parts) if gather else contextlib.nullcontext():
                    wire = _dtype(update.dtypes[bucket[0]])
                    flat = torch.cat([p.detach().reshape(-1).to(wire) for p in parts])
                    t2 = time.perf_counter()
                    gather_s += t2 - t1
                    nbytes += flat.numel() * flat.element_size()
                    self._broadcast(flat, f"bucket {b} of version {update.version}",
                                    lambda: self._raise_if_aborted(update.version))
                    broadcast_s += time.perf_counter() - t2
        except Exception:
            self.abort()
            raise
        return {"broadcast_s": broadcast_s, "gather_s": gather_s, "ready_s": ready_s, "bytes": float(nbytes)}

    def _wait_ready(self, version: int, bucket: int):
        """Every receiver has said it is ready for this bucket; bounded by the timeout, and ended
        at once when the driver aborts the sync (a member died: it will never be ready)."""
        keys = [bucket_ready_key(version, bucket, r) for r in range(1, self.world_size)]
        deadline = time.monotonic() + self.timeout.total_seconds()
        sleeps = poll_sleeps(FIRST_POLL_S, STORE_POLL_S)
        while not self.store.check(keys):
            self._raise_if_aborted(version)
            if time.monotonic() > deadline:  # say which ranks are missing: a timeout names none
                missing = [r for r, k in enumerate(keys, 1) if not self.store.check([k])]
                raise TimeoutError(f"weight sync to version {version}: receiver rank(s) {missing} not ready for "
                                   f"bucket {bucket} within {self.timeout.total_seconds():.0f}s (dead, or stuck)")
            time.sleep(next(sleeps))
        for key in keys:
            self.store.delete_key(key)

    def _raise_if_aborted(self, version: int):
        if self.store.check([sync_abort_key(version)]):
            raise SyncAborted(f"weight sync to version {version}: aborted by the driver (a generator failed "
                              f"during it)")

    def _broadcast(self, tensor: torch.Tensor, what: str, check=None):
        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        complete(self.pg.broadcast([tensor], opts), self.timeout, what, self.abort, check)


def complete(work, timeout: timedelta, what: str, abort, check=None):
    """Wait until `work` completed, polling: under NCCL `wait()` only makes the stream wait, so a clock
    read after it measures the enqueue, and a broadcast stuck on a dead peer blocks nobody until the
    next kernel. Past `timeout` the group is aborted (`abort()`), which ends the stuck collective;
    so is it when `check()`, called every STORE_POLL_S, raises (the driver aborted the sync)."""
    deadline = time.monotonic() + timeout.total_seconds()
    next_check = time.monotonic() + STORE_POLL_S
    sleeps = poll_sleeps(FIRST_POLL_S, POLL_S)
    while not work.is_completed():
        now = time.monotonic()
        if now > deadline:
            abort()
            raise TimeoutError(f"weight plane: {what} did not complete in {timeout.total_seconds():.0f}s; "
                               "the group was aborted")
        if check is not None and now > next_check:
            next_check = now + STORE_POLL_S
            try:
                check()
            except Exception:
                abort()
                raise
        time.sleep(next(sleeps))
    work.wait()  # raises the collective's own error, if it failed


def abort_sync(host: str, port: int, version: int, timeout_s: float = 10.0):
    """The driver's side: set the sync's abort key in the weight group's store, as a client."""
    store = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout_s))
    store.set(sync_abort_key(version), "")


def drop_tied(module, named):
    """(name, tensor) without the later names of a tied weight (lm_head.weight when it is
    embed_tokens.weight): vLLM loads a tied weight under its first name and skips the others,
    so sending them would broadcast, and hold, the embedding twice. Buffers pass."""
    first = {name for name, _ in module.named_parameters()}  # a shared Parameter keeps its first name
    every = {name for name, _ in module.named_parameters(remove_duplicate=False)}
    return [(name, t) for name, t in named if name in first or name not in every]


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.split(".", 1)[1])
