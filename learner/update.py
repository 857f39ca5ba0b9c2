"""One batch's updates on one rank: PPO epochs over mini-batches, micro-batches in each.

    prox = proximal_logprobs(...)            # with a correction: the policy before the first update
    for epoch in range(epochs):
        for m in range(minibatches):         # one optimizer step each
            for chunk in micro_batches(m):   # the same count on every rank (collectives line up)
                loss = micro_loss(chunk) * world / mini-batch totals
                engine.backward(loss)        # gradients averaged over ranks at the last chunk
            engine.step()                    # optimizer and learning-rate scheduler

Every rank runs the same number of forward and backward passes (ZeRO-3 gathers
parameters in each, collectively): a rank with fewer rows runs zero-weight passes over a
stand-in row. Losses are sums over a rank's tokens divided by the whole mini-batch's
totals, times the world size, because DeepSpeed averages gradients over ranks; so N
ranks make exactly the update one rank makes on the same mini-batch.
"""
from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist

from jury.learner.grpo import Batch, length_sorted_chunks, micro_loss, token_logprobs
from jury.learner.shard import Shard
from jury.protocol.config import LearnerConfig
from jury.protocol.plan import Sampling

STATS = ("clip_frac", "approx_kl", "ratio_mean", "entropy")
# About the importance weight f(w), w = π_prox / π_behav (kernels.policy_loss's stats); logged with
# a correction only. π_prox is fixed for the batch, so every pass over it gives the same values.
OFF_POLICY_STATS = ("tis_frac", "mask_frac", "is_weight_mean", "is_weight_sq_mean", "behav_kl")


def stand_in(device: torch.device, pad_id: int) -> Batch:
    """One row of two tokens, one completion token, advantage 0: a pass through every parameter
    whose loss is 0, for a rank that has no rows left when the others still do."""
    return Batch(torch.full((1, 2), pad_id, dtype=torch.long, device=device),
                 torch.ones((1, 2), dtype=torch.long, device=device),
                 torch.ones((1, 1), device=device), torch.zeros((1, 1), device=device),
                 torch.zeros(1, device=device), torch.zeros(1, device=device), 1)


