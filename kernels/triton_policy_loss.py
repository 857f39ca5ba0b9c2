"""Layer 2 in Triton: clipped-ratio policy loss, its gradient and its statistics in one pass.

The kernel reads each per-token input once and writes dL/dlogp (for a unit upstream
gradient) plus one row of masked partial sums per program; the backward only scales
the stored gradient. Aggregation enters as a per-sequence factor computed beforehand
from the mask (reference.aggregation_row_scale), so the kernel needs no global sums.
A sequence-level importance ratio enters the same way: reference.row_log_ratio computes
it per row beforehand, and the kernel reads one value per row instead of the token's.
"""

import torch
import triton
import triton.language as tl

from .reference import (KL_LOG_RATIO_BOUND, KL_VALUE_BOUND, RATIO_LOG_BOUND, SUM_COLUMNS, aggregation_row_scale,
                        check_policy_args, policy_stats, row_log_ratio)

_NUM_SUMS = len(SUM_COLUMNS)


@triton.jit
def _policy_loss_kernel(
    logp_ptr, old_ptr, adv_ptr, mask_ptr, behav_ptr, ref_ptr, row_ptr, scale_ptr, grad_ptr, sums_ptr,
    T, adv_stride_b, adv_stride_t, clip_low, clip_high, dual_clip, tis_cap, mask_low, mask_high,
    kl_coef, kl_log_bound, kl_value_bound, ratio_log_bound, HAS_DUAL: tl.constexpr, HAS_BEHAV: tl.constexpr, ROW_IS: tl.constexpr,
    HAS_CAP: tl.constexpr, HAS_BAND: tl.constexpr, HAS_REF: tl.constexpr, KL_CLAMP: tl.constexpr,
    NUM_SUMS: tl.constexpr, BLOCK_T: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs = row * T + cols
    m = tl.load(mask_ptr + offs, mask=cols < T, other=0).to(tl.float32)
    valid = m != 0
    m = tl.where(valid, 1.0, 0.0)
    # Padding may hold anything (even NaN): read it as 0 so exp() stays finite.
    lp = tl.load(logp_ptr + offs, mask=valid, other=0.0).to(tl.float32)
    old = tl.load(old_ptr + offs, mask=valid, other=0.0).to(tl.float32)
    adv = tl.load(adv_ptr + row * adv_stride_b + cols * adv_stride_t, mask=valid,
                  other=0.0).to(tl.float32)

    # the log-ratio clamped as reference.policy_loss does (RATIO_LOG_BOUND): no gradient past it
    log_ratio = lp - old
    in_bound = (log_ratio >= -ratio_log_bound) & (log_ratio <= ratio_log_bound)
    ratio = tl.exp(tl.minimum(tl.maximum(log_ratio, -ratio_log_bound), ratio_log_bound))
    clipped = ((adv > 0) & (ratio > 1 + clip_high)) | ((adv < 0) & (ratio < 1 - clip_low))
    pg = -tl.where(clipped, tl.minimum(tl.maximum(ratio, 1 - clip_low), 1 + clip_high), ratio) * adv
    dpg = tl.where(clipped | (in_bound == 0), 0.0, -ratio * adv)
    dual = tl.zeros_like(clipped)
    if HAS_DUAL:
        dual = (adv < 0) & (ratio > dual_clip)
        pg = tl.where(dual, -dual_clip * adv, pg)
        dpg = tl.where(dual, 0.0, dpg)

    # Importance weight of w = pi_old / pi_behav (reference.importance_weight): per token, or
    # the row's ratio (sequence product or geometric mean, precomputed) on every token.
    weight = tl.full([BLOCK_T], 1.0, tl.float32)
    truncated = tl.zeros_like(clipped)
    masked = tl.zeros_like(clipped)
    behav_kl = tl.zeros([BLOCK_T], tl.float32)
    if HAS_BEHAV:
        behav = tl.load(behav_ptr + offs, mask=valid, other=0.0).to(tl.float32)
        tok = old - behav
        weight = tl.exp(tok)
        behav_kl = weight - tok - 1
        if ROW_IS:  # a product may be inf: it compares and caps correctly, and is replaced below
            weight = tl.exp(tl.load(row_ptr + row)) + tl.zeros([BLOCK_T], tl.float32)
        if HAS_BAND:
            masked = (weight < mask_low) | (weight > mask_high)
        if HAS_CAP:
            truncated = (weight > tis_cap) & (masked == 0)
            weight = tl.minimum(weight, tis_cap)
        weight = tl.where(masked, 0.0, weight)
    pg = weight * pg
    dloss = weight * dpg

    if HAS_REF:
        d = tl.load(ref_ptr + offs, mask=valid, other=0.0).to(tl.float32) - lp
    else:  # approx_kl against the old policy: of the clamped log-ratio, as the ratio is
        d = -tl.minimum(tl.maximum(log_ratio, -ratio_log_bound), ratio_log_bound)
    dk3 = 1 - tl.exp(d)  # d(k3)/d(logp)
    # (one branch per case: Triton's compiler, unlike its interpreter, does not carry a name
    # defined under one `if` into the next)
    if KL_CLAMP:  # low_var_kl: no gradient where the log-ratio or the estimate is clamped
        inside = (d >= -kl_log_bound) & (d <= kl_log_bound)
        d = tl.minimum(tl.maximum(d, -kl_log_bound), kl_log_bound)
        k3 = tl.exp(d) - d - 1
        inside = inside & (k3 <= kl_value_bound)
        k3 = tl.minimum(k3, kl_value_bound)
        dk3 = tl.where(inside, dk3, 0.0)
    else:
        k3 = tl.exp(d) - d - 1
    loss = pg
    if HAS_REF:
        loss += kl_coef * k3
        dloss += kl_coef * dk3

    w_tok = m * tl.load(scale_ptr + row)
    tl.store(grad_ptr + offs, dloss * w_tok, mask=cols < T)

    # One row of partial sums per program, columns in reference.SUM_COLUMNS order.
    out = sums_ptr + (row * tl.num_programs(1) + tl.program_id(1)) * NUM_SUMS
    tl.store(out + 0, tl.sum(m, axis=0))
    tl.store(out + 1, tl.sum(loss * w_tok, axis=0))
    tl.store(out + 2, tl.sum(pg * w_tok, axis=0))
    tl.store(out + 3, tl.sum(tl.where(clipped, m, 0.0), axis=0))
    tl.store(out + 4, tl.sum(tl.where(dual, m, 0.0), axis=0))
    tl.store(out + 5, tl.sum(k3 * m, axis=0))
    tl.store(out + 6, tl.sum(tl.where(truncated, m, 0.0), axis=0))
    tl.store(out + 7, tl.sum(weight * m, axis=0))
    tl.store(out + 8, tl.sum(ratio * m, axis=0))
    tl.store(out + 9, tl.sum(tl.where(masked, m, 0.0), axis=0))
    tl.store(out + 10, tl.sum(weight * weight * m, axis=0))
    tl.store(out + 11, tl.sum(behav_kl * m, axis=0))


def _launch(logp, old_logp, advantages, mask, behav_logp, ref_logp, row_logw, scale, cfg, block_t):
    """Run the kernel; returns (dL/dlogp for a unit upstream gradient, SUM_COLUMNS sums)."""
    b, t = logp.shape
    block_t = block_t or min(2048, triton.next_power_of_2(max(t, 1)))
    grid = (b, triton.cdiv(t, block_t))
    adv = advantages.unsqueeze(1).expand(b, t) if advantages.dim() == 1 else advantages
    mask = mask.contiguous()
    mask = mask.view(torch.uint8) if mask.dtype == torch.bool else mask
    logp, old_logp = logp.contiguous(), old_logp.contiguous()
    # Absent optional inputs are never read (their constexpr flag is off).
    behav = logp if behav_logp is None else behav_logp.contiguous()
    ref = logp if ref_logp is None else ref_logp.contiguous()
    row = scale if row_logw is None else row_logw.float().contiguous()
    band = cfg["mask_band"]
    low, high = (float(band[0]), float(band[1])) if band is not None else (0.0, 0.0)
    grad = torch.empty_like(logp)
    sums = torch.empty(grid[0] * grid[1], _NUM_SUMS, dtype=torch.float32, device=logp.device)
    if grad.numel():
        _policy_loss_kernel[grid](
            logp, old_logp, adv, mask, behav, ref, row, scale, grad, sums,
            t, adv.stride(0), adv.stride(1), cfg["clip_low"], cfg["clip_high"],
            cfg["dual_clip"] or 0.0, cfg["tis_cap"] or 0.0, low, high, cfg["kl_coef"],
            KL_LOG_RATIO_BOUND, KL_VALUE_BOUND, RATIO_LOG_BOUND,
            HAS_DUAL=cfg["dual_clip"] is not None, HAS_BEHAV=behav_logp is not None,
            ROW_IS=row_logw is not None, HAS_CAP=cfg["tis_cap"] is not None,
            HAS_BAND=band is not None, HAS_REF=ref_logp is not None,
            KL_CLAMP=cfg["kl_estimator"] == "low_var_kl",
            NUM_SUMS=_NUM_SUMS, BLOCK_T=block_t,
        )
    return grad, sums.sum(dim=0)


class _PolicyLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logp, old_logp, advantages, mask, behav_logp, ref_logp, row_logw, scale, cfg,
                block_t):
        grad, sums = _launch(logp, old_logp, advantages, mask, behav_logp, ref_logp, row_logw, scale,
                             cfg, block_t)
        ctx.save_for_backward(grad)
        ctx.mark_non_differentiable(sums)
        return sums[SUM_COLUMNS.index("loss")].clone(), sums

    @staticmethod
    def backward(ctx, g_loss, _g_sums):
        (grad,) = ctx.saved_tensors
        return (grad * g_loss).to(grad.dtype), *([None] * 9)


