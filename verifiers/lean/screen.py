"""Screening untrusted Lean text before it reaches Lean, and cutting it out of LLM replies.

Proof bodies come from a policy-adjacent LLM, so they are adversarial input. Public
pipelines accept anything that elaborates with no error and no sorry; a body can pass
that rule by declaring an axiom, switching off the kernel (`native_decide`,
`implemented_by`), running meta code (`#eval`, `run_tac`, `elab`), or ending the theorem
and starting commands of its own. The screen refuses all of these on a token stream
that mirrors Lean's lexer where it matters (comments, identifiers) and refuses outright
whatever it cannot reason about (strings, char and name literals, `«»`, nested comments,
invisible characters). It also requires balanced parentheses: the checker wraps the body
in a pair, so that text trying to end the theorem early is a parse error in Lean even
when it starts a command no list here knows. A refusal only costs recall; a miss would
cost soundness.

    reason = screen(body)                 # None when clean, else why it was refused
    statement = extract_statement(reply)  # "theorem test_problem <signature>" or None
    body = extract_proof_body(reply)      # the text after the statement's `:=`, or None
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterator

THEOREM_NAME = "test_problem"
REF_NAME = "jury_statement_ref"  # the verifier's own copy of the statement (lean_check)
MAX_TEXT_CHARS = 64_000

# Identifier parts that may not appear anywhere in a body or statement. Command starters
# are here because a body that ends the theorem could otherwise add declarations the
# verifier never wrote; the rest switch off the kernel or run code at elaboration time.
BANNED_WORDS = frozenset({
    # declarations and commands
    "import", "set_option", "axiom", "opaque", "partial", "implemented_by",
    "implementedBy", "extern", "csimp", "theorem",
    "lemma", "def", "abbrev", "example", "instance", "structure", "class", "inductive",
    "mutual", "namespace", "section", "end", "open", "export", "universe", "variable",
    "attribute", "local", "scoped", "deriving", "noncomputable", "private", "protected",
    "omit", "include", "alias", "irreducible_def", "seal", "unseal", "recall",
    "add_decl_doc", "unif_hint", "proof_wanted", "gen_injective_theorems", "compile_inductive",
    "assert_not_exists", "suppress_compilation", "library_note", "count_heartbeats",
    # meta programming
    "by_elab", "prefix", "postfix",
    # trusting the compiler or skipping the proof
    "native_decide", "native", "ofReduceBool", "ofReduceNat", "reduceBool", "reduceNat",
    "trustCompiler", "sorry", "admit", "sorryAx", REF_NAME,
})
# Families, so that new members (notation3, register_simp_attr, run_meta, ...) are covered.
BANNED_PREFIXES = ("unsafe", "run_", "macro", "syntax", "elab", "notation", "infix", "simproc",
                   "dsimproc", "declare_", "register_", "builtin_", "initialize")

OPENERS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "⟦": "⟧", "⁅": "⁆"}
CLOSERS = frozenset(OPENERS.values())
# A comment opener glued to one of these could be the tail of a longer symbol token
# (Lean reads the longest token), so the screen refuses rather than guess.
SYMBOL_CHARS = frozenset("!#$%&*+-./:<=>?@\\^|~")


class LexError(ValueError):
    """Text the screen refuses to reason about; the message says why."""


@dataclass(frozen=True)
class Token:
    kind: str  # ident | number | symbol | attr | hashcmd
    text: str
    start: int
    end: int


# ---------------------------------------------------------------- Lean's character classes
def is_letter_like(c: str) -> bool:
    """Lean 4's `isLetterLike`: Greek (not λ Π Σ), Coptic, letterlike and math alphanumerics."""
    v = ord(c)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB) or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
            or 0x3CA <= v <= 0x3FB or 0x1F00 <= v <= 0x1FFE or 0x2100 <= v <= 0x214F
            or 0x1D49C <= v <= 0x1D59F)


def is_subscript(c: str) -> bool:
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C


def is_id_first(c: str) -> bool:
    # Lean's Char.isAlpha is ASCII only: `λaxiom` is the token `λ` then the keyword `axiom`.
    return (c.isascii() and c.isalpha()) or c == "_" or is_letter_like(c)


def is_id_rest(c: str) -> bool:
    return (c.isascii() and c.isalnum()) or c in "_'!?" or is_letter_like(c) or is_subscript(c)


def _check_characters(src: str) -> None:
    for i, c in enumerate(src):
        if c == "\n" or c == " ":
            continue
        cat = unicodedata.category(c)
        # Cc: control (tabs too; Lean refuses them), Cf: invisible format characters such as
        # zero-width joiners and bidi overrides, Z*: odd spaces, Co/Cs/Cn: not text at all.
        if cat in ("Cc", "Cf", "Co", "Cs", "Cn") or cat.startswith("Z"):
            raise LexError(f"character U+{ord(c):04X} ({cat}) at offset {i}")


# ---------------------------------------------------------------- lexer
def _block_comment_end(src: str, i: int) -> int:
    """Index after the `-/` closing the comment opened at i, walking pairs as Lean does."""
    j = i + 2
    while j < len(src):
        if src.startswith("-/", j):
            return j + 2
        if src.startswith("/-", j):
            # Lean nests block comments; the screen refuses nesting rather than count it.
            raise LexError(f"nested block comment at offset {j}")
        j += 1
    raise LexError(f"unterminated block comment at offset {i}")


