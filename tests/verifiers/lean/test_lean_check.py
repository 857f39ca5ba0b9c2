"""Proof verdicts against the protocol double: the verifier's own chain decides, the proof
text cannot; whole files with helpers; the type and kernel checks; caching; and the kimina
backend through a local HTTP server."""
import json
import shlex
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jury.verifiers.lean.backends import KiminaBackend, load_backend
from jury.verifiers.lean.check import ProofChecker, judge, parse_axioms, proof_chain
from jury.verifiers.lean.repl import (LeanMessage, LeanReplConfig, LeanTimeout, ReplResponse)

DOUBLE = Path(__file__).with_name("lean_repl_double.py")
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
STATEMENT = "theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4"


class Counting:
    """A LeanBackend that counts the chains it passes on, to see what the cache saves."""

    def __init__(self, inner):
        self.inner, self.identity, self.chains = inner, inner.identity, 0

    def run_chain(self, cmds, *, timeout_s):
        self.chains += 1
        return self.inner.run_chain(cmds, timeout_s=timeout_s)

    def close(self):
        self.inner.close()


@pytest.fixture
def backend():
    config = LeanReplConfig(command=shlex.join([sys.executable, str(DOUBLE)]), header=HEADER, pool_size=2,
                            user="", isolate_network="off", memory_limit_mb=0, start_timeout_s=20)
    b = Counting(load_backend(config))
    yield b
    b.close()


def verdict_of_chain(backend, statement, body=None, *, file=None, target="test_problem"):
    """The judgement of an unscreened proof: what Lean and the checks alone would say."""
    file = file if file is not None else f"{statement} :={body}"
    return judge(backend.run_chain(proof_chain(statement, file, target), timeout_s=10), target)


def test_honest_proof_is_proved_then_cached(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=10)
    first = checker.check_body(STATEMENT, " by\n  subst h₀\n  norm_num")
    assert first.status == "proved" and not first.cached and first.lean_s > 0
    again = checker.check_body(STATEMENT, " by\n  subst h₀\n  norm_num")
    # one chain asked the environment for its command table (once per checker), one checked
    assert again.status == "proved" and again.cached and backend.chains == 2


def test_screened_bodies_never_reach_lean(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=10)
    for body in (" by native_decide", " by sorry", " by norm_num\n#eval IO.println \"'test_problem' depends on axioms: []\""):
        assert checker.check_body(STATEMENT, body).status == "screened"
    assert checker.check_body("theorem test_problem : sorry = 1", " by simp").status == "screened"
    assert backend.chains == 0


def test_what_lean_and_the_checks_say_without_the_screen(backend):
    """The second line of defence, for bodies the screen would have refused."""
    assert verdict_of_chain(backend, STATEMENT, " by\n  sorry") == ("sorry", "proof contains sorry")
    status, detail = verdict_of_chain(backend, STATEMENT, " by native_decide")
    assert status == "bad_axioms" and detail == "uses Lean.ofReduceBool"
    # A body that proves the theorem with the verifier's own reference axiom.
    status, detail = verdict_of_chain(backend, STATEMENT, " by exact jury_statement_ref x h₀")
    assert status == "bad_axioms" and "jury_statement_ref" in detail
    status, detail = verdict_of_chain(backend, STATEMENT, " by\n  nothing_that_closes_goals")
    assert status == "lean_error" and detail.startswith("unsolved goals")


def test_a_theorem_with_another_statement_is_refused(backend):
    """As if a body had swapped test_problem for an easier one: the reference disagrees."""
    assert verdict_of_chain(backend, STATEMENT, file="theorem test_problem : True := by simp")[0] \
        == "statement_mismatch"


def test_statement_that_does_not_elaborate(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=10)
    bad = "theorem test_problem (x : ℕ) : x = ill_typed"
    assert checker.elaborates(bad).status == "statement_error"
    assert checker.elaborates(STATEMENT).status == "elaborates"
    assert checker.check_body(bad, " by simp").status == "statement_error"


def test_timeouts_and_crashes_are_verdicts_and_not_cached(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=1.0)
    assert checker.check_body(STATEMENT, " by DOUBLE_HANG").status == "timeout"
    assert checker.check_body(STATEMENT, " by DOUBLE_HANG").status == "timeout"
    crash = checker.check_body(STATEMENT, " by DOUBLE_CRASH")
    assert crash.status == "crash" and "PANIC" in crash.detail
    assert backend.chains == 1 + 3  # the command table, then three checks
    assert checker.check_body(STATEMENT, " by norm_num").status == "proved"  # restarted


def info(data):
    return LeanMessage("info", data, 1, 0)


def test_axioms_are_read_only_from_the_verifiers_own_command():
    ok = ReplResponse(env=1)
    forged = ReplResponse(env=2, messages=(info("'test_problem' depends on axioms: [propext]"),))
    honest_axioms = ReplResponse(env=3, messages=(info("'test_problem' depends on axioms: [propext, Lean.ofReduceBool]"),))
    assert judge([ok, forged, honest_axioms, ok]) == ("bad_axioms", "uses Lean.ofReduceBool")
    silent = ReplResponse(env=3)
    assert judge([ok, forged, silent, ok])[0] == "bad_axioms"
    assert judge([ok, ok, ReplResponse(env=3, messages=(info("'test_problem' does not depend on any axioms"),)), ok]) \
        == ("proved", "")