def policy_loss(logp, old_logp, advantages, mask, *, behav_logp=None, ref_logp=None,
                clip_low=0.2, clip_high=0.2, dual_clip=None, kl_coef=0.0, kl_estimator="k3", tis_cap=None,
                is_level="token", mask_band=None, agg="token-mean", agg_const=None, block_t=None):
    """Triton twin of reference.policy_loss (same arguments and results).

    block_t: tokens per program (default: up to 2048).
    """
    check_policy_args(logp, old_logp, advantages, mask, behav_logp, ref_logp,
                      clip_low, clip_high, dual_clip, kl_coef, tis_cap, agg, agg_const,
                      is_level, mask_band, kl_estimator)
    cfg = dict(clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip, kl_coef=kl_coef,
               kl_estimator=kl_estimator, tis_cap=tis_cap, mask_band=mask_band)
    scale = aggregation_row_scale(mask, agg, agg_const)
    behav = None if behav_logp is None else behav_logp.detach()
    row_logw = None
    if behav is not None and is_level != "token":
        row_logw = row_log_ratio(old_logp.detach(), behav, mask, is_level)
    loss, sums = _PolicyLoss.apply(logp, old_logp.detach(), advantages.detach(), mask, behav,
                                None if ref_logp is None else ref_logp.detach(),
                                row_logw, scale, cfg, block_t)
    return loss, policy_stats(sums)
