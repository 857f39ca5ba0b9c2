"""Verifier worker: RolloutGroups in, ScoredGroups out.

    loop:  group = rollouts.get()               # ZeroMQ PULL, bound here; generators connect
           verdicts = check(samples vs label)   # cache, then a process pool with a hard timeout
           rewards = scheme(group view)         # verifiers.rewards: ground truth, vote, JURY-RL, ...
           scored.send(ScoredGroup)             # ZeroMQ PUSH to the learner

Verdicts against the label are always computed when a label exists, because the pass
rate is a metric every run wants; whether the reward may read them is the scheme's
business (JURY-RL and majority vote never do). A group whose scoring fails is still
sent, with "error" verdicts and zero rewards, so the learner never waits for it.
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
from jury.verifiers.math.verify import Judgement, answer_key, extract_answer, normalize, quick_check
from jury.verifiers.pool import CheckPool
from jury.verifiers.tinyv import TinyVItem, tinyv_verify

log = logging.getLogger(__name__)
CHECK_FN = "jury.verifiers.math.verify:judge"
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
        self.cfg, self.worker_id = cfg, worker_id
        self.llm = llm  # an LLMClient for the TinyV cascade
        self.derl = derl  # a derl_scorer.DerlScorer when derl.enabled: the reward on diversifying prompts
        # built here, in this process: a gate may own processes (Lean REPLs) that cannot be shipped
        self.gate = gate_factory() if gate_factory else None
        self.pool = CheckPool(cfg.pool_workers, cfg.check_timeout_s)
        self.cache = VerdictCache(cfg.cache_size)
        self.counts: dict[str, float] = {"groups": 0, "samples": 0, "failed_groups": 0, "verify_s": 0.0,
                                         "pool_checks": 0, "rounded_accepts": 0, "gate_calls": 0, "gate_proved": 0,
                                         "tinyv_asked": 0, "tinyv_overturned": 0, "tinyv_failed": 0, "tinyv_s": 0.0}
        self.kinds: dict[str, int] = {}
        self.gate_totals: dict[str, float] = {}  # summed per-call records of a gate that keeps them
        self.rollouts = self.scored = None
        self._thread = None
        self._slow_s = 0.0

    # ── wiring ──
    def start(self, host: str | None, learner_endpoint: str, curve=None) -> str:
        """Bind the rollout queue on this node's address; return it for the generators."""
        if host is None:
            import ray  # only on a cluster: this node's address

            host = ray.util.get_node_ip_address()
        self.rollouts = Receiver(host, hwm=256, maxsize=256, name=f"{self.worker_id}-rollouts", curve=curve)
        self.scored = Sender([learner_endpoint], hwm=256, maxsize=256, name=f"{self.worker_id}-scored", curve=curve)
        self._thread = threading.Thread(target=self._loop, name=self.worker_id, daemon=True)
        self._thread.start()
        return self.rollouts.endpoint

    def _loop(self):
        while True:
            msg = self.rollouts.get(timeout=0.5)
            if msg is None:
                continue
            if isinstance(msg, Shutdown):
                return
            if not isinstance(msg, RolloutGroup):
                log.warning("%s: ignoring a %s on the rollout queue", self.worker_id, type(msg).__name__)
                continue
            if self._slow_s:  # fault injection
                time.sleep(self._slow_s)
            self.scored.send(self.score(msg))

    # ── the work ──
    def score(self, group: RolloutGroup) -> ScoredGroup:
        t0, wall0 = time.perf_counter(), time.time()
        try:
            scored = self._score(group)
        except Exception as e:  # fail loudly in the log, convert at the boundary
            log.exception("%s: scoring task %s failed", self.worker_id, group.task.task_id)
            self.counts["failed_groups"] += 1
            g = len(group.samples)
            scored = ScoredGroup(group=group, verdicts=[Verdict("error", NAME, 0.0)] * g,
                                 rewards=np.zeros(g, np.float32), scheme=self.cfg.reward, majority_answer=None,
                                 vote_share=0.0, gate=None, num_distinct=0, verify_s=0.0,
                                 stats={"error": 1.0}, worker_id=self.worker_id)
        scored.verify_s = time.perf_counter() - t0
        scored.t_verify_start, scored.t_verified = wall0, wall0 + scored.verify_s
        self.counts["groups"] += 1
        self.counts["samples"] += len(group.samples)
        self.counts["verify_s"] += scored.verify_s
        for v in scored.verdicts:
            self.kinds[v.kind] = self.kinds.get(v.kind, 0) + 1
        return scored

    def _score(self, group: RolloutGroup) -> ScoredGroup:
        for s in group.samples:
            s.answer = extract_answer(s.text)
        label = group.task.label
        verdicts = self._verdicts([s.answer for s in group.samples], label) if label is not None else \
            [Verdict("inconclusive", "none", 0.0) for _ in group.samples]
        # a diversifying group's reward is DeRL's alone: the run's scheme (proof gate, TinyV) is not
        # asked about it, and majority_vote only fills in the group's facts (majority, vote share)
        diversify = self.derl is not None and group.task.kind == "diversify"
        view = reward_schemes.GroupView(
            answer_keys=[answer_key(s.answer) for s in group.samples],
            verdicts=[v.kind for v in verdicts] if label is not None else None,
            token_logprobs=[s.logprobs.tolist() for s in group.samples],
            problem=group.task.prompt,
            tinyv=self._tinyv(group, verdicts) if self.cfg.reward == "tinyv" and not diversify else None,
        )
        result = reward_schemes.majority_vote(view) if diversify else self._reward(view, group)
        rewards = result.rewards
        correct = sum(v.kind == "correct" for v in verdicts)
        stats = {"pass_rate": correct / len(verdicts) if verdicts and label is not None else float("nan")}
        if self.derl is not None:  # correctness for DeRL is the label check above (see derl_scorer)
            rewards, derl_stats = self.derl.rewards(group.task, [s.text for s in group.samples],
                                                    [v.kind == "correct" for v in verdicts], rewards)
            stats.update(derl_stats)
        return ScoredGroup(group=group, verdicts=verdicts, rewards=np.asarray(rewards, np.float32),
                           scheme="derl" if diversify else self.cfg.reward, majority_answer=result.majority_answer,
                           vote_share=result.vote_share, gate=result.gate, num_distinct=result.num_distinct,
                           verify_s=0.0, worker_id=self.worker_id, stats=stats)

    def _reward(self, view, group: RolloutGroup):
        if self.cfg.reward == "jury":
            answers = {answer_key(s.answer): s.answer for s in group.samples if s.answer is not None}
            return reward_schemes.jury(view, gate=lambda problem, key: self._gate(problem, answers.get(key, key)),
                                       fallback=self.cfg.fallback, c=self.cfg.reszero_c)
        return reward_schemes.REWARD_SCHEMES[self.cfg.reward](view)

    def _tinyv(self, group: RolloutGroup, verdicts: list[Verdict]) -> list[bool | None]:
        """TinyV add-on mode: only what the rules call incorrect goes to the LLM."""
        if self.llm is None:
            raise ValueError("reward=tinyv needs an LLM client (verifier.tinyv_model)")
        items = [TinyVItem(group.task.prompt, group.task.label or "", s.answer, v.kind)
                 for s, v in zip(group.samples, verdicts)]
        t0 = time.perf_counter()
        try:
            accepted = tinyv_verify(self.llm, items)
        except Exception as e:  # the LLM failing must not wipe the rules' verdicts: fall back to them
            log.warning("%s: TinyV call failed, rules only for task %s: %s", self.worker_id, group.task.task_id, e)
            self.counts["tinyv_failed"] += 1
            return [v.kind == "correct" for v in verdicts]
        finally:
            self.counts["tinyv_s"] += time.perf_counter() - t0
        asked = [i for i, v in enumerate(verdicts) if v.kind == "incorrect"]
        self.counts["tinyv_asked"] += len(asked)
        self.counts["tinyv_overturned"] += sum(accepted[i] is True for i in asked)
        return accepted

    def _gate(self, problem: str, answer: str) -> bool:
        self.counts["gate_calls"] += 1
        if self.gate is None:
            proved = False
        elif hasattr(self.gate, "verify"):  # the Lean gate: keep its cost record (tokens per role, attempts, time)
            result = self.gate.verify(problem, answer)
            proved = result.proved
            for k, v in result.metrics().items():
                self.gate_totals[k] = self.gate_totals.get(k, 0.0) + v
        else:
            proved = self.gate(problem, answer) is True
        self.counts["gate_proved"] += proved
        return proved

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
        if self.cfg.reward == "tinyv":
            out["verifier/tinyv_share"] = self.counts["tinyv_asked"] / max(1, self.counts["samples"])
            out["verifier/tinyv_s_per_group"] = self.counts["tinyv_s"] / max(1, self.counts["groups"])
        out["verifier/pool_restarts"] = self.pool.restarts
        calls = max(1, self.counts["gate_calls"])
        out.update({f"{k}_per_call": v / calls for k, v in self.gate_totals.items()})
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
        if hasattr(self.gate, "close"):
            self.gate.close()

    def is_started(self) -> bool:
        """False after Ray restarted this actor: the driver wires it in again."""
        return self.rollouts is not None

    def slow(self, seconds: float):
        """Fault injection: wait this long before each group from now on."""
        self._slow_s = seconds

    def pid(self) -> int:
        return os.getpid()
