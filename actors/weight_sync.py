"""The receiving half of the weight plane, mixed into vLLM's worker.

vLLM loads this class by name (`worker_extension_cls`) into every worker process,
so its methods run where the model lives and are called with
`engine.collective_rpc(...)`. Tensors never travel as rpc arguments (they would
arrive as nested lists): the rpc carries only the WeightUpdate's layout, and the
bytes come over a process group shared with learner rank 0 (gloo on the CPU, NCCL
on GPUs). The sending half is the learner's WeightSender (learner/weight_sender.py),
whose docstring has the protocol; this half, per bucket:

    store.set(bucket_ready_key(version, b, rank))    # the sender broadcasts only to the ready
    flat = receive(bucket b)                         # polled to completion, bounded, and ended
                                                     # at once if the driver sets sync_abort_key
    loaded |= model.load_weights(bucket's tensors)   # layers load as their weights complete
    copy out what a layer still holds                # the bucket goes: one alive at a time
then every parameter of the model must have been loaded, or the sync fails naming them.
"""
from __future__ import annotations

import contextlib
import logging
import time
import weakref
from datetime import timedelta

from jury.protocol.messages import bucket_ready_key, poll_sleeps, sync_abort_key

POLL_S = 0.001  # the longest sleep between looks at a broadcast's completion (from FIRST_POLL_S, doubling)
FIRST_POLL_S = 0.0001
STORE_POLL_S = 0.01  # between looks at the sync's abort key (a store round trip each)
# vLLM's layerwise reload logs "<Layer>: Failed to load weights" for a layer that took no weights
# on a reload. Rotary embeddings hold only buffers and warn on every sync; every other layer is
# checked here by name (see _check_loaded), so those lines are dropped only for buffer-only layers.
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"


class WeightGroup:
    """This worker's membership of the weight group: its process group, the group's store, its rank."""

    def __init__(self, host: str, port: int, world_size: int, rank: int, backend: str, device, timeout_s: float):
        import torch.distributed as dist

        self.timeout, self.rank, self.device = timedelta(seconds=timeout_s), rank, device
        self.store = dist.TCPStore(host, port, world_size, is_master=False, timeout=self.timeout)
        self.pg = _new_group(backend, self.store, rank, world_size, self.timeout)
        self.peak_buckets = 0

    def join(self):
        """The one-element broadcast the sender's `connect` sends: NCCL forms its communicator at
        the first collective, so a bad interface or a closed port fails here, at the join."""
        import torch

        self.receive(torch.empty(1, device=self.device), "the join's first broadcast")

    def receive(self, tensor, what: str, version: int | None = None):
        """Broadcast from rank 0 into `tensor`, polled to completion within the timeout. During a
        sync (`version`), the driver's abort key for it also ends the wait: a peer died."""
        import torch.distributed as dist

        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        work = self.pg.broadcast([tensor], opts)
        deadline = time.monotonic() + self.timeout.total_seconds()
        next_check = time.monotonic() + STORE_POLL_S
        sleeps = poll_sleeps(FIRST_POLL_S, POLL_S)
        while not work.is_completed():  # under NCCL wait() would only order the stream
            now = time.monotonic()
            if now > deadline:
                self.abort()
                raise TimeoutError(f"weight plane, rank {self.rank}: {what} did not complete in "
                                   f"{self.timeout.total_seconds():.0f}s; the group was aborted")
            if version is not None and now > next_check:
                next_check = now + STORE_POLL_S
                if self.store.check([sync_abort_key(version)]):
                    self.abort()
                    raise RuntimeError(f"weight plane, rank {self.rank}: {what} aborted by the driver (another "
                                       f"member failed during the sync); the group was aborted")
            time.sleep(next(sleeps))
        work.wait()

    def abort(self):
        if self.pg is not None:
            self.pg.abort()
            self.pg = None

    def buckets(self, version: int, dtypes, shapes, buckets):
        """Each bucket as it arrives: (bucket index, [(index into names, tensor)]). A bucket is
        received only after the previous one was handed on, and lives while its tensors are
        referenced (vLLM holds a layer's weights until the layer has all of them)."""
        import torch

        alive = [0]  # buckets received and not yet freed; peak_buckets is its most

        def freed():
            alive[0] -= 1

        self.peak_buckets = 0
        for b, bucket in enumerate(buckets):
            sizes = [_numel(shapes[i]) for i in bucket]
            flat = torch.empty(sum(sizes), dtype=_dtype(dtypes[bucket[0]]), device=self.device)
            alive[0] += 1
            self.peak_buckets = max(self.peak_buckets, alive[0])
            weakref.finalize(flat, freed)
            self.store.set(bucket_ready_key(version, b, self.rank), "")
            self.receive(flat, f"bucket {b} of version {version}", version)
            parts = [(i, part.view(shapes[i])) for i, part in zip(bucket, flat.split(sizes))]
            del flat
            yield b, parts
            del parts  # before the next bucket is allocated: the caller has handed these on


