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

from jury.learner.grpo import CORRECTIONS, Batch, length_sorted_chunks, micro_loss, rejection_mask, token_logprobs
from jury.learner.self_rewards import row_scores
from jury.learner.shard import Shard
from jury.protocol.config import LearnerConfig
from jury.protocol.plan import Sampling

STATS = ("clip_frac", "dual_clip_frac", "approx_kl", "ratio_mean", "entropy")
# under generator.top_p < 1 only: the share of tokens outside the learner's nucleus, scored under the whole
# distribution instead (learner/nucleus.py)
NUCLEUS_STATS = ("nucleus_outside",)
# About the importance weight f(w), w = π_prox / π_behav (kernels.policy_loss's stats); logged with
# a correction only. π_prox is fixed for the batch, so every pass over it gives the same values.
OFF_POLICY_STATS = ("tis_frac", "mask_frac", "is_weight_mean", "is_weight_sq_mean", "behav_kl")
# A rejection (reject_*) weighs nothing: it counts what it rejected instead (update.reject)
REJECT_SUMS = ("tokens_before_reject", "rejected", "behav_kl_before_reject")


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


def proximal_logprobs(model, shard: Shard, micro_batch: int, sampling: Sampling, pad_id: int) -> torch.Tensor:
    """The log-probs of this rank's rows under the current weights (no grad), aligned with
    `completion`: the proximal policy of every correction (learner.correction), taken once before the
    batch's first update."""
    return forward_pass(model, shard, micro_batch, sampling, pad_id)[0]


def forward_pass(model, shard: Shard, micro_batch: int, sampling: Sampling, pad_id: int,
                 scheme: str | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One no-grad pass over this rank's rows under the current weights: their log-probs (the
    proximal policy, aligned with `completion`) and, with a self-reward `scheme`, each row's mean
    over its scoring span of the per-token self-certainty (KL(U || p)) or negative entropy
    (learner/self_rewards.py). Every rank runs the same number of passes (ZeRO-3 gathers)."""
    b, device = shard.batch, shard.batch.input_ids.device
    out = torch.zeros(b.completion.shape, device=device)
    per_token = torch.zeros(b.completion.shape, dtype=torch.float64, device=device) if scheme else None
    dummy = stand_in(device, pad_id)
    with torch.no_grad():
        for rows in pass_rows(b, micro_batch):
            if len(rows) == 0:
                token_logprobs(model, dummy.input_ids, dummy.attention, dummy.completion, sampling.temperature,
                               certainty=scheme == "self_certainty", top_p=sampling.top_p)
                continue
            width = int(b.attention[rows].sum(1).max())
            outs = token_logprobs(model, b.input_ids[rows][:, :width], b.attention[rows][:, :width],
                                  b.completion[rows][:, : width - 1], sampling.temperature,
                                  certainty=scheme == "self_certainty", top_p=sampling.top_p)
            out[rows, : width - 1] = outs[0]
            if scheme == "self_certainty":
                per_token[rows, : width - 1] = outs[2].double()
            elif scheme == "entropy":  # RENT's reward is the negative entropy
                per_token[rows, : width - 1] = -outs[1].double()
    scores = row_scores(per_token, shard.scoring.span) if scheme else None
    return out, scores


def train_shard(engine, shard: Shard, cfg: LearnerConfig, *, ref_model, sampling: Sampling,
                pad_id: int, timers: dict[str, float], prox: torch.Tensor | None = None) -> dict[str, float]:
    """All updates of one batch on this rank; returns this rank's sums (loss, stats weighted by
    tokens), to be added over ranks. `timers` collects forward+backward and optimizer seconds.
    `prox`: the proximal log-probs when the caller's forward pass took them already."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    b, device = shard.batch, shard.batch.input_ids.device
    engine.train()
    sums = {"loss": 0.0, "weight": 0.0, "nonfinite_skips": 0.0,
            **{k: 0.0 for k in STATS + OFF_POLICY_STATS + NUCLEUS_STATS + REJECT_SUMS}}
    if cfg.overlong_filter:  # before the denominators: a truncated sample leaves the loss and them
        keep_loss_rows(shard)
    if cfg.recompute_proximal:
        if prox is None:
            prox = proximal_logprobs(engine.module, shard, cfg.micro_batch, sampling, pad_id)
        if rejects(cfg):  # before the denominators: a rejected token leaves the loss and them
            sums.update(reject(shard, prox, cfg))
        elif cfg.correction == "none":  # recompute_old alone: the kernel weighs nothing and reports no behav_kl
            sums.update(behaviour_gap(shard, prox))
    counts = chunks_per_minibatch(shard, cfg.micro_batch, device)
    dummy = stand_in(device, pad_id)
    for _ in range(cfg.epochs):
        for m, count in enumerate(counts):
            rows = (shard.minibatch == m).nonzero().squeeze(1)
            chunks = length_sorted_rows(b, rows, cfg.micro_batch)
            tokens, seqs = float(shard.tokens[m]), float(shard.loss_seqs(cfg.loss_agg)[m])
            minibatch_loss = 0.0
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
                    minibatch_loss += float(loss.detach())
                    sums["loss"] += float(loss.detach())
                    sums["weight"] += w
                    for k in STATS + OFF_POLICY_STATS + NUCLEUS_STATS:
                        if k in stats:
                            sums[k] += float(stats[k]) * w
                else:  # this rank is out of rows: a zero-weight pass keeps the collectives in step
                    loss, _ = micro_loss(engine.module, dummy, slice(0, 1), cfg, ref_model=ref_model, total_tokens=1.0,
                                         total_seqs=1.0, sampling=sampling,
                                         proximal=torch.zeros_like(dummy.completion))
                    loss = loss * 0.0
                engine.backward(loss * world, scale_wrt_gas=False)
            _finish(device)  # else the last backward, still queued on the GPU, is timed as the optimizer's
            t1 = time.perf_counter()
            if not engine.zero_optimization():  # DeepSpeed reports the norm under ZeRO only
                timers["grad_norm"] = grad_norm(engine)
            skipped = step_if_finite(engine, minibatch_loss)
            if skipped:
                sums["nonfinite_skips"] += 1
                timers["nonfinite"] = skipped
            _finish(device)
            timers["forward_backward_s"] = timers.get("forward_backward_s", 0.0) + t1 - t0
            timers["optimizer_s"] = timers.get("optimizer_s", 0.0) + time.perf_counter() - t1
    return sums


