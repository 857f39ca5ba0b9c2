"""The reward-hacking monitor's per-step facts, taken on rank 0 from the groups of the trained batch:
how well the training reward agrees with the dataset's labels (a shadow metric: the label is read
here, after the rewards, and never reaches them), and what the signals of hacking are made of. The
driver's monitor (cluster/monitor.py) watches these over steps and warns.

    shadow = Shadow(cfg.monitor)                   # rank 0; keeps the run's completion lengths
    metrics.update(shadow.step(groups, step))      # shadow/* of batch `step`
    metrics["learner/initial_kl"] = initial_kl(first_policy, batch, rows, sampling, micro_batch)

A sample is *paid* when its reward is above its group's mean: then its advantage is positive under
every estimator here (GRPO, Dr.GRPO and RLOO all subtract the group's mean), so paid is what the
update pushes up, whatever the scale of the scheme's rewards (ResZero's are a hundredth of a 0/1
reward). For a 0/1 reward in a group with signal, paid is reward 1. CoReward's two views are
normalised apart (learner/grpo.py), so there a sample is paid against its own view's mean. The
reward is the scheme's, before DAPO's overlong penalty (which pays for length, not for an answer).
"""
from __future__ import annotations

import math

import numpy as np

from jury.protocol.config import MonitorConfig
from jury.protocol.messages import ScoredGroup

LABELLED = ("correct", "incorrect", "no_answer")  # verdicts that say what the label thinks of a sample


def paid(g: ScoredGroup) -> np.ndarray:
    """(G,) bool: the samples whose reward is above their group's (their view's) mean."""
    rewards = np.asarray(g.rewards, np.float64)
    views = np.array([s.view for s in g.group.samples])
    out = np.zeros(len(rewards), bool)
    for v in np.unique(views):
        mine = views == v
        out[mine] = rewards[mine] > rewards[mine].mean() + 1e-12 * max(1.0, float(np.abs(rewards[mine]).max()))
    return out


def agreement(groups: list[ScoredGroup], step: int) -> dict[str, float]:
    """The reward's precision (of the samples it pays, the share the label calls correct) and recall
    (of the samples the label calls correct, the share it pays), over the labelled samples of the
    groups with signal; overall and per staleness bucket k (`shadow/precision/stale{k}`). NaN where a
    denominator is empty (no labels, or every group flat)."""
    counts: dict[int, np.ndarray] = {}  # staleness -> [paid, correct, paid and correct]
    for g in _scored(groups):
        rewards = np.asarray(g.rewards)
        if rewards.max() == rewards.min():
            continue
        labelled = np.array([v.kind in LABELLED for v in g.verdicts])
        correct = np.array([v.kind == "correct" for v in g.verdicts])
        p = paid(g) & labelled
        c = counts.setdefault(step - g.group.version_start, np.zeros(3))
        c += [p.sum(), correct.sum(), (p & correct).sum()]
    out = {}
    for k, c in sorted(counts.items()):
        out[f"shadow/precision/stale{k}"] = _share(c[2], c[0])
        out[f"shadow/recall/stale{k}"] = _share(c[2], c[1])
    total = sum(counts.values(), np.zeros(3))
    out["shadow/precision"], out["shadow/recall"] = _share(total[2], total[0]), _share(total[2], total[1])
    return out


def consensus(groups: list[ScoredGroup], share: float) -> dict[str, float]:
    """Spurious consensus: groups whose majority holds at least `share` of their samples (in
    consensus), and of the labelled groups the share in consensus on an answer the label calls
    wrong; of the groups whose proof gate was asked, the share in consensus that it did not prove."""
    scored = _scored(groups)
    agreed = [g for g in scored if g.majority_answer is not None and g.vote_share >= share]
    labelled = [g for g in scored if g.group.task.label is not None]
    gated = [g for g in scored if g.gate is not None]
    return {"shadow/consensus": _share(len(agreed), len(scored)),
            "shadow/consensus_wrong": _share(sum(g.majority_verdict == "incorrect" for g in agreed), len(labelled)),
            "shadow/consensus_unproved": _share(sum(g.gate == "inconclusive" for g in agreed), len(gated))}


