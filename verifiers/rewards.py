"""Reward schemes: pure functions from one group of G samples to G rewards.

Every scheme has the shape `scheme(view, **options) -> RewardResult`; the registry
`REWARD_SCHEMES` maps the config name to it. The verifier worker calls them through
the objects of schemes.py, which bring what a function needs from outside the group
(the proof gate, the TinyV model); the learner turns rewards into advantages:

    view = GroupView(answer_keys=[answer_key(a) for a in answers], verdicts=verdicts,
                     problem=task.statement, tinyv=cascade)
    result = REWARD_SCHEMES["jury"](view, gate=lambda problem, answer: ...)   # JURY-RL
    result = REWARD_SCHEMES["majority_vote"](view)

Section numbers refer to JURY-RL (papers/000_...txt). Majority (§4.2.1, Algorithm 1
step 2): â ∈ argmax_a Σ_i 1[a_i = a]; the paper leaves ties open. Here unparsable
answers (key None) never vote and never win, and among tied answers the one that
occurs first in the group wins: sample order is independent of the answers, so the
rule is deterministic without favouring any particular answer string.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

FALLBACKS = ("reszero", "zero", "mv")
# What ResZero does with a sample that has no parsable answer (verifier.unparsable; README,
# Reward schemes). "cap": its reward is capped at the lowest reward of a parsed sample in its
# group, and the group is re-centred so that the rewards still sum to 0. "residual": the paper's
# formula read literally, the sample sits in the residual set R with z = 0, which can pay more
# than an answer.
UNPARSABLE_RULES = ("cap", "residual")


@dataclass(frozen=True)
class GroupView:
    """What a scheme sees about one group of G samples of the same problem."""

    answer_keys: list  # list[str | None], the label checker's key per sample; None never wins
    verdicts: list | None  # list[str] check() kinds vs the label; None where labels are off-limits
    problem: str
    tinyv: list | None = None  # list[bool | None]: the TinyV cascade's result per sample
    # list[int]: the prompt each sample answers (Sample.view: 0 the task's, 1 its CoReward rewrite); None: all 0
    views: list | None = None

    def __post_init__(self):
        g = len(self.answer_keys)
        for name in ("verdicts", "tinyv", "views"):
            field = getattr(self, name)
            if field is not None and len(field) != g:
                raise ValueError(f"GroupView.{name} has {len(field)} entries for a group of {g}")


@dataclass(frozen=True)
class RewardResult:
    rewards: list  # list[float], one per sample
    majority_answer: str | None
    vote_share: float  # |M| / G, unparsable samples included in G
    num_distinct: int  # distinct parsable answers
    gate: str | None = None  # "proved" | "inconclusive"; None when no gate was asked
    scheme: str = ""  # the scheme's name, filled by its object (verifiers/schemes.py)
    counts: dict = field(default_factory=dict)  # dict[str, float]: this group's counters, named as metrics
    scored_on: str = "verifier"  # "learner": the rewards are a placeholder the learner replaces


def majority(answer_keys: list) -> tuple[str | None, int]:
    """(â, |M|): the most frequent parsable key, first occurrence breaking ties."""
    counts: dict[str, int] = {}
    for key in answer_keys:
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None, 0
    best = max(counts.values())
    winner = next(k for k, c in counts.items() if c == best)  # dicts keep first-seen order
    return winner, best


def _result(view: GroupView, rewards: list[float], gate: str | None = None) -> RewardResult:
    keys = view.answer_keys
    winner, support = majority(keys)
    return RewardResult(
        rewards=[float(r) for r in rewards],
        majority_answer=winner,
        vote_share=support / len(keys) if keys else 0.0,
        num_distinct=len({k for k in keys if k is not None}),
        gate=gate,
    )


def _indicator(keys: list, winner: str | None) -> list[float]:
    return [1.0 if winner is not None and k == winner else 0.0 for k in keys]


def ground_truth(view: GroupView) -> RewardResult:
    """Supervised oracle (§5.3): 1 if the verifier says "correct" against the label."""
    if view.verdicts is None:
        raise ValueError("ground_truth reward needs verdicts (labels) in the GroupView")
    return _result(view, [1.0 if v == "correct" else 0.0 for v in view.verdicts])


def majority_vote(view: GroupView) -> RewardResult:
    """MV (§5.3, Shafayat et al.): r_i = 1[a_i = â]."""
    return _result(view, _indicator(view.answer_keys, majority(view.answer_keys)[0]))


def reszero(answer_keys: list, majority_answer: str | None, c: float, unparsable: str = "cap") -> list[float]:
    """ResZero (§4.2.3, Eq. 5): penalise the unverified majority, zero-mean residue.

    M = supporters of â, R = the rest, α = |M|/G. For i in R, z_i is the leave-one-out
    share of i's answer among the other residual samples, (#j in R, j != i, a_j = a_i)
    / (|R| - 1); ū is the mean of z over R. Then r_i = α(z_i - ū) + γ on R and
    r_i = -cα + γ on M, with γ = cα², so Σ r_i = 0.
    Edge cases: |R| = 1 has no other residual sample, so z = ū = 0 and the lone sample
    gets γ; |R| = 0 (unanimous) gives α = 1 and r_i = -c + c = 0 for all; no parsable
    answer at all gives α = 0 and zeros. Unparsable answers (None) never support each
    other, so they sit in R with z = 0.
    The paper is silent on unparsable answers, and read literally (`unparsable="residual"`)
    a sample with none gets -αū + γ, above the majority's -cα + γ whenever ū < c: not
    answering pays. `unparsable="cap"` (the default) caps each one at the lowest reward
    of a parsed sample and re-centres the group (cap_unparsable).
    """
    if unparsable not in UNPARSABLE_RULES:
        raise ValueError(f"unparsable must be one of {UNPARSABLE_RULES}, got {unparsable!r}")
    g = len(answer_keys)
    if g == 0:
        return []
    in_m = [majority_answer is not None and k == majority_answer for k in answer_keys]
    residual = [i for i in range(g) if not in_m[i]]
    alpha = (g - len(residual)) / g
    gamma = c * alpha * alpha
    z = {i: 0.0 for i in residual}
    if len(residual) > 1:
        for i in residual:
            same = sum(1 for j in residual if j != i and answer_keys[i] is not None and answer_keys[j] == answer_keys[i])
            z[i] = same / (len(residual) - 1)
    u_bar = sum(z.values()) / len(residual) if residual else 0.0
    rewards = [-c * alpha + gamma if in_m[i] else alpha * (z[i] - u_bar) + gamma for i in range(g)]
    return cap_unparsable(answer_keys, rewards) if unparsable == "cap" else rewards


def cap_unparsable(answer_keys: list, rewards: list[float]) -> list[float]:
    """Each unparsable sample (key None) earns at most the lowest reward of the group's parsed
    samples; then every reward is shifted by one constant so that they sum to 0 again.

    Why this rule: it is the smallest change that makes not answering never pay more than
    any answer. It changes only the samples that out-earned an answer (at worst a tie with
    the worst answer: no format penalty, which the paper does not have), and a shift common
    to the whole group leaves the order of the rewards, and every group-normalised advantage
    (GRPO, Dr.GRPO and RLOO all subtract the group mean), as they were. So the parsed samples
    keep their paper values up to that shift, and a group where no unparsable sample out-earns
    an answer is returned unchanged.
    """
    parsed = [r for k, r in zip(answer_keys, rewards) if k is not None]
    low = min(parsed, default=math.inf)
    if all(k is not None or r <= low for k, r in zip(answer_keys, rewards)):
        return list(rewards)
    capped = [r if k is not None else min(r, low) for k, r in zip(answer_keys, rewards)]
    shift = math.fsum(capped) / len(capped)
    return [r - shift for r in capped]


def jury(view: GroupView, *, gate: Callable[[str, str], bool | None], fallback: str = "reszero", c: float = 0.01,
         unparsable: str = "cap") -> RewardResult:
    """JURY-RL (§4.2.2, Algorithm 1): votes propose, proofs dispose.

    The gate is asked once, about â only: δ = 1 when it returns True (proved), else 0
    (None "inconclusive" and False "refuted" both fall back). δ = 1: r_i = 1[a_i = â].
    δ = 0: the fallback, "reszero" (default, §4.2.3), "zero" or "mv" (the ablation
    of §6.2.1). With no parsable answer the gate is not asked and all rewards are 0.
    `unparsable`: ResZero's rule for samples without an answer (reszero); the other
    branches give them 0, the lowest reward they give anyone.
    """
    if fallback not in FALLBACKS:
        raise ValueError(f"jury fallback must be one of {FALLBACKS}, got {fallback!r}")
    keys = view.answer_keys
    winner, _ = majority(keys)
    if winner is None:
        return _result(view, [0.0] * len(keys))
    if gate(view.problem, winner) is True:
        return _result(view, _indicator(keys, winner), gate="proved")
    if fallback == "reszero":
        rewards = reszero(keys, winner, c, unparsable)
    else:
        rewards = [0.0] * len(keys) if fallback == "zero" else _indicator(keys, winner)
    return _result(view, rewards, gate="inconclusive")


def scored_on_learner(view: GroupView) -> RewardResult:
    """Self-certainty (§5.3, Intuitor: the mean over the response of KL(U ‖ p_θ(·|context))) and
    entropy minimisation (§5.3, RENT: the negative mean entropy of p_θ) need the policy's full
    distribution at every token, which only the learner's forward has. The group's facts are set
    here; its rewards are a placeholder that the learner replaces (learner/self_rewards.py)."""
    return replace(_result(view, [0.0] * len(view.answer_keys)), scored_on="learner")


def tinyv(view: GroupView) -> RewardResult:
    """TinyV add-on cascade (TinyV §4): 1 if the rules or, for a rule "incorrect", the
    TinyV model accepted the answer (`view.tinyv`, from tinyv.tinyv_verify)."""
    if view.tinyv is None:
        raise ValueError("tinyv reward needs the cascade's results in GroupView.tinyv")
    return _result(view, [1.0 if ok is True else 0.0 for ok in view.tinyv])


# ── the label-free baselines of JURY-RL's Table 1 (§5.3): an LLM judge, an LLM teacher, CoReward ──
def llm_judge(view: GroupView, *, judged: list) -> RewardResult:
    """LLM-as-a-Judge (§5.3, Appendix D): r_i = 1 iff the judge's verdict about the pair
    (question, a_i) is True. `judged`: list[bool | None], the verdict per sample; None (the
    reply named neither True nor False) earns 0, and so does an unparsable answer, which is
    never shown to the judge."""
    if len(judged) != len(view.answer_keys):
        raise ValueError(f"llm_judge: {len(judged)} verdicts for a group of {len(view.answer_keys)}")
    return _result(view, [1.0 if k is not None and j is True else 0.0 for k, j in zip(view.answer_keys, judged)])


def llm_kd(view: GroupView, *, verdicts: list | None) -> RewardResult:
    """LLM-KD (§5.3): the teacher's answer to the problem is the pseudo-label, and r_i = 1 iff
    the run's label checker calls a_i correct against it (`verdicts`, its kinds). None: the
    teacher gave no extractable answer, so nothing can be checked and every reward is 0."""
    if verdicts is None:
        return _result(view, [0.0] * len(view.answer_keys))
    return _result(view, [1.0 if v == "correct" else 0.0 for v in verdicts])


def coreward(view: GroupView) -> RewardResult:
    """CoReward: Co-rewarding-I (Zhang et al. 2025, JURY-RL's "CoReward"), as its reward manager
    computes it (tmlr-group/Co-rewarding@6c60ea45, Co-rewarding-I/verl/workers/reward_manager/
    co_reward.py, CoRewardManager.__call__ and majority_vote).

    The group holds G samples of the prompt (view 0) and G of its rewrite (view 1). The
    pseudo-label of each view is the majority answer of the *other* view: r_i = 1 iff a_i
    equals it; an unparsable answer never votes and earns 0; a view whose other view has no
    parsable answer earns 0. Ties go to the answer seen first, as Counter.most_common does.
    The learner normalises each view apart (learner/grpo.py). Two differences, both on
    purpose: answers are compared by their vote keys (equivalent forms are one answer; theirs
    compares raw strings), and a group without a rewrite gets 0 everywhere and is counted
    (theirs drops a problem whose rewrite failed before training). The facts reported
    (majority, vote share, distinct answers) are the original view's.
    """
    keys, views = view.answer_keys, view.views or [0] * len(view.answer_keys)
    original = [k for k, v in zip(keys, views) if v == 0]
    if set(views) != {0, 1}:
        return _coreward_result(original, [0.0] * len(keys), {"coreward/no_rewrite_groups": 1.0})
    rewrite = [k for k, v in zip(keys, views) if v == 1]
    pseudo = {0: majority(rewrite)[0], 1: majority(original)[0]}  # each view is labelled by the other
    rewards = [1.0 if k is not None and k == pseudo[v] else 0.0 for k, v in zip(keys, views)]
    counts = {"coreward/views_agree": float(pseudo[0] is not None and pseudo[0] == pseudo[1]),
              "coreward/views_unlabelled": float((pseudo[0] is None) + (pseudo[1] is None))}
    return _coreward_result(original, rewards, counts)


def _coreward_result(original: list, rewards: list[float], counts: dict) -> RewardResult:
    winner, support = majority(original)
    return RewardResult(rewards=rewards, majority_answer=winner,
                        vote_share=support / len(original) if original else 0.0,
                        num_distinct=len({k for k in original if k is not None}), counts=counts)


REWARD_SCHEMES: dict[str, Callable[..., RewardResult]] = {
    "ground_truth": ground_truth,
    "majority_vote": majority_vote,
    "self_certainty": scored_on_learner,
    "entropy": scored_on_learner,
    "tinyv": tinyv,
    "jury": jury,
    "llm_judge": llm_judge,
    "llm_kd": llm_kd,
    "coreward": coreward,
}