class WeightReceiver:
    """Methods added to vLLM's Worker. `self.model_runner.get_model()` is the live model (on GPUs
    `.model` may be the CUDA-graph wrapper around it)."""

    def jury_init_weight_group(self, host: str, port: int, world_size: int, first_rank: int, backend: str,
                               timeout_s: float = 300.0) -> dict:
        """Join the learner's weight group; `timeout_s` bounds every wait of it (see WeightSender).
        Returns this worker's rank and the dtype its model holds, which the learner sends in."""
        self.jury_abort_weight_group()  # a group from before (the plane is being re-formed)
        rank = first_rank + self.rank  # self.rank: this worker's rank inside its engine (tensor parallel)
        device = "cpu" if backend == "gloo" else f"cuda:{self.device.index}"
        group = WeightGroup(host, port, world_size, rank, backend, device, timeout_s)
        group.join()  # a join that fails aborts its group: nothing is kept
        self._jury_group = group
        return {"rank": rank, "dtype": str(self.model_runner.model_config.dtype)}

    def jury_process(self) -> dict:
        """Where this worker runs: its pid, the cores it may use, torch's thread count, and whether
        its process was forked by actors/cpu_engine.py (on the CPU the engine core, whose start that
        module sets; tests compare them with what `ps` shows)."""
        import multiprocessing
        import os

        import torch

        return {"pid": os.getpid(), "cores": sorted(os.sched_getaffinity(0)), "threads": torch.get_num_threads(),
                "forked": type(multiprocessing.current_process()).__name__ == "EngineCoreFork"}

    def jury_abort_weight_group(self) -> bool:
        """Abort this worker's group, if it has one: a broadcast stuck on a dead peer ends."""
        group = getattr(self, "_jury_group", None)
        self._jury_group = None
        if group is not None:
            group.abort()
        return group is not None

    def jury_receive_weights(self, version: int, names, dtypes, shapes, buckets) -> dict:
        """Receive the buckets from rank 0, loading each as it arrives (as vLLM's own NCCL transfer
        does): one bucket is held at a time (peak_buckets), plus the weights of layers not yet
        complete, not the whole model beside vLLM's budget."""
        model = self.model_runner.get_model()
        group = self._jury_group
        t0 = time.perf_counter()
        recv_s, loaded = 0.0, set()
        with _reloading(model, self.model_runner.model_config) as release:
            t = time.perf_counter()
            for _, parts in group.buckets(version, dtypes, shapes, buckets):
                recv_s += time.perf_counter() - t
                loaded |= set(model.load_weights(weights=[(names[i], tensor) for i, tensor in parts]) or ())
                del parts
                release()
                t = time.perf_counter()
        _check_loaded(model, loaded, version)
        return {"version": version, "recv_s": recv_s, "load_s": time.perf_counter() - t0 - recv_s,
                "peak_buckets": group.peak_buckets}


@contextlib.contextmanager
def _reloading(model, model_config):
    """vLLM's parameters lose their weight_loader after the first load; the layerwise reload
    helpers restore it around load_weights (PLATFORM.md), and process each layer once all its
    weights came in. Yields `release`, called after each bucket's load (see _release_buckets)."""
    from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

    log = logging.getLogger(RELOAD_LOGGER)
    quiet = _BufferOnlyLayers(model)
    log.addFilter(quiet)
    initialize_layerwise_reload(model)
    try:
        yield _release_buckets
    finally:
        try:
            finalize_layerwise_reload(model, model_config)
        finally:
            log.removeFilter(quiet)


def _release_buckets():
    """A layer holds the weights handed to it until it has all of them, and some complete only at
    finalize (a vocabulary padded past the checkpoint's rows: the tiny model's 366 to 384). A held
    tensor is a view that keeps its whole bucket alive; copied out, only the tensor stays."""
    import torch
    from vllm.model_executor.model_loader.reload.layerwise import LAYERWISE_INFO

    for info in list(LAYERWISE_INFO.values()):
        for _, args in info.loaded_weights:
            for key, value in args.arguments.items():
                if isinstance(value, torch.Tensor) and value._base is not None:  # a view into a bucket
                    args.arguments[key] = value.clone()


class _BufferOnlyLayers(logging.Filter):
    """Drops the reload's "Failed to load weights" for layers that have no parameters (rotary
    embeddings): they have nothing to load. The other layers' are kept, and _check_loaded fails."""

    def __init__(self, model):
        super().__init__()
        self.names = {type(m).__name__ for m in model.modules() if not any(True for _ in m.parameters())}

    def filter(self, record) -> bool:
        return not ("Failed to load weights" in record.msg and record.args and record.args[0] in self.names)


def _check_loaded(model, loaded: set[str], version: int):
    """Every parameter of the model was loaded. A name vLLM's loader ignores (a `.bias` suffix, a
    rotary table) or a model's own loader skips would otherwise leave that layer on its old
    weights without a word: a silent partial sync."""
    missing = sorted(name for name, _ in model.named_parameters() if name not in loaded)
    if missing:
        raise RuntimeError(f"weight sync to version {version}: {len(missing)} parameter(s) of the engine's model "
                           f"got no weights (their names in the update did not match): {missing[:10]}")


def _new_group(backend: str, store, rank: int, world_size: int, timeout: timedelta):
    """As the sender's (learner/weight_sender.py new_group): NCCL's own timeout past ours."""
    import torch.distributed as dist

    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, world_size, timeout)
    opts = dist.ProcessGroupNCCL.Options()
    opts._timeout = 2 * timeout + timedelta(seconds=60)
    return dist.ProcessGroupNCCL(store, rank, world_size, opts)


def _dtype(name: str):
    import torch

    return getattr(torch, name.split(".", 1)[1])


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