def short_paid(groups: list[ScoredGroup], median: float, ratio: float) -> float:
    """Answers without reasoning: the share of samples shorter than ratio x `median` (the run's
    median completion length) that are paid."""
    n = hits = 0
    for g in _scored(groups):
        lengths = np.array([len(s.token_ids) for s in g.group.samples])
        hits += int((paid(g) & (lengths < ratio * median)).sum())
        n += len(lengths)
    return _share(hits, n)


class Shadow:
    """Rank 0's shadow metrics, step after step. It keeps a count of every completion length seen, so
    that "short" is measured against the run's median, not the step's (a batch that has collapsed to
    short answers has a short median itself). A resumed run counts from its resumption."""

    def __init__(self, cfg: MonitorConfig):
        self.cfg = cfg
        self.lengths = np.zeros(0, np.int64)  # length -> completions of that length so far

    def step(self, groups: list[ScoredGroup], step: int) -> dict[str, float]:
        new = np.array([len(s.token_ids) for g in _scored(groups) for s in g.group.samples], np.int64)
        seen = self.lengths if self.lengths.sum() else np.bincount(new)  # the first step: its own median
        median = _median(seen)
        out = {**agreement(groups, step), **consensus(groups, self.cfg.consensus_share),
               "shadow/short_paid": short_paid(groups, median, self.cfg.short_ratio),
               "shadow/median_len": median,
               "shadow/truncated_frac": _share(sum(s.finish_reason == "length" for g in _scored(groups)
                                                   for s in g.group.samples), len(new))}
        counts = np.bincount(new, minlength=len(self.lengths))
        counts[:len(self.lengths)] += self.lengths
        self.lengths = counts
        return out


def initial_kl(model, batch, rows: int, sampling, micro_batch: int) -> float:
    """The k3 estimate of KL(π_behav ‖ π_0) per token, π_0 the run's first policy (`model`, frozen),
    over `rows` of the batch's samples, evenly spaced: exp(d) - d - 1 with d = log π_0 - log π_behav
    of each sampled token (never negative). Scored under the generators' sampling (temperature,
    nucleus) as the behaviour log-probs were; no-grad forwards of `micro_batch` rows at a time,
    similar lengths together, each cut to its own longest row (as the update's micro-batches: one
    forward of all the rows padded to the longest took more time than the update itself on the
    chain task, and its activations grow with rows x the longest row)."""
    import torch

    from jury.learner.grpo import token_logprobs

    n = batch.input_ids.shape[0]
    if rows <= 0 or n == 0:
        return math.nan
    idx = torch.linspace(0, n - 1, min(rows, n)).round().long().unique().to(batch.input_ids.device)
    idx = idx[torch.argsort(batch.attention[idx].sum(1), stable=True)]
    k3, tokens = 0.0, 0.0
    for chunk in idx.split(micro_batch):
        width = int(batch.attention[chunk].sum(1).max())
        mask = batch.completion[chunk][:, : width - 1]
        with torch.no_grad():
            logp = token_logprobs(model, batch.input_ids[chunk][:, :width], batch.attention[chunk][:, :width], mask,
                                  sampling.temperature, top_p=sampling.top_p)[0]
        d = torch.where(mask != 0, logp.double() - batch.behav_logp[chunk][:, : width - 1].double(), 0.0)
        k3 += float(((d.exp() - d - 1) * mask).sum())
        tokens += float(mask.sum())
    return k3 / tokens if tokens else math.nan


def _scored(groups: list[ScoredGroup]) -> list[ScoredGroup]:
    """The groups with samples and rewards: an engine's refusal or a verifier's failure is neither."""
    return [g for g in groups if g.group.samples and g.error is None and len(g.rewards) == len(g.group.samples)]


def _share(part: float, whole: float) -> float:
    return float(part) / float(whole) if whole else math.nan


def _median(counts: np.ndarray) -> float:
    """The median of the values whose counts are `counts` (value i occurs counts[i] times)."""
    total = int(counts.sum())
    if total == 0:
        return math.nan
    cumulative = np.cumsum(counts)
    lower = int(np.searchsorted(cumulative, (total + 1) // 2))  # the ((total+1)//2)-th value, 1-based
    upper = int(np.searchsorted(cumulative, total // 2 + 1))
    return (lower + upper) / 2
