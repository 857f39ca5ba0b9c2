"""The PyTorch references against maths worked by hand, plus gradcheck and dispatch.

Expected values are written as the formulas that produce them from the inputs, so
each can be checked with a pencil; everything runs in float64.
"""

import math
import os
import subprocess
import sys

import pytest
import torch

from jury import kernels
from jury.kernels import reference as ref

F64 = torch.float64


def tensor(values):
    return torch.tensor(values, dtype=F64)


# ---------------------------------------------------------------- layer 1

# Group A has mean 1/2 and biased std 1/2; group B mean 2, centred [1, -1, 0, 0],
# biased variance 2/4, unbiased 2/3; group C is all equal.
REWARDS = [[1.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0], [5.0, 5.0, 5.0, 5.0]]


@pytest.mark.parametrize("mode, unbiased, expected", [
    ("grpo", False, [[0.5 / (0.5 + 1e-6) * s for s in (1, -1, -1, 1)],
                     [1 / (math.sqrt(0.5) + 1e-6) * s for s in (1, -1, 0, 0)], [0] * 4]),
    ("grpo", True, [[0.5 / (math.sqrt(1 / 3) + 1e-6) * s for s in (1, -1, -1, 1)],
                    [1 / (math.sqrt(2 / 3) + 1e-6) * s for s in (1, -1, 0, 0)], [0] * 4]),
    ("drgrpo", False, [[0.5, -0.5, -0.5, 0.5], [1, -1, 0, 0], [0] * 4]),
    # r_i minus the mean of the other three: A = [1 - 1/3, 0 - 2/3, 0 - 2/3, 1 - 1/3],
    # B = [3 - 5/3, 1 - 7/3, 2 - 6/3, 2 - 6/3].
    ("rloo", False, [[2 / 3, -2 / 3, -2 / 3, 2 / 3], [4 / 3, -4 / 3, 0, 0], [0] * 4]),
])
def test_group_advantage_by_hand(mode, unbiased, expected):
    adv = ref.group_advantage(tensor(REWARDS), mode=mode, unbiased_std=unbiased)
    torch.testing.assert_close(adv, tensor(expected), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["grpo", "drgrpo", "rloo"])
def test_singleton_and_flat_groups_are_zero_not_nan(mode):
    singletons = ref.group_advantage(tensor([[0.3], [7.0]]), mode=mode, unbiased_std=True)
    assert torch.equal(singletons, torch.zeros(2, 1, dtype=F64)), singletons
    # 0.1 * 3 / 3 != 0.1 in floating point: only the explicit rule gives exact zeros.
    flat = ref.group_advantage(torch.full((1, 3), 0.1), mode=mode)
    assert torch.equal(flat, torch.zeros(1, 3)), flat


