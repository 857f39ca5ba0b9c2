"""GAE, whitening and the clipped value loss (learner/gae.py): worked by hand, and against verl's
formulas restated here in our own code from

  volcengine/verl@012be9d9dcb7c38499f23616142870d2682757fc, verl/trainer/ppo/core_algos.py:
      compute_gae_advantage_return, compute_value_loss
  volcengine/verl@03c8cca18c827405ad726f7f90b2e0c3823b7830, verl/utils/torch_functional.py:
      masked_mean, masked_var (unbiased), masked_whiten, clip_by_value

and the config's acceptance and refusals for learner.advantage=gae."""
import math

import pytest
import torch

from jury.kernels.reference import aggregation_row_scale
from jury.learner.gae import gae, moments, token_rewards, value_loss, whiten
from jury.protocol.config import ConfigError
from jury.protocol.config_load import load_config


# ── verl, restated ──
def verl_gae(token_level_rewards, values, response_mask, gamma, lam):
    """verl's loop: backwards over the response; at a position outside the mask the running next
    value and running advantage are carried over unchanged; returns = advantages + values; then the
    advantages are whitened over the mask (unbiased variance, 1e-8 under the square root)."""
    rows, length = values.shape
    running_value = torch.zeros(rows, dtype=values.dtype)
    running_adv = torch.zeros(rows, dtype=values.dtype)
    per_step = [None] * length
    for t in reversed(range(length)):
        m = response_mask[:, t]
        td = token_level_rewards[:, t] + gamma * running_value - values[:, t]
        candidate = td + gamma * lam * running_adv
        running_value = values[:, t] * m + (1 - m) * running_value
        running_adv = candidate * m + (1 - m) * running_adv
        per_step[t] = running_adv
    advantages = torch.stack(per_step, dim=1)
    returns = advantages + values
    return verl_whiten(advantages, response_mask), returns


def verl_whiten(x, mask):
    n = mask.sum()
    mean = (x * mask).sum() / n
    var = (((x - mean) ** 2) * mask).sum() / n * (n / (n - 1))
    return (x - mean) / torch.sqrt(var + 1e-8)


def verl_value_loss(vpreds, returns, values, mask, cliprange_value):
    """token-mean (verl's default agg_loss): 0.5 · masked mean of max(unclipped², clipped²), and the
    share of tokens where the clipped one is strictly larger."""
    clipped = torch.max(torch.min(vpreds, values + cliprange_value), values - cliprange_value)
    a, b = (vpreds - returns) ** 2, (clipped - returns) ** 2
    loss = 0.5 * (torch.max(a, b) * mask).sum() / mask.sum()
    return loss, ((b > a).float() * mask).sum() / mask.sum()


# ── worked by hand ──
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
VALUES = torch.tensor([[0.5, 0.2, 0.8, 9.0]])  # the padding's value is never read


def test_the_score_sits_on_the_last_completion_token():
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    r = token_rewards(torch.tensor([1.0, -0.5, 7.0]), mask)
    assert r.tolist() == [[0, 0, 1, 0], [0, -0.5, 0, 0], [0, 0, 0, 0]]


def test_gae_with_gamma_and_lambda_one_is_the_return_minus_the_value():
    # score 1 at t = 2: A_t = 1 - V_t, R_t = 1
    adv, ret = gae(token_rewards(torch.tensor([1.0]), MASK), VALUES, MASK, 1.0, 1.0)
    assert adv.tolist()[0] == pytest.approx([0.5, 0.8, 0.2, 0.0])
    assert ret.tolist()[0] == pytest.approx([1.0, 1.0, 1.0, 0.0])


def test_gae_discounted_by_hand():
    # γ = λ = 0.5:  δ2 = 1 - 0.8 = 0.2,               A2 = 0.2
    #               δ1 = 0.5·0.8 - 0.2 = 0.2,          A1 = 0.2 + 0.25·0.2 = 0.25
    #               δ0 = 0.5·0.2 - 0.5 = -0.4,         A0 = -0.4 + 0.25·0.25 = -0.3375
    adv, ret = gae(token_rewards(torch.tensor([1.0]), MASK), VALUES, MASK, 0.5, 0.5)
    assert adv.tolist()[0] == pytest.approx([-0.3375, 0.25, 0.2, 0.0])
    assert ret.tolist()[0] == pytest.approx([0.1625, 0.45, 1.0, 0.0])
    # λ = 0 is one-step TD: A_t = δ_t
    adv, _ = gae(token_rewards(torch.tensor([1.0]), MASK), VALUES, MASK, 0.5, 0.0)
    assert adv.tolist()[0] == pytest.approx([-0.4, 0.2, 0.2, 0.0])


def test_a_position_outside_the_mask_is_skipped():
    # t = 1 is out: t = 0 sees V_2 as its next value and A_2 as its next advantage
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    adv, _ = gae(token_rewards(torch.tensor([1.0]), mask), torch.tensor([[0.5, 7.0, 0.8]]), mask, 1.0, 1.0)
    assert adv.tolist()[0] == pytest.approx([0.5, 0.0, 0.2])


