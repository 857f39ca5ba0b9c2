"""Every named loss option against its source's own formula.

Each test restates, in its own code and in float64, what the named source computes (repo, path and
commit in the comment, read from the peer's code), on random inputs with padding and masks, and
compares it with what jury-rl's option computes: learner.grpo.policy_loss from a LearnerConfig,
as the learner calls it (and rejection_mask for verl's rejections). Tolerance 1e-6.

Sources (commits as read):
  verl   volcengine/verl @ b178a3cd56f58b2d502255daba591e92833930a7
  AReaL  inclusionAI/AReaL @ 4aef98d8d818af55b43621aaadba047ae10f4e77
  TRL    huggingface/trl @ f2cd57710ae345ea6428ae95363267fcf38a3dc8
"""
import math

import pytest
import torch

from jury import kernels
from jury.learner.grpo import _advantages, aggregation_denominator, policy_loss, rejection_mask
from jury.protocol.config import LearnerConfig

B, T = 6, 9
TOL = dict(rtol=1e-6, atol=1e-6)


def inputs(seed: int, spread: float = 0.4):
    """log-probs (B, T) of the policy, the proximal (recomputed) and the behaviour policies, a
    sequence advantage, a ragged completion mask (row 5 empty), and NaN in the padding."""
    g = torch.Generator().manual_seed(seed)
    behav = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3 - 0.05
    prox = behav + spread * torch.randn(B, T, generator=g, dtype=torch.float64)
    logp = prox + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    lens = torch.tensor([9, 4, 1, 7, 3, 0])
    mask = (torch.arange(T) < lens.unsqueeze(1)).double()
    for t in (logp, prox, behav):
        t[mask == 0] = float("nan")  # padding may hold anything
    return logp, prox, behav, adv, mask


def clean(t, mask):
    return torch.where(mask != 0, t, 0.0)


def ours(cfg, logp, prox, behav, adv, mask, ref=None, max_new_tokens=T):
    """jury-rl's loss for cfg over one mini-batch, its gradient w.r.t. logp, and its stats."""
    logp = logp.clone().requires_grad_(True)
    if cfg.correction.startswith("reject"):
        mask = mask * rejection_mask(prox, behav, mask, cfg)
    tokens, seqs = float(mask.sum()), float((mask.sum(1) > 0).sum())
    loss, stats = policy_loss(cfg, logp, behav, prox, adv, mask, ref,
                              aggregation_denominator(cfg.loss_agg, tokens, seqs, max_new_tokens))
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), torch.nan_to_num(grad), stats


def grad_of(fn, logp, mask):
    x = clean(logp, mask).clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(x), x)
    return g * (mask != 0)


# ── the PPO term, as verl writes it ──
def verl_pg(logp, old, adv, eps_low=0.2, eps_high=0.2, clip_ratio_c=None):
    """verl/trainer/ppo/core_algos.py, compute_policy_loss_vanilla (lines 1160-1250): log-ratio
    clamped to +-20; L = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)); for A < 0 only,
    L = min(-A c, L) (the dual clip, clip_ratio_c)."""
    r = torch.exp((logp - old).clamp(-20, 20))
    a = adv.unsqueeze(1).expand_as(r)
    loss = torch.maximum(-a * r, -a * r.clamp(1 - eps_low, 1 + eps_high))
    if clip_ratio_c is not None:
        loss = torch.where(a < 0, torch.minimum(-a * clip_ratio_c, loss), loss)
    return loss


def verl_token_mean(loss, mask):
    """verl agg_loss(..., "token-mean"): the masked sum over the mask's tokens."""
    return (loss * mask).sum() / mask.sum()


