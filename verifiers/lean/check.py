"""Checking one proof file against one statement: screen, Lean, then checks the proof cannot touch.

A prover's whole file is checked, as SafeVerify, leanprover's comparator and lean4checker
check a solution (helper declarations, namespaces and all), never re-assembled from a cut
proof body. The verifier sends five commands as one chain, each in the environment the
previous one returned, the first in the header's:

    1. axiom jury_statement_ref <signature>    its own copy of the statement, elaborated
                                               before any untrusted text runs
    2. section jury_submission                 the screened file; the section makes Lean
       <file>                                  itself refuse a file that leaves a namespace
       end jury_submission                     open or closes one it did not open
    3. #print axioms <target>                  read from this reply only, never from 2
    4. example : @jury_statement_ref = @<target> := rfl
                                               the kernel finds both types definitionally equal
    5. KERNEL_CHECK (an #eval of the verifier's): the target is a theorem, its elaborated
       type is the reference's (Expr equality, as comparator and SafeVerify compare), it is
       the only test_problem, and every declaration the chain added replays through the
       kernel in a freshly imported header environment (lean4checker's replay), so an
       environment that meta code bent is caught. Optional (kernel_checks): it needs the
       `Lean` package among the header's imports, which Mathlib has.

Before the first proof reaches Lean, the checker asks the header environment once for the
first token of every command parser it knows (COMMAND_TABLE, another #eval of the
verifier's own), so the screen refuses a library command that is on no list of ours. A
Lean that cannot answer it (no `Lean` import, another API) leaves the screen with its own
lists, and a warning says so.

A proof counts when 1 elaborates, 2 has no error, no sorry and no "declaration uses
'sorry'" warning, 3 lists only propext, Classical.choice and Quot.sound, 4 elaborates and
5 answers "jury-check: ok". Verdicts are cached by (backend identity, header, statement,
file, checks); timeouts and crashes are not, since they say more about the machine's load
than about the proof.

    checker = ProofChecker(backend, header, timeout_s=60)
    v = checker.check("theorem test_problem : (2:ℕ) + 2 = 4", file)   # file: a Lean block
    v = checker.check_body("theorem test_problem : (2:ℕ) + 2 = 4", " by norm_num")
    v.status   # proved | screened | statement_error | lean_error | sorry | bad_axioms
               # | statement_mismatch | replay_failed | check_unavailable | timeout | crash
    checker.elaborates(statement).status   # elaborates | statement_error | timeout | crash
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Hashable, Sequence, TypeVar

from jury.verifiers.lean.backends import LeanBackend
from jury.verifiers.lean.repl import LeanCrash, LeanTimeout, ReplResponse
from jury.verifiers.lean.screen import (REF_NAME, SECTION, THEOREM_NAME, normalize_newlines, screen,
                                        screen_file, signature_of, strip_header_imports)

log = logging.getLogger(__name__)

ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
_DEPENDS = re.compile(r"^'?(.+?)'? depends on axioms: \[(.*)\]\s*$", re.DOTALL)
_NO_AXIOMS = re.compile(r"^'?(.+?)'? does not depend on any axioms\s*$")
_SORRY_WARNING = "declaration uses 'sorry'"
CHECK_OK = "jury-check: ok"

# The verifier's own meta command (5 above); {target} is the target's full name. Written
# for Lean 4's core API (Environment.replay, importModules), as SafeVerify's Main.lean uses
# it; tests/verifiers/lean/test_lean_real.py runs it against a real REPL.
KERNEL_CHECK = """open Lean Elab Command in
#eval show CommandElabM Unit from do
  -- jury-check: the verifier's own command (verifiers/lean/check.py), never a prover's
  let env ← getEnv
  let some ref := env.find? `{ref} | throwError "jury-check: no reference statement"
  let some thm := env.find? `{target} | throwError "jury-check: no target {target}"
  let .thmInfo val := thm | throwError "jury-check: {target} is not a theorem"
  unless val.type == ref.type && val.levelParams == ref.levelParams do
    throwError "jury-check: the elaborated type differs from the reference"
  let mut news : Std.HashMap Name ConstantInfo := {{}}
  let mut count := 0
  for (n, c) in env.constants.map₂.toList do
    news := news.insert n c
    if let .str _ s := n then
      if s == "{name}" then count := count + 1
  unless count == 1 do throwError "jury-check: {{count}} declarations named {name}"
  let base ← importModules env.header.imports {{}} 0
  try
    discard <| base.replay news
  catch e => throwError "jury-check: kernel replay failed: {{e.toMessageData}}"
  logInfo m!"jury-check: ok, {{news.size}} declarations replayed\""""

