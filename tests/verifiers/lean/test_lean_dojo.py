"""The LeanDojo backend's adapter against a small fake of LeanDojo's documented API
(lean_dojo 4.x: Dojo, LeanGitRepo, Theorem, CommandState, TacticState, ProofFinished,
ProofGivenUp, LeanError and its exceptions). The fake's command mode runs the REPL
double, answering as LeanDojo's Lean4Repl does: errors joined into `error`, every other
message printed, the command state keeping the messages of earlier commands. A real
LeanDojo runs in test_lean_real.py."""
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from jury.protocol.config import LeanGateConfig
from jury.verifiers.lean.backends import load_gate_backend
from jury.verifiers.lean.check import ProofChecker, judge, proof_chain
from jury.verifiers.lean.dojo import LeanDojoBackend, replay_tactics
from jury.verifiers.lean.repl import LeanTimeout

DOUBLE = Path(__file__).with_name("lean_repl_double.py")
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
STATEMENT = "theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4"


class FakeLeanDojo:
    """The names lean_dojo exports that the backend uses, with the same fields."""

    @dataclass(frozen=True)
    class CommandState:
        id: int
        message: str | None = None

    @dataclass(frozen=True)
    class TacticState:
        pp: str
        id: int
        message: str | None = None

    @dataclass(frozen=True)
    class ProofFinished:
        tactic_state_id: int
        message: str | None = None

    @dataclass(frozen=True)
    class ProofGivenUp:
        pass

    @dataclass(frozen=True)
    class LeanError:
        error: str

    class DojoTacticTimeoutError(Exception):
        pass

    class DojoCrashError(Exception):
        pass

    class DojoInitError(Exception):
        pass

    @dataclass(frozen=True)
    class LeanGitRepo:
        url: str
        commit: str

    @dataclass(frozen=True)
    class Theorem:
        repo: object
        file_path: str
        full_name: str

    def __init__(self):
        self.started = 0
        api = self

        class Dojo:
            def __init__(self, entry, timeout=600, additional_imports=(), build_deps=True):
                self.entry, self.timeout = entry, timeout

            def __enter__(self):
                api.started += 1
                if isinstance(self.entry, api.Theorem):
                    self.goal = f"x : ℕ\n⊢ {self.entry.full_name}"
                    return self, api.TacticState(self.goal, 0)
                self.proc = subprocess.Popen([sys.executable, str(DOUBLE)], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, text=True)
                self.seen, self.envs = {0: ""}, {0: self._send({"cmd": HEADER})["env"]}
                return self, api.CommandState(0)

            def __exit__(self, *exc):
                if hasattr(self, "proc"):
                    self.proc.kill()
                    self.proc.wait()

            def _send(self, request):
                self.proc.stdin.write(json.dumps(request) + "\n\n")
                self.proc.stdin.flush()
                lines = []
                while (line := self.proc.stdout.readline()).strip():
                    lines.append(line)
                return json.loads("".join(lines))

            def run_cmd(self, state, command):
                if "DOUBLE_HANG" in command:
                    raise api.DojoTacticTimeoutError()
                reply = self._send({"cmd": command, "env": self.envs[state.id]})
                errors = [m["data"] for m in reply.get("messages", []) if m["severity"] == "error"]
                if errors:
                    return api.LeanError("\n".join(errors))
                printed = "\n".join(m["data"].strip() for m in reply.get("messages", []))
                sid = len(self.envs)
                self.envs[sid] = reply["env"]
                # Lean4Repl prints the command state's messages, earlier commands' included
                self.seen[sid] = "\n".join(p for p in (self.seen[state.id], printed) if p)
                return api.CommandState(sid, self.seen[sid] or None)

            def run_tac(self, state, tactic):
                if "sorry" in tactic:
                    return api.ProofGivenUp()
                if tactic.startswith("fail"):
                    return api.LeanError("unknown tactic")
                if tactic in ("simp", "omega", "norm_num"):
                    return api.ProofFinished(state.id + 1)
                return api.TacticState(self.goal, state.id + 1)

        self.Dojo = Dojo


@pytest.fixture
def dojo():
    backend = LeanDojoBackend("https://example.org/proofs", "abc123", "Proofs/Header.lean", 4, api=FakeLeanDojo())
    yield backend
    backend.close()


def test_whole_proof_checks_through_leandojo(dojo):
    checker = ProofChecker(dojo, HEADER, timeout_s=10)
    assert checker.check_body(STATEMENT, " by\n  subst h₀\n  norm_num").status == "proved"
    assert checker.check_body(STATEMENT, " by native_decide").status == "screened"
    helper = f"lemma four : (2 : ℕ) + 2 = 4 := by norm_num\n{STATEMENT} := by\n  subst h₀\n  exact four"
    assert checker.check(STATEMENT, helper).status == "proved"


def test_what_leandojo_and_the_checks_say_without_the_screen(dojo):
    def verdict(body):
        return judge(dojo.run_chain(proof_chain(STATEMENT, f"{STATEMENT} :={body}", "test_problem"), timeout_s=10))
    assert verdict(" by\n  sorry")[0] == "sorry"  # a warning: recognised by its text
    assert verdict(" by native_decide") == ("bad_axioms", "uses Lean.ofReduceBool")
    assert verdict(" by\n  skip_everything")[0] == "lean_error"
    # the accumulated messages of earlier commands are not read as this command's
    replies = dojo.run_chain(proof_chain(STATEMENT, f"{STATEMENT} := by\n  subst h₀\n  norm_num", "test_problem"),
                             timeout_s=10)
    assert [len(r.messages) for r in replies] == [0, 0, 1, 0, 1]


def test_timeout_restarts_the_dojo(dojo):
    checker = ProofChecker(dojo, HEADER, timeout_s=5)
    assert checker.check_body(STATEMENT, " by\n  DOUBLE_HANG\n  norm_num").status == "timeout"
    with pytest.raises(LeanTimeout):
        dojo.run_chain(["theorem t : True := by DOUBLE_HANG"], timeout_s=5)
    assert checker.check_body(STATEMENT, " by omega").status == "proved"
    assert dojo.api.started == 3


def test_tactic_replay_screens_each_tactic(dojo):
    replay = replay_tactics(dojo, "Proofs/Basic.lean", "Proofs.foo", ["intro n", "simp", "never reached"])
    assert replay.finished and replay.tactics_run == ["intro n", "simp"]
    assert [s.outcome for s in replay.steps] == ["state", "finished"]
    replay = replay_tactics(dojo, "Proofs/Basic.lean", "Proofs.foo", ["intro n", "native_decide"])
    assert not replay.finished and replay.steps[-1].outcome == "screened"
    assert replay_tactics(dojo, "Proofs/Basic.lean", "Proofs.foo", ["fail"]).steps[0].outcome == "error"


def test_config_picks_leandojo_and_imports_it_lazily():
    cfg = LeanGateConfig(backend="leandojo", leandojo_repo="https://example.org/p", leandojo_file="P.lean",
                         leandojo_line=3)
    backend = load_gate_backend(cfg)
    assert isinstance(backend, LeanDojoBackend) and backend._api is None
    with pytest.raises(ValueError, match="leandojo_repo"):
        LeanGateConfig(backend="leandojo")
    with pytest.raises(ValueError, match="backend"):
        LeanGateConfig(backend="coq")
