"""DeRL's reward inside a verifier worker: one group at a time, after the worker's own checks.

    scheme = DerlScheme(DerlScorer(cfg, judge, seed), inner=make_scheme(...))  # the worker's scheme
    result = scheme.score(group, view)
        original prompt:    the inner scheme's rewards (a fair coin with derl.reward=random_all)
        diversifying prompt: 1 iff correct and the LLM judge says "not similar" to the plan
                             (diversity_rewards, §3.2.2), or a fair coin (random_partial / _all)

Correctness is the worker's label check (math_verify against the task's label, the
verdicts `ground_truth` rewards), whatever the run's scheme: §3.2.2 rewards a correct
answer, and the paper trains with ground truth. So a label-free scheme (JURY-RL) still
scores the original prompts, and the diversifying ones read the label. The worker does not
ask the run's scheme (its proof gate, TinyV) about a diversifying group at all.

The counts go into ScoredGroup.counts as derl/* metrics; the learner sums them per trained
batch and the driver turns them into shares (cluster/diversify.py). A judge that fails
(engine down, short reply) gives the group 0 and counts derl/judge_failed: a reward of 1
must rest on the judge's verdict.

Lean: lean_diversity_reward (forbidden tactics, §3.2.2) is not wired here. No dataset in
this project yields Lean statements and the generators' output is never checked as a Lean
proof; a Lean-task run would call it in `rewards` with that check's result instead of
the judge (DiversifyingMixer already renders Lean prompts without a plan).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Sequence

from jury.protocol.config import DerlConfig
from jury.protocol.messages import PromptTask, RolloutGroup
from jury.verifiers.derl.reward import DiversityItem, RandomReward, diversity_rewards
from jury.verifiers.llm import LLMClient
from jury.verifiers.rewards import GroupView, RewardResult, majority_vote
from jury.verifiers.schemes import Scheme

log = logging.getLogger(__name__)


class DerlScorer:
    def __init__(self, cfg: DerlConfig, client: LLMClient | None, seed: int):
        if cfg.reward == "judge" and client is None:
            raise ValueError("derl.reward=judge needs an LLM client for the judge (derl.model)")
        self.cfg, self.client = cfg, client
        self.coin = RandomReward(seed) if cfg.reward != "judge" else None

    def rewards(self, task: PromptTask, texts: Sequence[str], correct: Sequence[bool],
                scheme_rewards: Sequence[float]) -> tuple[list[float], dict[str, float]]:
        """The group's rewards and its derl_* counts (empty for an original prompt)."""
        g = len(texts)
        if task.kind == "original":
            return (self.coin.rewards(g) if self.cfg.reward == "random_all" else list(scheme_rewards)), {}
        if task.kind != "diversify":
            raise ValueError(f"task {task.task_id}: unknown kind {task.kind!r}")
        if task.plan is None or task.problem is None:
            raise ValueError(f"diversifying task {task.task_id} carries no plan or problem")
        stats = {"derl/diversifying_samples": float(g), "derl/correct_samples": float(sum(correct))}
        if self.coin is not None:
            rewards = self.coin.rewards(g)
            stats["derl/rewarded_samples"] = sum(rewards)
            return rewards, stats
        items = [DiversityItem(task.problem, task.plan, t, ok) for t, ok in zip(texts, correct)]
        stats["derl/judged_samples"] = float(sum(ok or self.cfg.judge_all for ok in correct))
        try:
            verdicts = diversity_rewards(self.client, items, self.cfg)
        except Exception as e:  # convert at the boundary: 0 and a count, never a silent reward
            log.warning("derl: judge failed for task %s, its group gets 0: %s", task.task_id, e)
            stats["derl/judge_failed"] = float(g)
            return [0.0] * g, stats
        rewards = [v.reward for v in verdicts]
        stats.update({"derl/dissimilar_samples": float(sum(v.diverse is True for v in verdicts)),
                      "derl/diverse_correct_samples": float(sum(r == 1.0 for r in rewards)),
                      "derl/judge_unparsable": float(sum(v.unparsable for v in verdicts)),
                      "derl/rewarded_samples": float(sum(rewards))})
        return rewards, stats


class DerlScheme:
    """DeRL as the run's reward scheme (verifiers/schemes.py's protocol), around the run's own:
    originals go to `inner` (a coin instead with derl.reward=random_all); a diversifying group
    gets DeRL's reward alone, and only the group's facts (majority, vote share) from a vote, so
    the inner scheme's proof gate or TinyV is never paid for a reward DeRL replaces."""

    def __init__(self, scorer: DerlScorer, inner: Scheme):
        self.scorer, self.inner = scorer, inner

    def score(self, group: RolloutGroup, view: GroupView) -> RewardResult:
        task, g = group.task, len(group.samples)
        correct = [v == "correct" for v in view.verdicts] if view.verdicts is not None else [False] * g
        base = self.inner.score(group, view) if task.kind == "original" else majority_vote(view)
        rewards, counts = self.scorer.rewards(task, [s.text for s in group.samples], correct, base.rewards)
        return replace(base, rewards=[float(r) for r in rewards], counts={**base.counts, **counts},
                       scheme=base.scheme if task.kind == "original" else "derl")

    def stats(self) -> dict[str, float]:
        return self.inner.stats()

    def close(self) -> None:
        self.inner.close()
