"""Reward schemes against worked examples (computed by hand here) and properties."""
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jury.verifiers.rewards import REWARD_SCHEMES, GroupView, ground_truth, jury, majority, majority_vote, reszero
from jury.verifiers.rewards import tinyv as tinyv_reward


def view(keys, verdicts=None, tinyv=None):
    return GroupView(answer_keys=list(keys), verdicts=verdicts,
                     problem="Compute 1+1.", tinyv=tinyv)


def test_reszero_paper_example():
    """JURY-RL §4.2.6: G=8, |M|=4, residual b,b,b,c, c=0.1. alpha=1/2, gamma=c*alpha^2=0.025,
    z_b=2/3, z_c=0, u_bar=(3*2/3+0)/4=1/2. M: -0.05+0.025=-0.025; b: 0.5*(2/3-1/2)+0.025=1/12+0.025
    (the paper prints 0.0667, a typo: the formula gives 0.1083); c: 0.5*(0-1/2)+0.025=-0.225."""
    r = reszero(["a"] * 4 + ["b"] * 3 + ["c"], "a", c=0.1)
    assert r[:4] == pytest.approx([-0.025] * 4)
    assert r[4:7] == pytest.approx([1 / 12 + 0.025] * 3)
    assert r[4] == pytest.approx(0.108333, abs=1e-6)
    assert r[7] == pytest.approx(-0.225)
    assert sum(r) == pytest.approx(0.0, abs=1e-12)


def test_reszero_small_residual_groups():
    # |R| = 1: no other residual sample, so z = u_bar = 0 and the lone sample gets gamma.
    # G=4, |M|=3: alpha=3/4, gamma=0.01*9/16; M gets -0.0075+gamma.
    r = reszero(["a", "a", "a", "b"], "a", c=0.01)
    gamma = 0.01 * 9 / 16
    assert r == pytest.approx([-0.0075 + gamma] * 3 + [gamma])
    # |R| = 0: alpha = 1, everyone gets -c + c = 0.
    assert reszero(["a"] * 5, "a", c=0.3) == pytest.approx([0.0] * 5)
    # nothing parsable: alpha = 0, all zero
    assert reszero([None, None], None, c=0.1) == [0.0, 0.0]
    assert reszero([], None, c=0.1) == []


def test_reszero_unparsable_answers_never_support_each_other():
    # M = {a, a}; R = {None, None, b, b}: the two b's support each other (z=1/3), the None's do not (z=0).
    # alpha=1/3, gamma=0.01/9, u_bar=(1/3+1/3)/4=1/6.
    keys = ["a", "a", None, None, "b", "b"]
    r = reszero(keys, "a", c=0.01, unparsable="residual")
    alpha, gamma = 1 / 3, 0.01 / 9
    assert r[2] == pytest.approx(alpha * (0 - 1 / 6) + gamma)
    assert r[4] == pytest.approx(alpha * (1 / 3 - 1 / 6) + gamma)
    # here the None's already earn the least (-0.0544 < the majority's -0.0022): the cap changes nothing
    assert reszero(keys, "a", c=0.01) == r


def test_not_answering_pays_under_the_literal_reading_and_not_under_the_cap():
    """Issue 25's example: G = 8, a two-vote majority and six unparsable samples, c = 0.01.
    residual: alpha = 1/4, gamma = c/16 = 0.000625, M gets -c/4 + gamma = -0.001875 and every
    None (z = u_bar = 0) gets gamma. GRPO: mean 0, population std sqrt((2 * 0.001875^2 + 6 *
    0.000625^2) / 8) = 0.0010825, so (with eps = 1e-6 beside it) the majority gets -1.730 and
    each None +0.577.
    cap: the None's are capped at -0.001875, the group is flat, re-centred to 0: no signal."""
    import torch
    from jury import kernels

    keys = ["a", "a"] + [None] * 6
    residual = reszero(keys, "a", c=0.01, unparsable="residual")
    assert residual == pytest.approx([-0.001875] * 2 + [0.000625] * 6)
    adv = kernels.group_advantage(torch.tensor([residual], dtype=torch.float64), mode="grpo").squeeze(0)
    std = math.sqrt((2 * 0.001875 ** 2 + 6 * 0.000625 ** 2) / 8)
    assert adv.tolist() == pytest.approx([-0.001875 / (std + 1e-6)] * 2 + [0.000625 / (std + 1e-6)] * 6, rel=1e-9)
    assert adv[0] == pytest.approx(-1.730, abs=1e-3) and adv[2] == pytest.approx(0.577, abs=1e-3)
    assert reszero(keys, "a", c=0.01) == pytest.approx([0.0] * 8, abs=1e-15)


