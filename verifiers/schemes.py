"""Reward schemes as the verifier worker calls them: one object per run, one call per group.

    scheme = make_scheme(cfg, gate=gate, llm=llm, checker=checker)   # from verifier.reward
    for group in groups:                              # the worker's loop
        view = GroupView(...)                         # answer keys, label verdicts
        result = scheme.score(group, view)            # RewardResult: rewards, facts, counts
    scheme.stats()                                    # the scheme's own counters, for metrics
    scheme.close()                                    # what it owns (a proof gate's Lean REPLs)

The arithmetic of every scheme is a pure function in `rewards.py`; an object here adds
what that function needs from outside the group: the proof gate (JURY-RL), the TinyV
model, the LLM judge and the LLM teacher with the run's label checker (llm_rewards.py),
DeRL's judge (derl/scorer.py, which wraps the run's scheme). A scheme's counts for
one group go in `RewardResult.counts`, named as metrics; the learner sums them per step.

Only the schemes in READS_LABEL see the dataset's label. Every other one is built `Blind`: it
is handed each group with the label taken off its task and the label check's verdicts out of
its view, so the label (which the worker still checks, as a shadow metric: the pass rate, the
reward-hacking monitor's precision and recall) cannot reach its rewards, whatever its code does.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Protocol

from jury.protocol.config import VerifierConfig
from jury.protocol.messages import RolloutGroup
from jury.verifiers import rewards
from jury.verifiers.checker import LabelChecker
from jury.verifiers.gate import ProofGate
from jury.verifiers.llm import LLMClient
from jury.verifiers.rewards import GroupView, RewardResult
from jury.verifiers.tinyv import TinyVItem, shown_answer, tinyv_verify

log = logging.getLogger(__name__)


class Scheme(Protocol):
    def score(self, group: RolloutGroup, view: GroupView) -> RewardResult:
        """The group's G rewards and its facts (majority, vote share, gate outcome)."""
        ...

    def stats(self) -> dict[str, float]:
        """Counters since the start, named as metrics (e.g. verifier/gate_calls)."""
        ...

    def close(self) -> None:
        """Release what it owns (a proof gate's processes)."""
        ...


# the schemes whose reward is a function of the dataset's label (README, Reward schemes: "reads the label")
READS_LABEL = frozenset({"ground_truth", "tinyv"})


class Blind:
    """A scheme that must not read the label, handed each group without it: the task's label is
    None and the view has no verdicts, as for a dataset without labels."""

    def __init__(self, inner: Scheme):
        self.inner = inner

    def score(self, group: RolloutGroup, view: GroupView) -> RewardResult:
        unlabelled = replace(group, task=replace(group.task, label=None))
        return self.inner.score(unlabelled, replace(view, verdicts=None))

    def stats(self) -> dict[str, float]:
        return self.inner.stats()

    def close(self) -> None:
        self.inner.close()


