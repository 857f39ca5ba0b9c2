"""JURY-RL's Lean proof gate (§4.2.4): δ(problem, majority answer) ∈ {proved, inconclusive}.

    problem, answer
      │  autoformalizer: k=8 Lean statements of "problem with this answer"   (LLM)
      ▼
    candidates ── consistency checker: each judged against the text, best kept (LLM)
      ▼
    statement  ── Lean: the statement must elaborate
      ▼
    prover: up to 16 attempts in rounds, stop after the round with a proof  (LLM)
      ▼
    each proof file: screen, Lean, axioms, type and kernel checks (check.py)  (CPU)

Results are cached by (problem, answer): as the policy converges the same pairs recur,
which is why the paper's per-step cost falls toward the ground-truth baseline (§5.6).
Each result records what the paper's cost table counts: tokens per role, proof
attempts, wall and Lean time, cache hit.

    cfg = LeanGateConfig()
    gate = LeanGate(cfg, formalizer=f, checker=c, prover=p,
                    backend=load_gate_backend(cfg))
    res = gate.verify(problem, answer)        # GateResult: res.proved is δ; res.metrics() for logging
    gate.close()
"""
from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from jury.protocol.config import LeanGateConfig  # noqa: F401  (re-exported)
from jury.verifiers.lean.backends import LeanBackend
from jury.verifiers.lean.check import LruCache, ProofChecker, ProofVerdict, digest
from jury.verifiers.lean.screen import extract_proof_file, extract_statement, normalized
from jury.verifiers.llm import LLMClient, fill, generate_checked, load_prompt, strip_reasoning