def chunks_per_minibatch(shard: Shard, micro_batch: int, device) -> list[int]:
    """Micro-batches of each mini-batch: the most any rank needs (every rank runs that many)."""
    minibatches = shard.tokens.numel()
    mine = [math.ceil(int((shard.minibatch == m).sum()) / micro_batch) for m in range(minibatches)]
    counts = torch.tensor([max(1, c) for c in mine], dtype=torch.long, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(counts, op=dist.ReduceOp.MAX)
    return counts.tolist()


def proximal_logprobs(model, shard: Shard, micro_batch: int, temperature: float, pad_id: int) -> torch.Tensor:
    """The log-probs of this rank's rows under the current weights (no grad), aligned with
    `completion`: the proximal policy of every correction (learner.correction), taken once before the
    batch's first update."""
    b, device = shard.batch, shard.batch.input_ids.device
    n = b.input_ids.shape[0]
    out = torch.zeros(b.completion.shape, device=device)
    passes = torch.tensor(math.ceil(n / micro_batch), dtype=torch.long, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(passes, op=dist.ReduceOp.MAX)
    dummy = stand_in(device, pad_id)
    with torch.no_grad():
        for i in range(int(passes)):
            rows = torch.arange(i * micro_batch, min(n, (i + 1) * micro_batch), device=device)
            if len(rows) == 0:
                token_logprobs(model, dummy.input_ids, dummy.attention, dummy.completion, temperature)
                continue
            width = int(b.attention[rows].sum(1).max())
            lp, _ = token_logprobs(model, b.input_ids[rows][:, :width], b.attention[rows][:, :width],
                                   b.completion[rows][:, : width - 1], temperature)
            out[rows, : width - 1] = lp
    return out


def train_shard(engine, shard: Shard, cfg: LearnerConfig, *, ref_model, sampling: Sampling,
                pad_id: int, timers: dict[str, float]) -> dict[str, float]:
    """All updates of one batch on this rank; returns this rank's sums (loss, stats weighted by
    tokens), to be added over ranks. `timers` collects forward+backward and optimizer seconds."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    b, device = shard.batch, shard.batch.input_ids.device
    engine.train()
    prox = None
    if cfg.recompute_proximal:
        prox = proximal_logprobs(engine.module, shard, cfg.micro_batch, sampling.temperature, pad_id)
    counts = chunks_per_minibatch(shard, cfg.micro_batch, device)
    dummy = stand_in(device, pad_id)
    sums = {"loss": 0.0, "weight": 0.0, **{k: 0.0 for k in STATS + OFF_POLICY_STATS}}
    for _ in range(cfg.epochs):
        for m, count in enumerate(counts):
            rows = (shard.minibatch == m).nonzero().squeeze(1)
            chunks = length_sorted_rows(b, rows, cfg.micro_batch)
            tokens, seqs = float(shard.tokens[m]), float(shard.seqs[m])
            t0 = time.perf_counter()
            for i in range(count):
                engine.set_gradient_accumulation_boundary(i == count - 1)
                _before_forward(engine)
                if i < len(chunks):
                    idx = chunks[i]
                    loss, stats = micro_loss(engine.module, b, idx, cfg, ref_model=ref_model,
                                             total_tokens=max(1.0, tokens), total_seqs=max(1.0, seqs),
                                             sampling=sampling, proximal=prox)
                    w = float(b.completion[idx].sum())
                    sums["loss"] += float(loss.detach())
                    sums["weight"] += w
                    for k in STATS + OFF_POLICY_STATS:
                        if k in stats:
                            sums[k] += float(stats[k]) * w
                else:  # this rank is out of rows: a zero-weight pass keeps the collectives in step
                    loss, _ = micro_loss(engine.module, dummy, slice(0, 1), cfg, ref_model=ref_model, total_tokens=1.0,
                                         total_seqs=1.0, sampling=sampling,
                                         proximal=torch.zeros_like(dummy.completion))
                    loss = loss * 0.0
                engine.backward(loss * world, scale_wrt_gas=False)
            t1 = time.perf_counter()
            if not engine.zero_optimization():  # DeepSpeed reports the norm under ZeRO only
                timers["grad_norm"] = grad_norm(engine)
            engine.step()
            timers["forward_backward_s"] = timers.get("forward_backward_s", 0.0) + t1 - t0
            timers["optimizer_s"] = timers.get("optimizer_s", 0.0) + time.perf_counter() - t1
    return sums


def step_stats(total: dict[str, float], cfg: LearnerConfig) -> dict[str, float]:
    """The step's loss statistics from train_shard's sums (added over ranks): token-weighted means,
    and with a correction the importance weights' normalised effective sample size
    ESS = (Σ f)² / (n Σ f²) = mean(f)² / mean(f²) over the batch's n tokens (0 if every f is 0)."""
    if total["weight"] <= 0:
        return {}
    keys = STATS + OFF_POLICY_STATS if cfg.recompute_proximal else STATS
    out = {k: total[k] / total["weight"] for k in keys}
    if cfg.recompute_proximal:
        sq = out.pop("is_weight_sq_mean")
        out["is_ess"] = out["is_weight_mean"] ** 2 / sq if sq > 0 else 0.0
    return out


def _before_forward(engine):
    """What DeepSpeed's engine.forward arranges, since the loss calls engine.module directly: a
    ZeRO optimizer counts micro-steps there (ZeRO-3 accumulates a micro-batch's gradient partition
    onto the last one only when it has counted it; without this each one overwrote the last, and
    only the final micro-batch of a step trained). And bf16 on ZeRO-1 (DeepSpeed's BF16_Optimizer,
    fp32 gradient sums) adds each micro-batch's bf16 gradients to its fp32 sums after backward, but
    clears them only in a backward hook engine.forward registers: without it each micro-batch added
    the gradients of all before it again."""
    optimizer = getattr(engine, "optimizer", None)
    clear = getattr(optimizer, "clear_backward_seen_flag", None)
    if clear is not None:
        clear()
    if type(optimizer).__name__ == "BF16_Optimizer":
        optimizer.clear_lp_grads()


def grad_norm(engine) -> float:
    """The global gradient norm (before clipping) of a replicated model, after the reduction."""
    norms = [p.grad.detach().float().norm() for p in engine.module.parameters() if p.grad is not None]
    return float(torch.stack(norms).norm()) if norms else 0.0


def length_sorted_rows(b: Batch, rows: torch.Tensor, size: int) -> list[torch.Tensor]:
    """`rows` in micro-batches of `size`, similar lengths together (see grpo.length_sorted_chunks)."""
    if len(rows) == 0:
        return []
    order = torch.argsort(b.attention[rows].sum(1), stable=True)
    return list(rows[order].split(size))


__all__ = ["train_shard", "proximal_logprobs", "length_sorted_chunks", "step_stats"]