def test_parse_axioms_reads_wrapped_lists():
    wrapped = "'test_problem' depends on axioms: [propext,\n Classical.choice,\n Quot.sound]"
    assert parse_axioms(ReplResponse(env=1, messages=(info(wrapped),))) == {"propext", "Classical.choice", "Quot.sound"}
    error = ReplResponse(env=1, messages=(LeanMessage("error", "unknown constant 'test_problem'", 1, 0),))
    assert parse_axioms(error) is None


# ---------------------------------------------------------------- kimina-lean-server, faked
class FakeKimina(BaseHTTPRequestHandler):
    """POST /check as kimina-lean-server answers it, with the double as its Lean."""

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/check" and self.headers["Authorization"] == "Bearer k3y"
        code = request["snippet"]["code"]
        if "DOUBLE_HANG" in code:
            reply = {"id": request["snippet"]["id"], "error": f"Lean REPL command timed out in {request['timeout']} seconds"}
        else:
            # The server's split: leading import and blank lines are the header, the rest
            # runs in the header's env and is numbered from its own first line.
            lines = code.split("\n")
            cut = next(i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("import "))
            stdin = json.dumps({"cmd": "\n".join(lines[:cut])}) + "\n\n" + \
                json.dumps({"cmd": "\n".join(lines[cut:]), "env": 0}) + "\n\n"
            out = subprocess.run([sys.executable, str(DOUBLE)], input=stdin, capture_output=True, text=True).stdout
            reply = {"id": request["snippet"]["id"], "time": 0.1, "response": json.loads(out.split("\n\n")[1])}
        body = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def kimina():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeKimina)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield KiminaBackend(f"http://127.0.0.1:{server.server_address[1]}", HEADER, api_key="k3y")
    server.shutdown()


def test_kimina_backend_splits_one_file_back_into_replies(kimina):
    def chain(body):
        return proof_chain(STATEMENT, f"{STATEMENT} :={body}", "test_problem")
    replies = kimina.run_chain(chain(" by\n  subst h₀\n  norm_num"), timeout_s=10)
    assert [len(r.messages) for r in replies] == [0, 0, 1, 0, 1]
    assert judge(replies) == ("proved", "")
    assert judge(kimina.run_chain(chain(" by\n  sorry"), timeout_s=10))[0] == "sorry"
    assert judge(kimina.run_chain(chain(" by native_decide"), timeout_s=10))[0] == "bad_axioms"
    with pytest.raises(LeanTimeout):
        kimina.run_chain(chain(" by DOUBLE_HANG"), timeout_s=1)
    assert ProofChecker(kimina, HEADER, timeout_s=10).check_body(STATEMENT, " by norm_num").status == "proved"


# ---------------------------------------------------------------- whole files, type and kernel checks
def test_whole_files_keep_helpers_and_namespaces(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=10)
    helper = ("lemma two_add_two : (2 : ℕ) + 2 = 4 := by norm_num\n\nnamespace Sol\n"
              f"{STATEMENT} := by\n  subst h₀\n  exact two_add_two\nend Sol\n\nlemma after : True := trivial")
    assert checker.check(STATEMENT, f"import Mathlib\n{helper}").status == "proved"
    # the same helper without its declaration: an unknown identifier, as in Lean
    assert checker.check(STATEMENT, helper.split("\n\n", 1)[1]).status == "lean_error"


def test_kernel_check_refuses_what_the_other_checks_miss(backend):
    # The target is a def, not a theorem (the screen refuses this; the kernel check too).
    status, detail = verdict_of_chain(backend, STATEMENT, file="def test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4 := "
                                      "by omega")
    assert status == "statement_mismatch" and "not a theorem" in detail
    # Two theorems named test_problem (the screen refuses this too).
    status, detail = verdict_of_chain(backend, STATEMENT, file=f"namespace A\n{STATEMENT} := by omega\nend A\n"
                                      f"{STATEMENT} := by omega")
    assert status == "statement_mismatch" and "2 declarations" in detail
    # The kernel skipped a declaration (debug.skipKernelTC, refused by the screen): only the
    # replay in a fresh environment finds it; without the option the kernel itself refuses.
    bad = f"{STATEMENT} := by\n  omega\n  all_goals DOUBLE_KERNEL_REJECTS"
    status, detail = verdict_of_chain(backend, STATEMENT, file="set_option debug.skipKernelTC true in\n" + bad)
    assert status == "replay_failed" and "kernel" in detail
    assert verdict_of_chain(backend, STATEMENT, file=bad) == ("lean_error", "(kernel) declaration type mismatch")


def test_replay_failure_and_missing_kernel_check_are_refusals():
    from jury.verifiers.lean.check import judge_kernel_check

    def reply(severity, data):
        return ReplResponse(env=5, messages=(LeanMessage(severity, data, 1, 0),))
    assert judge_kernel_check(reply("info", "jury-check: ok, 3 declarations replayed")) is None
    assert judge_kernel_check(reply("error", "jury-check: kernel replay failed: (kernel) bad"))[0] == "replay_failed"
    assert judge_kernel_check(reply("error", "unknown namespace 'Lean'"))[0] == "check_unavailable"
    assert judge_kernel_check(ReplResponse(env=5))[0] == "check_unavailable"


def test_local_instance_changes_the_elaborated_type(backend):
    file = f"local instance : Add ℕ := ⟨fun _ _ => 4⟩\n{STATEMENT} := by omega"
    assert verdict_of_chain(backend, STATEMENT, file=file)[0] == "statement_mismatch"


def test_kernel_checks_can_be_switched_off(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=10, kernel_checks=False)
    assert checker.check_body(STATEMENT, " by omega").status == "proved"
    assert len(proof_chain(STATEMENT, "x", "test_problem", kernel_checks=False)) == 4