NO_PROOF = ProofVerdict("no_proof", "no Lean block with a test_problem proof in the reply")
_CONSISTENCY = re.compile(r"<consistency>(.*?)</consistency>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class GateResult:
    proved: bool
    reason: str  # proved | no_statement | no_consistent_statement | lean_failed | no_elaborating_statement | no_proof
    statement: str | None = None  # the chosen formalization
    proof: str | None = None      # the proof file that checked
    formalizer_tokens: int = 0
    checker_tokens: int = 0
    prover_tokens: int = 0
    candidates: int = 0           # distinct well-formed statements from the formalizer
    consistent: int = 0           # of those, judged Correct at least once
    attempts: int = 0             # proof attempts until the first success, or all made
    verdicts: tuple[str, ...] = ()  # status of every proof checked, in order
    formalize_s: float = 0.0
    consistency_s: float = 0.0
    prove_s: float = 0.0          # prover generation and Lean checks
    lean_s: float = 0.0           # summed Lean wall time (checks run in parallel)
    time_s: float = 0.0
    cache_hit: bool = False

    @property
    def tokens(self) -> int:
        return self.formalizer_tokens + self.checker_tokens + self.prover_tokens

    def metrics(self) -> dict[str, float]:
        return {
            "verifier/lean_proved": float(self.proved),
            "verifier/lean_cache_hit": float(self.cache_hit),
            "verifier/lean_tokens": float(self.tokens),
            "verifier/lean_tokens_formalizer": float(self.formalizer_tokens),
            "verifier/lean_tokens_checker": float(self.checker_tokens),
            "verifier/lean_tokens_prover": float(self.prover_tokens),
            "verifier/lean_attempts": float(self.attempts),
            "verifier/lean_timeouts": float(self.verdicts.count("timeout")),
            "verifier/lean_crashes": float(self.verdicts.count("crash")),
            "verifier/lean_formalize_s": self.formalize_s,
            "verifier/lean_consistency_s": self.consistency_s,
            "verifier/lean_prove_s": self.prove_s,
            "verifier/lean_lean_s": self.lean_s,
            "verifier/lean_gate_s": self.time_s,
        }


def consistency_verdict(reply: str) -> bool | None:
    """The checker's last `<consistency> Correct|Incorrect </consistency>`; None if absent."""
    found = _CONSISTENCY.findall(strip_reasoning(reply))
    if not found:
        return None
    word = found[-1].strip().strip("[]*` ").strip().lower()
    return {"correct": True, "incorrect": False}.get(word)


class LeanGate:
    """The gate; thread-safe, so several verifier threads may share one (and its caches)."""

    def __init__(self, config: LeanGateConfig, *, formalizer: LLMClient, checker: LLMClient,
                 prover: LLMClient, backend: LeanBackend):
        self.config = config
        self.formalizer, self.checker, self.prover = formalizer, checker, prover
        self.backend = backend
        self.proofs = ProofChecker(backend, config.lean.header, timeout_s=config.proof_timeout_s,
                                   cache_size=config.verdict_cache_size, kernel_checks=config.kernel_checks)
        self.results: LruCache[str, GateResult] = LruCache(config.result_cache_size)
        # One Lean check per REPL process at a time; more threads would only queue.
        self._checks = ThreadPoolExecutor(config.lean.pool_size, thread_name_prefix="lean-check")

    def verify(self, problem: str, answer: str) -> GateResult:
        start = time.monotonic()
        key = digest(problem.strip(), answer.strip())
        hit = self.results.get(key)
        if hit is not None:
            # This call spent nothing: the cost table counts what a verify costs now.
            return GateResult(hit.proved, hit.reason, hit.statement, hit.proof, cache_hit=True,
                              time_s=time.monotonic() - start)
        result = self._verify(problem, answer, start)
        if result.proved or not {"timeout", "crash"} & set(result.verdicts):
            self.results.put(key, result)  # a machine that timed out may prove it next time
        return result

    def _verify(self, problem: str, answer: str, start: float) -> GateResult:
        informal = fill(load_prompt("lean_informal"), problem=problem, answer=answer).strip()
        t0 = time.monotonic()
        candidates, f_tokens = self._formalize(informal)
        t1 = time.monotonic()
        ranked, c_tokens = self._rank(informal, candidates)
        t2 = time.monotonic()
        statement, lean_s, failed = self._choose(ranked)
        proof, attempts, verdicts, p_tokens = self._prove(statement) if statement else (None, 0, [], 0)
        t3 = time.monotonic()
        reason = ("proved" if proof is not None else "no_statement" if not candidates
                  else "no_consistent_statement" if not ranked
                  else "lean_failed" if statement is None and failed
                  else "no_elaborating_statement" if statement is None else "no_proof")
        return GateResult(
            proved=proof is not None, reason=reason, statement=statement, proof=proof,
            formalizer_tokens=f_tokens, checker_tokens=c_tokens, prover_tokens=p_tokens,
            candidates=len(candidates), consistent=len(ranked), attempts=attempts,
            # the elaboration checks' timeouts and crashes too: the result is not cached, and counted
            verdicts=tuple(failed) + tuple(v.status for v in verdicts), formalize_s=t1 - t0,
            consistency_s=t2 - t1, prove_s=t3 - t2, lean_s=lean_s + sum(v.lean_s for v in verdicts),
            time_s=time.monotonic() - start)

    def _formalize(self, informal: str) -> tuple[list[str], int]:
        """Distinct screened statements from k formalizer samples, in sample order; tokens."""
        cfg = self.config
        prompt = fill(load_prompt("lean_autoformalizer"), informal_statement_content=informal)
        [outs] = generate_checked(self.formalizer, [prompt], n=cfg.num_statements,
                                  temperature=cfg.formalizer_temperature, max_tokens=cfg.formalizer_max_tokens)
        distinct: dict[str, str] = {}
        for c in outs:
            statement = extract_statement(strip_reasoning(c.text))
            if statement is not None:
                distinct.setdefault(normalized(statement), statement)
        return list(distinct.values()), sum(c.num_tokens for c in outs)

    def _rank(self, informal: str, candidates: list[str]) -> tuple[list[str], int]:
        """Candidates judged Correct at least once, best share first (ties: sample order); tokens."""
        cfg = self.config
        system = load_prompt("lean_checker_system").strip()
        prompts = [system + "\n\n" + fill(load_prompt("lean_checker_user"), informal_prefix=informal,
                                          formal_statement=f"{s} := by sorry") for s in candidates]
        outs = generate_checked(self.checker, prompts, n=cfg.checker_samples,
                                temperature=cfg.checker_temperature, max_tokens=cfg.checker_max_tokens)
        shares = [sum(consistency_verdict(c.text) is True for c in comps) / len(comps) for comps in outs]
        order = sorted((i for i, s in enumerate(shares) if s > 0), key=lambda i: (-shares[i], i))
        return [candidates[i] for i in order], sum(c.num_tokens for comps in outs for c in comps)

    def _choose(self, ranked: list[str]) -> tuple[str | None, float, list[str]]:
        """The best-ranked statement that elaborates in Lean; the Lean time it took; the statuses of
        the checks that timed out or crashed on the way (Lean's failure, not the statement's: one
        that ran out of time may elaborate next time)."""
        if not self.config.elaborate_statements:
            return (ranked[0] if ranked else None), 0.0, []
        lean_s, failed = 0.0, []
        for statement in ranked:
            verdict = self.proofs.elaborates(statement)
            lean_s += verdict.lean_s
            if verdict.status == "elaborates":
                return statement, lean_s, failed
            if verdict.status in ("timeout", "crash"):
                failed.append(verdict.status)
        return None, lean_s, failed

    def _prove(self, statement: str) -> tuple[str | None, int, list[ProofVerdict], int]:
        """(proof, attempts, verdicts, tokens): rounds of samples, each round checked in parallel."""
        cfg = self.config
        formal = f"{cfg.lean.header}\n\n{statement} := by\n  sorry"
        prompt = fill(load_prompt("lean_prover"), formal_statement=formal)
        verdicts: list[ProofVerdict] = []
        tokens, made = 0, 0
        while made < cfg.max_attempts:
            n = min(cfg.attempts_per_round, cfg.max_attempts - made)
            [outs] = generate_checked(self.prover, [prompt], n=n, temperature=cfg.prover_temperature,
                                      max_tokens=cfg.prover_max_tokens)
            tokens += sum(c.num_tokens for c in outs)
            files = [extract_proof_file(strip_reasoning(c.text)) for c in outs]
            round_verdicts = list(self._checks.map(
                lambda file: NO_PROOF if file is None else self.proofs.check(statement, file), files))
            verdicts += round_verdicts
            for i, verdict in enumerate(round_verdicts):
                if verdict.proved:
                    return files[i], made + i + 1, verdicts, tokens
            made += n
        return None, made, verdicts, tokens

    def close(self) -> None:
        self._checks.shutdown(wait=True)
        self.backend.close()
