"""The checks the double stands in for, against a real Lean REPL with Mathlib.

Found from $JURY_LEAN_CMD (e.g. "lake env repl", run in $JURY_LEAN_CWD, a Mathlib
project), else `repl` on PATH, else `lake` on PATH with $JURY_LEAN_CWD set; skipped when
none is found or an auto-discovered one cannot import the header ($JURY_LEAN_HEADER,
default: Mathlib). An explicit $JURY_LEAN_CMD that fails to start fails the tests.

    JURY_LEAN_CMD="lake env repl" JURY_LEAN_CWD=~/mathlib-project \
        python3 -m pytest -m lean tests/verifiers/lean

LeanDojo: $JURY_LEANDOJO_REPO, $JURY_LEANDOJO_COMMIT, $JURY_LEANDOJO_FILE (a file whose
imports include Mathlib) and $JURY_LEANDOJO_LINE (the line after its imports).
"""
import os
import shutil
import sys
from pathlib import Path

import pytest

from jury.verifiers.lean.check import ProofChecker, judge, proof_chain
from jury.verifiers.lean.screen import extract_proof_file
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


sys.path.insert(0, str(Path(__file__).parent))
import cases  # noqa: E402
import test_lean_commands as commands_cases  # noqa: E402


def verdict(lean, statement, body=None, timeout_s=300, file=None, target="test_problem"):
    file = file if file is not None else f"{statement} :={body}"
    return judge(lean.run_chain(proof_chain(statement, file, target), timeout_s=timeout_s), target)[0]


def test_honest_proof_is_proved(lean):
    assert ProofChecker(lean, lean.config.header, timeout_s=300).check_body(STATEMENT, HONEST).status == "proved"


@pytest.mark.parametrize("name,statement,reply", cases.HONEST, ids=[c[0] for c in cases.HONEST])
def test_our_honest_proofs_are_proved(lean, name, statement, reply):
    v = ProofChecker(lean, lean.config.header, timeout_s=300).check(statement, extract_proof_file(reply))
    assert v.status == "proved", (name, v)


@pytest.mark.parametrize("name,statement,reply", cases.EXPLOITS, ids=[c[0] for c in cases.EXPLOITS])
def test_our_exploits_are_refused(lean, name, statement, reply):
    proof = extract_proof_file(reply)
    assert proof is None or not ProofChecker(lean, lean.config.header, timeout_s=300).check(statement, proof).proved


def test_kernel_check_answers_and_compares_elaborated_types(lean):
    replies = lean.run_chain(proof_chain(STATEMENT, f"{STATEMENT} :={HONEST}", "test_problem"), timeout_s=300)
    assert any(m.data.startswith("jury-check: ok") for m in replies[4].messages), replies[4]
    # definitionally equal (2 + 2 reduces to 4) but another expression: refused, as comparator does
    other = "theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 2 + 2 := by\n  subst h₀\n  norm_num"
    status = verdict(lean, STATEMENT, file=other)
    assert status == "statement_mismatch"


# ---------------------------------------------------------------- issue 26: lexing, commands, idioms
def errors_of(lean, *cmds):
    return [[m.data for m in r.errors] for r in lean.run_chain(list(cmds), timeout_s=300)]


def test_doc_comment_body_starts_after_the_comments_that_follow_the_opener(lean):
    # as lean_lexer_ref reads Term.lean's docComment: `-- -/` is a line comment, so the
    # doc comment ends on the next line, and the theorem after it is declared
    assert errors_of(lean, "/-- -- -/\nx -/\ntheorem jury_t26a : True := trivial", "#check jury_t26a") == [[], []]
    # a `/-` inside that line comment does not nest: the theorem is code, not comment
    assert errors_of(lean, "/-- -- /-\n-/\ntheorem jury_t26b : True := trivial\n-- -/", "#check jury_t26b") \
        == [[], []]


