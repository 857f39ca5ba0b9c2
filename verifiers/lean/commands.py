"""What a proof file may say at the top level, and why the rest is refused.

The second stage of the screen (screen.py walks the tokens with these tables). Commands
are an allowlist: a word that heads a command in Lean is refused unless it is on
ALLOWED_COMMANDS, and its reason says why. Which words head commands comes from three
places: REFUSED below (Lean core's and Mathlib's commands this project decided on, one
reason each), the families in COMMAND_FAMILIES, and, when a Lean is at hand, the header
environment itself (check.py asks it once for the first token of every command parser it
knows, libraries' included), so a library command nobody listed is refused too.

Words that are not commands but change the verdict (`sorry`, `native_decide`, the
verifier's own reference axiom) are in REFUSED as well, with their reasons. A word that is
neither is an identifier: it cannot start a command, since Lean lexes a keyword as a
keyword wherever it stands.
"""
from __future__ import annotations

from jury.verifiers.lean.lexer import HASH_COMMANDS

THEOREM_NAME = "test_problem"
REF_NAME = "jury_statement_ref"  # the verifier's own copy of the statement (check.py)

DECLARATIONS = frozenset({"theorem", "lemma", "def", "abbrev", "example", "instance", "structure", "class",
                          "inductive"})
# Commands a proof needs. Each has its own rules in screen.py (options, attributes,
# scopes, the target); the rest are harmless as written: what they change (a variable,
# an instance, an opened namespace) can only change the target's elaborated type, and the
# checker compares that with the reference.
ALLOWED_COMMANDS = DECLARATIONS | frozenset({
    "namespace", "section", "end", "open", "export", "universe", "variable", "include", "omit", "set_option",
    "attribute", "mutual", "deriving",
    # modifiers
    "private", "protected", "noncomputable", "nonrec",
    # `local`/`scoped` only before `instance` and inside attribute lists (screen.py)
    "local", "scoped",
}) | HASH_COMMANDS  # inspection: they print, and the checker reads no message of the file but
# its errors and sorries (the axioms come from the checker's own `#print axioms`, after the file)

_SORRY = "an unproved goal (Lean's sorry check stands behind this)"
_COMPILER = "trusts compiled code instead of the kernel (native_decide's axiom Lean.ofReduceBool)"
_RUNS_CODE = "runs meta code the proof itself wrote, in the verifier's Lean process"
_SYNTAX = ("declares syntax: its tokens change how Lean lexes the rest of the file (a token can swallow a "
           "comment opener and turn a comment into code), and macros are code run at elaboration")
_TRUSTS = "attaches code the compiler runs in place of the definition, which native evaluation then trusts"
_NOT_PROVED = "declares a constant without a proof"
_SCOPE = "the screen would have to model the scopes it changes; no proof needs it"

