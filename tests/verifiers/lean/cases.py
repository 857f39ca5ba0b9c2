"""Our own proof-gate cases: honest proofs that must be accepted and exploit spellings that
must be refused. Each is (name, statement, reply): the statement as the autoformalizer
wrote it, the reply as a prover would send it (a fenced Lean block around a whole file).

The honest ones cover every shape the issue lists (set_option/open ... in, namespace and
section, helpers before and after, banned-prefix names, string and char literals,
equation-style proofs, comments after `<;>`, nested comments, CRLF, termination_by,
where) plus everyday competition proofs. They are meant to be real Lean 4 + Mathlib:
test_lean_real.py runs all of them through a real REPL where one is installed.

The exploits are spellings outside the public corpora: each passes "no error, no sorry"
in some checker, or hides from a screen that lexes differently from Lean, or runs code
before any check (issue 26's: what Lean reads after `/--` and after a lexing error).
HONEST_IDIOMS are the idioms issue 26 found refused: they cannot change the verdict.
"""
from __future__ import annotations


def block(code: str) -> str:
    return f"Here is the proof.\n```lean4\n{code}\n```\n"


ADD = "theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4"
REAL = "theorem test_problem (x : ℝ) (h₀ : 2 * x + 3 = 7) : x = 2"
FALSE = "theorem test_problem : (1 : ℕ) + 1 = 3"

