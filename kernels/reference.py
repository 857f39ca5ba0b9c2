"""PyTorch references for the three kernel layers.

They define the maths each Triton kernel must match, and they are what the learner
runs on the CPU, so they are chunked and vectorised rather than literal. Inputs in
bf16/fp16/fp32 are computed in float32; float64 stays float64 (for gradcheck).

Layer 1  group_advantage   rewards (num_groups, G) -> advantages, optionally per token
Layer 2  policy_loss       per-token log-probs    -> clipped-ratio loss and stats
Layer 3  lm_head_logprobs  hidden, head, targets  -> log-prob, entropy, log-sum-exp
"""

import torch

ADVANTAGE_MODES = ("grpo", "drgrpo", "rloo")
# Named after the sources that define them: verl's agg_loss modes (token-mean, seq-mean-token-mean,
# seq-mean-token-sum, seq-mean-token-sum-norm: verl/trainer/ppo/core_algos.py) and TRL's loss_type
# dr_grpo (trl/trainer/grpo_trainer.py). TRL's grpo is seq-mean-token-mean, its dapo token-mean (its bnpo
# too when every micro-batch holds as many tokens: it is a per-micro-batch token mean over the steps).
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "dr_grpo")
# Aggregations whose denominator is a constant the caller gives (agg_const), not a count of the mask
CONST_AGGREGATIONS = ("seq-mean-token-sum-norm", "dr_grpo")
KL_ESTIMATORS = ("k3", "low_var_kl")
# verl's low_var_kl (kl_penalty in verl/trainer/ppo/core_algos.py): k3 of a log-ratio clamped to
# +-20, the estimate itself clamped to +-10 (k3 >= 0: at most 10); no gradient where either clamps
KL_LOG_RATIO_BOUND, KL_VALUE_BOUND = 20.0, 10.0
# The policy ratio's log is clamped to +-20 before the exp, as verl does (compute_policy_loss_vanilla,
# verl/trainer/ppo/core_algos.py): a behaviour log-prob of -inf (or -100) would give ratio inf, and
# inf x 0 a NaN gradient on a token the clip had already cut off (or a NaN loss at advantage 0).
# Past the bound no gradient flows; any clip range cuts far below it (e^20 is 4.9e8)
RATIO_LOG_BOUND = 20.0
# What the importance ratio w = pi_old / pi_behav is taken over: each token, the whole
# sequence (product of its tokens' ratios) or the sequence's geometric mean.
IS_LEVELS = ("token", "sequence", "geometric")

# Masked token sums both policy-loss backends produce, in this column order; the
# statistics the learner logs are ratios of them (see policy_stats).
SUM_COLUMNS = (
    "tokens", "loss", "pg_loss", "clipped", "dual_clipped",
    "approx_kl", "truncated", "is_weight", "ratio",
    "masked", "is_weight_sq", "behav_kl",
)


def compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


# ---------------------------------------------------------------- layer 1: advantages

def check_advantage_args(rewards, mode, mask):
    if rewards.dim() != 2 or rewards.shape[1] == 0:
        raise ValueError(f"rewards must be (num_groups, G >= 1), got shape {tuple(rewards.shape)}")
    if mode not in ADVANTAGE_MODES:
        raise ValueError(f"mode={mode!r}; expected one of {ADVANTAGE_MODES}")
    if mask is not None and (mask.dim() != 3 or mask.shape[:2] != rewards.shape):
        raise ValueError(f"mask must be (num_groups, G, T) matching rewards {tuple(rewards.shape)}, "
                         f"got {tuple(mask.shape)}")


def group_advantage(rewards, *, mode="grpo", eps=1e-6, unbiased_std=False, mask=None):
    """Group-normalised advantages; (num_groups, G), or (num_groups, G, T) under a mask.

    grpo:   (r - mean) / (std + eps), std biased unless unbiased_std
    drgrpo: r - mean (Dr.GRPO: no std division)
    rloo:   r - mean of the other G-1 rewards in the group
    A group whose rewards are all equal (a singleton group included) gets exactly 0.
    """
    check_advantage_args(rewards, mode, mask)
    r = rewards.to(compute_dtype(rewards))
    g = r.shape[1]
    total = r.sum(dim=1, keepdim=True)
    centred = r - total / g
    if mode == "grpo":
        var = centred.square().sum(dim=1, keepdim=True) / max(g - 1 if unbiased_std else g, 1)
        adv = centred / (var.sqrt() + eps)
    elif mode == "drgrpo":
        adv = centred
    else:
        adv = r - (total - r) / max(g - 1, 1)
    # Round-off in the mean would otherwise turn "no signal" into tiny nonzero values.
    flat = r.amax(dim=1, keepdim=True) == r.amin(dim=1, keepdim=True)
    adv = adv.masked_fill(flat, 0.0)
    if mask is None:
        return adv
    return adv.unsqueeze(-1) * mask.to(adv.dtype)


