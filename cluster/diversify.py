"""DeRL in a training run, on the driver: the prompt mix and the plan store.

    feeder       ─► Diversifier.mix(task, problem)    # original, or diversifying (kind, prompt, plan)
    generators, verifiers (verifiers/derl/scorer.py: the reward on diversifying prompts; its
                           counters travel in ScoredGroup.counts as derl/* metrics)
    learner.step ─► StepResult: the batch's ledger, each group's first correct sample, the
                    derl/* counters summed over the batch
    driver       ─► Diversifier.after_step(result)    # the CoTs into the store, finished plans in,
                                                      # the next plan request out, derl/ shares

Plans are written off the step's path: one request (at most derl.plans_per_step CoTs, one
batched LLM call) runs on a background thread while training goes on, and its plans are
taken in at the first step after it finished. The mixer is only touched on the driver's
own thread; the background thread sees only the immutable requests.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import replace

from jury.data.problems import Problem
from jury.protocol.messages import PromptTask, StepResult
from jury.protocol.config import DerlConfig
from jury.data.derl import DerlTask, DiversifyingMixer
from jury.verifiers.derl.plans import PlanRequest, PlanResult, make_proof_plans
from jury.verifiers.llm import LLMClient

log = logging.getLogger(__name__)


def problem_id(p: Problem) -> str:
    """Stable across epochs and runs: the plan store is keyed by it."""
    return hashlib.sha1(f"{p.source}\0{p.problem}".encode()).hexdigest()[:16]


class _PlanRequest(threading.Thread):
    """make_proof_plans on a daemon thread (a hung LLM call never holds up the driver's exit)."""

    def __init__(self, client: LLMClient, ids: list[str], requests: list[PlanRequest], cfg: DerlConfig):
        super().__init__(name="derl-plans", daemon=True)
        self.ids, self.requests, self.client, self.cfg = ids, requests, client, cfg
        self.results: list[PlanResult] | None = None
        self.error: Exception | None = None
        self.start()

    def run(self):
        try:
            self.results = make_proof_plans(self.client, self.requests, self.cfg)
        except Exception as e:  # reported by the driver's thread in after_step
            self.error = e


class Diversifier:
    def __init__(self, cfg: DerlConfig, client: LLMClient, *, tokenizer=None, max_prompt_tokens: int = 0,
                 wrap=None):
        """`wrap`: the message as the engine gets it (the feeder's PromptFormat.wrap: the chat template
        and system prompt), so that max_prompt_tokens is measured on what is sent."""
        self.cfg, self.client = cfg, client
        self.tokenizer, self.max_prompt_tokens = tokenizer, max_prompt_tokens
        self.wrap = wrap or (lambda text: text)
        self.mixer = DiversifyingMixer(cfg)
        self.problems: dict[int, tuple[str, str]] = {}  # task index -> (problem id, statement), until trained
        self.request: _PlanRequest | None = None
        self.counts = _zero()
        self.diverse_correct_total = 0.0
        self._warned = False

    # ── the feeder's side ──
    def mix(self, task: PromptTask, problem: Problem) -> PromptTask:
        """The task as original or diversifying, at cfg.ratio (DiversifyingMixer decides)."""
        pid = problem_id(problem)
        self.problems[task.index] = (pid, problem.problem)
        (m,) = self.mixer.next_tasks([DerlTask(pid, problem.problem)])
        if m.diversifying:
            if self._fits(m.prompt):
                return replace(task, prompt=m.prompt, kind="diversify", problem=problem.problem, plan=m.plan)
            # the slot is spent: the mix stays a bounded share, never a later burst
            self.counts["prompt_too_long"] += 1
            return task
        if self.cfg.original_prompt == "paper":
            if self._fits(m.prompt):
                return replace(task, prompt=m.prompt)
            self.counts["prompt_too_long"] += 1
        return task

    def _fits(self, prompt: str) -> bool:
        if self.tokenizer is None or self.max_prompt_tokens <= 0:
            return True
        n = len(self.tokenizer(self.wrap(prompt))["input_ids"])
        if n > self.max_prompt_tokens and not self._warned:
            self._warned = True  # once: the count derl/prompt_too_long says how often
            log.warning("derl: a prompt of %d tokens is over max_prompt_tokens=%d and stays original; "
                        "DeRL's prompt formats need a larger max_prompt_tokens (and max_model_len)",
                        n, self.max_prompt_tokens)
        return n <= self.max_prompt_tokens

    # ── the driver's side, once per learner step ──
    def after_step(self, result: StepResult) -> dict[str, float]:
        """Store the batch's correct CoTs of original prompts, take in finished plans, start the
        next plan request; returns the step's derl/ metrics."""
        problems = {row.index: self.problems.pop(row.index) for row in result.ledger}
        for c in result.correct:
            if c.kind == "original":
                pid, statement = problems[c.index]
                self.mixer.record_correct(pid, statement, c.text, c.answer or "")
        self._take_plans()
        self._request_plans()
        out = self._metrics(result)
        self.counts = _zero()
        return out

    def _take_plans(self):
        req = self.request
        if req is None or req.is_alive():
            return
        self.request = None
        if req.error is not None:  # the CoTs stay pending and go out again with the next request
            log.warning("derl: writing %d plans failed: %s", len(req.ids), req.error)
            self.counts["plans_failed"] += len(req.ids)
            return
        for pid, res in zip(req.ids, req.results):
            self.mixer.set_plan(pid, res.plan)
            self.counts["plans_written" if res.plan is not None else "plans_refused"] += 1
            self.counts["plan_tokens"] += res.tokens

    def _request_plans(self):
        if self.request is not None:
            return
        pending = self.mixer.pending_plans()[: self.cfg.plans_per_step]
        if pending:
            self.request = _PlanRequest(self.client, [pid for pid, _ in pending], [r for _, r in pending], self.cfg)
            self.counts["llm_calls"] += len(pending) * self.cfg.plan_attempts

    def _metrics(self, result: StepResult) -> dict[str, float]:
        """Per trained batch, from the verifiers' derl/* counters the learner summed over it.
        Shares over no samples are left out."""
        s = {k: v for k, v in result.metrics.items() if k.startswith("derl/")}
        samples = s.setdefault("derl/diversifying_samples", 0.0)
        kinds = [row.kind for row in result.ledger]
        out = {**s, "derl/diversifying_prompt_share": kinds.count("diversify") / max(1, len(kinds))}
        if samples:
            out["derl/correct_share"] = s.get("derl/correct_samples", 0.0) / samples
            out["derl/rewarded_share"] = s.get("derl/rewarded_samples", 0.0) / samples
            if self.cfg.reward == "judge":  # the random control never asks the judge
                out["derl/diverse_correct_share"] = s.get("derl/diverse_correct_samples", 0.0) / samples
                out["derl/diverse_share"] = s.get("derl/dissimilar_samples", 0.0) / samples
        self.diverse_correct_total += s.get("derl/diverse_correct_samples", 0.0)
        out["derl/diverse_correct_total"] = self.diverse_correct_total
        out.setdefault("derl/judge_unparsable", 0.0)
        out.setdefault("derl/judge_failed", 0.0)
        out.update({f"derl/{k}": float(v) for k, v in self.counts.items()})
        out["derl/llm_calls"] += s.get("derl/judged_samples", 0.0)  # the judge's calls, made on the verifiers
        out["derl/plans_pending"] = float(len(self.mixer.pending_plans()))
        return out


def _zero() -> dict[str, float]:
    """What the driver counts between two steps (plan requests and admissions)."""
    return {"plans_written": 0, "plans_refused": 0, "plans_failed": 0, "plan_tokens": 0, "llm_calls": 0,
            "prompt_too_long": 0}
