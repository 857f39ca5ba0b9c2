"""LeanDojo as a Lean backend, for users who already have a traced Lean repository.

Two uses, both behind the same screen and checks as the REPL path:

  - whole-proof checks: LeanDojo's command mode, `Dojo((repo, file, line))`, is a REPL
    over command states; `run_cmd(state, cmd)` answers `CommandState(id, message)` (the
    non-error messages, printed one after another) or `LeanError(error)` (the errors).
    LeanDojoBackend.run_chain runs the checker's chain there, state after state, so
    ProofChecker works on it unchanged (check.py: axioms, elaborated type, kernel replay).
  - tactic-by-tactic replay: tactic mode, `Dojo(Theorem(repo, file, name))`, runs one
    tactic at a time on a theorem of the traced repository and reports each new goal
    state: what a prover role searching step by step, or DeRL's forbidden-tactic reward
    (the tactics that actually ran), consumes. Each tactic is screened first; a proof
    that LeanDojo reports finished is only trusted after the whole-proof check.

lean_dojo is imported on first use (`pip install lean-dojo`); tests pass an object with
the same names (LeanGitRepo, Theorem, Dojo, CommandState, TacticState, ProofFinished,
ProofGivenUp, LeanError, DojoTacticTimeoutError, DojoCrashError, DojoInitError).

    backend = LeanDojoBackend("https://github.com/me/proofs", "abc123", "Proofs/Header.lean", 3)
    checker = ProofChecker(backend, header="", timeout_s=120)
    replay = replay_tactics(backend, "Proofs/Basic.lean", "Proofs.foo", ["intro n", "simp"])
"""
from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

from jury.verifiers.lean.repl import LeanCrash, LeanMessage, LeanStartupError, LeanTimeout, ReplResponse
from jury.verifiers.lean.screen import screen

_SORRY_WARNING = "declaration uses 'sorry'"


def import_lean_dojo() -> Any:
    try:
        import lean_dojo
    except ImportError as e:
        raise LeanStartupError("LeanGateConfig.backend=leandojo needs `pip install lean-dojo`") from e
    return lean_dojo


def _new_part(text: str, before: str) -> str:
    """What a reply adds to the previous one: Lean's command state keeps earlier messages."""
    text, before = text or "", before or ""
    return text[len(before):].strip("\n") if before and text.startswith(before) else text.strip("\n")


class LeanDojoBackend:
    """A LeanBackend on LeanDojo's command mode; one Dojo process, used by one caller at a time."""

    def __init__(self, repo: str, commit: str, file: str, line: int, *, api: Any = None):
        self.repo, self.commit, self.file, self.line = repo, commit, file, line
        self.identity = json.dumps(["leandojo", repo, commit, file, line])
        self._api = api
        self._lock = threading.Lock()
        self._ctx: Any = None
        self._dojo: Any = None
        self._state0: Any = None

    @property
    def api(self) -> Any:
        if self._api is None:
            self._api = import_lean_dojo()
        return self._api

    def git_repo(self) -> Any:
        return self.api.LeanGitRepo(self.repo, self.commit)

    def _start(self, timeout_s: float) -> None:
        try:
            self._ctx = self.api.Dojo((self.git_repo(), self.file, self.line), timeout=math.ceil(timeout_s))
            self._dojo, self._state0 = self._ctx.__enter__()
        except self.api.DojoInitError as e:
            self._ctx = None
            raise LeanStartupError(f"LeanDojo could not start at {self.file}:{self.line}: {e}") from e

    def _stop(self) -> None:
        if self._ctx is not None:
            try:
                self._ctx.__exit__(None, None, None)
            finally:
                self._ctx = self._dojo = self._state0 = None

    def run_chain(self, cmds: Sequence[str], *, timeout_s: float) -> list[ReplResponse]:
        """Each command in the state its predecessor left; an error repeats for the rest,
        since LeanDojo hands back no state after an error (any error refuses the proof)."""
        api = self.api
        with self._lock:
            if self._ctx is None:
                self._start(timeout_s)
            out: list[ReplResponse] = []
            state, said, erred = self._state0, "", ""
            try:
                for cmd in cmds:
                    if state is None:
                        out.append(out[-1])
                        continue
                    res = self._dojo.run_cmd(state, cmd)
                    if isinstance(res, api.LeanError):
                        errors = _new_part(res.error, erred)
                        out.append(ReplResponse(env=None, messages=(LeanMessage("error", errors, 1, 0),)))
                        state = None
                        continue
                    message = _new_part(res.message or "", said)
                    said = res.message or said
                    out.append(ReplResponse(env=res.id, messages=_messages(message)))
                    state = res
            except api.DojoTacticTimeoutError as e:
                self._stop()
                raise LeanTimeout(f"LeanDojo: no answer in {timeout_s:.0f} s") from e
            except (api.DojoCrashError, EOFError) as e:
                self._stop()
                raise LeanCrash(f"LeanDojo crashed: {e}") from e
            return out

    def close(self) -> None:
        with self._lock:
            self._stop()


def _messages(text: str) -> tuple[LeanMessage, ...]:
    """LeanDojo prints non-error messages without their severity: the sorry warning is
    recognised by its text, everything else counts as info (the judge reads info only
    from the verifier's own commands)."""
    if not text:
        return ()
    severity = "warning" if _SORRY_WARNING in text else "info"
    return (LeanMessage(severity, text, 1, 0),)


# ---------------------------------------------------------------- tactic-by-tactic replay
@dataclass
class TacticStep:
    tactic: str
    outcome: str   # state | finished | error | given_up | screened
    detail: str    # the goals after it, or the error


@dataclass
class TacticReplay:
    steps: list[TacticStep] = field(default_factory=list)
    finished: bool = False  # LeanDojo found no goals left and its own checks passed

    @property
    def tactics_run(self) -> list[str]:
        """The tactics Lean accepted, in order (DeRL's syntax_tactics input)."""
        return [s.tactic for s in self.steps if s.outcome in ("state", "finished")]


def replay_tactics(backend: LeanDojoBackend, file: str, theorem: str, tactics: Sequence[str], *,
                   timeout_s: float = 60) -> TacticReplay:
    """Run tactics one by one on a theorem of the traced repository; stop at the first
    refusal, error or finished proof. A finished replay is evidence for a prover's search,
    not a verdict: the whole proof still goes through ProofChecker."""
    api = backend.api
    replay = TacticReplay()
    entry = api.Theorem(backend.git_repo(), file, theorem)
    try:
        with api.Dojo(entry, timeout=math.ceil(timeout_s)) as (dojo, state):
            for tactic in tactics:
                refused = screen(tactic)
                if refused is not None:
                    replay.steps.append(TacticStep(tactic, "screened", refused))
                    break
                res = dojo.run_tac(state, tactic)
                if isinstance(res, api.ProofFinished):
                    replay.steps.append(TacticStep(tactic, "finished", ""))
                    replay.finished = True
                    break
                if isinstance(res, api.LeanError):
                    replay.steps.append(TacticStep(tactic, "error", res.error))
                    break
                if isinstance(res, api.ProofGivenUp):
                    replay.steps.append(TacticStep(tactic, "given_up", "proof contains sorry"))
                    break
                replay.steps.append(TacticStep(tactic, "state", res.pp))
                state = res
    except api.DojoTacticTimeoutError as e:
        raise LeanTimeout(f"LeanDojo: tactic ran past {timeout_s:.0f} s") from e
    except (api.DojoCrashError, EOFError) as e:
        raise LeanCrash(f"LeanDojo crashed: {e}") from e
    return replay