# ---------------------------------------------------------------- honest: the shapes
HONEST_SHAPES = [
    ("set_option in, inside the proof", REAL,
     block(f"{REAL} := by\n  set_option maxRecDepth 2000 in\n  linarith")),
    ("open in, inside the proof", "theorem test_problem (n : ℕ) (h : n % 2 = 1) : n % 2 ≠ 0",
     block("theorem test_problem (n : ℕ) (h : n % 2 = 1) : n % 2 ≠ 0 := by\n  open Nat in\n  omega")),
    ("open in, before the theorem", "theorem test_problem : Real.sqrt 4 = 2",
     block("open Real in\ntheorem test_problem : Real.sqrt 4 = 2 := by\n"
           "  rw [show (4 : ℝ) = 2 ^ 2 by norm_num]\n  exact Real.sqrt_sq (by norm_num)")),
    ("set_option in, before the theorem", ADD,
     block(f"set_option maxHeartbeats 400000 in\n{ADD} := by\n  subst h₀\n  norm_num")),
    ("theorem inside namespace", ADD,
     block(f"namespace Solution\n\n{ADD} := by\n  subst h₀\n  rfl\n\nend Solution")),
    ("theorem inside section", ADD,
     block(f"section\n\n{ADD} := by\n  omega\n\nend")),
    ("theorem inside a named section with open", ADD,
     block(f"section Work\nopen Finset\n\n{ADD} := by\n  omega\n\nend Work")),
    ("helper lemma after the main theorem", ADD,
     block(f"{ADD} := by\n  subst h₀\n  norm_num\n\nlemma unused_helper (y : ℕ) : y + 0 = y := by simp")),
    ("helper lemma before the main theorem", "theorem test_problem (x : ℕ) : (x + 0) * 1 = x",
     block("lemma add_zero_helper (x : ℕ) : x + 0 = x := by simp\n\n"
           "theorem test_problem (x : ℕ) : (x + 0) * 1 = x := by\n  rw [add_zero_helper]\n  simp")),
    ("helper definition before the main theorem", "theorem test_problem : (3 : ℕ) * 3 = 9",
     block("def mySq (n : ℕ) : ℕ := n * n\n\ntheorem test_problem : (3 : ℕ) * 3 = 9 := by\n"
           "  show mySq 3 = 9\n  decide")),
    ("name starting with a banned word (infix)",
     "theorem test_problem (l₁ l₂ l₃ : List ℕ) : l₂ <:+: l₁ ++ l₂ ++ l₃",
     block("theorem test_problem (l₁ l₂ l₃ : List ℕ) : l₂ <:+: l₁ ++ l₂ ++ l₃ :=\n"
           "  List.infix_append l₁ l₂ l₃")),
    ("name starting with a banned word (prefix)", "theorem test_problem (a b : List ℕ) : a <+: a ++ b",
     block("theorem test_problem (a b : List ℕ) : a <+: a ++ b := List.prefix_append a b")),
    ("string literal", "theorem test_problem (s : String) (h : s = \"abc\") : s = \"abc\"",
     block("theorem test_problem (s : String) (h : s = \"abc\") : s = \"abc\" := by\n"
           "  -- the literal \"abc\" is data, not code\n  rw [h]")),
    ("string literal with escapes", "theorem test_problem (s : String) (h : s = \"a\\\"b\\\\\") : s = \"a\\\"b\\\\\"",
     block("theorem test_problem (s : String) (h : s = \"a\\\"b\\\\\") : s = \"a\\\"b\\\\\" := h")),
    ("string containing comment markers", "theorem test_problem (s : String) (h : s = \"-- /- -/\") : s = \"-- /- -/\"",
     block("theorem test_problem (s : String) (h : s = \"-- /- -/\") : s = \"-- /- -/\" := by\n  exact h")),
    ("char literal", "theorem test_problem (c : Char) (h : c = 'a') : c = 'a'",
     block("theorem test_problem (c : Char) (h : c = 'a') : c = 'a' := by\n  rw [h]")),
    ("char literal escape", "theorem test_problem (c : Char) (h : c = '\\n') : c = '\\n'",
     block("theorem test_problem (c : Char) (h : c = '\\n') : c = '\\n' := h")),
    ("quote char literal next to a prime", "theorem test_problem (c : Char) (h' : c = '\"') : c = '\"'",
     block("theorem test_problem (c : Char) (h' : c = '\"') : c = '\"' := h'")),
    ("equation-style proof, no :=", "theorem test_problem : ∀ n : ℕ, 0 + n = n",
     block("theorem test_problem : ∀ n : ℕ, 0 + n = n\n  | 0 => rfl\n  | n + 1 => by simp")),
    ("comment right after <;>", "theorem test_problem : (2 : ℕ) + 2 = 4 ∧ (3 : ℕ) * 3 = 9",
     block("theorem test_problem : (2 : ℕ) + 2 = 4 ∧ (3 : ℕ) * 3 = 9 := by\n"
           "  constructor <;>-- both halves are numerals\n    norm_num")),
    ("comment after <;> with a space", "theorem test_problem : (2 : ℕ) + 2 = 4 ∧ (3 : ℕ) * 3 = 9",
     block("theorem test_problem : (2 : ℕ) + 2 = 4 ∧ (3 : ℕ) * 3 = 9 := by\n"
           "  constructor <;> -- both halves\n    norm_num")),
    ("nested block comments", ADD,
     block(f"/- outer /- inner -/ still a comment: axiom sorry -/\n{ADD} := by\n  subst h₀\n  norm_num")),
    ("doc comment and module doc", ADD,
     block(f"/-! # Solution\nWe substitute. -/\n\n/-- The main theorem. -/\n{ADD} := by\n  subst h₀\n  norm_num")),
    ("doc comment with nested comment inside", ADD,
     block(f"/-- uses /- nested -/ text -/\n{ADD} := by\n  subst h₀\n  norm_num")),
    ("Windows line endings", ADD,
     block(f"{ADD} := by\n  subst h₀\n  norm_num").replace("\n", "\r\n")),
    ("termination_by on a helper", "theorem test_problem : (1 : ℕ) + 1 = 2",
     block("def myAck : ℕ → ℕ → ℕ\n  | 0, y => y + 1\n  | x + 1, 0 => myAck x 1\n"
           "  | x + 1, y + 1 => myAck x (myAck (x + 1) y)\ntermination_by x y => (x, y)\n\n"
           "theorem test_problem : (1 : ℕ) + 1 = 2 := by norm_num")),
    ("where clause", "theorem test_problem (n : ℕ) (h : n = 3) : n + n = 6",
     block("theorem test_problem (n : ℕ) (h : n = 3) : n + n = 6 := by\n  subst h\n  exact aux\n"
           "where\n  aux : (3 : ℕ) + 3 = 6 := by norm_num")),
    ("header repeated in the reply", ADD,
     block("import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
           f"open BigOperators Real Nat Topology Rat\n\n{ADD} := by\n  subst h₀\n  norm_num")),
    ("open scoped", "theorem test_problem : ∑ i ∈ Finset.range 4, i = 6",
     block("open scoped BigOperators\n\ntheorem test_problem : ∑ i ∈ Finset.range 4, i = 6 := by\n"
           "  simp [Finset.sum_range_succ]")),
    ("simp lemma helper with attribute", "theorem test_problem (x : ℕ) : x * 1 + 0 = x",
     block("@[simp] lemma my_mul_one (x : ℕ) : x * 1 = x := Nat.mul_one x\n\n"
           "theorem test_problem (x : ℕ) : x * 1 + 0 = x := by simp")),
    ("private helper", ADD,
     block(f"private lemma my_two_add_two : (2 : ℕ) + 2 = 4 := rfl\n\n{ADD} := by\n  subst h₀\n  exact my_two_add_two")),
    ("example next to the theorem", ADD,
     block(f"example : (1 : ℕ) + 1 = 2 := rfl\n\n{ADD} := by\n  subst h₀\n  norm_num")),
    ("lemma keyword for the main theorem", ADD,
     block("lemma test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4 := by\n  subst h₀\n  norm_num")),
    ("theorem with dotted namespace name", ADD,
     block("theorem Solution.test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4 := by\n  omega")),
    ("calc block", "theorem test_problem (a b : ℝ) (h : a = b) : a + 1 = b + 1",
     block("theorem test_problem (a b : ℝ) (h : a = b) : a + 1 = b + 1 := by\n"
           "  calc a + 1 = b + 1 := by rw [h]")),
    ("noncomputable helper", "theorem test_problem : (2 : ℝ) * 3 = 6",
     block("noncomputable def mySix : ℝ := 6\n\ntheorem test_problem : (2 : ℝ) * 3 = 6 := by norm_num")),
    ("tactic block with · and <;>", "theorem test_problem (p q : Prop) (hp : p) (hq : q) : p ∧ q ∧ p",
     block("theorem test_problem (p q : Prop) (hp : p) (hq : q) : p ∧ q ∧ p := by\n"
           "  refine ⟨?_, ?_, ?_⟩ <;> assumption")),
]