def test_whitening_by_hand_and_over_ranks():
    # 1, 2, 3, 6: mean 3, unbiased variance (4 + 1 + 0 + 9) / 3 = 14/3
    x = torch.tensor([[1.0, 2.0, 0.0], [3.0, 6.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    w = whiten(x, mask, moments(x, mask))
    scale = 1 / math.sqrt(14 / 3 + 1e-8)
    assert w.tolist() == [pytest.approx([-2 * scale, -scale, 0.0]), pytest.approx([0.0, 3 * scale, 0.0])]
    # two ranks holding a row each: their moments summed whiten each row as the whole batch would
    both = moments(x[:1], mask[:1]) + moments(x[1:], mask[1:])
    assert torch.allclose(whiten(x[1:], mask[1:], both), w[1:])


def test_the_clipped_value_loss_by_hand():
    # V_old = 0, R = 1, clip 0.5. Token 0: V = 0.8, clipped to 0.5: max(0.04, 0.25) = 0.25, clipped.
    # Token 1: V = -0.2 inside the range: 1.44. Token 2: V = 0.3 inside: 0.49. Token 3: padding.
    v = torch.tensor([[0.8, -0.2, 0.3, 5.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, clipped = value_loss(v, torch.ones(1, 4), torch.zeros(1, 4), mask, 0.5,
                               aggregation_row_scale(mask, "token-mean", None))
    assert float(loss.detach()) == pytest.approx(0.5 * (0.25 + 1.44 + 0.49) / 3) and int(clipped) == 1
    loss.backward()
    # the clipped token gives no gradient; the others (V - R) / 3
    assert v.grad.tolist()[0] == pytest.approx([0.0, -1.2 / 3, -0.7 / 3, 0.0])


# ── against verl ──
@pytest.mark.parametrize("gamma, lam", [(1.0, 1.0), (0.99, 0.95), (0.5, 0.0), (0.0, 0.7)])
def test_gae_and_whitening_match_verl(gamma, lam):
    g = torch.Generator().manual_seed(int(gamma * 100 + lam * 10))
    rows, length = 6, 13
    lengths = torch.randint(1, length + 1, (rows,), generator=g)
    mask = (torch.arange(length) < lengths.unsqueeze(1)).double()  # right-padded responses
    values = torch.randn(rows, length, generator=g, dtype=torch.float64)
    score = torch.randn(rows, generator=g, dtype=torch.float64)
    rewards = token_rewards(score, mask).double()
    want_adv, want_ret = verl_gae(rewards, values, mask, gamma, lam)
    raw, ret = gae(rewards, values, mask, gamma, lam)
    adv = whiten(raw, mask, moments(raw, mask))
    on = mask.bool()
    torch.testing.assert_close(adv[on], want_adv[on], rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(ret[on], want_ret[on], rtol=1e-12, atol=1e-12)


def test_the_value_loss_matches_verl():
    g = torch.Generator().manual_seed(3)
    mask = (torch.arange(9) < torch.tensor([[3], [9], [1], [6]])).float()
    old, ret = torch.randn(4, 9, generator=g), torch.randn(4, 9, generator=g)
    new = old + torch.randn(4, 9, generator=g)  # some move past the clip, some not
    want, want_frac = verl_value_loss(new, ret, old, mask, 0.5)
    loss, clipped = value_loss(new, ret, old, mask, 0.5, aggregation_row_scale(mask, "token-mean", None))
    assert float(loss) == pytest.approx(float(want), rel=1e-6)
    assert float(clipped) / float(mask.sum()) == pytest.approx(float(want_frac))
    assert 0 < float(want_frac) < 1


# ── the config ──
def test_gae_takes_any_group_size_and_says_its_defaults():
    cfg = load_config(None, ["learner.advantage=gae", "generator.group_size=1"])
    lc = cfg.learner
    assert cfg.generator.group_size == 1
    assert (lc.gamma, lc.lam, lc.critic_lr, lc.critic_weight_decay, lc.value_clip) == (1.0, 1.0, 1e-5, 0.01, 0.5)
    assert load_config(None, ["learner.advantage=gae", "generator.group_size=8"]).generator.group_size == 8


@pytest.mark.parametrize("overrides, message", [
    (["generator.group_size=1"], r"generator\.group_size must be >= 2 .*learner\.advantage=gae learns from single"),
    (["learner.advantage=grpo", "generator.group_size=1"], r"under learner\.advantage=grpo"),
    (["generator.group_size=0"], r"generator\.group_size must be >= 1"),
    (["learner.advantage=gae", "dynamic_sampling=true"], "dynamic_sampling with learner.advantage=gae"),
    (["learner.advantage=gae", "verifier.reward=entropy"], "verifier.reward=entropy with learner.advantage=gae"),
    (["learner.critic_model=/m"], r"learner\.critic_model must be \"\" unless advantage=gae"),
    (["learner.advantage=gae", "learner.gamma=1.5"], r"learner\.gamma must be in \[0, 1\]"),
    (["learner.advantage=gae", "learner.lam=-0.1"], r"learner\.lam must be in \[0, 1\]"),
    (["learner.advantage=gae", "learner.value_clip=0"], r"learner\.value_clip must be > 0"),
    (["learner.advantage=gae", "learner.critic_lr=0"], r"learner\.critic_lr must be > 0"),
])
def test_gae_settings_are_refused_naming_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_the_critic_is_named_in_the_preflight_and_the_resources(tmp_path):
    """learner.critic_model must be a model folder before anything starts; the critic runs in each
    learner rank's actor, on its devices, and the resource check says so."""
    from jury.cluster.driver import preflight
    from jury.cluster.errors import RunFailed
    from jury.cluster.pipeline import check_resources

    gae = ["learner.advantage=gae", "generator.group_size=1"]
    with pytest.raises(ConfigError, match=r"learner\.critic_model: .* is not a Hugging Face model folder"):
        preflight(load_config(None, [*gae, f"learner.critic_model={tmp_path}"]))
    with pytest.raises(RunFailed, match=r"learner rank 0 \(policy and critic\) asks for CPU: 1, GPU: 1"):
        check_resources(load_config(None, [*gae, "learner.num_gpus=1"]), [{"CPU": 8.0}])