# ---------------------------------------------------------------- layer 2: policy loss

def check_policy_args(logp, old_logp, advantages, mask, behav_logp, ref_logp,
                      clip_low, clip_high, dual_clip, kl_coef, tis_cap, agg, agg_const,
                      is_level="token", mask_band=None, kl_estimator="k3"):
    shape = tuple(logp.shape)
    if logp.dim() != 2:
        raise ValueError(f"logp must be (B, T), got {shape}")
    for name, t in (("old_logp", old_logp), ("mask", mask),
                    ("behav_logp", behav_logp), ("ref_logp", ref_logp)):
        if t is not None and tuple(t.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {shape}")
    if tuple(advantages.shape) not in (shape, shape[:1]):
        raise ValueError(f"advantages has shape {tuple(advantages.shape)}, "
                         f"expected {shape} or {shape[:1]}")
    if not (0 <= clip_low < 1 and clip_high >= 0):
        raise ValueError(f"need 0 <= clip_low < 1 and clip_high >= 0, got {clip_low}, {clip_high}")
    if dual_clip is not None and dual_clip <= 1:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    if kl_coef != 0.0 and ref_logp is None:
        raise ValueError(f"kl_coef={kl_coef} needs ref_logp")
    if tis_cap is not None and tis_cap <= 0:
        raise ValueError(f"tis_cap must be > 0, got {tis_cap}")
    if is_level not in IS_LEVELS:
        raise ValueError(f"is_level={is_level!r}; expected one of {IS_LEVELS}")
    if mask_band is not None and not (len(mask_band) == 2 and 0 <= mask_band[0] <= mask_band[1]):
        raise ValueError(f"mask_band must be (low, high) with 0 <= low <= high, got {mask_band}")
    if is_level == "sequence" and behav_logp is not None and tis_cap is None and mask_band is None:
        # an untruncated product of ratios overflows on long sequences
        raise ValueError("is_level='sequence' needs tis_cap or mask_band to bound the weight")
    if agg not in AGGREGATIONS:
        raise ValueError(f"agg={agg!r}; expected one of {AGGREGATIONS}")
    if agg in CONST_AGGREGATIONS and agg_const is None:
        raise ValueError(f"agg={agg!r} needs agg_const (e.g. max_len, or max_len * num_seqs for dr_grpo)")
    if kl_estimator not in KL_ESTIMATORS:
        raise ValueError(f"kl_estimator={kl_estimator!r}; expected one of {KL_ESTIMATORS}")
    if agg_const is not None and not agg_const > 0:
        raise ValueError(f"agg_const must be positive, got {agg_const}")


def aggregation_row_scale(mask, agg, agg_const, dtype=torch.float32):
    """Per-sequence factor s_b such that loss = sum_bt [mask_bt != 0] * s_b * loss_bt. (B,)

    token-mean                1 / tokens                             (verl token-mean; TRL dapo)
    seq-mean-token-mean       1 / (len_b * sequences with a token)   (verl; TRL grpo)
    seq-mean-token-sum        1 / sequences with a token             (verl)
    seq-mean-token-sum-norm   1 / agg_const, the response length     (verl's Dr.GRPO: not / sequences)
    dr_grpo                   1 / agg_const, max length * sequences  (TRL's Dr.GRPO)
    For the first three, agg_const (when given) is the count to divide by instead of this call's
    own: the whole mini-batch's tokens or sequences, when this call holds one micro-batch of it on
    one rank, so that the calls' losses add up to the mini-batch's. Empty batches and empty rows
    get 0, never NaN.
    """
    lens = (mask != 0).sum(dim=1).to(dtype)
    if agg in CONST_AGGREGATIONS:
        return torch.full_like(lens, 1.0 / agg_const)
    if agg == "token-mean":
        total = lens.sum().expand_as(lens) if agg_const is None else torch.full_like(lens, agg_const)
        return torch.where(total > 0, 1.0 / total.clamp_min(1e-30), 0.0)
    seqs = (lens > 0).sum() if agg_const is None else torch.tensor(agg_const, dtype=dtype)
    per_seq = lens * seqs if agg == "seq-mean-token-mean" else seqs.expand_as(lens)
    return torch.where(lens > 0, 1.0 / per_seq.clamp_min(1e-30), 0.0)


def row_log_ratio(old, behav, mask, level):
    """Per-sequence log importance ratio (B,) from per-token log-probs (B, T) under `mask`.

    sequence:  sum_t (old_t - behav_t)             log of the product of the token ratios
    geometric: the same sum / the row's tokens     log of their geometric mean (0 for an empty row)
    Padding may hold anything. Both backends take the sequence-level ratio from here and hand
    it to their kernels as a per-row input: one definition of it.
    """
    valid = mask != 0
    ct = compute_dtype(old, behav)
    total = torch.where(valid, old.to(ct) - behav.to(ct), 0.0).sum(dim=1)
    if level == "sequence":
        return total
    return total / valid.sum(dim=1).clamp_min(1).to(ct)


def importance_weight(old, behav, valid, level, cap, band):
    """(weight, truncated, masked, behav_kl), each (B, T), of the ratio w = pi_old / pi_behav.

    w is per token, or the row's (row_log_ratio) on every token of the row. Then
      masked    = w outside [low, high] (band given): weight 0 (IcePop's masked IS)
      truncated = w > cap (cap given, token not masked): weight cap; else weight w
    A w exactly on a bound is kept. behav_kl is the k3 estimate of KL(pi_behav || pi_old) at
    each token from that token's own ratio, whatever the level: w - log w - 1 >= 0.
    """
    tok = old - behav
    behav_kl = torch.exp(tok) - tok - 1
    log_w = tok if level == "token" else row_log_ratio(old, behav, valid, level).unsqueeze(1).expand_as(tok)
    # A sequence's product may overflow to inf: inf compares and caps correctly, and every
    # path below replaces it before it could meet a 0.
    w = torch.exp(log_w)
    masked = torch.zeros_like(valid)
    if band is not None:
        masked = (w < band[0]) | (w > band[1])
    truncated = torch.zeros_like(valid)
    if cap is not None:
        truncated = ~masked & (w > cap)
        w = w.clamp(max=cap)
    return torch.where(masked, 0.0, w), truncated, masked, behav_kl


def policy_stats(sums: torch.Tensor) -> dict[str, torch.Tensor]:
    """The logged statistics, from masked sums laid out as SUM_COLUMNS."""
    col = dict(zip(SUM_COLUMNS, sums, strict=True))
    tokens = col["tokens"]
    per_token = lambda x: torch.where(tokens > 0, x / tokens.clamp_min(1e-30), 0.0)
    stats = {
        "pg_loss": col["pg_loss"],
        "clip_frac": per_token(col["clipped"]),
        "dual_clip_frac": per_token(col["dual_clipped"]),
        "approx_kl": per_token(col["approx_kl"]),
        "tis_frac": per_token(col["truncated"]),
        "mask_frac": per_token(col["masked"]),
        "is_weight_mean": per_token(col["is_weight"]),
        "is_weight_sq_mean": per_token(col["is_weight_sq"]),
        "behav_kl": per_token(col["behav_kl"]),
        "ratio_mean": per_token(col["ratio"]),
        "tokens": tokens,
    }
    return {k: v.detach() for k, v in stats.items()}


def policy_loss(logp, old_logp, advantages, mask, *, behav_logp=None, ref_logp=None,
                clip_low=0.2, clip_high=0.2, dual_clip=None, kl_coef=0.0, kl_estimator="k3", tis_cap=None,
                is_level="token", mask_band=None, agg="token-mean", agg_const=None):
    """Clipped-ratio policy loss; differentiable w.r.t. logp only. See the package docstring."""
    check_policy_args(logp, old_logp, advantages, mask, behav_logp, ref_logp,
                      clip_low, clip_high, dual_clip, kl_coef, tis_cap, agg, agg_const,
                      is_level, mask_band, kl_estimator)
    ct = compute_dtype(logp)
    valid = mask != 0
    # Padding may hold anything (even NaN); zero it before any exp so that neither the
    # loss nor the gradient can pick up NaN * 0.
    clean = lambda t: torch.where(valid, t.to(ct), 0.0)
    lp = clean(logp)
    old = clean(old_logp.detach())
    adv = advantages.detach().to(ct)
    adv = clean(adv.unsqueeze(1).expand_as(lp) if adv.dim() == 1 else adv)

    log_ratio = (lp - old).clamp(-RATIO_LOG_BOUND, RATIO_LOG_BOUND)
    ratio = torch.exp(log_ratio)
    r = ratio.detach()
    clipped = ((adv > 0) & (r > 1 + clip_high)) | ((adv < 0) & (r < 1 - clip_low))
    pg = -torch.where(clipped, r.clamp(1 - clip_low, 1 + clip_high), ratio) * adv
    dual = torch.zeros_like(clipped)
    if dual_clip is not None:
        dual = (adv < 0) & (r > dual_clip)
        pg = torch.where(dual, -dual_clip * adv, pg)

    zeros = torch.zeros_like(r)
    weight, truncated, masked, behav_kl = torch.ones_like(r), zeros, zeros, zeros
    if behav_logp is not None:
        weight, truncated, masked, behav_kl = importance_weight(
            old, clean(behav_logp.detach()), valid, is_level, tis_cap, mask_band)
    # The importance weight corrects the policy-gradient term only; the KL penalty is a
    # regulariser on the current policy, as in verl's decoupled PPO.
    pg = weight * pg
    # k3 estimator: against the reference policy when given, else against the old one.
    # (against the old policy: approx_kl, a statistic, of the clamped log-ratio as the ratio is)
    d = -log_ratio if ref_logp is None else clean(ref_logp.detach()) - lp
    if kl_estimator == "low_var_kl":  # verl's: the log-ratio clamped to +-20, the estimate to <= 10
        d = d.clamp(-KL_LOG_RATIO_BOUND, KL_LOG_RATIO_BOUND)
    k3 = torch.exp(d) - d - 1
    if kl_estimator == "low_var_kl":
        k3 = k3.clamp(max=KL_VALUE_BOUND)
    tok_loss = pg + kl_coef * k3 if ref_logp is not None else pg

    m = valid.to(ct)
    w_tok = m * aggregation_row_scale(mask, agg, agg_const, ct).unsqueeze(1)
    loss = (tok_loss * w_tok).sum()
    with torch.no_grad():
        sums = torch.stack([
            m.sum(), loss, (pg * w_tok).sum(), (clipped * m).sum(), (dual * m).sum(),
            (k3 * m).sum(), (truncated * m).sum(), (weight * m).sum(), (r * m).sum(),
            (masked * m).sum(), (weight.square() * m).sum(), (behav_kl * m).sum(),
        ])
    return loss, policy_stats(sums)


# ---------------------------------------------------------------- layer 3: LM head

def check_lm_head_args(hidden, weight, targets):
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"need hidden (N, H) and weight (V, H), got {tuple(hidden.shape)}, "
                         f"{tuple(weight.shape)}")
    if hidden.dtype != weight.dtype:
        raise ValueError(f"hidden is {hidden.dtype} but weight is {weight.dtype}")
    if targets.shape != hidden.shape[:1] or targets.dtype != torch.int64:
        raise ValueError(f"targets must be int64 of shape ({hidden.shape[0]},), "
                         f"got {targets.dtype} {tuple(targets.shape)}")