# ---------------------------------------------------------------- honest: everyday proofs
_EVERYDAY = [
    ("norm_num", "theorem test_problem : (7 : ℕ) * 8 = 56", "by norm_num"),
    ("decide", "theorem test_problem : (12 : ℕ) % 5 = 2", "by decide"),
    ("rfl", "theorem test_problem : (3 : ℕ) + 4 = 7", "rfl"),
    ("omega", "theorem test_problem (a b : ℕ) (h₀ : a + b = 10) (h₁ : a = 3) : b = 7", "by omega"),
    ("linarith", REAL, "by linarith"),
    ("nlinarith", "theorem test_problem (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2",
     "by nlinarith [sq_nonneg (a - b)]"),
    ("positivity", "theorem test_problem (x : ℝ) : 0 ≤ x ^ 2 + 1", "by positivity"),
    ("ring", "theorem test_problem (a b : ℤ) : (a + b) ^ 2 = a ^ 2 + 2 * a * b + b ^ 2", "by ring"),
    ("div_self", "theorem test_problem (x : ℝ) (hx : x ≠ 0) : x / x = 1", "div_self hx"),
    ("simp", "theorem test_problem (l : List ℕ) : (l ++ []).length = l.length", "by simp"),
    ("subst and norm_num", ADD, "by\n  subst h₀\n  norm_num"),
    ("intro and exact", "theorem test_problem (p q : Prop) (hq : q) : p → q", "by\n  intro _\n  exact hq"),
    ("constructor", "theorem test_problem : (1 : ℕ) < 2 ∧ (2 : ℕ) < 3", "by\n  constructor\n  · norm_num\n  · norm_num"),
    ("use", "theorem test_problem : ∃ n : ℕ, n * n = 49", "by\n  use 7"),
    ("anonymous constructor", "theorem test_problem : ∃ n : ℕ, n + 3 = 5", "⟨2, rfl⟩"),
    ("induction", "theorem test_problem (n : ℕ) : 2 ∣ n * (n + 1)",
     "by\n  induction n with\n  | zero => simp\n  | succ k ih =>\n"
     "    have h : (k + 1) * (k + 1 + 1) = k * (k + 1) + 2 * (k + 1) := by ring\n"
     "    rw [h]\n    exact dvd_add ih (dvd_mul_right 2 _)"),
    ("rcases", "theorem test_problem (a b : ℕ) (h : a = 1 ∧ b = 2) : a + b = 3",
     "by\n  rcases h with ⟨rfl, rfl⟩\n  rfl"),
    ("obtain", "theorem test_problem (a b : ℕ) (h : a = 1 ∧ b = 2) : a * b = 2",
     "by\n  obtain ⟨ha, hb⟩ := h\n  subst ha hb\n  rfl"),
    ("have chain", "theorem test_problem (x : ℝ) (h : 3 * x = 12) : x = 4",
     "by\n  have h₁ : x = 12 / 3 := by linarith\n  rw [h₁]\n  norm_num"),
    ("interval_cases", "theorem test_problem (n : ℕ) (h₀ : n < 3) (h₁ : n ^ 2 = 4) : n = 2",
     "by\n  interval_cases n <;> simp_all"),
    ("Finset sum", "theorem test_problem : ∑ i ∈ Finset.range 5, i = 10", "by\n  simp [Finset.sum_range_succ]"),
    ("integers", "theorem test_problem : (10 : ℤ) - 15 = -5", "by norm_num"),
    ("by_contra", "theorem test_problem (n : ℕ) (h : n ≠ 0) : 0 < n", "by\n  by_contra h'\n  omega"),
    ("exact lemma", "theorem test_problem (a b : ℕ) : a + b = b + a", "Nat.add_comm a b"),
    ("fun term", "theorem test_problem : ∀ x : ℝ, x ^ 2 ≥ 0", "fun x => sq_nonneg x"),
    ("show and norm_num", "theorem test_problem : (2 : ℚ) / 4 = 1 / 2", "by\n  show (2 : ℚ) / 4 = 1 / 2\n  norm_num"),
    ("rw with show", "theorem test_problem : Real.sqrt 9 = 3",
     "by\n  rw [show (9 : ℝ) = 3 ^ 2 by norm_num]\n  exact Real.sqrt_sq (by norm_num)"),
    ("norm_num at", "theorem test_problem (x : ℕ) (h : x + 0 = 5) : x = 5", "by\n  norm_num at h\n  exact h"),
    ("classical em", "theorem test_problem (P : Prop) : P ∨ ¬P", "Classical.em P"),
    ("mod arith", "theorem test_problem : (2 ^ 10 : ℕ) % 7 = 2", "by norm_num"),
]

