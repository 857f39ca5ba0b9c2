"""The screen refuses every cheating body and file we know of and passes honest ones;
extraction cuts statements and files out of LLM replies. No Lean needed. (Its lexer:
test_lean_lexer.py; its command allowlist and the idioms it accepts: test_lean_commands.py.)"""
import sys
from pathlib import Path

import pytest

from jury.verifiers.lean.screen import (extract_proof_body, extract_proof_file, extract_statement,
                                        normalize_newlines, screen, screen_file, signature_of, strip_header_imports)

sys.path.insert(0, str(Path(__file__).parent))
import cases  # noqa: E402

# Each passes the public "no error, no sorry" rule in real Lean (or hides from a naive
# substring screen); each must be refused before Lean sees it.
CHEATS = {
    "import": " by\nimport Mathlib.Tactic\n  norm_num",
    "set_option": " by\n  set_option maxHeartbeats 0 in\n  nlinarith [sq_nonneg x]",
    "axiom": " absurd trivial cheat\naxiom cheat : ¬True",
    "opaque": " magic\nopaque magic : (2:ℕ) + 2 = 4",
    "unsafe def": " by norm_num\nunsafe def boom : Nat := boom",
    "unsafeCast": " by exact unsafeCast ()",
    "partial": " by norm_num\npartial def loop (n : ℕ) : ℕ := loop n",
    "implemented_by": " by norm_num\nattribute [implemented_by fast] slow",
    "extern": " by norm_num\n@[extern \"c_fn\"] opaque f : Nat → Nat",
    "csimp": " by norm_num\n@[csimp] theorem fast_eq : @slow = @fast := rfl",
    "#eval": " by norm_num\n#eval IO.println \"'test_problem' depends on axioms: [propext]\"",
    "#print forged": " by norm_num\n#print axioms test_problem",
    "#exit": " by norm_num\n#exit",
    "run_cmd": " by norm_num\nrun_cmd Lean.logInfo m!\"ok\"",
    "run_tac": " by\n  run_tac Lean.Elab.Tactic.closeMainGoal (Lean.mkConst ``True.intro)",
    "run_elab": " by norm_num\nrun_elab pure ()",
    "by_elab": " by_elab pure (Lean.mkConst ``True.intro)",
    "initialize": " by norm_num\ninitialize counter : IO.Ref Nat ← IO.mkRef 0",
    "macro": " by\n  win\nmacro \"win\" : tactic => `(tactic| sorry)",
    "syntax": " by norm_num\nsyntax \"win\" : tactic",
    "elab": " by norm_num\nelab \"win\" : tactic => pure ()",
    "notation": " by norm_num\nnotation \"⊤⊤\" => True",
    "local instance": " by\n  attribute [local instance] Classical.propDecidable in\n  decide",
    "@[local instance]": " by norm_num\n@[local instance] def d : Decidable True := isTrue trivial",
    "instance": " h\ninstance : Fact (1 < 2) := ⟨by norm_num⟩",
    "native_decide": " by native_decide",
    "decide +native": " by decide +native",
    "ofReduceBool": " Lean.ofReduceBool _ _ rfl",
    "sorry": " by sorry",
    "admit": " by\n  norm_num\n  admit",
    "sorryAx": " sorryAx _ false",
    "reference axiom": " jury_statement_ref",
    "second theorem": " by norm_num\nnamespace Foo\ntheorem test_problem : True := trivial\nend Foo",
    "open in": " by\n  open Classical in\n  exact Classical.em _",
    "aux lemma with attribute": " by simp\n@[simp] lemma aux : (2:ℕ) + 2 = 4 := rfl",
    "notation3": " by norm_num\nnotation3 \"⊤⊤\" => True",
    "register_simp_attr": " by norm_num\nregister_simp_attr cheat_simps",
    "unif_hint": " by norm_num\nunif_hint (n : ℕ) where n =?= 4 ⊢ n + 0 =?= 4",
    # escaping the verifier's parentheses to start a command the lists do not know
    "closes the wrapper": " by simp)\nsome_future_command x\n(",
    "opens without closing": " (by simp\nsome_future_command x",
    # combinations
    "set_option + native_decide": " by\n  set_option maxRecDepth 100000 in\n  native_decide",
    "macro expanding to sorry": " by\n  cheat\nlocal macro \"cheat\" : tactic => `(tactic| exact sorryAx _ false)",
    # lexing tricks
    "quote in line comment": " by norm_num -- \"\naxiom cheat : False",
    "after block comment": " by norm_num /- fine -/ axiom cheat : False",
    "nested comment closed early": " by norm_num /- /- -/ -/ axiom cheat : False",
    "doc comment spelling /--/": " by norm_num\n/--/ -- -/ axiom cheat : False",
    "unterminated comment": " by norm_num /- swallows what the verifier sends next",
    "char literal": " by exact (fun _ => trivial) '\"' -- \"\naxiom c : False",
    "guillemets": " by exact «sorry»",
    "zero-width space": " by norm_num\nax\u200biom cheat : False",
    "bidi override": " by norm_num -- \u202e\naxiom cheat : False",
    "tab": " by\n\tnative_decide",
    "greek glued": " by norm_num\nλaxiom",
    "escape in string": " by norm_num\n#eval \"\\u{61}xiom\"",
    "comment glued to symbol": " by exact h <-- Lean may read `<--` as one token\n  trivial",
    "dotted part": " by exact Foo.sorry",
}

