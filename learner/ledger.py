"""What a trained batch says about itself: the step's reward, staleness and rollout
metrics, a ledger row per group, and each group's first correct sample.

    result = batch_result(groups, step, t_train, arrived)   # a StepResult, no training in it
    result.metrics.update(train_metrics)                     # learner/loss, ... from the update

Pure functions of the groups (no model, no engine), so the step's bookkeeping is the same
whoever trains the batch.
"""
from __future__ import annotations

import math

import numpy as np

from jury.protocol.messages import CorrectSample, LedgerRow, RolloutGroup, Sample, ScoredGroup, StepResult


def batch_result(groups: list[ScoredGroup], step: int, t_train: float, arrived: dict[int, float]) -> StepResult:
    """The bookkeeping of batch `step`, trained at wall clock t_train; `arrived` (admission index
    -> wall clock the group reached the learner) loses the batch's entries."""
    ledger = [ledger_row(g, step, t_train, arrived.pop(g.group.task.index, math.nan)) for g in groups]
    # the staleness the update saw: a group refused or left unscored is in the ledger (with its error)
    # but trains nothing, and its staleness was nobody's
    stale = [row.staleness for row, g in zip(ledger, groups) if trained(g)]
    shares = [r.verify_share for r in ledger if not math.isnan(r.verify_share)]
    metrics = batch_metrics(groups)
    metrics.update({"staleness/max": float(max(stale)) if stale else math.nan, "staleness/mean": _mean(stale),
                    "staleness/verify_share": _mean(shares)})
    counts: dict[str, float] = {}  # the reward schemes' counters, summed over the batch
    for g in groups:
        for k, v in g.counts.items():
            counts[k] = counts.get(k, 0.0) + v
    metrics.update(counts)
    return StepResult(step, metrics=metrics, staleness_hist={str(k): stale.count(k) for k in sorted(set(stale))},
                      verdicts=_count(v.kind for g in groups for v in g.verdicts), ledger=ledger,
                      correct=first_correct(groups))


def trained(g: ScoredGroup) -> bool:
    """Does the update train on g? Not when the engine refused its task (no samples) nor when the
    verifier could not score it (the learner's `usable` groups)."""
    return bool(g.group.samples) and g.error is None


def _mean(values: list) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def batch_metrics(groups: list[ScoredGroup]) -> dict[str, float]:
    """The batch's rollout and reward metrics; a batch of no group (a step dynamic sampling skips:
    every group flat up to the refill cap) has the same keys, nan where there is nothing to average
    and 0 tokens."""
    judged = [g for g in groups if len(g.rewards) and g.error is None]  # not refused, not unscored
    scored = [g.rewards for g in judged]
    # the rollout's figures count what the update trains: an unscored group's samples are not
    used = [g for g in groups if trained(g)]
    spans = [version_span(g.group, s) for g in used for s in g.group.samples]
    rewards = np.concatenate(scored) if scored else np.zeros(0)
    lengths = [len(s.token_ids) for g in used for s in g.group.samples]
    pass_rates = [g.pass_rate for g in groups]
    gates = [g.gate for g in groups if g.gate is not None]
    nan = float("nan")
    return {
        "reward/mean": float(rewards.mean()) if rewards.size else nan,
        "reward/std": float(rewards.std()) if rewards.size else nan,
        "reward/pass_rate": float(np.nanmean(pass_rates)) if not all(map(math.isnan, pass_rates)) else nan,
        # over the groups the verifier scored: a refused or unscored group has no vote (its 0 is no share)
        "reward/distinct_answers": _mean([g.num_distinct for g in judged]),
        "reward/vote_share": _mean([g.vote_share for g in judged]),
        "reward/gate_proved": float(np.mean([x == "proved" for x in gates])) if gates else nan,
        "rollout/completion_len": _mean(lengths),
        "rollout/tokens": float(sum(lengths)),
        # what the step trained: fewer than B groups where dynamic sampling hit its refill cap
        "rollout/groups": float(len(used)),
        "rollout/completions": float(len(lengths)),
        "rollout/generate_s": _mean([g.group.generate_s for g in groups]),
        "verifier/verify_s": _mean([g.verify_s for g in groups]),
        "learner/version_span_mean": float(np.mean(spans)) if spans else nan,
        "learner/version_span_max": float(max(spans)) if spans else nan,
    }


def version_span(group: RolloutGroup, sample: Sample) -> int:
    """How many policy versions one trajectory spans, first to last inclusive: 1 when one policy
    sampled all of it. Its tokens' versions under sync_mode inflight, else its group's
    version_start..version_end. Counted in learner versions: with sync_every > 1 the versions
    between two syncs never reached a generator but are counted, as staleness counts them."""
    if len(sample.token_versions):
        return int(sample.token_versions.max()) - int(sample.token_versions.min()) + 1
    return group.version_end - group.version_start + 1


def ledger_row(g: ScoredGroup, step: int, t_train: float, arrived: float) -> LedgerRow:
    """Which policy version made this group and which step consumed it, with its life in
    wall-clock seconds: generation, waiting for a verifier, verification, waiting here."""
    r = g.group
    lengths = [len(s.token_ids) for s in r.samples]
    life = t_train - (r.t_generated - r.generate_s)
    return LedgerRow(
        task_id=r.task.task_id, index=r.task.index, step=step, kind=r.task.kind, source=r.task.source,
        admitted_version=r.task.admitted_version, version_start=r.version_start, version_end=r.version_end,
        staleness=step - r.version_start, generator=r.actor_id, verifier=g.worker_id,
        length=float(np.mean(lengths)) if lengths else 0.0,
        reward=float(np.mean(g.rewards)) if len(g.rewards) else math.nan,
        pass_rate=g.pass_rate, majority_answer=g.majority_answer, error=r.error or g.error,
        generate_s=r.generate_s, verify_wait_s=g.t_verify_start - r.t_generated, verify_s=g.verify_s,
        learner_wait_s=t_train - g.t_verified,
        # staleness accrues in wall time, so this is the verifier's share of it
        verify_share=(g.t_verified - r.t_generated) / life if life > 0 else math.nan,
        arrived=arrived, trained=t_train, tokens_by_version=tokens_by_version(r))


def tokens_by_version(group: RolloutGroup) -> dict[str, int]:
    """How many of the group's tokens each policy version sampled (JSON keys are strings)."""
    out: dict[str, int] = {}
    for s in group.samples:
        if len(s.token_versions):
            vs, counts = np.unique(s.token_versions, return_counts=True)
            for v, c in zip(vs.tolist(), counts.tolist()):
                out[str(v)] = out.get(str(v), 0) + c
        elif len(s.token_ids):
            out[str(group.version_start)] = out.get(str(group.version_start), 0) + len(s.token_ids)
    return out


def first_correct(groups: list[ScoredGroup]) -> list[CorrectSample]:
    """Each group's first sample the label check called correct (groups with none are left out)."""
    out = []
    for g in groups:
        first = next((s for s, v in zip(g.group.samples, g.verdicts) if v.kind == "correct"), None)
        if first is not None:
            out.append(CorrectSample(g.group.task.index, g.group.task.kind, first.text, first.answer))
    return out


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out
