"""CoReward's rewrites from an LLM, on the driver (verifier.reward=coreward, verifier.rewrites=llm).

    feeder   ─► Lookahead: problems are drawn verifier.rewrite_ahead ahead of admission, and
                each one drawn is queued for the rewriter
             ─► Rewriter.mix(task, problem)      # the rewrite, if it is ready: the task's second prompt
    driver   ─► Rewriter.after_step()            # finished rewrites in, the next request out, coreward/ metrics

Never on the step's path: one request (at most verifier.rewrite_batch problems, one batched LLM
call) runs on a background thread, as DeRL's plan requests do (cluster/diversify.py). A task
admitted before its problem's rewrite is back goes without one, and its group earns 0
(rewards.coreward), counted as coreward/admitted_without_rewrite. The first requests go out
while the engines start, so only the first batches of a run should lack rewrites. Rewrites are
cached by problem statement (verifier.llm_cache_size), so a later epoch asks nothing; a reply
that breaks the format is cached as None and not asked again (Co-rewarding-I drops those
problems). Only the driver's thread touches the buffer and the cache; the background thread
sees only its own immutable list of problems.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from dataclasses import replace
from typing import Iterator

from jury.data.problems import Problem
from jury.protocol.config import VerifierConfig
from jury.protocol.messages import PromptTask
from jury.verifiers.coreward import RewriteResult, make_rewrites
from jury.verifiers.llm import LLMClient

log = logging.getLogger(__name__)
_MISSING = object()


class _RewriteRequest(threading.Thread):
    """make_rewrites on a daemon thread (a hung LLM call never holds up the driver's exit)."""

    def __init__(self, client: LLMClient, problems: list[str], cfg: VerifierConfig):
        super().__init__(name="coreward-rewrites", daemon=True)
        self.client, self.problems, self.cfg = client, problems, cfg
        self.results: list[RewriteResult] | None = None
        self.error: Exception | None = None
        self.start()

    def run(self):
        try:
            self.results = make_rewrites(self.client, self.problems, max_tokens=self.cfg.rewrite_max_tokens,
                                         temperature=self.cfg.rewrite_temperature)
        except Exception as e:  # reported on the driver's thread
            self.error = e


class Lookahead:
    """The feeder's problem stream, drawn `ahead` problems early: yields the same problems in the
    same order, and hands each one to the rewriter as it is drawn. It fills at construction, so
    the first request goes out before the first admission."""

    def __init__(self, rewriter: "Rewriter", problems: Iterator[Problem]):
        self.rewriter, self.problems = rewriter, problems
        self.buffer: deque[Problem] = deque()
        self._fill()

    def _fill(self):
        while len(self.buffer) <= self.rewriter.cfg.rewrite_ahead:
            p = next(self.problems, None)
            if p is None:
                break
            self.buffer.append(p)
        self.rewriter.request(self.buffer)

    def __iter__(self):
        return self

    def __next__(self) -> Problem:
        self._fill()
        if not self.buffer:
            raise StopIteration
        return self.buffer.popleft()


class Rewriter:
    def __init__(self, cfg: VerifierConfig, client: LLMClient):
        self.cfg, self.client = cfg, client
        self.rewrites: OrderedDict[str, str | None] = OrderedDict()  # statement -> rewrite (None: unusable)
        self.request_in_flight: _RewriteRequest | None = None
        self.lookahead: Lookahead | None = None
        self.counts = _zero()

    def ahead(self, problems: Iterator[Problem]) -> Lookahead:
        """The feeder's `ahead`: its stream, seen early."""
        self.lookahead = Lookahead(self, problems)
        return self.lookahead

    # ── the feeder's side ──
    def mix(self, task: PromptTask, problem: Problem) -> PromptTask:
        """The task with its problem's rewrite, if one is back; as it is otherwise."""
        self._take()
        rewrite = self.rewrites.get(problem.problem, _MISSING)
        if rewrite is _MISSING or rewrite is None:
            self.counts["admitted_without_rewrite"] += 1
            return task
        self.rewrites.move_to_end(problem.problem)
        return replace(task, rewrite=rewrite)

    def request(self, upcoming) -> None:
        """Send the next problems still without a rewrite, if no request is in flight."""
        self._take()
        if self.request_in_flight is not None:
            return
        todo = list(dict.fromkeys(p.problem for p in upcoming if p.problem not in self.rewrites))
        todo = todo[: self.cfg.rewrite_batch]
        if todo:
            self.request_in_flight = _RewriteRequest(self.client, todo, self.cfg)
            self.counts["llm_calls"] += len(todo)

    def _take(self):
        req = self.request_in_flight
        if req is None or req.is_alive():
            return
        self.request_in_flight = None
        if req.error is not None:  # nothing cached: the problems go out again with the next request
            log.warning("coreward: rewriting %d problems failed: %s", len(req.problems), req.error)
            self.counts["rewrites_failed"] += len(req.problems)
            return
        for problem, result in zip(req.problems, req.results):
            self.rewrites[problem] = result.rewrite
            self.counts["rewrites_written" if result.rewrite is not None else "rewrites_unparsable"] += 1
            self.counts["rewrite_tokens"] += result.tokens
        while len(self.rewrites) > self.cfg.llm_cache_size:
            self.rewrites.popitem(last=False)

    # ── the driver's side, once per learner step ──
    def after_step(self) -> dict[str, float]:
        """Finished rewrites in, the next request out; the coreward/ counters since the last step."""
        self.request(self.lookahead.buffer if self.lookahead else ())
        out = {f"coreward/{k}": float(v) for k, v in self.counts.items()}
        out["coreward/rewrites_in_flight"] = float(len(self.request_in_flight.problems)
                                                  if self.request_in_flight else 0)
        self.counts = _zero()
        return out


def _zero() -> dict[str, float]:
    return {"rewrites_written": 0, "rewrites_unparsable": 0, "rewrites_failed": 0, "rewrite_tokens": 0,
            "llm_calls": 0, "admitted_without_rewrite": 0}