def test_group_advantage_per_token_under_mask():
    mask = torch.tensor([[[1, 1, 0], [1, 0, 0]]], dtype=torch.bool)
    adv = ref.group_advantage(tensor([[2.0, 0.0]]), mode="drgrpo", mask=mask)
    torch.testing.assert_close(adv, tensor([[[1.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]]))


# ---------------------------------------------------------------- layer 2

# Two sequences of three tokens; token (1, 2) is padding holding NaN.
RATIOS = [[1.5, 0.5, 1.1], [1.0, 4.0, 1.0]]
ADVS = [[1.0, -1.0, -1.0], [2.0, -1.0, 0.0]]
MASK = [[1, 1, 1], [1, 1, 0]]
# Per token, with clip 0.2: (0,0) A>0, r>1.2 clipped: pg = -1.2, no grad;
# (0,1) A<0, r<0.8 clipped: pg = +0.8, no grad; (0,2) pg = -r A = 1.1, dpg = -r A = 1.1;
# (1,0) pg = -2, dpg = -2; (1,1) pg = 4, dpg = 4 (dual clip 3 would cap it at 3, no grad).
PG = [[-1.2, 0.8, 1.1], [-2.0, 4.0, 0.0]]
DPG = [[0.0, 0.0, 1.1], [-2.0, 4.0, 0.0]]


def hand_inputs():
    old = tensor([[-1.0, -2.0, -0.5], [-3.0, -1.5, -1.0]])
    logp = (old + tensor(RATIOS).log()).requires_grad_()
    with torch.no_grad():
        logp[1, 2] = float("nan")
    return logp, old, tensor(ADVS), tensor(MASK)


def loss_and_grad(**kwargs):
    logp, old, adv, mask = hand_inputs()
    loss, stats = ref.policy_loss(logp, old, adv, mask, **kwargs)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss, grad, stats


def test_policy_loss_token_mean_by_hand():
    loss, grad, stats = loss_and_grad()
    assert torch.isclose(loss, tensor(sum(map(sum, PG)) / 5)), loss  # 2.7 / 5
    torch.testing.assert_close(grad, tensor(DPG) / 5)
    assert stats["clip_frac"].item() == pytest.approx(2 / 5)
    assert stats["ratio_mean"].item() == pytest.approx((1.5 + 0.5 + 1.1 + 1.0 + 4.0) / 5)
    # approx_kl against old: k3 = exp(-log r) + log r - 1 = 1/r + log r - 1 per token.
    k3 = sum(1 / r + math.log(r) - 1 for r in (1.5, 0.5, 1.1, 1.0, 4.0))
    assert stats["approx_kl"].item() == pytest.approx(k3 / 5)
    assert stats["tokens"].item() == 5 and stats["tis_frac"].item() == 0


def test_policy_loss_seq_mean_and_drgrpo_by_hand():
    loss, grad, _ = loss_and_grad(agg="seq-mean-token-mean")
    # Row means 0.7/3 and 2/2, averaged; row 0 tokens weigh 1/(3*2), row 1 tokens 1/(2*2).
    assert torch.isclose(loss, tensor((0.7 / 3 + 1.0) / 2)), loss
    torch.testing.assert_close(grad, tensor([[0, 0, 1.1 / 6], [-2 / 4, 4 / 4, 0]]))
    loss, grad, _ = loss_and_grad(agg="dr_grpo", agg_const=10.0)
    assert torch.isclose(loss, tensor(2.7 / 10)), loss
    torch.testing.assert_close(grad, tensor(DPG) / 10)


def test_policy_loss_dual_clip_and_asymmetric_clip_by_hand():
    loss, grad, stats = loss_and_grad(dual_clip=3.0)
    assert torch.isclose(loss, tensor((2.7 - 4 + 3) / 5)), loss  # token (1,1): pg 4 -> 3
    torch.testing.assert_close(grad, tensor([[0, 0, 1.1 / 5], [-2 / 5, 0, 0]]))
    assert stats["dual_clip_frac"].item() == pytest.approx(1 / 5)
    # DAPO clip_high 0.6: token (0,0) at r=1.5 is no longer clipped: pg = -1.5, dpg = -1.5.
    loss, grad, stats = loss_and_grad(clip_high=0.6)
    assert torch.isclose(loss, tensor((2.7 + 1.2 - 1.5) / 5)), loss
    assert grad[0, 0].item() == pytest.approx(-1.5 / 5)
    assert stats["clip_frac"].item() == pytest.approx(1 / 5)


def test_ratio_on_the_clip_bound_is_not_clipped():
    # clip 0 puts both bounds at exactly 1 = exp(0): every token sits on a bound.
    logp = torch.zeros(1, 2, dtype=F64, requires_grad=True)
    adv = tensor([[3.0, -2.0]])
    loss, stats = ref.policy_loss(logp, torch.zeros(1, 2, dtype=F64), adv, torch.ones(1, 2),
                                  clip_low=0.0, clip_high=0.0)
    (grad,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(grad, -adv / 2)
    assert stats["clip_frac"].item() == 0


def test_policy_loss_truncated_importance_weight_and_kl_by_hand():
    logp, old, adv, mask = hand_inputs()
    # w = exp(old - behav) = [2, 0.5, 1], [3 -> capped 2.5, 1]: pg * w summed:
    # -2.4 + 0.4 + 1.1 - 5 + 4 = -1.9.
    behav = old - tensor([[2.0, 0.5, 1.0], [3.0, 1.0, 1.0]]).log()
    # ref - logp = log 2 on token (0,0), 0 elsewhere: k3 = 2 - log 2 - 1, dk3/dlogp = 1 - 2.
    ref_logp = logp.detach().clone()
    ref_logp[0, 0] += math.log(2)
    loss, stats = ref.policy_loss(logp, old, adv, mask, behav_logp=behav, tis_cap=2.5,
                                  ref_logp=ref_logp, kl_coef=0.1)
    (grad,) = torch.autograd.grad(loss, logp)
    k3 = 1 - math.log(2)
    assert torch.isclose(loss, tensor((-1.9 + 0.1 * k3) / 5)), loss
    expected = tensor([[0.1 * -1, 0, 1.1], [-2 * 2.5, 4, 0]]) / 5
    torch.testing.assert_close(grad, expected)
    assert stats["tis_frac"].item() == pytest.approx(1 / 5)
    assert stats["is_weight_mean"].item() == pytest.approx((2 + 0.5 + 1 + 2.5 + 1) / 5)
    assert stats["approx_kl"].item() == pytest.approx(k3 / 5)


# Behaviour ratios w = old / behav for the off-policy corrections below; padding holds NaN.
W = [[2.0, 0.5, 1.0], [3.0, 1.0, 1.0]]


def corrected(**kwargs):
    """loss, dL/dlogp and stats of the hand inputs through the dispatcher, behaviour ratios W."""
    logp, old, adv, mask = hand_inputs()
    behav = old - tensor(W).log()
    behav[1, 2] = float("nan")
    loss, stats = kernels.policy_loss(logp, old, adv, mask, behav_logp=behav, **kwargs)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss, grad, stats


def test_sequence_truncated_importance_sampling_by_hand():
    # products: row 0 2 * 0.5 * 1 = 1 (under the cap), row 1 3 * 1 = 3 -> capped at 2 on both
    # of its tokens. pg * weight summed: (-1.2 + 0.8 + 1.1) * 1 + (-2 + 4) * 2 = 4.7.
    loss, grad, stats = corrected(is_level="sequence", tis_cap=2.0)
    assert torch.isclose(loss, tensor(4.7 / 5)), loss
    torch.testing.assert_close(grad, tensor([[0, 0, 1.1], [-2 * 2, 4 * 2, 0]]) / 5)
    assert stats["tis_frac"].item() == pytest.approx(2 / 5) and stats["mask_frac"].item() == 0
    # weights per token 1, 1, 1, 2, 2: ESS = (7/5)^2 / (11/5) = 49/55
    assert stats["is_weight_mean"].item() == pytest.approx(7 / 5)
    assert stats["is_weight_sq_mean"].item() == pytest.approx(11 / 5)
    # behav_kl is per token whatever the level: w - log w - 1 on 2, 0.5, 1, 3, 1
    # = (1 - log 2) + (log 2 - 0.5) + 0 + (2 - log 3) + 0 = 2.5 - log 3
    assert stats["behav_kl"].item() == pytest.approx((2.5 - math.log(3)) / 5)


def test_token_masked_importance_sampling_by_hand():
    # band [0.4, 2.5]: token (1, 0) with w = 3 is masked (weight 0, no gradient though it is
    # not clipped); the others keep their own w: -1.2 * 2 + 0.8 * 0.5 + 1.1 * 1 + 0 + 4 * 1 = 3.1
    loss, grad, stats = corrected(mask_band=(0.4, 2.5))
    assert torch.isclose(loss, tensor(3.1 / 5)), loss
    torch.testing.assert_close(grad, tensor([[0, 0, 1.1], [0, 4, 0]]) / 5)
    assert stats["mask_frac"].item() == pytest.approx(1 / 5) and stats["tis_frac"].item() == 0
    assert stats["is_weight_mean"].item() == pytest.approx((2 + 0.5 + 1 + 0 + 1) / 5)


def test_sequence_masked_importance_sampling_by_hand():
    # geometric means: row 0 (2 * 0.5 * 1)^(1/3) = 1, row 1 (3 * 1)^(1/2) = 1.732.
    # band [0.5, 1.5] masks all of row 1: only row 0's pg, weight 1: (-1.2 + 0.8 + 1.1) = 0.7.
    loss, grad, stats = corrected(is_level="geometric", mask_band=(0.5, 1.5))
    assert torch.isclose(loss, tensor(0.7 / 5)), loss
    torch.testing.assert_close(grad, tensor([[0, 0, 1.1], [0, 0, 0]]) / 5)
    assert stats["mask_frac"].item() == pytest.approx(2 / 5)
    # band [0.5, 2]: row 1 kept with its geometric mean on both tokens: 0.7 + sqrt(3) (-2 + 4)
    loss, grad, _ = corrected(is_level="geometric", mask_band=(0.5, 2.0))
    assert torch.isclose(loss, tensor((0.7 + 2 * math.sqrt(3)) / 5)), loss
    torch.testing.assert_close(grad, tensor([[0, 0, 1.1], [-2 * math.sqrt(3), 4 * math.sqrt(3), 0]]) / 5)


def test_ratio_on_a_band_bound_is_kept():
    # behav == old: every w is exactly 1, on both bounds of the band [1, 1], and on the cap 1
    logp, old, adv, mask = hand_inputs()
    loss, stats = kernels.policy_loss(logp, old, adv, mask, behav_logp=old.clone(), mask_band=(1.0, 1.0),
                                      tis_cap=1.0)
    assert torch.isclose(loss, tensor(2.7 / 5)), loss
    assert stats["mask_frac"].item() == 0 and stats["tis_frac"].item() == 0


def test_sequence_ratio_overflow_is_capped_not_inf():
    # a product of e^1000 overflows float32: capped to 2 (or masked), the loss stays finite
    logp, old, adv, mask = hand_inputs()
    behav = old - 500.0
    loss, stats = kernels.policy_loss(logp, old, adv, mask, behav_logp=behav, is_level="sequence", tis_cap=2.0)
    assert torch.isclose(loss, tensor(2 * 2.7 / 5)), loss
    loss, stats = kernels.policy_loss(logp, old, adv, mask, behav_logp=behav, is_level="sequence",
                                      mask_band=(0.5, 2.0))
    assert loss.item() == 0 and stats["mask_frac"].item() == 1


def test_an_old_log_prob_of_minus_inf_gives_a_finite_loss_and_gradient():
    """A token the old policy gave probability 0 (-inf, or -100): its ratio overflowed to inf and
    inf x 0 made a NaN gradient on a clipped token, and a NaN loss at advantage 0, so the step was
    skipped as non-finite. The log-ratio is clamped to +-20 before the exp, as verl does
    (volcengine/verl@b178a3cd verl/trainer/ppo/core_algos.py compute_policy_loss_vanilla): past
    it no gradient, and the loss is verl's."""
    old = tensor([[-1.1, -math.inf, -2.0, -100.0]])
    logp = tensor([[-1.0, -1.0, -2.0, -1.0]]).requires_grad_()
    mask = torch.ones(1, 4)
    e20 = math.exp(ref.RATIO_LOG_BOUND)
    for adv, kwargs, tok in ((1.0, {}, [None, -(1.2), None, -(1.2)]),          # clipped at 1 + 0.2
                             (-1.0, dict(dual_clip=3.0), [None, 3.0, None, 3.0]),  # dual-clipped at 3
                             (-1.0, {}, [None, e20, None, e20]),                  # unclipped: e^20
                             (0.0, {}, [0.0, 0.0, 0.0, 0.0])):
        loss, stats = ref.policy_loss(logp, old, torch.full((1,), adv, dtype=F64), mask, **kwargs)
        (grad,) = torch.autograd.grad(loss, logp)
        assert torch.isfinite(loss) and torch.isfinite(grad).all(), (adv, kwargs, loss, grad)
        assert grad[0, 1].item() == 0 and grad[0, 3].item() == 0, (adv, kwargs, grad)  # no gradient past the bound
        assert math.isfinite(stats["ratio_mean"].item()) and math.isfinite(stats["approx_kl"].item())
        r = [math.exp(0.1), None, 1.0, None]
        want = sum(t if t is not None else -r[i] * adv for i, t in enumerate(tok)) / 4
        assert loss.item() == pytest.approx(want, rel=1e-9), (adv, kwargs)


def test_policy_loss_empty_mask_gives_zero_not_nan():
    logp = torch.randn(2, 3, requires_grad=True)
    loss, stats = ref.policy_loss(logp, torch.randn(2, 3), torch.randn(2), torch.zeros(2, 3),
                                  agg="seq-mean-token-mean")
    (grad,) = torch.autograd.grad(loss, logp)
    assert loss.item() == 0 and torch.equal(grad, torch.zeros(2, 3))
    assert all(torch.isfinite(v) for v in stats.values()), stats


@pytest.mark.parametrize("bad, match", [
    (dict(agg="dr_grpo"), "agg_const"), (dict(agg="mean"), "agg"),
    (dict(kl_coef=0.1), "ref_logp"), (dict(dual_clip=0.5), "dual_clip"),
    (dict(clip_low=1.0), "clip_low"), (dict(tis_cap=0.0), "tis_cap"),
    (dict(is_level="row"), "is_level"), (dict(mask_band=(2.0, 1.0)), "mask_band"),
    (dict(behav_logp=torch.zeros(1, 2), is_level="sequence"), "tis_cap or mask_band"),
])
def test_policy_loss_refuses_bad_arguments(bad, match):
    with pytest.raises(ValueError, match=match):
        ref.policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 2), **bad)