def _finish(device) -> None:
    """Wait for the work queued on a GPU, so that a timer read next counts it (once a mini-batch)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_if_finite(engine, loss: float) -> str | None:
    """engine.step(), unless the mini-batch's loss or gradient is not finite on some rank: then the
    optimizer never sees it (no update, no momentum) and what was not finite is returned.
    DeepSpeed's ZeRO optimizers (stages 1-3) already skip a step whose gradient norm is not
    finite (their `overflow`); without ZeRO the check is here, on the reduced gradients."""
    if engine.zero_optimization():
        engine.step()
        return "gradient" if getattr(engine.optimizer, "overflow", False) else None
    grads = [p.grad for p in engine.module.parameters() if p.grad is not None]
    # on the gradients' device: on GPUs the default group is NCCL, which takes CUDA tensors only
    # (a CPU tensor there raises "No backend type associated with device type cpu")
    device = grads[0].device if grads else next(engine.module.parameters()).device
    bad = torch.tensor([float(not math.isfinite(loss)),
                        float(any(not bool(torch.isfinite(g).all()) for g in grads))], dtype=torch.float64,
                       device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(bad, op=dist.ReduceOp.MAX)
    if bad.any():
        engine.zero_grad()
        return "loss" if bad[0] else "gradient"
    engine.step()
    return None


def rejects(cfg: LearnerConfig) -> bool:
    return cfg.correction != "none" and CORRECTIONS[cfg.correction][1] == "reject"


def reject(shard: Shard, prox: torch.Tensor, cfg: LearnerConfig) -> dict[str, float]:
    """verl's rollout rejection on this rank's rows: rejected tokens leave `completion` (the loss's
    mask), and every mini-batch's tokens and sequences (over all ranks) are counted again without
    them. Returns this rank's sums: tokens before, tokens rejected, and the k3 estimate of
    KL(π_behav ‖ π_prox) over the tokens before (what the kernel reports for a weighted correction)."""
    b = shard.batch
    gap = behaviour_gap(shard, prox)  # over the tokens before
    before = float(b.completion.sum())
    b.completion.mul_(rejection_mask(prox, b.behav_logp, b.completion, cfg))
    recount(shard)
    return {**gap, "rejected": before - float(b.completion.sum())}


def behaviour_gap(shard: Shard, prox: torch.Tensor) -> dict[str, float]:
    """This rank's completion tokens and the sum of the k3 estimate of KL(π_behav ‖ π_prox) over them
    (under the names REJECT_SUMS gives them: with a rejection, the tokens before it)."""
    b = shard.batch
    tok = torch.where(b.completion != 0, prox.double() - b.behav_logp.double(), 0.0)
    return {"tokens_before_reject": float(b.completion.sum()),
            "behav_kl_before_reject": float(((tok.exp() - tok - 1) * b.completion).sum())}


def keep_loss_rows(shard: Shard):
    """DAPO's overlong filtering (learner.overlong_filter): the rows collate marked out of the loss
    (Batch.in_loss 0, truncated samples) lose their completion tokens from the loss's mask, and every
    mini-batch's tokens and sequences are counted again without them. Their advantages were taken
    with their rewards in the group, and a self-reward has scored them already (learner.py)."""
    shard.batch.completion.mul_(shard.batch.in_loss.unsqueeze(1))
    recount(shard)


def recount(shard: Shard):
    """Every mini-batch's completion tokens and sequences (a row with at least one token left in the
    mask), over all ranks (a collective: every rank calls it), after tokens left `completion`."""
    b = shard.batch
    counts = torch.zeros(2, shard.tokens.numel(), dtype=torch.float64, device=b.completion.device)
    counts[0].index_add_(0, shard.minibatch, b.completion.sum(1).double())
    counts[1].index_add_(0, shard.minibatch, (b.completion.sum(1) > 0).double())
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(counts)
    if shard.generated_seqs is None:
        shard.generated_seqs = shard.seqs
    shard.tokens, shard.seqs = counts[0], counts[1]


def step_stats(total: dict[str, float], cfg: LearnerConfig) -> dict[str, float]:
    """The step's loss statistics from train_shard's sums (added over ranks): token-weighted means,
    and with a weighting correction the importance weights' normalised effective sample size
    ESS = (Σ f)² / (n Σ f²) = mean(f)² / mean(f²) over the batch's n tokens (0 if every f is 0).
    With a rejection: the share of tokens rejected, and the behaviour KL over all of them."""
    out = {}
    if (rejects(cfg) or cfg.correction == "none") and total["tokens_before_reject"] > 0:
        if rejects(cfg):
            out["reject_frac"] = total["rejected"] / total["tokens_before_reject"]
        # with recompute_old and no correction too: approx_kl is then to π_prox, 0 at the first
        # update of a step, so this is the only measure of how far the learner is from the sampler
        out["behav_kl"] = total["behav_kl_before_reject"] / total["tokens_before_reject"]
    if total["weight"] <= 0:
        return out
    weighted = cfg.correction != "none" and not rejects(cfg)
    out.update({k: total[k] / total["weight"] for k in (STATS + OFF_POLICY_STATS if weighted else STATS)})
    if weighted:
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


def pass_rows(b: Batch, micro_batch: int) -> list[torch.Tensor]:
    """A no-grad pass's micro-batches over every row of `b`, similar lengths together (each is padded
    to its longest row only), as many on every rank: a rank out of rows gets empty ones, for a pass
    of the stand-in (ZeRO-3 gathers the weights collectively)."""
    rows = torch.arange(b.input_ids.shape[0], device=b.input_ids.device)
    chunks = length_sorted_rows(b, rows, micro_batch)
    passes = torch.tensor(len(chunks), dtype=torch.long, device=rows.device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(passes, op=dist.ReduceOp.MAX)
    return chunks + [rows[:0]] * (int(passes) - len(chunks))


def length_sorted_rows(b: Batch, rows: torch.Tensor, size: int) -> list[torch.Tensor]:
    """`rows` in micro-batches of `size`, similar lengths together (see grpo.length_sorted_chunks)."""
    if len(rows) == 0:
        return []
    order = torch.argsort(b.attention[rows].sum(1), stable=True)
    return list(rows[order].split(size))


__all__ = ["train_shard", "proximal_logprobs", "length_sorted_chunks", "step_stats"]