def test_the_cap_lowers_only_the_unparsable_samples_that_out_earned_an_answer():
    """G = 6, M = {a, a, a}, R = {b, None, None}, c = 0.1: alpha = 1/2, gamma = 0.025, every
    z is 0 (b has no twin, None's never support each other), so u_bar = 0; M gets -0.05 + 0.025
    = -0.025 and R gets 0.025. The cap lowers the None's to -0.025 (sum -0.1), then shifts every
    reward by +0.1/6: a -> -0.008333, b -> 0.041667, None -> -0.008333, sum 0 again."""
    keys = ["a", "a", "a", "b", None, None]
    assert reszero(keys, "a", c=0.1, unparsable="residual") == pytest.approx([-0.025] * 3 + [0.025] * 3)
    r = reszero(keys, "a", c=0.1)
    assert r == pytest.approx([-0.025 + 0.1 / 6] * 3 + [0.025 + 0.1 / 6] + [-0.025 + 0.1 / 6] * 2)
    assert math.fsum(r) == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError, match="unparsable"):
        reszero(keys, "a", c=0.1, unparsable="ignore")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=2, max_size=16), st.floats(0.0, 1.0))
def test_under_the_cap_an_unparsable_sample_never_has_a_higher_advantage_than_an_answer(keys, c):
    """ResZero with the cap, through the learner's own advantage kernel, GRPO (std division) and
    Dr.GRPO (none): no unparsable sample's advantage is above any parsed sample's, and the
    rewards still sum to 0."""
    import torch
    from jury import kernels

    winner, _ = majority(keys)
    r = jury(view(keys), gate=lambda p, a: None, c=c).rewards
    assert math.fsum(r) == pytest.approx(0.0, abs=1e-12)
    for mode in ("grpo", "drgrpo"):
        adv = kernels.group_advantage(torch.tensor([r], dtype=torch.float64), mode=mode).squeeze(0).tolist()
        parsed = [a for k, a in zip(keys, adv) if k is not None]
        unparsable = [a for k, a in zip(keys, adv) if k is None]
        if parsed and unparsable:
            assert max(unparsable) <= min(parsed), (mode, keys, c, r, adv)


keys_st = st.lists(st.sampled_from(["a", "b", "c", "d", None]), min_size=1, max_size=16)


@settings(max_examples=300, deadline=None)
@given(keys_st, st.floats(0.0, 1.0))
def test_reszero_sums_to_zero(keys, c):
    winner, _ = majority(keys)
    assert math.fsum(reszero(keys, winner, c)) == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(keys_st, st.floats(0.001, 1.0))
def test_reszero_keeps_variance_while_votes_disagree(keys, c):
    """With c > 0 the majority sits c*alpha below the residual mean, so the group has
    variance whenever its answers are split (0 < |M| < parsed samples: some parsed residual
    answer has z >= u_bar, since a None's z is 0, so it earns above the majority's -c*alpha +
    gamma, and the cap never lowers it); a group whose answers agree gets all zeros (the
    unparsable rest is capped at the majority's reward, then re-centred)."""
    winner, support = majority(keys)
    r = reszero(keys, winner, c)
    if 0 < support < sum(k is not None for k in keys):
        assert statistics.pvariance(r) > 0
    else:
        assert statistics.pvariance(r) == pytest.approx(0.0, abs=1e-15)


def test_reszero_residual_variance_comes_from_unequal_support():
    # c = 0 isolates the residual term: identical residual answers carry no signal ...
    assert statistics.pvariance(reszero(["a", "a", "a", "b", "b"], "a", c=0.0)) == 0
    # ... unequal support among residual answers does: b (z=1/2) above c (z=0)
    r = reszero(["a", "a", "a", "b", "b", "c"], "a", c=0.0)
    assert r[3] > 0 > r[5]


def test_majority_ties_and_unparsable():
    assert majority(["b", "a", "a", "b"]) == ("b", 2)          # tie: first occurrence wins
    assert majority([None, None, None, "x"]) == ("x", 1)       # None never wins
    assert majority([None, None]) == (None, 0)