def iter_tokens(src: str) -> Iterator[Token]:
    """Tokens of src, lazily, so a caller may stop before text it does not need.

    Identifiers are split at `.` (finer than Lean, never coarser), numbers are digit runs:
    every word Lean would read as a keyword appears here as an identifier part. Odd
    characters lex as symbols here; `screen` refuses them before lexing.
    """
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c in " \n":
            i += 1
        elif src.startswith("--", i) or src.startswith("/-", i):
            if i > 0 and src[i - 1] in SYMBOL_CHARS:
                raise LexError(f"comment glued to a symbol at offset {i}")
            i = src.find("\n", i) if c == "-" else _block_comment_end(src, i)
            i = n if i < 0 else i
        elif c == '"':
            raise LexError(f"string literal at offset {i}")
        elif c == "'":
            raise LexError(f"char literal at offset {i}")
        elif c in "`«»":
            raise LexError(f"quoted name {c!r} at offset {i}")
        elif src.startswith("@[", i):
            yield Token("attr", "@[", i, i + 2)
            i += 2
        elif c == "#" and i + 1 < n and is_id_first(src[i + 1]):
            j = i + 1
            while j < n and is_id_rest(src[j]):
                j += 1
            yield Token("hashcmd", src[i:j], i, j)
            i = j
        elif is_id_first(c):
            j = i + 1
            while j < n and is_id_rest(src[j]):
                j += 1
            yield Token("ident", src[i:j], i, j)
            i = j
        elif c.isascii() and c.isdigit():
            j = i + 1
            while j < n and src[j].isascii() and src[j].isdigit():
                j += 1
            yield Token("number", src[i:j], i, j)
            i = j
        else:
            width = 2 if src.startswith(":=", i) else 1
            yield Token("symbol", src[i:i + width], i, i + width)
            i += width


# ---------------------------------------------------------------- the screen
def screen(text: str) -> str | None:
    """Why text may not be sent to Lean as a proof body or signature; None when clean."""
    if not text.strip():
        return "empty"
    if len(text) > MAX_TEXT_CHARS:
        return f"longer than {MAX_TEXT_CHARS} characters"
    depth = 0  # of ( ), which must balance: the checker wraps the body in parentheses
    try:
        _check_characters(text)
        for tok in iter_tokens(text):
            depth += {"(": 1, ")": -1}.get(tok.text, 0)
            if depth < 0:
                return f"unbalanced `)` at offset {tok.start}"
            if tok.kind == "attr":
                return f"attribute `@[` at offset {tok.start}"
            if tok.kind == "hashcmd":
                return f"command `{tok.text}` at offset {tok.start}"
            if tok.kind == "ident" and (tok.text in BANNED_WORDS or tok.text.startswith(BANNED_PREFIXES)):
                return f"`{tok.text}` at offset {tok.start}"
    except LexError as e:
        return str(e)
    return "unbalanced `(`" if depth else None


# ---------------------------------------------------------------- cutting Lean out of replies
_DECL = re.compile(r"\b(?:theorem|lemma)\s+" + THEOREM_NAME + r"(?![\w'!?.])")


def lean_blocks(reply: str) -> list[str]:
    """Fenced blocks tagged lean, lean4 or nothing, by fence lines (a regex pairs the closing
    fence of one block with the opening of the next). An unclosed block was cut off: dropped."""
    blocks: list[str] = []
    current: list[str] | None = None
    tag = ""
    for line in reply.split("\n"):
        fence = line.strip().startswith("```")
        if current is None and fence:
            current, tag = [], line.strip()[3:].strip().lower()
        elif fence:
            if tag in ("", "lean", "lean4"):
                blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def _decl_block(reply: str) -> str | None:
    """The last Lean block that declares test_problem (models restate drafts first)."""
    blocks = [b for b in lean_blocks(reply) if _DECL.search(b)]
    return blocks[-1] if blocks else None


def assign_offset(text: str, start: int = 0) -> int | None:
    """Offset just after the first `:=` at bracket depth 0 from start; None if there is none."""
    depth = 0
    try:
        for tok in iter_tokens(text[start:]):
            if tok.text in OPENERS:
                depth += 1
            elif tok.text in CLOSERS:
                depth = max(0, depth - 1)
            elif tok.text == ":=" and depth == 0:
                return start + tok.end
    except LexError:
        return None
    return None


def extract_statement(reply: str) -> str | None:
    """`theorem test_problem <signature>` from an autoformalizer reply, screened; else None.

    Only the declaration itself is kept: header lines are the verifier's, and any proof
    the formalizer attached (usually `by sorry`) is dropped.
    """
    block = _decl_block(reply)
    if block is None:
        return None
    m = _DECL.search(block)
    cut = assign_offset(block, m.end())
    signature = (block[m.end():cut - 2] if cut is not None else block[m.end():]).strip()
    if not signature or screen(signature) is not None:
        return None
    return f"theorem {THEOREM_NAME} {signature}"


def signature_of(statement: str) -> str:
    """The part of a statement after `theorem test_problem`, with its leading space."""
    prefix = f"theorem {THEOREM_NAME}"
    if not statement.startswith(prefix + " "):
        raise ValueError(f"not a verifier-written statement: {statement[:80]!r}")
    return statement[len(prefix):]


def extract_proof_body(reply: str) -> str | None:
    """What a prover wrote after its test_problem statement's `:=`, verbatim; else None.

    Only this body is kept: the verifier writes the header and the statement itself, so a
    prover that restated the theorem differently simply fails to check. The body is not
    screened here; the checker screens everything it is given.
    """
    block = _decl_block(reply)
    if block is None:
        return None
    for m in _DECL.finditer(block):
        cut = assign_offset(block, m.end())
        if cut is not None:
            body = block[cut:].rstrip()
            return body if body.strip() else None
    return None


def normalized(text: str) -> str:
    """Whitespace-insensitive form, to spot duplicate candidates."""
    return " ".join(text.split())
