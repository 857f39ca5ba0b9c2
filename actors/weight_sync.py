"""The receiving half of the weight plane, mixed into vLLM's worker.

vLLM loads this class by name (`worker_extension_cls`) into every worker process,
so its methods run where the model lives and are called with
`engine.collective_rpc(...)`. Tensors never travel as rpc arguments (they would
arrive as nested lists): the rpc carries only the WeightUpdate's layout, and the
bytes come over a process group shared with learner rank 0 (gloo on the CPU, NCCL
on GPUs). The sending half is the learner's WeightSender.
"""
from __future__ import annotations

import logging
import time


def _dtype(name: str):
    import torch

    return getattr(torch, name.split(".", 1)[1])


class WeightReceiver:
    """Methods added to vLLM's Worker. `self.model_runner.model` is the live model."""

    def jury_init_weight_group(self, host: str, port: int, world_size: int, first_rank: int, backend: str,
                               timeout_s: float = 300.0) -> int:
        """Join the learner's weight group; `timeout_s` bounds every wait of it (see WeightSender)."""
        from datetime import timedelta

        import torch.distributed as dist
        from torch.distributed import TCPStore

        rank = first_rank + self.rank  # self.rank: this worker's rank inside its engine (tensor parallel)
        timeout = timedelta(seconds=timeout_s)
        store = TCPStore(host, port, world_size, is_master=False, timeout=timeout)
        if backend == "gloo":
            self._jury_pg = dist.ProcessGroupGloo(store, rank, world_size, timeout)
        else:
            opts = dist.ProcessGroupNCCL.Options()
            opts._timeout = timeout
            self._jury_pg = dist.ProcessGroupNCCL(store, rank, world_size, opts)
        self._jury_device = "cpu" if backend == "gloo" else f"cuda:{self.device.index}"
        return rank

    def jury_receive_weights(self, version: int, names, dtypes, shapes, buckets) -> dict:
        """Receive every bucket from rank 0, then load them into the model in one pass."""
        import torch
        import torch.distributed as dist
        from vllm.model_executor.model_loader.reload import (
            finalize_layerwise_reload,
            initialize_layerwise_reload,
        )

        t0 = time.perf_counter()
        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        weights = []
        for bucket in buckets:
            dtype = _dtype(dtypes[bucket[0]])
            sizes = [_numel(shapes[i]) for i in bucket]
            flat = torch.empty(sum(sizes), dtype=dtype, device=self._jury_device)
            self._jury_pg.broadcast([flat], opts).wait()
            for i, part in zip(bucket, flat.split(sizes)):
                weights.append((names[i], part.view(shapes[i])))
        t1 = time.perf_counter()
        model = self.model_runner.model
        # rotary embeddings hold no weights; vLLM's reload warns about each one on every sync
        logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").setLevel(logging.ERROR)
        # vLLM's parameters lose their weight_loader after the first load; the reload
        # helpers restore it around load_weights (see PLATFORM.md).
        initialize_layerwise_reload(model)
        model.load_weights(weights=weights)
        finalize_layerwise_reload(model, self.model_runner.model_config)
        return {"version": version, "recv_s": t1 - t0, "load_s": time.perf_counter() - t1}


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n