def _row_block_forward(h, w, tgt, chunk_vocab, with_entropy):
    """(target logit, lse, sum p*z) for a block of rows, streaming the vocabulary.

    Online log-sum-exp: m is the running max, s = sum exp(z - m), t = sum exp(z - m) z.
    """
    n, v = h.shape[0], w.shape[0]
    m = torch.full((n,), float("-inf"), dtype=h.dtype, device=h.device)
    s, t, zt = (torch.zeros(n, dtype=h.dtype, device=h.device) for _ in range(3))
    for v0 in range(0, v, chunk_vocab):
        z = h @ w[v0:v0 + chunk_vocab].T
        m_new = torch.maximum(m, z.amax(dim=1))
        alpha = torch.exp(m - m_new)
        p = torch.exp(z - m_new.unsqueeze(1))
        s = s * alpha + p.sum(dim=1)
        if with_entropy:
            t = t * alpha + (p * z).sum(dim=1)
        local = tgt - v0
        inside = (local >= 0) & (local < z.shape[1])
        picked = z.gather(1, local.clamp(0, z.shape[1] - 1).unsqueeze(1)).squeeze(1)
        zt = torch.where(inside, picked, zt)
        m = m_new
    return zt, m + torch.log(s), t / s


def _row_block_backward(h, w, tgt, lse, c0, g_logp, g_ent, chunk_vocab, dh, dw):
    """Add this row block's dL/dh into dh and dL/dW into dw, recomputing the logits.

    dL/dz = g_logp * onehot(target) + p * (c0 - g_ent * z), with
    c0 = g_lse - g_logp + g_ent * sum(p*z): the three output gradients in one form.
    """
    for v0 in range(0, w.shape[0], chunk_vocab):
        ws = w[v0:v0 + chunk_vocab]
        z = h @ ws.T
        dz = torch.exp(z - lse.unsqueeze(1)) * (c0.unsqueeze(1) - g_ent.unsqueeze(1) * z)
        local = tgt - v0
        inside = (local >= 0) & (local < z.shape[1])
        dz.scatter_add_(1, local.clamp(0, z.shape[1] - 1).unsqueeze(1),
                        torch.where(inside, g_logp, 0.0).unsqueeze(1))
        if dh is not None:
            dh.addmm_(dz, ws)
        if dw is not None:
            dw[v0:v0 + chunk_vocab].addmm_(dz.T, h)


