"""The sending half of the weight plane: learner rank 0 broadcasts buckets.

Protocol of one sync (one control message, bucketed broadcast, version bumped only
after every engine acknowledged):
  1. the learner builds a WeightUpdate (names, dtypes, shapes, bucket layout);
  2. the driver sends it to every generator as one Ray call; each generator drains
     or pauses its engine and calls `jury_receive_weights` in its workers;
  3. at the same time the learner broadcasts the buckets in order;
  4. the driver waits for every generator's acknowledgement, then bumps the version.
"""
from __future__ import annotations

import contextlib
import math
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from jury.protocol.messages import WeightUpdate


class WeightSender:
    def __init__(self, host: str, world_size: int, backend: str = "gloo", port: int = 0, timeout_s: float = 300.0):
        """`timeout_s` bounds every wait of the group (forming it, each broadcast): a receiver that
        never joins or stops taking part ends a sync with an error, not a hang."""
        self.timeout = timedelta(seconds=timeout_s)
        self.store = dist.TCPStore(host, port, world_size, is_master=True, timeout=self.timeout,
                                   wait_for_workers=False)
        self.host, self.port, self.world_size, self.backend = host, self.store.port, world_size, backend
        self.pg = None

    def connect(self):
        """Join the group as rank 0; returns once every receiver has joined too."""
        if self.backend == "gloo":
            self.pg = dist.ProcessGroupGloo(self.store, 0, self.world_size, self.timeout)
        else:
            opts = dist.ProcessGroupNCCL.Options()
            opts._timeout = self.timeout
            self.pg = dist.ProcessGroupNCCL(self.store, 0, self.world_size, opts)

    @staticmethod
    def layout(named_params, version: int, bucket_bytes: int = 64 << 20) -> WeightUpdate:
        """Group consecutive tensors of one dtype into buckets of about `bucket_bytes`.

        A ZeRO-3 partitioned parameter is laid out by its full shape (`ds_shape`)."""
        names, dtypes, shapes, buckets = [], [], [], []
        current, current_bytes, current_dtype = [], 0, None
        for i, (name, p) in enumerate(named_params):
            shape = list(getattr(p, "ds_shape", p.shape))
            names.append(name)
            dtypes.append(str(p.dtype))
            shapes.append(shape)
            size = math.prod(shape) * p.element_size()
            if current and (p.dtype != current_dtype or current_bytes + size > bucket_bytes):
                buckets.append(current)
                current, current_bytes = [], 0
            current.append(i)
            current_bytes += size
            current_dtype = p.dtype
        if current:
            buckets.append(current)
        return WeightUpdate(version=version, names=names, dtypes=dtypes, shapes=shapes, buckets=buckets)

    def broadcast(self, update: WeightUpdate, tensors: dict[str, torch.Tensor], gather=None) -> dict[str, float]:
        """Broadcast every bucket of `update` from rank 0. Returns timings and bytes.

        `gather(tensors)`, when given, is a context manager that makes partitioned tensors
        whole (ZeRO-3): entered per bucket, so only one bucket is ever gathered at a time."""
        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        gather_s = broadcast_s = 0.0
        nbytes = 0
        for bucket in update.buckets:
            parts = [tensors[update.names[i]] for i in bucket]
            t0 = time.perf_counter()
            with gather(parts) if gather else contextlib.nullcontext():
                flat = torch.cat([p.detach().reshape(-1) for p in parts])
                t1 = time.perf_counter()
                gather_s += t1 - t0
                nbytes += flat.numel() * flat.element_size()
                self.pg.broadcast([flat], opts).wait()
                broadcast_s += time.perf_counter() - t1
        return {"broadcast_s": broadcast_s, "gather_s": gather_s, "bytes": float(nbytes)}