def test_dual_clip_is_verls_clip_ratio_c():
    logp, prox, behav, adv, mask = inputs(0, spread=0.0)
    logp = behav + torch.randn(B, T, dtype=torch.float64, generator=torch.Generator().manual_seed(9)) * 1.2
    cfg = LearnerConfig(dual_clip=3.0)
    loss, grad, stats = ours(cfg, logp, prox, behav, adv, mask)
    theirs = lambda x: verl_token_mean(verl_pg(x, clean(behav, mask), adv, clip_ratio_c=3.0), mask)  # noqa: E731
    torch.testing.assert_close(loss, theirs(clean(logp, mask)), **TOL)
    torch.testing.assert_close(grad, grad_of(theirs, logp, mask), **TOL)
    assert stats["dual_clip_frac"] > 0  # the inputs reach the dual clip
    # verl's own test vector: A=[1,-1,-1,1,-2], r=[1.5,0.5,5,0.7,1.1], c=3, token-mean 0.82
    a = torch.tensor([1.0, -1, -1, 1, -2], dtype=torch.float64)
    r = torch.tensor([[1.5, 0.5, 5.0, 0.7, 1.1]], dtype=torch.float64).log().T
    one = torch.ones(5, 1, dtype=torch.float64)
    vector, _, _ = ours(cfg, r, torch.zeros(5, 1, dtype=torch.float64), torch.zeros(5, 1, dtype=torch.float64), a, one)
    assert vector.item() == pytest.approx(0.82, abs=1e-12)
    assert ours(LearnerConfig(), r, r * 0, r * 0, a, one)[0].item() == pytest.approx(1.22, abs=1e-12)  # no dual clip


def test_recompute_old_takes_the_ratio_against_the_trainers_forward():
    """verl recomputes old_log_prob with the actor before the update (ray_trainer.py fit, lines
    1486-1533, bypass_mode false): the PPO ratio is pi_theta / pi_old(recomputed), no behaviour weight."""
    logp, prox, behav, adv, mask = inputs(1)
    loss, grad, _ = ours(LearnerConfig(recompute_old=True), logp, prox, behav, adv, mask)
    theirs = lambda x: verl_token_mean(verl_pg(x, clean(prox, mask), adv), mask)  # noqa: E731
    torch.testing.assert_close(loss, theirs(clean(logp, mask)), **TOL)
    torch.testing.assert_close(grad, grad_of(theirs, logp, mask), **TOL)
    behaviour, _, _ = ours(LearnerConfig(), logp, prox, behav, adv, mask)
    assert abs(behaviour - loss) > 1e-3  # the two readings of "old" differ on these inputs


@pytest.mark.parametrize("cap", [5.0, 1.3])
def test_decoupled_is_areals_decoupled_ppo(cap):
    """AReaL areal/utils/functional/functional.py, ppo_actor_loss_fn (lines 429-559) with
    apply_rejection_sampling (185-426) at {level: token, action: mask, metric: ratio, upper: C}:
    r = pi_theta / pi_prox clipped as PPO; w = pi_prox / pi_behav; a token with w > C leaves the
    numerator (its mask) but not the denominator N0 (the valid tokens before rejection); the kept
    ones are weighted by w itself, not truncated. C = 5 in AReaL's recipes (gsm8k_grpo.yaml)."""
    logp, prox, behav, adv, mask = inputs(2, spread=0.9)
    cfg = LearnerConfig(correction="decoupled", is_cap=cap)
    loss, grad, stats = ours(cfg, logp, prox, behav, adv, mask)

    def theirs(x):
        w = torch.exp(clean(prox, mask) - clean(behav, mask))
        kept = (mask != 0) & (w <= cap)
        n0 = mask.sum()
        return (verl_pg(x, clean(prox, mask), adv) * w * kept).sum() / n0

    torch.testing.assert_close(loss, theirs(clean(logp, mask)), **TOL)
    torch.testing.assert_close(grad, grad_of(theirs, logp, mask), **TOL)
    assert 0 < stats["mask_frac"] < 1 and stats["tis_frac"] == 0
    assert LearnerConfig(correction="decoupled").cap == 5.0


