"""The top level is an allowlist: every command off it is refused with its reason, a library
command nobody listed too (through the header environment's own table), and the idioms
honest provers write are accepted because they cannot change the verdict: each is shown
with an exploit built on it that the checker still refuses (on the REPL double)."""
import shlex
import sys
from pathlib import Path

import pytest

from jury.verifiers.lean.backends import load_backend
from jury.verifiers.lean.check import COMMAND_TABLE, ProofChecker, judge, parse_command_table, proof_chain
from jury.verifiers.lean.commands import ALLOWED_COMMANDS, COMMAND_FAMILIES, REFUSED, TERM_WORDS
from jury.verifiers.lean.repl import LeanMessage, LeanReplConfig, ReplResponse
from jury.verifiers.lean.screen import extract_proof_file, screen_file

sys.path.insert(0, str(Path(__file__).parent))
import cases  # noqa: E402

DOUBLE = Path(__file__).with_name("lean_repl_double.py")
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
ADD = "theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4"
PROOF = f"{ADD} := by\n  subst h₀\n  norm_num"
FALSE = "theorem test_problem : (1 : ℕ) + 1 = 3"


@pytest.fixture(scope="module")
def backend():
    config = LeanReplConfig(command=shlex.join([sys.executable, str(DOUBLE)]), header=HEADER, pool_size=1,
                            user="", isolate_network="off", memory_limit_mb=0, start_timeout_s=20)
    b = load_backend(config)
    yield b
    b.close()


@pytest.fixture(scope="module")
def checker(backend):
    return ProofChecker(backend, HEADER, timeout_s=10)


def reason(text, environment=frozenset()):
    return screen_file(text, environment).reason


# ---------------------------------------------------------------- refused, with reasons
COMMAND_WORDS = sorted(w for w in REFUSED if w not in TERM_WORDS)


@pytest.mark.parametrize("word", COMMAND_WORDS)
def test_every_command_off_the_allowlist_is_refused_with_its_reason(word):
    why = reason(f"{PROOF}\n{word} foo")
    assert why is not None and word in why and REFUSED[word] in why, (word, why)


def test_command_families_and_unknown_hash_commands_are_refused():
    for family in COMMAND_FAMILIES:
        assert "a command of a family" in (reason(f"{PROOF}\n{family}thing foo") or ""), family
    assert "not on the allowlist" in reason(f"{PROOF}\n#leansearch \"x\"")
    assert "glued" in reason(f"{PROOF}\n#check% x")  # may be a longer token of Lean's table


def test_a_library_command_nobody_listed_is_refused_through_the_environment(backend, checker):
    file = f"{PROOF}\nlib_exec foo"
    assert reason(file) is None  # no list of the screen's knows `lib_exec`...
    assert "header environment" in reason(file, frozenset({"lib_exec"}))
    v = checker.check(ADD, file)  # ...the environment's own table does (the double's has it)
    assert v.status == "screened" and "lib_exec" in v.detail, v
    # without the screen the double runs it, as Lean would run a library's command
    replies = backend.run_chain(proof_chain(ADD, file, "test_problem"), timeout_s=10)
    assert any(m.data == "lib_exec: ran" for m in replies[1].messages)


def test_the_command_table_is_read_from_the_environment(backend):
    table = parse_command_table(backend.run_chain([COMMAND_TABLE], timeout_s=10)[0])
    assert {"theorem", "lemma", "#eval", "run_cmd", "lib_exec"} <= table
    assert not table & {"ident", "num", "str"}  # token kinds, not words
    error = ReplResponse(env=1, messages=(LeanMessage("error", "unknown constant 'getCategory'", 1, 0),))
    assert parse_command_table(error) is None