def test_policy_loss_gradcheck():
    # Small clip ranges and cap so that clipped, truncated and free tokens all occur.
    b, t = 3, 5
    old = torch.randn(b, t, dtype=F64)
    logp = (old + 0.05 * torch.randn(b, t, dtype=F64)).requires_grad_()
    adv, mask = torch.randn(b, t, dtype=F64), torch.rand(b, t) > 0.3
    kwargs = dict(behav_logp=old + 0.1 * torch.randn(b, t, dtype=F64), tis_cap=1.05,
                  ref_logp=old + 0.1 * torch.randn(b, t, dtype=F64), kl_coef=0.2,
                  dual_clip=3.0, agg="seq-mean-token-mean", clip_low=0.02, clip_high=0.03)
    fn = lambda lp: ref.policy_loss(lp, old, adv, mask, **kwargs)[0]
    assert torch.autograd.gradcheck(fn, (logp,))


# ---------------------------------------------------------------- layer 3

def test_lm_head_by_hand_across_chunks():
    # Row 0: h = 1, logits [0, log 2, log 3] -> softmax [1/6, 1/3, 1/2], lse = log 6.
    # Row 1: h = 2, logits [0, 2 log 2, 2 log 3] -> exp [1, 4, 9], lse = log 14.
    weight = tensor([[0.0], [math.log(2)], [math.log(3)]]).requires_grad_()
    hidden = tensor([[1.0], [2.0]]).requires_grad_()
    targets = torch.tensor([2, 0])
    logp, ent, lse = ref.lm_head_logprobs(hidden, weight, targets, chunk_rows=1, chunk_vocab=2)
    torch.testing.assert_close(lse, tensor([math.log(6), math.log(14)]))
    torch.testing.assert_close(logp, tensor([math.log(3 / 6), math.log(1 / 14)]))
    p0, p1 = [1 / 6, 1 / 3, 1 / 2], [1 / 14, 4 / 14, 9 / 14]
    torch.testing.assert_close(ent, tensor([-sum(p * math.log(p) for p in p0),
                                            -sum(p * math.log(p) for p in p1)]))
    # d logp / d h = sum_j (onehot_j - p_j) w_j; only row 0's logp enters the loss.
    dh, dw = torch.autograd.grad(logp[0], (hidden, weight))
    w = [0.0, math.log(2), math.log(3)]
    dz = [(j == 2) - p0[j] for j in range(3)]
    torch.testing.assert_close(dh, tensor([[sum(d * wj for d, wj in zip(dz, w, strict=True))], [0.0]]))
    torch.testing.assert_close(dw, tensor([[d * 1.0] for d in dz]))