def test_areals_own_test_vector():
    # the executed AReaL vector: A=[1,-1,-1,1,-2], r=pi/pi_prox=[1.5,0.5,5,0.7,1.1],
    # w=pi_prox/pi_behav=[1,2,6,0.25,5], upper 5: loss (-1.2+1.6+0-0.175+11)/5 = 2.245
    a = torch.tensor([1.0, -1, -1, 1, -2], dtype=torch.float64)
    r = torch.tensor([1.5, 0.5, 5.0, 0.7, 1.1], dtype=torch.float64).log().unsqueeze(1)
    w = torch.tensor([1, 2, 6, 0.25, 5], dtype=torch.float64).log().unsqueeze(1)
    prox = torch.zeros(5, 1, dtype=torch.float64)
    loss, _, _ = ours(LearnerConfig(correction="decoupled"), r, prox, prox - w, a, torch.ones(5, 1, dtype=torch.float64))
    assert loss.item() == pytest.approx(2.245, abs=1e-12)


@pytest.mark.parametrize("correction, level", [("tis_token", "token"), ("tis_seq", "sequence")])
def test_tis_is_verls_rollout_is(correction, level):
    """verl verl/trainer/ppo/rollout_corr_helper.py, compute_rollout_correction_weights (481-598):
    token w_t = exp(lambda_t), sequence w = exp(sum_t lambda_t) on every token, lambda = log pi_old -
    log pi_rollout, truncated above at rollout_is_threshold (2.0), multiplied into the PPO loss after
    both clips (core_algos.py 1160-1250). (verl clamps lambda to +-20; these inputs stay inside.)"""
    logp, prox, behav, adv, mask = inputs(3, spread=0.5)
    cfg = LearnerConfig(correction=correction)
    loss, grad, stats = ours(cfg, logp, prox, behav, adv, mask)

    def theirs(x):
        lam = clean(prox, mask) - clean(behav, mask)
        if level == "sequence":
            lam = lam.sum(1, keepdim=True).expand_as(lam)
        w = torch.exp(lam).clamp(max=2.0) * mask
        return verl_token_mean(verl_pg(x, clean(prox, mask), adv) * w, mask)

    torch.testing.assert_close(loss, theirs(clean(logp, mask)), **TOL)
    torch.testing.assert_close(grad, grad_of(theirs, logp, mask), **TOL)
    assert 0 < stats["tis_frac"] < 1


@pytest.mark.parametrize("correction, mode, clip_min, clip_max", [
    ("mask_token", "token_mask", 0.5, 5.0),          # IcePop's band (TRL's IcePop test)
    ("mask_seq_product", "sequence_mask", None, 3.0),  # TRL's default mode and bounds
])
def test_masks_are_trls_vllm_importance_sampling(correction, mode, clip_min, clip_max):
    """TRL trl/trainer/grpo_trainer.py, _generate_and_score_completions (2561-2624) and _compute_loss
    (3054-3150): delta_t = (old_t - vllm_t) * mask; token: rho_t = exp(delta_t), sequence: rho =
    exp(sum_t delta_t) (a product, not a mean); *_mask: rho = 0 outside [clip_min, clip_max] (None:
    unbounded), kept values keep rho; per_token_loss *= rho after the PPO min; the denominator is
    unchanged (loss_type dapo: the batch's active tokens)."""
    logp, prox, behav, adv, mask = inputs(4 if mode == "token_mask" else 11, spread=0.9 if mode == "token_mask" else 0.5)
    cfg = LearnerConfig(correction=correction)
    loss, grad, stats = ours(cfg, logp, prox, behav, adv, mask)

    def theirs(x):
        delta = (clean(prox, mask) - clean(behav, mask)) * mask
        rho = torch.exp(delta if mode == "token_mask" else delta.sum(1, keepdim=True).expand_as(delta))
        low = -math.inf if clip_min is None else clip_min
        rho = torch.where((rho < low) | (rho > clip_max), 0.0, rho)
        coef_1 = torch.exp(x - clean(prox, mask))
        a = adv.unsqueeze(1)
        per_token = -torch.minimum(coef_1 * a, coef_1.clamp(0.8, 1.2) * a) * rho
        return (per_token * mask).sum() / mask.sum()

    torch.testing.assert_close(loss, theirs(clean(logp, mask)), **TOL)
    torch.testing.assert_close(grad, grad_of(theirs, logp, mask), **TOL)
    assert 0 < stats["mask_frac"] < 1


