"""Self-certainty and entropy as rewards, scored where the full distribution is: the learner.

    verifier: the group's scheme is self_certainty or entropy -> ScoredGroup.scored_on = "learner"
    learner, rank 0:  plan_scoring(groups, batch)  -> which rows, their groups, their spans
    every rank:       a no-grad forward over its rows (update.forward_pass): per token
                          self-certainty  KL(U || p) = LSE(z) - mean_j z_j - log V   (Intuitor)
                          entropy         H(p) = LSE(z) - sum_j p_j z_j              (RENT)
                      with z the logits / the sampling temperature, at the position that predicted
                      the token, averaged over the row's span
    every rank:       rewards_from_scores: all rows' scores (summed over ranks), an unparsable
                      row lowered to its group's lowest parsed score, then the group advantages

Sources, restated in tests/learner/test_self_rewards.py: Intuitor (sunblaze-ucb/Intuitor @
3f0cdd7b8b5e2377d5388806edc45ba5b8b7e12e, verl-intuitor's self_certainty_from_logits and its
INTUITOR advantage: the mean over the response tokens, EOS included; its code drops the constant
-log V, which group normalisation removes anyway) and RENT (satrams/rent-rl @
5d4d38a7ea91fc23636f10d63084fe4f910423b5: reward = -mean over the response tokens of the full
entropy). `verifier.self_reward_span: answer` averages over the final answer's tokens instead,
as JURY-RL's text describes its baselines (§5.3); a row whose answer cannot be found in its
tokens falls back to the whole response and is counted (learner/self_reward_span_fallback).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from jury.protocol.messages import ScoredGroup
from jury.protocol.plan import LearnerReward

SCHEMES = ("self_certainty", "entropy")


@dataclass
class Scoring:
    """What the self-reward needs of a whole batch (rows in collate's order)."""
    scored: torch.Tensor   # (N,) bool: rows whose reward the learner scores
    group: torch.Tensor    # (N,) int64: each row's group
    parsed: torch.Tensor   # (N,) bool: rows with an extracted answer
    span: torch.Tensor     # (N, L-1) float32: the tokens each scored row's reward averages
    fallback: int = 0      # answer-span rows that fell back to the whole response


def plan_scoring(groups: list[ScoredGroup], completion: torch.Tensor, reward: LearnerReward | None,
                 tokenizer) -> Scoring | None:
    """None when no group of the batch is scored on the learner (collate's usable groups, in order)."""
    usable = [g for g in groups if g.group.samples and g.error is None]
    if not any(g.scored_on == "learner" for g in usable):
        return None
    if reward is None:
        raise ValueError("a group scored on the learner reached a learner without a self-reward scheme")
    scored, group, parsed = [], [], []
    span = torch.zeros_like(completion)
    fallback, row = 0, 0
    for gi, g in enumerate(usable):
        for s in g.group.samples:
            here = g.scored_on == "learner"
            scored.append(here)
            group.append(gi)
            parsed.append(s.answer is not None)
            positions = completion[row].nonzero().squeeze(1)  # the row's completion positions, in order
            if here:
                which = answer_tokens(tokenizer, s.token_ids.tolist(), s.text, s.answer) \
                    if reward.span == "answer" and s.answer is not None else None
                if reward.span == "answer" and s.answer is not None and which is None:
                    fallback += 1
                first, end = which if which is not None else (0, len(positions))
                span[row, positions[first:end]] = 1.0
            row += 1
    return Scoring(torch.tensor(scored), torch.tensor(group), torch.tensor(parsed), span, fallback)


def answer_tokens(tokenizer, token_ids: list[int], text: str, answer: str) -> tuple[int, int] | None:
    """[first, end) of the tokens that spell the last occurrence of `answer` in `text`, or None
    when the tokens do not decode to the text (then no token boundary can be trusted) or the
    answer is not written there as it was extracted. Only suffixes are decoded, a binary search
    over their length: the answer is near the end."""
    if tokenizer.decode(token_ids, skip_special_tokens=True) != text:
        return None
    start = text.rfind(answer)
    if start < 0 or not answer:
        return None
    end = start + len(answer)
    suffix = lambda k: len(tokenizer.decode(token_ids[len(token_ids) - k:], skip_special_tokens=True))  # noqa: E731
    n = len(token_ids)
    # the fewest trailing tokens whose text reaches back to the answer's start
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if suffix(mid) < len(text) - start else (lo, mid)
    first = n - lo
    # the most trailing tokens whose text lies wholly after the answer's end
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if suffix(mid) <= len(text) - end else (lo, mid - 1)
    last = n - lo
    return (first, last) if first < last else None


def row_scores(per_token: torch.Tensor, span: torch.Tensor) -> torch.Tensor:
    """(n,) the mean of a per-token quantity (n, T) over each row's span (0 for an empty span)."""
    weight = span.to(per_token.dtype)
    return (per_token * weight).sum(1) / weight.sum(1).clamp(min=1)


def rewards_from_scores(scores: torch.Tensor, scoring: Scoring, verifier_rewards: torch.Tensor) -> torch.Tensor:
    """(N,) every row's reward: the verifier's, or for a scored row its score, where a row with no
    answer gets its group's lowest parsed score (no answer never earns more than an answer; a group
    with no parsed row is flat: advantage 0)."""
    rewards = verifier_rewards.clone().double()
    for g in scoring.group[scoring.scored].unique().tolist():
        rows = (scoring.group == g) & scoring.scored
        parsed = rows & scoring.parsed
        floor = scores[parsed].min() if parsed.any() else torch.tensor(0.0, dtype=scores.dtype)
        rewards[rows] = torch.where(scoring.parsed[rows], scores[rows].to(rewards.dtype), floor.to(rewards.dtype))
    return rewards.float()


def group_rewards(rewards: torch.Tensor, scoring: Scoring) -> list[np.ndarray]:
    """The rewards split back into the batch's groups (collate's order)."""
    return [rewards[scoring.group == g].numpy() for g in range(int(scoring.group.max()) + 1)]


def shaped_group_rewards(rewards: torch.Tensor, penalty: torch.Tensor, scoring: Scoring) -> list[np.ndarray]:
    """The rewards the advantages are taken from, per group: each row's reward plus its overlong
    penalty (grpo.overlong_penalty; zeros when off), as collate adds it for a verifier's rewards."""
    return group_rewards(rewards + penalty.to(rewards.dtype), scoring)