HONEST_EVERYDAY = [(name, st, block(f"{st} := {proof}")) for name, st, proof in _EVERYDAY]

# ---------------------------------------------------------------- honest: idioms of issue 26
# What provers leave in real files and cannot change the verdict (the screen refused each).
_ADD_PROOF = f"{ADD} := by\n  subst h₀\n  norm_num"
HONEST_IDIOMS = [
    ("underscore binder", "theorem test_problem (p q : Prop) (hq : q) : p → q",
     block("theorem test_problem (p q : Prop) (hq : q) : p → q := by\n  intro _hp\n  exact hq")),
    ("underscore names in patterns", "theorem test_problem (a b : ℕ) (h : a = 1 ∧ b = 2) : a = 1",
     block("theorem test_problem (a b : ℕ) (h : a = 1 ∧ b = 2) : a = 1 := by\n  obtain ⟨h_1, _h_2⟩ := h\n  exact h_1")),
    ("leftover #check and #print axioms", ADD,
     block(f"{_ADD_PROOF}\n\n#check test_problem\n#print axioms test_problem")),
    ("leftover #reduce and #synth", ADD,
     block(f"#reduce (2 : ℕ) + 2\n#synth Inhabited ℕ\n\n{_ADD_PROOF}")),
    ("local simp attribute on a helper", "theorem test_problem (x : ℕ) : (x + 0) * 1 = x",
     block("lemma my_add_zero (x : ℕ) : x + 0 = x := by simp\n\nattribute [local simp] my_add_zero\n\n"
           "theorem test_problem (x : ℕ) : (x + 0) * 1 = x := by simp")),
    ("section with variables for a helper", ADD,
     block("section Helpers\nvariable (a b : ℕ)\n\nlemma my_comm : a + b = b + a := Nat.add_comm a b\n\n"
           f"end Helpers\n\n{_ADD_PROOF}")),
    ("variable the target names", "theorem test_problem (x : ℕ) (h₀ : x = 2) : x + 2 = 4",
     block("section\nvariable (x : ℕ)\n\ntheorem test_problem (h₀ : x = 2) : x + 2 = 4 := by\n  subst h₀\n  norm_num"
           "\n\nend")),
    ("noncomputable section", REAL,
     block(f"noncomputable section\n\ndef half (y : ℝ) : ℝ := y / 2\n\n{REAL} := by linarith\n\nend")),
    ("universe for a helper", ADD,
     block(f"universe u\n\nlemma my_id {{α : Sort u}} (a : α) : id a = a := rfl\n\n{_ADD_PROOF}")),
    ("deriving on a helper structure", ADD,
     block(f"structure Pt where\n  x : ℕ\n  y : ℕ\nderiving Repr, DecidableEq\n\n{_ADD_PROOF}")),
    ("mutual helper definitions", "theorem test_problem : (3 : ℕ) * 3 = 9",
     block("mutual\ndef isEven : ℕ → Bool\n  | 0 => true\n  | n + 1 => isOdd n\ndef isOdd : ℕ → Bool\n"
           "  | 0 => false\n  | n + 1 => isEven n\nend\n\ntheorem test_problem : (3 : ℕ) * 3 = 9 := by norm_num")),
    ("local instance in a closed section", ADD,
     block("section\nattribute [local instance] Classical.propDecidable\n\n"
           "lemma my_em (p : Prop) : p ∨ ¬p := Classical.em p\n\nend\n\n" + _ADD_PROOF)),
    ("noncomputable section left open", ADD, block(f"noncomputable section\n\nopen Real\n\n{_ADD_PROOF}")),
    ("namespace left open", ADD, block(f"namespace Sol\n\n{_ADD_PROOF}")),
    ("doc comment opening with a line comment", ADD,
     block(f"/-- -- the main theorem\n  By substitution. -/\n{_ADD_PROOF}")),
    ("imports of Mathlib modules the header covers", ADD,
     block(f"import Mathlib.Tactic\nimport Mathlib.Data.Real.Basic\n\n{_ADD_PROOF}")),
    ("elaboration options", ADD,
     block(f"set_option tactic.skipAssignedInstances false in\nset_option backward.isDefEq.lazyWhnfCore false in\n"
           f"{_ADD_PROOF}")),
]
HONEST = HONEST_SHAPES + HONEST_EVERYDAY + HONEST_IDIOMS