@pytest.mark.parametrize("cmd", [
    'def jury_n := 0xrun_cmd Lean.logInfo "jury-ran"',                 # Lean resumes after `0x`
    'def jury_s := "\\{\n#eval Lean.logInfo "jury-ran" -- "',      # and after an invalid escape
])
def test_after_a_lexing_error_lean_runs_what_follows(lean, cmd):
    """The threat the lexer's refusals answer: code inside what looked like a literal runs."""
    reply = lean.run_chain([cmd], timeout_s=300)[0]
    assert reply.errors and any("jury-ran" in m.data for m in reply.messages), reply


def test_the_environment_lists_its_commands(lean):
    table = ProofChecker(lean, lean.config.header, timeout_s=300).environment_commands()
    assert {"theorem", "lemma", "#eval", "run_cmd", "set_option"} <= table, sorted(table)[:50]


@pytest.mark.parametrize("name", sorted(commands_cases.IDIOMS))
def test_accepted_idioms_prove(lean, name):
    statement = commands_cases.ADD if name != "underscore names" else \
        "theorem test_problem (p q : Prop) (hq : q) : p → q"
    v = ProofChecker(lean, lean.config.header, timeout_s=300).check(statement, commands_cases.IDIOMS[name])
    assert v.status == "proved", (name, v)


@pytest.mark.parametrize("name", sorted(commands_cases.ABUSES))
def test_accepted_idioms_cannot_change_the_verdict(lean, name):
    file, _ = commands_cases.ABUSES[name]
    v = ProofChecker(lean, lean.config.header, timeout_s=300).check(commands_cases.FALSE, file)
    assert v.status not in ("proved", "screened"), (name, v)


def test_namespaced_target_and_helpers(lean):
    file = f"lemma four : (2 : ℕ) + 2 = 4 := by norm_num\nnamespace Sol\n{STATEMENT} := by\n  subst h₀\n  exact four\nend Sol"
    assert verdict(lean, STATEMENT, file=file, target="Sol.test_problem") == "proved"


def test_sorry_and_errors_are_refused(lean):
    assert verdict(lean, STATEMENT, " by\n  sorry") == "sorry"
    assert verdict(lean, STATEMENT, " by\n  skip_everything") == "lean_error"
    # the verifier's section: a file that leaves a namespace open is an error in Lean itself
    assert verdict(lean, STATEMENT, file=f"namespace A\n{STATEMENT} :={HONEST}", target="A.test_problem") == "lean_error"


def test_axioms_beyond_the_standard_three_are_refused(lean):
    assert verdict(lean, CLOSED, " by native_decide") == "bad_axioms"
    assert verdict(lean, STATEMENT, " by exact jury_statement_ref x h₀") == "bad_axioms"


def test_another_statement_is_refused(lean):
    assert verdict(lean, STATEMENT, file="theorem test_problem : True := by simp") == "statement_mismatch"


def test_statement_elaboration(lean):
    checker = ProofChecker(lean, lean.config.header, timeout_s=300)
    assert checker.elaborates(STATEMENT).status == "elaborates"
    assert checker.elaborates("theorem test_problem (x : ℕ) : x = (ill_typed : ℕ → ℕ)").status == "statement_error"


def test_timeout_kills_and_restarts(lean):
    checker = ProofChecker(lean, lean.config.header, timeout_s=5)
    assert checker.check_body(CLOSED, " by\n  sleep 100000\n  norm_num").status == "timeout"
    assert ProofChecker(lean, lean.config.header, timeout_s=300).check_body(STATEMENT, HONEST).status == "proved"


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


def test_leandojo_checks_a_proof():
    env = {k: os.environ.get(f"JURY_LEANDOJO_{k.upper()}", "") for k in ("repo", "commit", "file", "line")}
    if not (env["repo"] and env["file"] and env["line"]):
        pytest.skip("no traced LeanDojo repository: set JURY_LEANDOJO_REPO, _COMMIT, _FILE and _LINE")
    from jury.verifiers.lean.dojo import LeanDojoBackend

    backend = LeanDojoBackend(env["repo"], env["commit"], env["file"], int(env["line"]))
    try:
        checker = ProofChecker(backend, "", timeout_s=600)
        assert checker.check_body(STATEMENT, HONEST).status == "proved"
        assert checker.check_body(CLOSED, " by\n  skip_everything").status == "lean_error"
    finally:
        backend.close()
