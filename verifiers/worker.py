"""Verifier worker: RolloutGroups in, ScoredGroups out. Its loop, a label checker and a scheme.

    loop:  group = rollouts.get()                     # ZeroMQ PULL, bound here; generators connect
           answers, keys = checker.extract, .key      # verifiers/checker.py (math: verifiers/math/checker.py)
           verdicts = checker.check(answers, label)   # cache, then a process pool with a hard timeout
           result = scheme.score(group, view)         # verifiers/schemes.py: ground truth, vote, JURY-RL, ...
           scored.send(ScoredGroup)                   # ZeroMQ PUSH to the learner

The checker and the scheme are built here, in this process, from recipes the wiring ships
(cluster/recipes.py): they may own processes (the check pool, Lean REPLs) that cannot travel,
and the wiring composes them (DeRL wraps the run's scheme). A new domain is a new checker.

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
from typing import Callable

import numpy as np

from jury.protocol.config import VerifierConfig
from jury.protocol.messages import RolloutGroup, ScoredGroup, Verdict
from jury.protocol.transport import Receiver, Sender
from jury.verifiers import rewards as reward_schemes
from jury.verifiers.checker import LabelChecker
from jury.verifiers.schemes import Scheme

log = logging.getLogger(__name__)
SCORE_ATTEMPTS = 3


class VerifierWorker:
    def __init__(self, cfg: VerifierConfig, worker_id: str, *, checker: Callable[[], LabelChecker],
                 scheme: Callable[[LabelChecker], Scheme]):
        """`checker`, `scheme`: recipes called here, in this process (cluster/recipes.py); the scheme's
        is handed the checker (LLM-KD checks samples against its teacher's answer with it)."""
        self.cfg, self.worker_id = cfg, worker_id
        self.checker = checker()
        self.scheme = scheme(self.checker)
        self.counts: dict[str, float] = {"groups": 0, "samples": 0, "failed_groups": 0, "score_retries": 0,
                                         "verify_s": 0.0}
        self.kinds: dict[str, int] = {}
        self.rollouts = self.scored = None
        self._thread = None
        self._slow_s, self._fault = 0.0, ""

    # ── wiring ──
    def start(self, host: str | None, learner_endpoint: str, curve=None) -> str:
        """Bind the rollout queue on this node's address; return it for the generators. First the
        checker's preflight: a setting it cannot work under is refused now (ConfigError), not
        found out as every check failing."""
        self.check_cost_s = self.checker.preflight()
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
            self.checker.close()
            logging.shutdown()
            os._exit(70)

    def _serve(self):
        self.rollouts.serve(self._handle)  # until stop() wakes the queue

    def _handle(self, group: RolloutGroup):
        self._injected_fault()
        self.scored.send(self.score(group))

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
            scored = ScoredGroup(group=group, verdicts=[Verdict("error", self.checker.name, 0.0)] * g,
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
        for sample in group.samples:
            sample.answer = self.checker.extract(sample.text)
        answers, label = [sample.answer for sample in group.samples], group.task.label
        texts = [sample.text for sample in group.samples]
        verdicts = self.checker.check(answers, label, texts) if label is not None else \
            [Verdict("inconclusive", "none", 0.0) for _ in group.samples]
        view = reward_schemes.GroupView(
            answer_keys=self.checker.keys(answers),
            verdicts=[v.kind for v in verdicts] if label is not None else None,
            problem=group.task.statement,  # the gate formalises the problem, not the template around it
            views=[sample.view for sample in group.samples],
        )
        result = self.scheme.score(group, view)
        correct = sum(v.kind == "correct" for v in verdicts)
        # a shadow fact for the monitor (spurious consensus), after the scheme has scored
        majority = next((v.kind for key, v in zip(view.answer_keys, verdicts)
                         if label is not None and key is not None and key == result.majority_answer), None)
        return ScoredGroup(group=group, verdicts=verdicts, rewards=np.asarray(result.rewards, np.float32),
                           scheme=result.scheme, majority_answer=result.majority_answer,
                           vote_share=result.vote_share, gate=result.gate, num_distinct=result.num_distinct,
                           verify_s=0.0, worker_id=self.worker_id, counts=dict(result.counts), scored_on=result.scored_on,
                           pass_rate=correct / len(verdicts) if verdicts and label is not None else float("nan"),
                           majority_verdict=majority)

    # ── control ──
    def stats(self) -> dict:
        out = {f"verifier/{k}": v for k, v in self.counts.items()}
        out.update({f"verifier/verdict_{k}": v for k, v in self.kinds.items()})
        out.update(self.checker.stats())
        out.update(self.scheme.stats())
        if "verifier/tinyv_asked" in out:
            out["verifier/tinyv_share"] = out["verifier/tinyv_asked"] / max(1, self.counts["samples"])
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
        self.checker.close()
        self.scheme.close()

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