class NoTable:
    """A Lean that cannot answer the table query (another API): errors on it, the rest passes."""

    def __init__(self, inner):
        self.inner, self.identity = inner, inner.identity

    def run_chain(self, cmds, *, timeout_s):
        if "jury-commands" in cmds[0]:
            return [ReplResponse(env=0, messages=(LeanMessage("error", "unknown identifier 'getCategory'", 1, 0),))]
        return self.inner.run_chain(cmds, timeout_s=timeout_s)


def test_a_lean_without_the_table_leaves_the_screen_its_own_lists(backend, caplog):
    checker = ProofChecker(NoTable(backend), HEADER, timeout_s=10)
    assert checker.check(ADD, PROOF).status == "proved"
    assert "did not list its commands" in caplog.text
    assert checker.check(ADD, f"{PROOF}\nrun_cmd pure ()").status == "screened"
    assert checker.environment_commands() == frozenset()


@pytest.mark.parametrize("text,why", [
    ("local notation \"three\" => 3", "only before `instance`"),
    ("scoped macro \"t\" : tactic => sorry", "only before `instance`"),
    ("deriving instance Repr for Nat", "`deriving instance`"),
    ("open private mk from Lean.Environment", "private internals"),
    ("@[implemented_by id] def f (n : ℕ) : ℕ := n", "attribute `implemented_by`"),
    ("attribute [aesop safe] Nat.le_refl", "attribute `aesop`"),
    ("@[simp (high)] lemma l : 1 = 1 := rfl", "`(` in an attribute"),
    ("set_option debug.skipKernelTC true", "option `debug.skipKernelTC`"),
    ("def bar.match_1 : ℕ := 3", "auxiliaries"),
    ("namespace bar\ndef _sunfold : ℕ := 3\nend bar", "auxiliaries"),
    ("def f : ℕ := bar._sunfold", "auxiliaries"),
    ("def f : ℕ := _private.Mathlib.Foo.0.bar", "auxiliaries"),
    ("def f : ℕ := match_1", "auxiliaries"),
])
def test_what_stays_refused_says_why(text, why):
    assert why in (reason(f"{text}\n{PROOF}") or ""), reason(f"{text}\n{PROOF}")


# ---------------------------------------------------------------- accepted: the idioms
IDIOMS = {
    "inspection": f"{PROOF}\n#check test_problem\n#print axioms test_problem\n#reduce (2 : ℕ) + 2\n#synth Inhabited ℕ",
    "underscore names": "theorem test_problem (p q : Prop) (hq : q) : p → q := fun _hp => hq",
    "local attributes": "lemma my_l (x : ℕ) : x + 0 = x := by simp\nattribute [local simp] my_l\n"
                        "attribute [-simp] Nat.add_zero\n@[simp, local norm_cast] lemma my_m : (1 : ℕ) = 1 := rfl\n"
                        + PROOF,
    "section and variable": "section S\nvariable (a b : ℕ)\ninclude a\nomit a\nlemma my_c : a + b = b + a := "
                            f"Nat.add_comm a b\nend S\n{PROOF}",
    "scoped and local instances": "namespace N\nscoped instance : Inhabited ℕ := ⟨5⟩\nend N\nsection\n"
                                  f"local instance : Inhabited ℕ := ⟨3⟩\nend\nopen scoped N in\n{PROOF}",
    "modifiers and universes": f"universe u\nprivate noncomputable def f : ℕ := 1\nprotected def N.g : ℕ := 2\n{PROOF}",
    "mutual, export and deriving": "mutual\ndef ev : ℕ → Bool\n  | 0 => true\n  | n + 1 => od n\ndef od : ℕ → Bool\n"
                                   "  | 0 => false\n  | n + 1 => ev n\nend\nexport Nat (succ)\n"
                                   f"structure P where\n  x : ℕ\nderiving Repr\n{PROOF}",
}


@pytest.mark.parametrize("name", sorted(IDIOMS))
def test_idioms_pass_the_screen_and_prove(checker, name):
    assert reason(IDIOMS[name]) is None, reason(IDIOMS[name])
    assert checker.check(ADD if name != "underscore names" else "theorem test_problem (p q : Prop) (hq : q) : p → q",
                         IDIOMS[name]).status == "proved"