@pytest.mark.parametrize("with_entropy", [True, False])
def test_lm_head_gradcheck(with_entropy):
    hidden = torch.randn(5, 3, dtype=F64, requires_grad=True)
    weight = torch.randn(7, 3, dtype=F64, requires_grad=True)
    targets = torch.tensor([0, 6, 3, 6, 2])
    fn = lambda h, w: ref.lm_head_logprobs(h, w, targets, chunk_rows=2, chunk_vocab=3,
                                           with_entropy=with_entropy)
    assert torch.autograd.gradcheck(fn, (hidden, weight))


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-5)])
def test_lm_head_matches_full_logits(dtype, tol):
    # bf16 inputs are upcast before the product, so even they match float64 closely.
    hidden, weight = torch.randn(9, 16).to(dtype), torch.randn(37, 16).to(dtype)
    targets = torch.randint(0, 37, (9,))
    logp, ent, lse = ref.lm_head_logprobs(hidden, weight, targets, chunk_rows=4, chunk_vocab=10)
    full = (hidden.double() @ weight.double().T).log_softmax(dim=-1)
    torch.testing.assert_close(logp.double(), full.gather(1, targets[:, None]).squeeze(1),
                               rtol=tol, atol=tol)
    torch.testing.assert_close(ent.double(), -(full.exp() * full).sum(1), rtol=tol, atol=tol)
    assert logp.dtype == torch.float32 and lse.dtype == torch.float32