class _LMHeadLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk_rows, chunk_vocab, with_entropy):
        ct = compute_dtype(hidden, weight)
        w = weight.to(ct)  # upcast once per call: bf16 logits would cost ~1e-2 in log-prob
        n = hidden.shape[0]
        logp, lse, mean_z = (torch.empty(n, dtype=ct, device=hidden.device) for _ in range(3))
        for r0 in range(0, n, chunk_rows):
            rows = slice(r0, r0 + chunk_rows)
            zt, lse[rows], mean_z[rows] = _row_block_forward(
                hidden[rows].to(ct), w, targets[rows], chunk_vocab, with_entropy)
            logp[rows] = zt - lse[rows]
        entropy = lse - mean_z if with_entropy else torch.zeros_like(lse)
        if not with_entropy:
            ctx.mark_non_differentiable(entropy)
        ctx.save_for_backward(hidden, weight, targets, lse, mean_z)
        ctx.chunks = (chunk_rows, chunk_vocab)
        return logp, entropy, lse

    @staticmethod
    def backward(ctx, g_logp, g_ent, g_lse):
        hidden, weight, targets, lse, mean_z = ctx.saved_tensors
        chunk_rows, chunk_vocab = ctx.chunks
        need_dh, need_dw = ctx.needs_input_grad[:2]
        ct = lse.dtype
        w = weight.to(ct)
        c0 = g_lse - g_logp + g_ent * mean_z
        dh = torch.zeros(hidden.shape, dtype=ct, device=hidden.device) if need_dh else None
        dw = torch.zeros(weight.shape, dtype=ct, device=weight.device) if need_dw else None
        for r0 in range(0, hidden.shape[0], chunk_rows):
            rows = slice(r0, r0 + chunk_rows)
            _row_block_backward(hidden[rows].to(ct), w, targets[rows], lse[rows], c0[rows],
                                g_logp[rows], g_ent[rows], chunk_vocab,
                                None if dh is None else dh[rows], dw)
        return (None if dh is None else dh.to(hidden.dtype),
                None if dw is None else dw.to(weight.dtype), None, None, None, None)


def lm_head_logprobs(hidden, weight, targets, *, chunk_rows=1024, chunk_vocab=8192,
                     with_entropy=True):
    """(logp, entropy, lse), each (N,), of hidden (N, H) @ weight (V, H).T at targets (N,).

    Logits exist for at most chunk_rows x chunk_vocab entries at a time. Differentiable
    w.r.t. hidden and weight; dW is accumulated in float32 (float64 for float64 inputs).
    With with_entropy=False the entropy is zeros and not differentiable.
    """
    check_lm_head_args(hidden, weight, targets)
    if targets.numel() and not (0 <= int(targets.min()) and int(targets.max()) < weight.shape[0]):
        raise ValueError(f"targets must lie in [0, {weight.shape[0]}), got "
                         f"[{int(targets.min())}, {int(targets.max())}]")
    return _LMHeadLogprobs.apply(hidden, weight, targets, chunk_rows, chunk_vocab, with_entropy)