HONEST = [
    " by norm_num",
    " by\n  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), mul_pos ha hb]",
    " by\n  have h₁ : x = 2 := by linarith\n  subst h₁\n  norm_num",
    " by\n  intro x hx\n  rcases hx with ⟨y, rfl⟩\n  simp [Finset.sum_range_succ]",
    " by\n  -- a comment may say axiom, sorry or #eval\n  /- and so may \"this\" one -/\n  omega",
    " by\n  constructor\n  · norm_num\n  · intro h\n    exact h.1",
    " by\n  rw [show (4:ℝ) = 2 * 2 by norm_num]\n  field_simp\n  ring_nf",
    " by\n  induction n with\n  | zero => simp\n  | succ k ih => simp [pow_succ, ih]; ring",
    " ⟨2, by norm_num⟩",
    " by\n  obtain ⟨h₀', h₁'⟩ := h\n  interval_cases x <;> simp_all",
    " by\n  calc (2:ℝ) + 2 = 4 := by norm_num\n    _ = 4 := rfl",
    " fun x hx => by positivity",
    " by\n  simp only [Nat.reduceMul, Finset.sum_range_succ]",
    " by\n  haveI : Fact (1 < 2) := ⟨by norm_num⟩\n  exact h",
    " by\n  let f := fun n : ℕ => n ^ 2\n  show f 2 = 4\n  rfl",
    " by\n  norm_num [Real.sqrt_eq_iff_mul_self_eq] at h ⊢\n  exact h",
    "\n  by decide",
    " by\n  have := h 3 (by norm_num)\n  nlinarith [this, sq_abs x, abs_nonneg x]",
]


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheats_are_refused(name):
    assert len(CHEATS) >= 20
    reason = screen(CHEATS[name])
    assert reason is not None, f"{name!r} passed the screen: {CHEATS[name]!r}"


@pytest.mark.parametrize("body", HONEST)
def test_honest_proofs_pass(body):
    assert screen(body) is None, screen(body)


def test_refusal_names_the_rule():
    assert "native_decide" in screen(" by native_decide")
    assert "#eval" in screen(" by simp\n#eval 1")
    assert screen(' by simp [show "a" = "a" from rfl]') is None  # strings are data
    assert "may be interpolated" in screen(' by simp [show s!"{x}" = "a" from rfl]')
    assert "unterminated comment" in screen(" by simp /- /- -/")
    assert "U+200B" in screen(" by simp\u200b")
    assert screen("   \n ") == "empty"
    assert "longer than" in screen(" by " + "simp; " * 20_000)