def test_lm_head_refuses_out_of_range_targets():
    with pytest.raises(ValueError, match="targets"):
        ref.lm_head_logprobs(torch.zeros(2, 3), torch.zeros(4, 3), torch.tensor([0, 4]))


# ---------------------------------------------------------------- dispatch

def test_cpu_tensors_use_the_reference(monkeypatch):
    monkeypatch.delenv("JURY_KERNELS", raising=False)
    assert kernels.backend(torch.zeros(1)) == "reference"
    logp, old, adv, mask = hand_inputs()
    loss, _ = kernels.policy_loss(logp, old, adv, mask)
    assert torch.isclose(loss, tensor(2.7 / 5)), loss


def test_backend_override(monkeypatch):
    monkeypatch.setenv("JURY_KERNELS", "triton")
    assert kernels.backend(torch.zeros(1)) == "triton"
    monkeypatch.setenv("JURY_KERNELS", "cuda")
    with pytest.raises(ValueError, match="JURY_KERNELS"):
        kernels.backend()


def test_importing_the_package_does_not_load_triton():
    code = ("import sys, torch, jury.kernels as k; "
            "k.group_advantage(torch.ones(2, 3)); assert 'triton' not in sys.modules")
    env = {key: value for key, value in os.environ.items() if key != "JURY_KERNELS"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