def test_mask_seq_is_areals_sequence_rejection_on_the_geometric_mean():
    """AReaL apply_rejection_sampling (functional.py 185-426) at {level: sequence, action: mask,
    metric: ratio, agg: mean}: the sequence's geometric mean exp(mean_t log w_t) decides, out of
    band the whole sequence leaves the numerator (not N0), and the kept sequences are weighted by
    that geometric mean on every token. Default band: upper 5.0, no lower bound."""
    logp, prox, behav, adv, mask = inputs(5, spread=0.6)
    low, high = 0.85, 1.15
    loss, grad, stats = ours(LearnerConfig(correction="mask_seq", mask_low=low, mask_high=high),
                             logp, prox, behav, adv, mask)

    def theirs(x):
        lr = clean(prox, mask) - clean(behav, mask)
        geo = torch.exp(lr.sum(1) / mask.sum(1).clamp(min=1)).unsqueeze(1).expand_as(lr)
        kept = (geo >= low) & (geo <= high) & (mask != 0)
        return (verl_pg(x, clean(prox, mask), adv) * geo * kept).sum() / mask.sum()

    torch.testing.assert_close(loss, theirs(clean(logp, mask)), **TOL)
    torch.testing.assert_close(grad, grad_of(theirs, logp, mask), **TOL)
    assert 0 < stats["mask_frac"] < 1
    assert LearnerConfig(correction="mask_seq").band == (0.0, 5.0)


@pytest.mark.parametrize("correction, option, spec", [
    ("reject_token", "token_k1", (0.8, 1.25)),
    ("reject_seq_sum", "seq_sum_k1", (0.5, 2.0)),        # verl's decoupled_seq_is_rs preset
    ("reject_seq_mean", "seq_mean_k1", (0.9, 1.2)),     # asymmetric: verl's band is on 1/w
])
def test_rejections_are_verls_rollout_rs(correction, option, spec):
    """verl rollout_corr_helper.py, compute_rollout_rejection_mask (156-372) and
    compute_rollout_correction_and_add_to_batch (943-997): k1_t = log pi_rollout - log pi_train
    (= -lambda_t); token_k1 keeps a token iff log lo <= k1_t <= log hi, seq_sum_k1 a sequence iff
    its sum of k1 is inside, seq_mean_k1 iff its mean is; response_mask *= keep, so a rejected
    token leaves the numerator and the denominator, and a kept one weighs 1 (rollout_is off).
    verl's "lo_hi" bounds pi_rollout / pi_train = 1 / w: jury-rl's band on w is (1 / hi, 1 / lo)."""
    logp, prox, behav, adv, mask = inputs(6, spread=0.3 if option == "token_k1" else 0.5)
    lo, hi = spec
    cfg = LearnerConfig(correction=correction, mask_low=1 / hi, mask_high=1 / lo)
    loss, grad, stats = ours(cfg, logp, prox, behav, adv, mask)

    def theirs(x):
        k1 = clean(behav, mask) - clean(prox, mask)
        if option == "token_k1":
            stat = k1
        else:
            total = (k1 * mask).sum(1, keepdim=True)
            stat = (total if option == "seq_sum_k1" else total / (mask.sum(1, keepdim=True) + 1e-8)).expand_as(k1)
        keep = ((stat >= math.log(lo)) & (stat <= math.log(hi))).double()
        response_mask = mask * keep
        return verl_token_mean(verl_pg(x, clean(prox, mask), adv), response_mask)

    torch.testing.assert_close(loss, theirs(clean(logp, mask)), **TOL)
    torch.testing.assert_close(grad, grad_of(theirs, logp, mask), **TOL)
    kept = mask * rejection_mask(prox, behav, mask, cfg)
    assert 0 < kept.sum() < mask.sum()  # some rejected, not all
    assert stats["is_weight_mean"] == 0 or stats["tis_frac"] == 0  # no weight applied to the kept


def test_reject_defaults_follow_verls_presets():
    assert LearnerConfig(correction="reject_seq_sum").band == (0.5, 2.0)
    low, high = LearnerConfig(correction="reject_seq_mean").band  # "0.999_1.001" on 1 / w
    assert (low, high) == pytest.approx((1 / 1.001, 1 / 0.999))


