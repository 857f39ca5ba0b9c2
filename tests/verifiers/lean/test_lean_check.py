"""Proof verdicts against the protocol double: the verifier's own chain decides, the proof
text cannot; caching; and the kimina backend through a local HTTP server."""
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
from jury.verifiers.lean.repl import (LeanMessage, LeanReplConfig, LeanTimeout, ReplPool,
                                      ReplResponse)

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


def verdict_of_chain(backend, statement, body):
    """The judgement of an unscreened body: what Lean and the checks alone would say."""
    return judge(backend.run_chain(proof_chain(statement, body), timeout_s=10))


def test_honest_proof_is_proved_then_cached(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=10)
    first = checker.check(STATEMENT, " by\n  subst h₀\n  norm_num")
    assert first.status == "proved" and not first.cached and first.lean_s > 0
    again = checker.check(STATEMENT, " by\n  subst h₀\n  norm_num")
    assert again.status == "proved" and again.cached and backend.chains == 1


def test_screened_bodies_never_reach_lean(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=10)
    for body in (" by native_decide", " by sorry", " by norm_num\n#print axioms test_problem"):
        assert checker.check(STATEMENT, body).status == "screened"
    assert checker.check("theorem test_problem : sorry = 1", " by simp").status == "screened"
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
    chain = proof_chain(STATEMENT, " by norm_num")
    chain[1] = "theorem test_problem : True := by simp"
    assert judge(backend.run_chain(chain, timeout_s=10))[0] == "statement_mismatch"


def test_statement_that_does_not_elaborate(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=10)
    bad = "theorem test_problem (x : ℕ) : x = ill_typed"
    assert checker.elaborates(bad).status == "statement_error"
    assert checker.elaborates(STATEMENT).status == "elaborates"
    assert checker.check(bad, " by simp").status == "statement_error"


def test_timeouts_and_crashes_are_verdicts_and_not_cached(backend):
    checker = ProofChecker(backend, HEADER, timeout_s=1.0)
    assert checker.check(STATEMENT, " by DOUBLE_HANG").status == "timeout"
    assert checker.check(STATEMENT, " by DOUBLE_HANG").status == "timeout"
    crash = checker.check(STATEMENT, " by DOUBLE_CRASH")
    assert crash.status == "crash" and "PANIC" in crash.detail
    assert backend.chains == 3
    assert checker.check(STATEMENT, " by norm_num").status == "proved"  # restarted


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
    replies = kimina.run_chain(proof_chain(STATEMENT, " by\n  subst h₀\n  norm_num"), timeout_s=10)
    assert [len(r.messages) for r in replies] == [0, 0, 1, 0]
    assert judge(replies) == ("proved", "")
    assert judge(kimina.run_chain(proof_chain(STATEMENT, " by\n  sorry"), timeout_s=10))[0] == "sorry"
    assert judge(kimina.run_chain(proof_chain(STATEMENT, " by native_decide"), timeout_s=10))[0] == "bad_axioms"
    with pytest.raises(LeanTimeout):
        kimina.run_chain(proof_chain(STATEMENT, " by DOUBLE_HANG"), timeout_s=1)
    assert ProofChecker(kimina, HEADER, timeout_s=10).check(STATEMENT, " by norm_num").status == "proved"
