"""The checks the double stands in for, against a real Lean REPL with Mathlib.

Found from $JURY_LEAN_CMD (e.g. "lake env repl", run in $JURY_LEAN_CWD, a Mathlib
project), else `repl` on PATH, else `lake` on PATH with $JURY_LEAN_CWD set; skipped when
none is found or an auto-discovered one cannot import the header ($JURY_LEAN_HEADER,
default: Mathlib). An explicit $JURY_LEAN_CMD that fails to start fails the tests.
"""
import os
import shutil

import pytest

from jury.verifiers.lean.check import ProofChecker, judge, proof_chain
from jury.verifiers.lean.gate import LeanGate, LeanGateConfig
from jury.verifiers.lean.repl import DEFAULT_HEADER, LeanReplConfig, LeanStartupError, ReplPool
from jury.verifiers.llm import Completion

pytestmark = pytest.mark.lean

STATEMENT = "theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4"
CLOSED = "theorem test_problem : (2:ℕ) + 2 = 4"
HONEST = " by\n  subst h₀\n  norm_num"


def discover() -> tuple[str, str, bool] | None:
    """(command, cwd, explicit) or None."""
    cwd = os.environ.get("JURY_LEAN_CWD", "")
    if os.environ.get("JURY_LEAN_CMD"):
        return os.environ["JURY_LEAN_CMD"], cwd, True
    if shutil.which("repl"):
        return "repl", cwd, False
    if shutil.which("lake") and cwd:
        return "lake env repl", cwd, False
    return None


@pytest.fixture(scope="module")
def lean():
    found = discover()
    if found is None:
        pytest.skip("no Lean REPL: set JURY_LEAN_CMD (and JURY_LEAN_CWD) or put `repl` on PATH")
    command, cwd, explicit = found
    config = LeanReplConfig(command=command, cwd=cwd, pool_size=2, start_timeout_s=900,
                            header=os.environ.get("JURY_LEAN_HEADER", DEFAULT_HEADER))
    pool = ReplPool(config)
    try:
        pool.start()
    except LeanStartupError as e:
        pool.close()
        if explicit:
            raise
        pytest.skip(f"discovered {command} cannot import the header: {e}")
    yield pool
    pool.close()


def verdict(lean, statement, body, timeout_s=300):
    return judge(lean.run_chain(proof_chain(statement, body), timeout_s=timeout_s))[0]


def test_honest_proof_is_proved(lean):
    assert ProofChecker(lean, lean.config.header, timeout_s=300).check(STATEMENT, HONEST).status == "proved"


def test_sorry_and_errors_are_refused(lean):
    assert verdict(lean, STATEMENT, " by\n  sorry") == "sorry"
    assert verdict(lean, STATEMENT, " by\n  skip_everything") == "lean_error"
    # Inside the verifier's parentheses, a command after the proof is a parse error.
    assert verdict(lean, STATEMENT, HONEST + "\nexample : True := trivial") == "lean_error"


def test_axioms_beyond_the_standard_three_are_refused(lean):
    assert verdict(lean, CLOSED, " by native_decide") == "bad_axioms"
    assert verdict(lean, STATEMENT, " by exact jury_statement_ref x h₀") == "bad_axioms"


def test_another_statement_is_refused(lean):
    chain = proof_chain(STATEMENT, HONEST)
    chain[1] = "theorem test_problem : True := by simp"
    assert judge(lean.run_chain(chain, timeout_s=300))[0] == "statement_mismatch"


def test_statement_elaboration(lean):
    checker = ProofChecker(lean, lean.config.header, timeout_s=300)
    assert checker.elaborates(STATEMENT).status == "elaborates"
    assert checker.elaborates("theorem test_problem (x : ℕ) : x = (ill_typed : ℕ → ℕ)").status == "statement_error"


def test_timeout_kills_and_restarts(lean):
    checker = ProofChecker(lean, lean.config.header, timeout_s=5)
    assert checker.check(CLOSED, " by\n  sleep 100000\n  norm_num").status == "timeout"
    assert ProofChecker(lean, lean.config.header, timeout_s=300).check(STATEMENT, HONEST).status == "proved"


class Fixed:
    """An LLMClient that always answers text."""

    def __init__(self, text):
        self.text = text

    def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
        return [[Completion(self.text, 1) for _ in range(n)] for _ in prompts]


def test_gate_end_to_end(lean):
    cfg = LeanGateConfig(lean=lean.config, num_statements=2, max_attempts=2, attempts_per_round=2)
    gate = LeanGate(cfg, formalizer=Fixed(f"```lean4\n{STATEMENT} := by sorry\n```"),
                    checker=Fixed("<consistency> Correct </consistency>"),
                    prover=Fixed(f"```lean4\n{STATEMENT} :={HONEST}\n```"), backend=lean)
    res = gate.verify("Let x = 2. Compute x + 2.", "4")
    assert res.proved and res.attempts == 1, res
