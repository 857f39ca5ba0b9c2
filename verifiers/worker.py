"""Verifier worker: RolloutGroups in, ScoredGroups out.

    loop:  group = rollouts.get()               # ZeroMQ PULL, bound here; generators connect
           verdicts = check(samples vs label)   # cache, then a process pool with a hard timeout
           result = scheme.score(group, view)   # verifiers/schemes.py: ground truth, vote, JURY-RL, ...
           scored.send(ScoredGroup)             # ZeroMQ PUSH to the learner

Verdicts against the label are always computed when a label exists, because the pass
rate is a metric every run wants; whether the reward may read them is the scheme's
business (JURY-RL and majority vote never do). A group whose scoring fails is scored
again; if it still fails it is sent marked `error` (so the learner never waits for it)
and the learner trains on none of it.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict

import numpy as np

from jury.protocol.config import VerifierConfig
from jury.protocol.messages import RolloutGroup, ScoredGroup, Shutdown, Verdict
from jury.protocol.transport import Receiver, Sender
from jury.verifiers import rewards as reward_schemes
from jury.verifiers.derl.scorer import DerlScheme
from jury.verifiers.math.verify import Judgement, answer_key, extract_answer, normalize, quick_check, reference_parts
from jury.verifiers.pool import CheckPool
from jury.verifiers.schemes import make_scheme

log = logging.getLogger(__name__)
CHECK_FN = "jury.verifiers.math.verify:judge"
SCORE_ATTEMPTS = 3
NAME = "math"


class VerdictCache:
    """(normalised answer, normalised reference, accept_rounded) -> Judgement, least recently used out first."""

    def __init__(self, size: int):
        self.size, self._d = size, OrderedDict()
        self.hits = self.misses = 0

    def get(self, key):
        kind = self._d.get(key)
        if kind is None:
            self.misses += 1
            return None
        self._d.move_to_end(key)
        self.hits += 1
        return kind

    def put(self, key, kind: Judgement):
        self._d[key] = kind
        if len(self._d) > self.size:
            self._d.popitem(last=False)


class VerifierWorker:
    def __init__(self, cfg: VerifierConfig, worker_id: str, gate_factory=None, llm=None, derl=None):
        """`llm`: an LLMClient for TinyV; `derl`: a derl.scorer.DerlScorer when derl.enabled (its
        scheme then wraps the run's). A gate is built here, in this process: it may own processes
        (Lean REPLs) that cannot be shipped."""
        self.cfg, self.worker_id = cfg, worker_id
        self.gate = gate_factory() if gate_factory else None
        self.scheme = make_scheme(cfg, gate=self.gate, llm=llm)
        if derl is not None:
            self.scheme = DerlScheme(derl, self.scheme)
        self.pool = CheckPool(cfg.pool_workers, cfg.check_timeout_s)
        self.cache = VerdictCache(cfg.cache_size)
        self.counts: dict[str, float] = {"groups": 0, "samples": 0, "failed_groups": 0, "score_retries": 0,
                                         "verify_s": 0.0, "pool_checks": 0, "rounded_accepts": 0}
        self.kinds: dict[str, int] = {}
        self.rollouts = self.scored = None
        self._thread = None
        self._slow_s, self._fault = 0.0, ""

    # ── wiring ──
    def start(self, host: str | None, learner_endpoint: str, curve=None) -> str:
        """Bind the rollout queue on this node's address; return it for the generators."""
        if host is None:
            import ray  # only on a cluster: this node's address

            host = ray.util.get_node_ip_address()
        self.rollouts = Receiver(host, hwm=256, maxsize=256, name=f"{self.worker_id}-rollouts", curve=curve,
                                 accept=(RolloutGroup,))
        self.scored = Sender([learner_endpoint], hwm=256, maxsize=256, name=f"{self.worker_id}-scored", curve=curve)
        self._thread = threading.Thread(target=self._loop, name=self.worker_id, daemon=True)
        self._thread.start()
        return self.rollouts.endpoint

    def _loop(self):
        """The loop thread; if it dies, the actor dies with it (a thread's exception would
        otherwise vanish, leaving an actor that answers health checks and scores nothing)."""
        try:
            self._serve()
        except BaseException:
            log.critical("%s: the verifier loop died; the actor exits so that Ray restarts it", self.worker_id,
                         exc_info=True)
            self.pool.close()
            logging.shutdown()
            os._exit(70)

    def _serve(self):
        while True:
            msg = self.rollouts.get(timeout=0.5)
            if msg is None:
                continue
            if isinstance(msg, Shutdown):  # local: stop() woke the queue
                return
            self._injected_fault()
            self.scored.send(self.score(msg))

    # ── the work ──
    def score(self, group: RolloutGroup) -> ScoredGroup:
        """Score a group; a failure is tried again (the pool has replaced a dead process by then),
        and a group that still cannot be scored goes out marked `error`, so that the learner
        trains on none of it: an unchecked group must never become reward 0."""
        t0, wall0 = time.perf_counter(), time.time()
        for attempt in range(1, SCORE_ATTEMPTS + 1):
            try:
                scored = self._score(group)
                break
            except Exception as e:  # fail loudly in the log, convert at the boundary
                log.exception("%s: scoring task %s failed (attempt %d of %d)", self.worker_id,
                              group.task.task_id, attempt, SCORE_ATTEMPTS)
                self.counts["score_retries"] += attempt < SCORE_ATTEMPTS
                error = f"{type(e).__name__}: {e}"[:500]
        else:
            self.counts["failed_groups"] += 1
            g = len(group.samples)
            scored = ScoredGroup(group=group, verdicts=[Verdict("error", NAME, 0.0)] * g,
                                 rewards=np.zeros(g, np.float32), scheme=self.cfg.reward, majority_answer=None,
                                 vote_share=0.0, gate=None, num_distinct=0, verify_s=0.0,
                                 counts={"verifier/failed_groups": 1.0}, worker_id=self.worker_id, error=error)
        scored.verify_s = time.perf_counter() - t0
        scored.t_verify_start, scored.t_verified = wall0, wall0 + scored.verify_s
        self.counts["groups"] += 1
        self.counts["samples"] += len(group.samples)
        self.counts["verify_s"] += scored.verify_s
        for v in scored.verdicts:
            self.kinds[v.kind] = self.kinds.get(v.kind, 0) + 1
        return scored

    def _score(self, group: RolloutGroup) -> ScoredGroup:
        """Extract, check against the label (when there is one), then the run's scheme."""
        for s in group.samples:
            s.answer = extract_answer(s.text, unanchored=self.cfg.unanchored)
        label = group.task.label
        verdicts = self._verdicts(self._checked_answers(group, label), label) if label is not None else \
            [Verdict("inconclusive", "none", 0.0) for _ in group.samples]
        view = reward_schemes.GroupView(
            answer_keys=[answer_key(s.answer) for s in group.samples],
            verdicts=[v.kind for v in verdicts] if label is not None else None,
            token_logprobs=[s.logprobs.tolist() for s in group.samples],
            problem=group.task.prompt,
        )
        result = self.scheme.score(group, view)
        correct = sum(v.kind == "correct" for v in verdicts)
        return ScoredGroup(group=group, verdicts=verdicts, rewards=np.asarray(result.rewards, np.float32),
                           scheme=result.scheme, majority_answer=result.majority_answer,
                           vote_share=result.vote_share, gate=result.gate, num_distinct=result.num_distinct,
                           verify_s=0.0, worker_id=self.worker_id, counts=dict(result.counts),
                           pass_rate=correct / len(verdicts) if verdicts and label is not None else float("nan"))

    def _checked_answers(self, group: RolloutGroup, label: str) -> list[str | None]:
        """The answers checked against the label: the vote's, unless the label has several
        parts, when a response may box one part at a time (the vote never reads the label)."""
        parts = reference_parts(label)
        if parts == 1:
            return [s.answer for s in group.samples]
        return [extract_answer(s.text, parts, self.cfg.unanchored) for s in group.samples]

    def _verdicts(self, answers: list[str | None], label: str) -> list[Verdict]:
        """Cache, then the cheap in-process check, then the pool for what is left."""
        out: list[Verdict | None] = [None] * len(answers)
        ref = normalize(label)
        todo = []
        for i, a in enumerate(answers):
            t0 = time.perf_counter()
            if a is None:
                out[i] = Verdict("no_answer", NAME, 0.0)
                continue
            key = (normalize(a), ref, self.cfg.accept_rounded)  # verdicts depend on the rounding setting
            hit = self.cache.get(key)
            if hit is not None:
                out[i] = Verdict(hit.verdict, NAME, time.perf_counter() - t0, cache_hit=True)
                self.counts["rounded_accepts"] += hit.rounded
                continue
            kind = quick_check(a, label)
            if kind is not None:
                self.cache.put(key, Judgement(kind, False))
                out[i] = Verdict(kind, NAME, time.perf_counter() - t0)
                continue
            todo.append((i, key))
        if todo:
            results = self.pool.map(CHECK_FN, [(answers[i], label, self.cfg.accept_rounded) for i, _ in todo])
            self.counts["pool_checks"] += len(todo)
            for (i, key), r in zip(todo, results):
                kind = r.value.verdict if r.status == "ok" else r.status  # "timeout" | "error" are verdicts too
                if r.status == "ok":
                    self.cache.put(key, r.value)
                    self.counts["rounded_accepts"] += r.value.rounded
                out[i] = Verdict(kind, NAME, r.latency_s)
        return out

    # ── control ──
    def stats(self) -> dict:
        c = self.cache
        out = {f"verifier/{k}": v for k, v in self.counts.items()}
        out.update({f"verifier/verdict_{k}": v for k, v in self.kinds.items()})
        out["verifier/cache_hit_rate"] = c.hits / max(1, c.hits + c.misses)
        out.update(self.scheme.stats())
        if "verifier/tinyv_asked" in out:
            out["verifier/tinyv_share"] = out["verifier/tinyv_asked"] / max(1, self.counts["samples"])
        out["verifier/pool_restarts"] = self.pool.restarts
        if self.rollouts:
            out.update(self.rollouts.stats.as_dict("verifier/rollouts"))
            out["verifier/queue_depth"] = self.rollouts.depth()
        return out

    def stop(self):
        if self.rollouts:
            self.rollouts.wake("stop")
            self._thread.join(timeout=30)
            self.rollouts.close()
            self.scored.close()
        self.pool.close()
        if self.gate is not None:
            self.gate.close()

    def is_started(self) -> bool:
        """False after Ray restarted this actor: the driver wires it in again."""
        return self.rollouts is not None

    def fault(self, action: str, seconds: float = 0.0):
        """Fault injection: "slow" waits `seconds` before each group from now on; "raise" makes the
        loop raise on its next group (the actor must then fail, not hang)."""
        self._fault, self._slow_s = action, seconds if action == "slow" else self._slow_s

    def _injected_fault(self):
        if self._fault == "raise":
            raise RuntimeError(f"fault injection: {self.worker_id}'s loop raises")
        if self._slow_s:
            time.sleep(self._slow_s)

    def pid(self) -> int:
        return os.getpid()