# The verifier's own query for the header environment's command words: the first tokens of
# the `command` category's parsers (Lean.Parser.Extension: parserExtension, getCategory,
# PrattParsingTables.leadingTable), Lean core's and every imported library's.
COMMAND_TABLE = """open Lean Parser Elab Command in
#eval show CommandElabM Unit from do
  -- jury-commands: the verifier's own command (verifiers/lean/check.py), never a prover's
  let some cat := getCategory (parserExtension.getState (← getEnv)).categories `command
    | throwError "jury-commands: no command category"
  let mut words : Array String := #[]
  for (tk, _) in cat.tables.leadingTable do
    words := words.push (tk.toString (escape := false))
  let line := " ".intercalate words.toList
  logInfo m!"jury-commands: {line}\""""
COMMANDS_OK = "jury-commands: "
# Keys of the leading table that name a token kind, not a word
_TOKEN_KINDS = frozenset({"ident", "num", "str", "char", "scientific", "name", "fieldIdx", "hexnum"})

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


def kernel_check_command(target: str) -> str:
    return KERNEL_CHECK.format(ref=REF_NAME, target=target, name=THEOREM_NAME)


def proof_chain(statement: str, submission: str, target: str, *, kernel_checks: bool = True) -> list[str]:
    """The commands above for a screened submission whose target theorem is `target`."""
    chain = [reference_command(statement), f"section {SECTION}\n{submission}\nend {SECTION}",
             f"#print axioms {target}", f"example : @{REF_NAME} = @{target} := rfl"]
    return chain + [kernel_check_command(target)] if kernel_checks else chain


def parse_axioms(reply: ReplResponse, target: str = THEOREM_NAME) -> frozenset[str] | None:
    """The axioms `#print axioms target` reported, or None when it did not answer."""
    if reply.error or reply.errors:
        return None
    for m in reply.messages:
        if m.severity != "info":
            continue
        none = _NO_AXIOMS.match(m.data)
        if none and none.group(1) == target:
            return frozenset()
        found = _DEPENDS.match(m.data)
        if found and found.group(1) == target:  # Lean may wrap a long list over several lines
            return frozenset(a.strip() for a in found.group(2).split(",") if a.strip())
    return None


def parse_command_table(reply: ReplResponse) -> frozenset[str] | None:
    """The command words COMMAND_TABLE listed, or None when it did not answer."""
    if reply.error or reply.errors:
        return None
    for m in reply.messages:
        if m.severity == "info" and m.data.startswith(COMMANDS_OK):
            words = m.data[len(COMMANDS_OK):].split()
            return frozenset(w for w in words if w not in _TOKEN_KINDS and (w[0].isalpha() or w[0] in "_#«"
                                                                           or not w[0].isascii()))
    return None


def judge_kernel_check(reply: ReplResponse) -> tuple[str, str] | None:
    """None when the kernel check said ok; else (status, detail)."""
    if reply.errors:
        data = reply.errors[0].data
        if data.startswith("jury-check: kernel replay failed"):
            return "replay_failed", data
        if data.startswith("jury-check:"):
            return "statement_mismatch", data
        return "check_unavailable", ("the kernel check did not run (does the header import Lean? "
                                     f"else set kernel_checks=False): {data}")
    if any(m.severity == "info" and m.data.startswith(CHECK_OK) for m in reply.messages):
        return None
    return "check_unavailable", "no answer from the kernel check"


def judge(replies: Sequence[ReplResponse], target: str = THEOREM_NAME) -> tuple[str, str]:
    """(status, detail) for the replies to proof_chain's commands."""
    ref, proof, axioms, same = replies[:4]
    failed = next((r.error for r in replies if r.error), None)
    if failed:
        return "lean_error", f"REPL: {failed}"
    if ref.errors:
        return "statement_error", ref.errors[0].data
    if proof.errors:
        return "lean_error", proof.errors[0].data
    if proof.sorries or any(m.severity == "warning" and _SORRY_WARNING in m.data for m in proof.messages):
        return "sorry", "proof contains sorry"
    used = parse_axioms(axioms, target)
    if used is None:
        return "bad_axioms", "no answer from #print axioms: " + "; ".join(m.data for m in axioms.messages)
    if used - ALLOWED_AXIOMS:
        return "bad_axioms", "uses " + ", ".join(sorted(used - ALLOWED_AXIOMS))
    if same.errors:
        return "statement_mismatch", same.errors[0].data
    if len(replies) > 4:
        kernel = judge_kernel_check(replies[4])
        if kernel is not None:
            return kernel
    return "proved", ""