FORMALIZER_REPLY = """<think>Let me draft: ```lean4
theorem test_problem : x = 1 := by sorry
``` no, x needs a type.</think>
The statement:
```lean4
import Mathlib
import Aesop

set_option maxHeartbeats 400000

open BigOperators Real Nat Topology Rat

/-- If 2x = 4 then x = 2. -/
theorem test_problem (x : ℝ) (h₀ : 2 * x = 4) :
    x = 2 := by
  sorry
```"""


def test_extract_statement_keeps_only_the_signature():
    from jury.verifiers.llm import strip_reasoning
    statement = extract_statement(strip_reasoning(FORMALIZER_REPLY))
    assert statement == "theorem test_problem (x : ℝ) (h₀ : 2 * x = 4) :\n    x = 2"
    assert signature_of(statement) == " (x : ℝ) (h₀ : 2 * x = 4) :\n    x = 2"


def test_extract_statement_drops_a_trailing_comment():
    """The prover's prompt and the checker write ` := by` after the statement: a trailing line comment
    would comment it out (outside audit)."""
    reply = "```lean4\ntheorem test_problem (x : ℕ) (h : x = 2) : x + 2 = 4 -- answer 4\n  := by sorry\n```"
    assert extract_statement(reply) == "theorem test_problem (x : ℕ) (h : x = 2) : x + 2 = 4"
    inner = "```lean4\ntheorem test_problem (x : ℕ) -- the unknown\n  (h : x = 2) : x + 2 = 4 := by sorry\n```"
    assert extract_statement(inner) == "theorem test_problem (x : ℕ) -- the unknown\n  (h : x = 2) : x + 2 = 4"


@pytest.mark.parametrize("reply", [
    "no code at all",
    "```lean4\ntheorem test_problem2 : True := trivial\n```",
    "```lean4\ntheorem test_problem : native_decide = 1 := by sorry\n```",
    "```lean4\ntheorem test_problem (s : String) : s = s!\"{s}\" := by sorry\n```",
    "```lean4\ntheorem test_problem := by sorry\n```",
])
def test_extract_statement_refuses(reply):
    assert extract_statement(reply) is None


def test_extract_statement_without_proof_and_lemma_keyword():
    assert extract_statement("```lean\nlemma test_problem : (2:ℕ) + 2 = 4\n```") == \
        "theorem test_problem : (2:ℕ) + 2 = 4"
    assert extract_statement("```lean4\ntheorem test_problem (f : ℕ → ℕ) (h : ∀ n, f n = (n := 1)) : f 0 = 1 := by simp\n```") \
        == "theorem test_problem (f : ℕ → ℕ) (h : ∀ n, f n = (n := 1)) : f 0 = 1"


PROVER_REPLY = """Plan: square both sides.
```lean4
theorem test_problem (x : ℝ) (h₀ : 2 * x = 4) : x = 2 := by sorry
```
Final proof:
```lean4
import Mathlib

theorem test_problem (x : ℝ) (h₀ : 2 * x = 4) :
    x = 2 := by
  have h : x = 4 / 2 := by
    field_simp
    linarith
  rw [h]; norm_num
```
"""


def test_extract_proof_body_is_verbatim_after_the_assignment():
    body = extract_proof_body(PROVER_REPLY)
    assert body == " by\n  have h : x = 4 / 2 := by\n    field_simp\n    linarith\n  rw [h]; norm_num"
    assert screen(body) is None


def test_other_fenced_blocks_do_not_swallow_the_lean_one():
    reply = "Plan:\n```text\nstep 1\n```\nthen\n```\nx + 2 = 4\n```\n" + PROVER_REPLY.split("Final proof:")[1]
    assert extract_proof_body(reply).endswith("rw [h]; norm_num")


def test_extract_proof_body_refuses_truncated_or_missing_replies():
    assert extract_proof_body("```lean4\ntheorem test_problem : True := by\n  trivial") is None  # cut by max_tokens
    assert extract_proof_body("```lean4\ntheorem test_problem : True :=\n```") is None
    assert extract_proof_body("```lean4\ntheorem other : True := trivial\n```") is None