class Pure:
    """A scheme that needs nothing but the group: ground truth, majority vote, self-certainty, entropy,
    CoReward (its two views are in the group)."""

    def __init__(self, name: str):
        self.name, self.fn = name, rewards.REWARD_SCHEMES[name]

    def score(self, group: RolloutGroup, view: GroupView) -> RewardResult:
        return replace(self.fn(view), scheme=self.name)

    def stats(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


class Jury:
    """JURY-RL: the proof gate is asked about the majority answer only (rewards.jury)."""

    def __init__(self, gate: ProofGate | None, fallback: str, c: float, unparsable: str = "cap"):
        self.gate, self.fallback, self.c, self.unparsable = gate, fallback, c, unparsable
        self.calls = self.proved = 0
        self.totals: dict[str, float] = {}  # the gate's per-call records, summed

    def score(self, group: RolloutGroup, view: GroupView) -> RewardResult:
        # the gate reads the answer as written, not its vote key
        answers = {key: s.answer for key, s in zip(view.answer_keys, group.samples) if key is not None}
        result = rewards.jury(view, gate=lambda problem, key: self._ask(problem, answers.get(key, key)),
                              fallback=self.fallback, c=self.c, unparsable=self.unparsable)
        # verifier.gate=none: nothing was asked, so no group is "inconclusive" (reward/gate_proved is
        # then nan, not a gate that never proves) and no call is counted
        return replace(result, scheme="jury", gate=result.gate if self.gate is not None else None)

    def _ask(self, problem: str, answer: str) -> bool:
        if self.gate is None:
            return False
        self.calls += 1
        result = self.gate.verify(problem, answer)
        for k, v in result.metrics().items():
            self.totals[k] = self.totals.get(k, 0.0) + v
        self.proved += result.proved
        return result.proved

    def stats(self) -> dict[str, float]:
        calls = max(1, self.calls)
        return {"verifier/gate_calls": self.calls, "verifier/gate_proved": self.proved,
                **{f"{k}_per_call": v / calls for k, v in self.totals.items()}}

    def close(self) -> None:
        if self.gate is not None:
            self.gate.close()


class TinyV:
    """TinyV add-on mode: what the rules do not call correct goes to the LLM (a response they found no
    answer in too, shown its final statement, as TinyV's pipeline asks; verifier.tinyv_unanswered=zero
    keeps those wrong); if the LLM fails, the rules' verdicts stand (a failure never wipes them)."""

    def __init__(self, llm: LLMClient | None, max_tokens: int = 8, checker: LabelChecker | None = None,
                 ask_unanswered: bool = True):
        if llm is None:
            raise ValueError("reward=tinyv needs an LLM client (verifier.tinyv_model)")
        self.llm, self.max_tokens, self.ask_unanswered = llm, max_tokens, ask_unanswered
        self.checker = checker  # its read(): the answers the label check compared (all parts of one)
        self.counts = {"tinyv_asked": 0, "tinyv_overturned": 0, "tinyv_no_verdict": 0, "tinyv_failed": 0,
                       "tinyv_s": 0.0, "groups": 0}

    def score(self, group: RolloutGroup, view: GroupView) -> RewardResult:
        if view.verdicts is None:
            raise ValueError("reward=tinyv needs labels")
        label, texts = group.task.label or "", [s.text for s in group.samples]
        answers = [s.answer for s in group.samples]
        read = getattr(self.checker, "read", None)
        if read is not None:  # a label of several parts was checked against every part, not the vote's one
            answers = read(answers, label, texts)
        items = [TinyVItem(group.task.statement, label, a, v, text)
                 for a, v, text in zip(answers, view.verdicts, texts)]
        t0 = time.perf_counter()
        self.counts["groups"] += 1
        try:
            accepted = tinyv_verify(self.llm, items, max_tokens=self.max_tokens, ask_unanswered=self.ask_unanswered)
        except Exception as e:
            log.warning("TinyV call failed, rules only for task %s: %s", group.task.task_id, e)
            self.counts["tinyv_failed"] += 1
            accepted = [v == "correct" for v in view.verdicts]
        else:
            asked = [i for i, item in enumerate(items) if shown_answer(item, self.ask_unanswered) is not None]
            self.counts["tinyv_asked"] += len(asked)
            self.counts["tinyv_overturned"] += sum(accepted[i] is True for i in asked)
            # a reply with neither True nor False: the rules' "incorrect" stands (reward 0), counted apart
            self.counts["tinyv_no_verdict"] += sum(accepted[i] is None for i in asked)
        finally:
            self.counts["tinyv_s"] += time.perf_counter() - t0
        return replace(rewards.tinyv(replace(view, tinyv=accepted)), scheme="tinyv")

    def stats(self) -> dict[str, float]:
        out = {f"verifier/{k}": v for k, v in self.counts.items() if k != "groups"}
        out["verifier/tinyv_s_per_group"] = self.counts["tinyv_s"] / max(1, self.counts["groups"])
        return out

    def close(self) -> None:
        pass


def make_scheme(cfg: VerifierConfig, *, gate: ProofGate | None = None, llm: LLMClient | None = None,
                checker: LabelChecker | None = None, template: str = "{problem}\n") -> Scheme:
    """The run's scheme from verifier.reward, blind to the label unless it reads it (READS_LABEL).
    `llm`: the client of the scheme's LLM role (TinyV, the judge, the teacher); `checker`: the run's
    label checker; `template`: the run's prompt template (data.template, with {problem}), in which
    the teacher is shown a problem."""
    scheme = _scheme(cfg, gate=gate, llm=llm, checker=checker, template=template)
    return scheme if cfg.reward in READS_LABEL else Blind(scheme)


def _scheme(cfg: VerifierConfig, *, gate: ProofGate | None, llm: LLMClient | None, checker: LabelChecker | None,
            template: str) -> Scheme:
    if cfg.reward == "jury":
        return Jury(gate, cfg.fallback, cfg.reszero_c, cfg.unparsable)
    if cfg.reward == "tinyv":
        return TinyV(llm, cfg.tinyv_max_tokens, checker, ask_unanswered=cfg.tinyv_unanswered == "ask")
    if cfg.reward == "llm_judge":
        from jury.verifiers.llm_rewards import LLMJudge

        return LLMJudge(llm, max_tokens=cfg.judge_max_tokens, temperature=cfg.judge_temperature,
                        cache_size=cfg.llm_cache_size)
    if cfg.reward == "llm_kd":
        from jury.verifiers.llm_rewards import LLMKD

        return LLMKD(llm, checker, template, max_tokens=cfg.teacher_max_tokens, temperature=cfg.teacher_temperature,
                     cache_size=cfg.llm_cache_size)
    return Pure(cfg.reward)
