"""PPO's advantages from a value model: GAE, whitening, the clipped value loss. Pure functions over
tensors (torch only), restated from verl in tests/learner/test_gae.py; learner/critic.py runs them.

Rows are right-padded sequences aligned as `completion` is (learner/grpo.py): position t holds the
state that predicts completion token t+1, so V(s_t) is the value model's output there and the
reward of a whole sample, its scheme's reward plus the overlong penalty, sits on its last
completion position (verl's token_level_rewards: the score on the last response token, 0 elsewhere).

    r = token_rewards(score, mask)                      # (N, T)
    adv, ret = gae(r, values, mask, gamma, lam)         # per token, before whitening
    adv = whiten(adv, mask, moments(adv, mask))         # over the whole batch (moments summed over ranks)
    loss, clipped = value_loss(v_new, ret, values, mask, clip, row_scale)
"""
from __future__ import annotations

import torch

WHITEN_EPS = 1e-8  # verl's masked_whiten: (x - mean) * rsqrt(var + 1e-8)


def token_rewards(score: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(N, T): each row's score (N,) on its last position in `mask`, 0 elsewhere (a row with no
    position in the mask gets nothing)."""
    valid = mask != 0
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(valid, positions, -1).amax(dim=1)
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    rows = (last >= 0).nonzero().squeeze(1)
    out[rows, last[rows]] = score[rows].to(out.dtype)
    return out


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) per row, backwards over the mask:

        δ_t = r_t + γ V_{t'} - V_t              t' the next position in the mask (V = 0 past the last)
        A_t = δ_t + γ λ A_{t'}                  returns R_t = A_t + V_t

    Positions outside the mask are skipped (they carry neither value nor advantage forward), as
    verl's compute_gae_advantage_return does. Returns (advantages, returns), 0 outside the mask,
    in float32 (float64 for float64 values)."""
    dtype = torch.float64 if values.dtype == torch.float64 else torch.float32
    r, v, m = rewards.to(dtype), values.detach().to(dtype), (mask != 0).to(dtype)
    adv = torch.zeros_like(v)
    next_value = torch.zeros(v.shape[0], dtype=dtype, device=v.device)
    next_adv = torch.zeros_like(next_value)
    for t in range(v.shape[1] - 1, -1, -1):
        delta = r[:, t] + gamma * next_value - v[:, t]
        here = delta + gamma * lam * next_adv
        next_value = torch.where(m[:, t] > 0, v[:, t], next_value)
        next_adv = torch.where(m[:, t] > 0, here, next_adv)
        adv[:, t] = here * m[:, t]
    return adv, (adv + v) * m


def moments(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(count, Σx, Σx²) over the mask, float64: summed over ranks they give the whole batch's
    mean and variance (whiten)."""
    m = (mask != 0).to(torch.float64)
    x = x.detach().to(torch.float64) * m
    return torch.stack([m.sum(), x.sum(), x.square().sum()])


def mean_var(sums: torch.Tensor) -> tuple[float, float]:
    """The mean and the unbiased variance (n - 1, as verl's masked_var) from moments' sums; the
    variance of fewer than two values is 0."""
    n, s, sq = (float(v) for v in sums)
    if n < 1:
        return 0.0, 0.0
    mean = s / n
    return mean, max(sq - n * mean * mean, 0.0) / (n - 1) if n > 1 else 0.0


def whiten(x: torch.Tensor, mask: torch.Tensor, sums: torch.Tensor) -> torch.Tensor:
    """verl's masked_whiten over the whole batch: (x - mean) / sqrt(var + 1e-8), mean and unbiased
    variance from `sums` (moments over every rank's rows). 0 outside the mask."""
    mean, var = mean_var(sums)
    return (x - mean) * (var + WHITEN_EPS) ** -0.5 * (mask != 0).to(x.dtype)


def value_loss(v_new: torch.Tensor, returns: torch.Tensor, v_old: torch.Tensor, mask: torch.Tensor,
               clip: float, row_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped value loss (verl's compute_value_loss, from TRL's PPO):

        V_clip = clamp(V_new, V_old - clip, V_old + clip)
        loss   = 0.5 · Σ_t row_scale · max((V_new - R)², (V_clip - R)²)     over the mask

    `row_scale` (N,): the aggregation's factor per row (kernels.reference.aggregation_row_scale,
    loss_agg with the whole mini-batch's denominator), so micro-batch losses add up to the
    mini-batch's. Returns (loss, clipped tokens: where the clipped term is the larger)."""
    valid = mask != 0
    v = torch.where(valid, v_new.float(), 0.0)
    old, ret = torch.where(valid, v_old.float(), 0.0), torch.where(valid, returns.float(), 0.0)
    clipped_v = torch.maximum(torch.minimum(v, old + clip), old - clip)
    unclipped_sq, clipped_sq = (v - ret).square(), (clipped_v - ret).square()
    per_token = torch.maximum(unclipped_sq, clipped_sq)
    loss = 0.5 * (per_token * valid * row_scale.unsqueeze(1)).sum()
    return loss, ((clipped_sq > unclipped_sq) & valid).sum().detach()