# ---------------------------------------------------------------- exploit spellings
_DOC_HIDE = "/--/ -- -/"  # Lean: a doc comment ending at `-/`; a naive screen: `/--/` then a line comment
EXPLOITS = [
    ("doc comment hides an axiom (/--/ -- -/)", FALSE,
     block(f"{_DOC_HIDE} axiom cheat : (1 : ℕ) + 1 = 3\n{FALSE} := cheat")),
    ("doc comment hides a line in the proof", FALSE,
     block(f"{FALSE} := by\n  let rec {_DOC_HIDE} f : (1 : ℕ) + 1 = 3 := by native_decide\n  exact f")),
    ("module doc hides an axiom (/-!/ -- -/)", FALSE,
     block("/-!/ -- -/ axiom cheat : (1 : ℕ) + 1 = 3\n" + FALSE + " := cheat")),
    ("nested comment closes late", FALSE,
     block("/- /- -/ axiom cheat : (1 : ℕ) + 1 = 3 -/\n-/ axiom cheat2 : (1 : ℕ) + 1 = 3\n" + FALSE + " := cheat2")),
    ("string hides comment opener", FALSE,
     block("def s := \"/-\"\naxiom cheat : (1 : ℕ) + 1 = 3 -- -/\n" + FALSE + " := cheat")),
    ("char literal quote", FALSE,
     block("def c := '\"'\naxiom cheat : (1 : ℕ) + 1 = 3 -- \"\n" + FALSE + " := cheat")),
    ("raw string with backslash", FALSE,
     block("def s := r\"\\\"\n#eval s -- \"\n" + FALSE + " := by native_decide")),
    ("interpolated string runs code", FALSE,
     block("def s := s!\"{(by native_decide : (1 : ℕ) + 1 = 3)}\"\n" + FALSE + " := by native_decide")),
    ("escaped identifier", FALSE, block(FALSE + " := by exact «sorry»")),
    ("isolated carriage return", FALSE, block(FALSE + " := by\r  native_decide")),
    ("skipKernelTC top-level", FALSE,
     block("set_option debug.skipKernelTC true\n" + FALSE + " := by decide")),
    ("skipKernelTC inside proof", FALSE,
     block(FALSE + " := by\n  set_option debug.skipKernelTC true in\n  decide")),
    ("byAsSorry", FALSE, block("set_option debug.byAsSorry true in\n" + FALSE + " := by omega")),
    ("verso docstrings", FALSE, block("set_option doc.verso true\n" + FALSE + " := by decide")),
    ("open private", FALSE, block("open private mk from Lean.Environment\n" + FALSE + " := by decide")),
    ("local instance redefines +", FALSE,
     block("local instance : Add ℕ where\n  add _ _ := 3\n\n" + FALSE + " := rfl")),
    ("attribute local instance", FALSE,
     block("attribute [local instance] Classical.propDecidable\n" + FALSE + " := by decide")),
    ("implemented_by attribute", FALSE,
     block("@[implemented_by id] def f (n : ℕ) : ℕ := n\n" + FALSE + " := by native_decide")),
    ("csimp attribute", FALSE, block("@[csimp] theorem c : @id = @id := rfl\n" + FALSE + " := by decide")),
    ("local notation", FALSE, block("local notation \"three\" => 2\n" + FALSE + " := rfl")),
    ("macro_rules sorry", FALSE,
     block("macro_rules | `(tactic| decide) => `(tactic| sorry)\n" + FALSE + " := by decide")),
    ("#exit stops the file", FALSE, block(FALSE + " := by decide\n#exit")),
    ("axiom as the target", FALSE, block("axiom test_problem : (1 : ℕ) + 1 = 3")),
    ("def as the target", FALSE, block("def test_problem : (1 : ℕ) + 1 = 3 := by native_decide")),
    ("opaque as the target", FALSE, block("opaque test_problem : (1 : ℕ) + 1 = 3")),
    ("second target in another namespace", FALSE,
     block("namespace A\ntheorem test_problem : (1 : ℕ) + 1 = 2 := rfl\nend A\n"
           "theorem test_problem : (1 : ℕ) + 1 = 3 := by native_decide")),
    ("unclosed namespace", FALSE,
     block("namespace A\ntheorem test_problem : (1 : ℕ) + 1 = 2 := rfl")),
    ("extra end", FALSE, block(FALSE + " := by decide\nend")),
    ("easier statement", FALSE, block("theorem test_problem : (1 : ℕ) + 1 = 2 := rfl")),
    ("variable adds a hypothesis", FALSE,
     block("variable (h : False)\ninclude h\n" + FALSE + " := h.elim")),
    ("native_decide", FALSE, block(FALSE + " := by native_decide")),
    ("decide +native", FALSE, block(FALSE + " := by decide +native")),
    ("sorry", FALSE, block(FALSE + " := by sorry")),
    ("admit", FALSE, block(FALSE + " := by admit")),
    ("run_tac", FALSE, block(FALSE + " := by\n  run_tac Lean.Elab.Tactic.evalTactic (← `(tactic| sorry))")),
    ("by_elab", FALSE, block(FALSE + " := by_elab pure (Lean.mkConst ``True.intro)")),
    ("import after the header", FALSE, block("import Lean\n" + FALSE + " := by decide")),
    ("tab", FALSE, block(FALSE + " := by\n\tdecide")),
    ("zero-width joiner", FALSE, block(FALSE + " := by\n  nat\u200dive_decide")),
    ("comment glued to an unknown symbol", FALSE, block(FALSE + " := by\n  exact h <-- x\n  decide")),
    ("reference axiom", FALSE, block(FALSE + " := jury_statement_ref")),
    ("prelude", FALSE, block("prelude\n" + FALSE + " := by decide")),
    ("mutual block", FALSE,
     block("mutual\ntheorem test_problem : (1 : ℕ) + 1 = 3 := by decide\nend")),
    # issue 26: what Lean reads after the doc-comment opener, and after a lexing error
    ("line comment after /-- hides meta code", FALSE,
     block("/-- -- /-\n-/\nrun_cmd Lean.logInfo \"ran\"\n-- -/\n" + FALSE + " := by decide")),
    ("malformed number resumes at a command", FALSE,
     block("def n := 0xrun_cmd Lean.logInfo \"ran\"\n" + FALSE + " := by decide")),
    ("string gap resumes inside the string", FALSE,
     block("def s := \"a\\\n\n#eval IO.println 1 -- \"\n" + FALSE + " := by decide")),
    ("escaped brace resumes inside the string", FALSE,
     block("def s := \"\\{\n#eval IO.println 1 -- \"\n" + FALSE + " := by decide")),
    ("number with _ resumes at a command", FALSE,
     block("def n := 1_run_cmd Lean.logInfo \"ran\"\n" + FALSE + " := by decide")),
    # issue 26: commands no list of the old screen knew
    ("set_premise_selector runs code", FALSE,
     block("set_premise_selector fun _ _ => pure #[]\n" + FALSE + " := by decide")),
    ("guard_msgs swallows the errors", FALSE,
     block("/-- error: unsolved goals -/\n#guard_msgs in\n" + FALSE + " := by decide")),
    ("declares a matcher-like name", FALSE,
     block("def bar.match_1 : ℕ := 3\n" + FALSE + " := by decide")),
    ("underscore binder hides an extra hypothesis", FALSE,
     block("theorem test_problem (_h : (1 : ℕ) + 1 = 3) : (1 : ℕ) + 1 = 3 := _h")),
    ("local instance in a section around the target", FALSE,
     block("section\nlocal instance : Add ℕ := ⟨fun _ _ => 3⟩\n" + FALSE + " := rfl\nend")),
    # a global instance outlives the checker's section: the checker's own commands after the file would
    # be elaborated with it (an outside audit's finding, from Lean's elaborator; the double cannot model it)
    ("global coercion of the statement to True", FALSE,
     block("instance : CoeOut ((1 : ℕ) + 1 = 3) True := ⟨fun _ => trivial⟩\ntheorem test_problem : True := trivial")),
    ("global BEq Expr that always answers true", FALSE,
     block("instance (priority := high) : BEq Lean.Expr := ⟨fun _ _ => true⟩\n"
           "instance : CoeOut ((1 : ℕ) + 1 = 3) True := ⟨fun _ => trivial⟩\ntheorem test_problem : True := trivial")),
    ("instance attribute on a def", FALSE,
     block("@[instance 10000] def c : CoeOut ((1 : ℕ) + 1 = 3) True := ⟨fun _ => trivial⟩\n"
           "theorem test_problem : True := trivial")),
    ("global instance attribute", FALSE,
     block("def c : CoeOut ((1 : ℕ) + 1 = 3) True := ⟨fun _ => trivial⟩\nattribute [instance 10000] c\n"
           "theorem test_problem : True := trivial")),
    ("global instance inside a section", FALSE,
     block("section\ninstance {P : Prop} : CoeOut P True := ⟨fun _ => trivial⟩\nend\n"
           "theorem test_problem : True := trivial")),
    ("an instance erased for the checker", FALSE,
     block("attribute [-instance] instDecidableEqNat\n" + FALSE + " := by decide")),
]