# Each accepted idiom, used to try to get `1 + 1 = 3` accepted: the screen lets it through and
# the checker's Lean-side layers refuse it, with the status of the layer that decides.
ABUSES = {
    "inspection forges the axioms line": (
        f"{FALSE} := by decide\n#print \"'test_problem' does not depend on any axioms\"", "lean_error"),
    "underscore binder adds a hypothesis": (
        "theorem test_problem (_h : (1 : ℕ) + 1 = 3) : (1 : ℕ) + 1 = 3 := _h", "statement_mismatch"),
    "variable and include add a hypothesis": (
        f"variable (h : (1 : ℕ) + 1 = 3)\ninclude h\n{FALSE} := h", "statement_mismatch"),
    "a variable the proof names is not the statement's": (
        f"section\nvariable (h : (1 : ℕ) + 1 = 3)\n{FALSE} := h\nend", "lean_error"),
    "local instance redefines +": (
        f"section\nlocal instance : Add ℕ := ⟨fun _ _ => 3⟩\n{FALSE} := rfl\nend", "statement_mismatch"),
    "local instance attribute": (
        f"def weird : Add ℕ := ⟨fun _ _ => 3⟩\nattribute [local instance] weird\n{FALSE} := rfl", "statement_mismatch"),
    "mutual block around the target": (
        f"mutual\n{FALSE} := by decide\nend", "lean_error"),
    "local simp lemma": (
        f"lemma l : (1 : ℕ) + 1 = 2 := rfl\nattribute [local simp] l\n{FALSE} := by decide", "lean_error"),
}


@pytest.mark.parametrize("name", sorted(ABUSES))
def test_accepted_idioms_cannot_change_the_verdict(checker, name):
    file, status = ABUSES[name]
    assert reason(file) is None, (name, reason(file))
    v = checker.check(FALSE, file)
    assert v.status == status, (name, v)


def test_imports_the_header_covers_are_dropped_and_others_refused():
    from jury.verifiers.lean.screen import strip_header_imports
    file = strip_header_imports(f"import Mathlib.Tactic\nimport Aesop -- again\n{PROOF}", HEADER)
    assert reason(file) is None
    assert "imports come from the verifier's header" in reason(strip_header_imports(f"import Lean\n{PROOF}", HEADER))
    assert reason(strip_header_imports(f"import MathlibExtra\n{PROOF}", HEADER)) is not None  # not a submodule


def test_options_that_switch_a_check_off_stay_refused():
    for option in ("debug.skipKernelTC", "debug.byAsSorry", "compiler.extract_closed", "doc.verso"):
        assert f"option `{option}`" in reason(f"set_option {option} true in\n{PROOF}"), option
    for option in ("maxHeartbeats 0", "linter.unusedVariables false", "backward.isDefEq.lazyWhnfCore false"):
        assert reason(f"set_option {option} in\n{PROOF}") is None, option


# ---------------------------------------------------------------- all our cases, through the checker
@pytest.mark.parametrize("name,statement,reply", cases.HONEST, ids=[c[0] for c in cases.HONEST])
def test_our_honest_cases_are_proved_on_the_double(checker, name, statement, reply):
    v = checker.check(statement, extract_proof_file(reply))
    assert v.status == "proved", (name, v)


@pytest.mark.parametrize("name,statement,reply", cases.EXPLOITS, ids=[c[0] for c in cases.EXPLOITS])
def test_our_exploits_are_refused_on_the_double(checker, name, statement, reply):
    proof = extract_proof_file(reply)
    assert proof is None or not checker.check(statement, proof).proved, name


def test_allowed_commands_are_not_refused_words():
    assert not ALLOWED_COMMANDS & set(REFUSED)