def test_low_var_kl_is_verls_clamped_k3():
    """verl core_algos.py kl_penalty / kl_penalty_forward (1841-1902), "low_var_kl": x =
    clip(ref - logp, -20, 20); kl = exp(x) - x - 1; clip(kl, -10, 10). Beyond a log-ratio of about
    2.5, k3 passes 10 and the two estimators part."""
    logp, prox, behav, adv, mask = inputs(7)
    ref = clean(logp, mask) + torch.linspace(-4, 3, T, dtype=torch.float64)  # log-ratios past 2.5
    cfg = LearnerConfig(kl_coef=0.3, kl_estimator="low_var_kl")
    loss, grad, _ = ours(cfg, logp, prox, behav, adv * 0, mask, ref=ref)

    def theirs(x):
        d = (ref - x).clamp(-20, 20)
        kl = (torch.exp(d) - d - 1).clamp(-10, 10)
        return verl_token_mean(0.3 * kl, mask)

    torch.testing.assert_close(loss, theirs(clean(logp, mask)), **TOL)
    torch.testing.assert_close(grad, grad_of(theirs, logp, mask), **TOL)
    plain, _, _ = ours(LearnerConfig(kl_coef=0.3), logp, prox, behav, adv * 0, mask, ref=ref)
    assert plain > loss + 1e-3  # TRL's k3 (no clamp) is larger on these ratios


def test_aggregations_are_their_sources():
    """verl core_algos.py agg_loss (1025-1080) on its own vector L=[[1,2,3,0],[4,5,0,0]]: token-mean
    3.0, seq-mean-token-sum 7.5, seq-mean-token-mean 3.25, seq-mean-token-sum-norm 15/4 (the
    response length); TRL's dr_grpo (grpo_trainer.py 3124-3150): sum / (B * max_completion_length)."""
    per_token = torch.tensor([[1.0, 2, 3, 0], [4, 5, 0, 0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.float64)
    # the per-token values through the kernel's aggregation, with the denominator the learner hands it
    for agg, expected in (("token-mean", 3.0), ("seq-mean-token-sum", 7.5), ("seq-mean-token-mean", 3.25),
                          ("seq-mean-token-sum-norm", 3.75), ("dr_grpo", 15 / (2 * 4))):
        scale = kernels.reference.aggregation_row_scale(
            mask, agg, aggregation_denominator(agg, float(mask.sum()), 2.0, 4), torch.float64)
        assert float((per_token * mask * scale.unsqueeze(1)).sum()) == pytest.approx(expected, abs=1e-7), agg
    assert aggregation_denominator("seq-mean-token-sum-norm", 5, 2, 4) * 2 == aggregation_denominator("dr_grpo", 5, 2, 4)


@pytest.mark.parametrize("std, eps, source", [
    ("unbiased", 1e-6, "verl core_algos.py compute_grpo_outcome_advantage (267-330): torch.std, eps 1e-6"),
    ("unbiased", 1e-4, "TRL grpo_trainer.py (2683-2724): nanstd (n - 1), eps 1e-4"),
    ("population", 1e-6, "JURY-RL's formula: the population std"),
])
def test_grpo_advantage_std(std, eps, source):
    g = torch.Generator().manual_seed(8)
    rewards = torch.rand(5, 8, generator=g, dtype=torch.float64)
    rewards[2] = 0.5  # a flat group: 0 whatever the std
    cfg = LearnerConfig(advantage="grpo", adv_std=std, adv_eps=eps)
    adv = _advantages(list(rewards.numpy()), cfg).view(5, 8).double()  # the learner's, as collate calls it
    centred = rewards - rewards.mean(1, keepdim=True)
    spread = rewards.std(1, keepdim=True, correction=1 if std == "unbiased" else 0)
    expected = torch.where(spread > 0, centred / (spread + eps), 0.0)
    torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-6, msg=source)  # the learner's are float32
    if std == "unbiased":  # at G = 8 the unbiased std's advantages are sqrt(7/8) of the population's
        population = kernels.group_advantage(rewards, mode="grpo", eps=eps)
        ratio = (adv[0] / population[0]).mean().item()
        assert ratio == pytest.approx(math.sqrt(7 / 8), rel=1e-4)