def test_majority_vote_worked_example():
    res = majority_vote(view(["2", "3", "2", None]))
    assert res.rewards == [1.0, 0.0, 1.0, 0.0]
    assert (res.majority_answer, res.vote_share, res.num_distinct, res.gate) == ("2", 0.5, 2, None)


def test_ground_truth_reads_verdicts():
    res = ground_truth(view(["1", "2", None], verdicts=["correct", "incorrect", "no_answer"]))
    assert res.rewards == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="verdicts"):
        ground_truth(view(["1"]))


def test_jury_proved_rewards_the_majority_only():
    calls = []
    res = jury(view(["7", "7", "8", None]), gate=lambda p, a: calls.append((p, a)) or True)
    assert calls == [("Compute 1+1.", "7")]                    # asked once, about the majority
    assert res.rewards == [1.0, 1.0, 0.0, 0.0] and res.gate == "proved"


@pytest.mark.parametrize("gate_says", [False, None])
def test_jury_inconclusive_falls_back(gate_says):
    keys = ["a"] * 4 + ["b"] * 3 + ["c"]
    res = jury(view(keys), gate=lambda p, a: gate_says, c=0.1)
    assert res.gate == "inconclusive"
    assert res.rewards == pytest.approx(reszero(keys, "a", 0.1))
    assert jury(view(keys), gate=lambda p, a: gate_says, fallback="zero").rewards == [0.0] * 8
    assert jury(view(keys), gate=lambda p, a: gate_says, fallback="mv").rewards == [1.0] * 4 + [0.0] * 4


def test_jury_without_any_answer_asks_no_gate():
    def gate(p, a):
        raise AssertionError("the gate must not be asked")

    res = jury(view([None, None, None]), gate=gate)
    assert res.rewards == [0.0, 0.0, 0.0] and res.gate is None and res.majority_answer is None
    with pytest.raises(ValueError, match="fallback"):
        jury(view(["a"]), gate=gate, fallback="random")


@pytest.mark.parametrize("scheme", ["self_certainty", "entropy"])
def test_self_rewards_are_left_to_the_learner(scheme):
    # the full distribution they need is only in the learner's forward (learner/self_rewards.py)
    res = REWARD_SCHEMES[scheme](view(["1", "2", None, "1"]))
    assert res.scored_on == "learner" and res.rewards == [0.0] * 4
    assert (res.majority_answer, res.vote_share, res.num_distinct) == ("1", 0.5, 2)


def test_tinyv_scheme_reads_the_cascade():
    res = tinyv_reward(view(["1", "2", "3"], verdicts=["correct", "incorrect", "incorrect"], tinyv=[True, True, None]))
    assert res.rewards == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="tinyv"):
        tinyv_reward(view(["1"]))


def test_registry_and_view_validation():
    assert set(REWARD_SCHEMES) == {"ground_truth", "majority_vote", "self_certainty", "entropy", "tinyv", "jury",
                                   "llm_judge", "llm_kd", "coreward"}
    assert REWARD_SCHEMES["jury"] is jury
    with pytest.raises(ValueError, match="verdicts"):
        GroupView(answer_keys=["1", "2"], verdicts=["correct"], problem="")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.booleans()), min_size=2, max_size=12),
       st.sampled_from([True, False, None]), st.sampled_from(["reszero", "zero", "mv"]))
def test_no_label_or_vote_scheme_pays_an_unparsable_sample_more_than_an_answer(samples, gate_says, fallback):
    """Issue 25, item 4, for the schemes that read answers (the confidence scores read log-probs):
    majority vote, ground truth (an unparsable sample's verdict is no_answer), TinyV (never asked
    about one) and JURY-RL with every gate outcome and fallback (ResZero under the cap)."""
    keys = [k for k, _ in samples]
    verdicts = ["no_answer" if k is None else "correct" if ok else "incorrect" for k, ok in samples]
    cascade = [False if k is None else ok for k, ok in samples]
    results = [majority_vote(view(keys)), ground_truth(view(keys, verdicts=verdicts)),
               tinyv_reward(view(keys, verdicts=verdicts, tinyv=cascade)),
               jury(view(keys), gate=lambda p, a: gate_says, fallback=fallback, c=0.1)]
    for res in results:
        parsed = [r for k, r in zip(keys, res.rewards) if k is not None]
        unparsable = [r for k, r in zip(keys, res.rewards) if k is None]
        if parsed and unparsable:
            assert max(unparsable) <= min(parsed), (keys, res)
