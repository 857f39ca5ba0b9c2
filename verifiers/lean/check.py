"""Checking one proof body against one statement: screen, Lean, then checks the proof cannot touch.

The verifier writes every command itself and sends them as one chain (each command in
the environment the previous one returned, the first in the header's):

    1. axiom jury_statement_ref <signature>        its own copy of the statement, elaborated
                                                   before any untrusted text runs
    2. theorem test_problem <signature> := (<body>
       )                                           the only place the body goes; inside the
                                                   parentheses a body that tries to end the
                                                   theorem and start commands of its own is a
                                                   parse error (the screen balances them)
    3. #print axioms test_problem                  read from this reply only, never from 2
    4. example : @jury_statement_ref = @test_problem := rfl
                                                   the proved theorem has the written type

A proof counts when 1 elaborates, 2 has no error, no sorry and no "declaration uses
'sorry'" warning, 3 lists only propext, Classical.choice and Quot.sound, and 4 elaborates.
A body that uses the reference axiom to prove itself shows it in 3. Verdicts are cached
by (backend identity, header, statement, body); timeouts and crashes are not, since they
say more about the machine's load than about the proof.

    checker = ProofChecker(backend, header, timeout_s=60)
    v = checker.check("theorem test_problem : (2:ℕ) + 2 = 4", " by norm_num")
    v.status   # proved | screened | statement_error | lean_error | sorry | bad_axioms
               # | statement_mismatch | timeout | crash
    checker.elaborates(statement).status   # elaborates | statement_error | timeout | crash
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Hashable, Sequence, TypeVar

from jury.verifiers.lean.backends import LeanBackend
from jury.verifiers.lean.repl import LeanCrash, LeanTimeout, ReplResponse
from jury.verifiers.lean.screen import REF_NAME, THEOREM_NAME, screen, signature_of

ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
_DEPENDS = re.compile(r"^'?" + THEOREM_NAME + r"'? depends on axioms: \[(.*)\]\s*$", re.DOTALL)
_NO_AXIOMS = re.compile(r"^'?" + THEOREM_NAME + r"'? does not depend on any axioms\s*$")
_SORRY_WARNING = "declaration uses 'sorry'"

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A bounded, thread-safe map that forgets the least recently used entry."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
            return None

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)


def digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class ProofVerdict:
    status: str
    detail: str = ""
    lean_s: float = 0.0    # wall time in Lean for this check (0 when cached or screened)
    cached: bool = False

    @property
    def proved(self) -> bool:
        return self.status == "proved"


# ---------------------------------------------------------------- the chain and its judgement
def reference_command(statement: str) -> str:
    return f"axiom {REF_NAME}{signature_of(statement)}"


def proof_chain(statement: str, body: str) -> list[str]:
    """The four commands above; body is the text after `:=`, kept verbatim for its layout.

    The closing parenthesis goes on a line of its own, after any final line comment.
    """
    return [reference_command(statement), f"{statement} := ({body}\n)",
            f"#print axioms {THEOREM_NAME}", f"example : @{REF_NAME} = @{THEOREM_NAME} := rfl"]


def parse_axioms(reply: ReplResponse) -> frozenset[str] | None:
    """The axioms `#print axioms test_problem` reported, or None when it did not answer."""
    if reply.error or reply.errors:
        return None
    for m in reply.messages:
        if m.severity != "info":
            continue
        if _NO_AXIOMS.match(m.data):
            return frozenset()
        found = _DEPENDS.match(m.data)
        if found:  # Lean may wrap a long list over several lines
            return frozenset(a.strip() for a in found.group(1).split(",") if a.strip())
    return None


def judge(replies: Sequence[ReplResponse]) -> tuple[str, str]:
    """(status, detail) for the replies to proof_chain's four commands."""
    ref, proof, axioms, same = replies
    failed = next((r.error for r in replies if r.error), None)
    if failed:
        return "lean_error", f"REPL: {failed}"
    if ref.errors:
        return "statement_error", ref.errors[0].data
    if proof.errors:
        return "lean_error", proof.errors[0].data
    if proof.sorries or any(m.severity == "warning" and _SORRY_WARNING in m.data for m in proof.messages):
        return "sorry", "proof contains sorry"
    used = parse_axioms(axioms)
    if used is None:
        return "bad_axioms", "no answer from #print axioms: " + "; ".join(m.data for m in axioms.messages)
    if used - ALLOWED_AXIOMS:
        return "bad_axioms", "uses " + ", ".join(sorted(used - ALLOWED_AXIOMS))
    if same.errors:
        return "statement_mismatch", same.errors[0].data
    return "proved", ""


# ---------------------------------------------------------------- the checker
class ProofChecker:
    """Screen, run and judge proofs; thread-safe (the backend serialises per process)."""

    def __init__(self, backend: LeanBackend, header: str, *, timeout_s: float, cache_size: int = 100_000):
        self.backend = backend
        self.header = header
        self.timeout_s = timeout_s
        self.cache: LruCache[str, ProofVerdict] = LruCache(cache_size)

    def check(self, statement: str, body: str) -> ProofVerdict:
        """statement: "theorem test_problem <signature>" as extract_statement wrote it."""
        refused = screen(signature_of(statement)) or screen(body)
        if refused is not None:
            return ProofVerdict("screened", refused)
        key = digest(self.backend.identity, self.header, statement, body)
        hit = self.cache.get(key)
        if hit is not None:
            return ProofVerdict(hit.status, hit.detail, 0.0, cached=True)
        verdict = self._run(proof_chain(statement, body), judge)
        if verdict.status not in ("timeout", "crash"):
            self.cache.put(key, verdict)
        return verdict

    def elaborates(self, statement: str) -> ProofVerdict:
        """Whether the statement alone elaborates (a formalization Lean cannot read is useless)."""
        key = digest(self.backend.identity, self.header, statement)
        hit = self.cache.get(key)
        if hit is not None:
            return ProofVerdict(hit.status, hit.detail, 0.0, cached=True)

        def judge_statement(replies: Sequence[ReplResponse]) -> tuple[str, str]:
            bad = replies[0].error or next((m.data for m in replies[0].errors), None)
            return ("statement_error", bad) if bad else ("elaborates", "")
        verdict = self._run([reference_command(statement)], judge_statement)
        if verdict.status not in ("timeout", "crash"):
            self.cache.put(key, verdict)
        return verdict

    def _run(self, cmds: list[str], decide) -> ProofVerdict:
        """Lean failures become verdicts here, at the boundary; anything else propagates."""
        start = time.monotonic()
        try:
            replies = self.backend.run_chain(cmds, timeout_s=self.timeout_s)
        except LeanTimeout as e:
            return ProofVerdict("timeout", str(e), time.monotonic() - start)
        except LeanCrash as e:
            return ProofVerdict("crash", str(e), time.monotonic() - start)
        status, detail = decide(replies)
        return ProofVerdict(status, detail, time.monotonic() - start)