def test_every_refused_word_and_family_is_refused_on_its_own_with_its_reason():
    from jury.verifiers.lean.commands import COMMAND_FAMILIES, REFUSED
    for word, why in REFUSED.items():
        if word.startswith("#"):
            assert word in (screen(f" by simp\n{word} x") or ""), word  # the lexer's allowlist of `#` words
        else:
            assert why in (screen(f" by simp\n{word} x") or ""), word
    for family in COMMAND_FAMILIES:
        assert "a command of a family" in (screen(f" by simp\n{family}x y") or ""), family


# ---------------------------------------------------------------- whole files
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"


def file_of(reply):
    return strip_header_imports(extract_proof_file(reply), HEADER)


@pytest.mark.parametrize("name,statement,reply", cases.HONEST, ids=[c[0] for c in cases.HONEST])
def test_honest_files_pass_the_file_screen(name, statement, reply):
    assert len(cases.HONEST) >= 50
    fs = screen_file(file_of(reply))
    assert fs.reason is None and fs.target.endswith("test_problem"), (name, fs)


# Exploits only Lean can refuse (the type check), or that never reach the screen, and the
# idioms the screen accepts because they cannot change the verdict: a local instance, a
# variable or a mutual block changes only what the target elaborates to, which the
# checker compares with the reference (test_lean_commands.py runs them through it).
LEAN_SIDE = {"easier statement", "axiom as the target", "def as the target", "opaque as the target",
             "local instance redefines +", "attribute local instance", "variable adds a hypothesis", "mutual block",
             "underscore binder hides an extra hypothesis", "local instance in a section around the target",
             "unclosed namespace"}


@pytest.mark.parametrize("name,statement,reply", cases.EXPLOITS, ids=[c[0] for c in cases.EXPLOITS])
def test_exploit_files_are_refused(name, statement, reply):
    proof = extract_proof_file(reply)
    if name in LEAN_SIDE:
        return
    assert screen_file(strip_header_imports(proof, HEADER)).reason is not None, name


def test_file_screen_finds_the_target_and_its_namespace():
    assert screen_file("namespace A.B\ntheorem test_problem : True := trivial\nend A.B").target == "A.B.test_problem"
    assert screen_file("namespace A\ntheorem _root_.test_problem : True := trivial\nend A").target == "test_problem"
    assert screen_file("namespace «1»\ntheorem test_problem : True := trivial\nend «1»").target == "«1».test_problem"
    assert "2 theorems" in screen_file("theorem test_problem : True := trivial\n"
                                       "theorem A.test_problem : True := trivial").reason
    assert "must be a theorem" in screen_file("def test_problem : True := trivial").reason
    # Lean closes what a file leaves open at its end; the checker writes the `end`s before its own
    unclosed = screen_file("noncomputable section\nnamespace A.B\nsection s\ntheorem test_problem : True := trivial")
    assert unclosed.reason is None and unclosed.target == "A.B.test_problem"
    assert unclosed.closers == "end s\nend A.B\nend"
    assert screen_file("theorem test_problem : True := trivial").closers == ""
    assert "mutual" in screen_file("mutual\ntheorem test_problem : True := trivial").reason
    assert "closes namespace" in screen_file("namespace A\ntheorem test_problem : True := trivial\nend B").reason
    assert "option" in screen_file("set_option debug.skipKernelTC true in\ntheorem test_problem : True := trivial").reason
    assert screen_file("set_option linter.unusedVariables false\ntheorem test_problem : True := trivial").reason is None
    assert "attribute" in screen_file("@[csimp] theorem test_problem : True := trivial").reason
    assert "match_1" in screen_file("theorem test_problem : True := bar.match_1").reason


def test_crlf_is_normalised_and_lone_cr_refused():
    assert normalize_newlines("a\r\nb") == "a\nb"
    assert "U+000D" in screen_file("theorem test_problem : True := by\r  trivial").reason