REFUSED: dict[str, str] = {
    "sorry": _SORRY, "admit": _SORRY, "sorryAx": _SORRY,
    "native_decide": _COMPILER, "native": _COMPILER, "ofReduceBool": _COMPILER, "ofReduceNat": _COMPILER,
    "reduceBool": _COMPILER, "reduceNat": _COMPILER, "trustCompiler": _COMPILER,
    "implemented_by": _TRUSTS, "implementedBy": _TRUSTS, "extern": _TRUSTS, "csimp": _TRUSTS,
    REF_NAME: "the verifier's own copy of the statement, an axiom",
    "axiom": _NOT_PROVED, "opaque": _NOT_PROVED + " whose value Lean hides (implemented_by gives it code)",
    "proof_wanted": _NOT_PROVED,
    "partial": "a partial def is an opaque constant implemented by code that need not terminate",
    "unsafe": "unsafe code escapes the kernel's checks (unsafeCast, pointer equality)",
    # meta code
    "#eval": _RUNS_CODE + " (compiled)", "#eval!": _RUNS_CODE + " (compiled)", "#guard": _RUNS_CODE + " (compiled)",
    "run_cmd": _RUNS_CODE, "run_elab": _RUNS_CODE, "run_meta": _RUNS_CODE, "run_tac": _RUNS_CODE,
    "by_elab": _RUNS_CODE, "initialize": _RUNS_CODE + " when the environment is loaded",
    "builtin_initialize": _RUNS_CODE + " when the environment is loaded",
    "#guard_msgs": "turns the errors of the command it wraps into nothing, which the checker would read as success",
    "#exit": "stops Lean reading the file, so the checker's own `end` of the section would never be read",
    "#time": "wraps another command; no proof needs it",
    "#lint": "runs every linter over the environment: heavy, and no proof needs it",
    "#help": "lists syntax and options; no proof needs it",
    "import": "imports come from the verifier's header, at the top of the file only",
    "prelude": "drops the header's imports, core Lean included",
    "module": "switches on the module system, which changes what is visible and exported",
    "meta": "marks meta code",
    # syntax
    **{w: _SYNTAX for w in ("macro", "macro_rules", "syntax", "elab", "elab_rules", "notation", "notation3", "infix",
                            "infixl", "infixr", "prefix", "postfix", "declare_syntax_cat", "binder_predicate",
                            "unif_hint", "simproc", "dsimproc", "simproc_decl")},
    # library commands that are harmless but no proof needs: each would need rules of its own
    "open_private": "exposes private internals (with meta code, enough to forge an environment)",
    "irreducible_def": "builds the definition through an opaque wrapper",
    "alias": _SCOPE, "recall": _SCOPE, "add_decl_doc": _SCOPE, "library_note": _SCOPE,
    "assert_not_exists": _SCOPE, "suppress_compilation": _SCOPE, "count_heartbeats": _SCOPE,
    "compile_inductive": _RUNS_CODE, "gen_injective_theorems": _SCOPE, "seal": _SCOPE, "unseal": _SCOPE,
    "set_premise_selector": _RUNS_CODE + " (it evaluates the selector it is given)",
}
# Refused even as a part of a dotted name (`Lean.ofReduceBool`, `h.sorry`).
TERM_WORDS = frozenset({"sorry", "admit", "sorryAx", "native_decide", "ofReduceBool", "ofReduceNat", "reduceBool",
                        "reduceNat", "trustCompiler", "implemented_by", "implementedBy", REF_NAME})
# Words of these families head commands in Lean core or Mathlib (run_meta,
# declare_syntax_cat, register_simp_attr, simproc_decl, builtin_initialize, ...).
COMMAND_FAMILIES = ("unsafe", "run_", "macro", "syntax", "elab", "notation", "simproc", "dsimproc", "declare_",
                    "register_", "builtin_", "initialize")

# Attributes: only ones that tag a lemma for a tactic or set reducibility. The others attach
# code (implemented_by, extern, export, csimp, init), register meta code (command_elab,
# tactic, *_parser, simproc) or change how Lean elaborates the rest.
ALLOWED_ATTRS = frozenset({"simp", "reducible", "irreducible", "semireducible", "inline", "noinline", "instance",
                           "ext", "norm_cast", "push_cast", "specialize", "nolint", "refl", "symm", "trans",
                           "elab_as_elim", "induction_eliminator", "cases_eliminator", "congr", "gcongr", "mono",
                           "continuity", "measurability", "fun_prop", "bound", "field_simps", "pp_nodot", "coe",
                           "simps", "match_pattern"})
# Options: limits, printing, tracing, linting and elaboration behaviour, none of which the
# kernel's check depends on. The others (debug.skipKernelTC, debug.byAsSorry and kin,
# compiler and interpreter options, doc.verso) switch a check off or change what is read.
# A `set_option` in the file ends with the checker's section around it.
ALLOWED_OPTIONS = frozenset({"maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats",
                             "synthInstance.maxSize", "maxSize", "exponentiation.threshold", "autoImplicit",
                             "relaxedAutoImplicit", "allowUnsafeReducibility", "tactic.hygienic",
                             "push_neg.use_distrib", "simprocs", "Elab.async", "tactic.skipAssignedInstances",
                             "maxSynthPendingDepth", "diagnostics", "diagnostics.threshold", "profiler",
                             "profiler.threshold"})
ALLOWED_OPTION_FAMILIES = ("linter.", "pp.", "trace.", "backward.")


def refusal(word: str, environment: frozenset[str] = frozenset()) -> str | None:
    """Why `word` may not stand in a proof file outside the places screen.py allows; None
    for an identifier or an allowed command."""
    if word in REFUSED:
        return REFUSED[word]
    if word in ALLOWED_COMMANDS:
        return None
    if word.startswith("#"):
        return "a command that is not on the allowlist (#check, #print, #reduce, #synth ... are)"
    if word.startswith(COMMAND_FAMILIES):
        return "a command of a family that declares syntax or runs code"
    if word in environment:
        return "a command of the header environment (a library's) that is not on the allowlist"
    return None