# ---------------------------------------------------------------- the checker
class ProofChecker:
    """Screen, run and judge proofs; thread-safe (the backend serialises per process)."""

    def __init__(self, backend: LeanBackend, header: str, *, timeout_s: float, cache_size: int = 100_000,
                 kernel_checks: bool = True, command_table: bool = True):
        self.backend = backend
        self.header = header
        self.timeout_s = timeout_s
        self.kernel_checks = kernel_checks
        self.cache: LruCache[str, ProofVerdict] = LruCache(cache_size)
        # None: not asked yet; frozenset(): Lean could not say, the screen's own lists only
        self._commands: frozenset[str] | None = None if command_table else frozenset()
        self._commands_lock = threading.Lock()

    def environment_commands(self) -> frozenset[str]:
        """The header environment's command words, asked of Lean on first use. A timeout or
        crash propagates (asked again next time); an answer without the table is kept empty."""
        with self._commands_lock:
            if self._commands is None:
                reply = self.backend.run_chain([COMMAND_TABLE], timeout_s=self.timeout_s)[0]
                table = parse_command_table(reply)
                if table is None:
                    log.warning("the header environment did not list its commands (%s); the screen uses its own "
                                "lists only", (reply.error or "; ".join(m.data for m in reply.messages))[:200])
                self._commands = table or frozenset()
            return self._commands

    def _screen(self, statement: str, submission: str) -> tuple[str | None, str | None, str]:
        """(why the statement or file is refused, the target's full name, the `end` lines closing
        what the file leaves open), with the environment's command words; until Lean was asked for
        them, the screen's own lists first, so a file they refuse costs no query."""
        environment = self._commands
        if environment is None:
            refused, screened = screen(signature_of(statement)), screen_file(submission)
            if refused is not None or screened.reason is not None:
                return refused or screened.reason, None, ""
            environment = self.environment_commands()
        refused, screened = screen(signature_of(statement), environment), screen_file(submission, environment)
        return refused or screened.reason, screened.target, screened.closers

    def check(self, statement: str, proof_file: str) -> ProofVerdict:
        """statement: "theorem test_problem <signature>" as extract_statement wrote it;
        proof_file: the prover's Lean file (extract_proof_file), header imports allowed."""
        submission = strip_header_imports(normalize_newlines(proof_file), self.header).strip("\n")
        try:
            refused, target, closers = self._screen(statement, submission)
        except (LeanTimeout, LeanCrash) as e:
            return ProofVerdict("timeout" if isinstance(e, LeanTimeout) else "crash", f"command table: {e}")
        if refused is not None:
            return ProofVerdict("screened", refused)
        if closers:
            submission = f"{submission}\n{closers}"
        key = digest(self.backend.identity, self.header, statement, submission, str(self.kernel_checks))
        hit = self.cache.get(key)
        if hit is not None:
            return ProofVerdict(hit.status, hit.detail, 0.0, cached=True)
        chain = proof_chain(statement, submission, target, kernel_checks=self.kernel_checks)
        verdict = self._run(chain, lambda replies: judge(replies, target))
        if verdict.status not in ("timeout", "crash"):
            self.cache.put(key, verdict)
        return verdict

    def check_body(self, statement: str, body: str) -> ProofVerdict:
        """A bare proof body (the text after the statement's `:=`) as a one-theorem file."""
        return self.check(statement, f"{statement} :={body}")

    def elaborates(self, statement: str) -> ProofVerdict:
        """Whether the statement alone elaborates (a formalization Lean cannot read is useless).
        Its signature is screened first: it reaches Lean as the reference axiom."""
        key = digest(self.backend.identity, self.header, statement)
        hit = self.cache.get(key)
        if hit is not None:
            return ProofVerdict(hit.status, hit.detail, 0.0, cached=True)
        try:
            refused = screen(signature_of(statement)) or screen(signature_of(statement), self.environment_commands())
        except (LeanTimeout, LeanCrash) as e:
            return ProofVerdict("timeout" if isinstance(e, LeanTimeout) else "crash", f"command table: {e}")
        if refused is not None:
            return ProofVerdict("statement_error", f"screened: {refused}")

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
