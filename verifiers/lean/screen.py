"""Screening untrusted Lean text before it reaches Lean, and cutting it out of LLM replies.

Proofs come from a policy-adjacent LLM, so they are adversarial input. A whole proof file
(helpers, namespaces, the target theorem) is screened on a token stream that lexes as
Lean 4's own lexer does (Lean's src/Lean/Parser/Basic.lean: whitespace, finishCommentBlock,
tokenFn): `--` line comments, nested `/- -/` block comments, doc comments `/--` and `/-!`
(tokens whose body nests like a block comment), string literals with their escapes and
gaps, char literals, raw strings, `«escaped»` identifiers. What it cannot lex exactly it
refuses: tabs and lone carriage returns (Lean refuses them too), invisible characters,
strings that may be interpolated (a `{`), raw strings with a backslash (older Lean reads
them as `r` + a string), backquoted names and quotations (meta code), and comments glued to
a symbol it cannot prove is a whole token. tests/verifiers/lean/test_lean_screen.py checks
that its view and a tokeniser transliterated from Lean's agree on every corpus file.

On that stream the file screen refuses: declaring axioms or opaque constants, unsafe and
partial code, `sorry`, native computation, meta programming (macros, syntax, elaborators,
`#` commands, `run_*`), `local`/`scoped` changes to elaboration, `variable`, imports not in
the header, attributes and options outside small allowlists (so `debug.skipKernelTC` and
kin are refused), unbalanced `namespace`/`section`/`end`, and a file that does not declare
exactly one `test_problem` theorem. It returns the target's full name, for the checker.
A refusal only costs recall; a miss would cost soundness, and the checker's Lean-side
layers (axioms, elaborated type, kernel replay) stand behind it.

    reason = screen(signature)            # None when clean (no commands at all), else why
    fs = screen_file(text)                # fs.reason: None when clean; fs.target: "Ns.test_problem"
    statement = extract_statement(reply)  # "theorem test_problem <signature>" or None
    proof = extract_proof_file(reply)     # the Lean block declaring test_problem, or None
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterator

THEOREM_NAME = "test_problem"
REF_NAME = "jury_statement_ref"  # the verifier's own copy of the statement (check.py)
SECTION = "jury_submission"      # the section the checker wraps a submission in
MAX_TEXT_CHARS = 64_000

# Identifier components refused anywhere (a dotted name is refused if any part is one).
BANNED_WORDS = frozenset({
    # declaring what is not proved, or trusting the compiler
    "axiom", "opaque", "partial", "unsafe", "implemented_by", "implementedBy", "extern", "export",
    "csimp", "native_decide", "native", "ofReduceBool", "ofReduceNat",
    "reduceBool", "reduceNat", "trustCompiler", "sorry", "admit", "sorryAx", REF_NAME,
    # meta programming and changing how the rest elaborates
    "macro", "macro_rules", "syntax", "elab", "elab_rules", "notation", "notation3", "infix", "infixl",
    "infixr", "prefix", "postfix", "by_elab", "initialize", "builtin_initialize", "deriving",
    "local", "scoped", "variable", "include", "omit", "mutual", "prelude", "module", "meta", "import",
    "unif_hint", "irreducible_def", "seal", "unseal", "recall", "alias", "add_decl_doc", "proof_wanted",
    "gen_injective_theorems", "compile_inductive", "assert_not_exists", "suppress_compilation",
    "library_note", "count_heartbeats", "open_private", "nonrec_unsafe",
})
# Undotted identifiers starting with these may be keywords we do not know (run_meta,
# declare_syntax_cat, register_simp_attr, simproc_decl, ...): refused. A dotted name is
# never a keyword, so List.infix_append passes.
BANNED_PREFIXES = ("unsafe", "run_", "macro", "syntax", "elab", "notation", "simproc", "dsimproc",
                   "declare_", "register_", "builtin_", "initialize")
COMMANDS = frozenset({"theorem", "lemma", "def", "abbrev", "example", "instance", "structure", "class",
                      "inductive", "namespace", "section", "end", "open", "set_option", "universe",
                      "attribute", "private", "protected", "noncomputable", "nonrec"})
DECLARES = frozenset({"theorem", "lemma", "def", "abbrev", "instance", "structure", "class", "inductive"})
ALLOWED_ATTRS = frozenset({"simp", "reducible", "irreducible", "inline", "instance", "ext", "norm_cast",
                           "push_cast", "specialize", "nolint", "refl", "symm", "trans", "elab_as_elim"})
ALLOWED_OPTIONS = frozenset({"maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats",
                             "synthInstance.maxSize", "maxSize", "exponentiation.threshold", "autoImplicit",
                             "relaxedAutoImplicit", "allowUnsafeReducibility", "tactic.hygienic",
                             "push_neg.use_distrib", "simprocs", "Elab.async"})
ALLOWED_OPTION_FAMILIES = ("linter.", "pp.", "trace.")

OPENERS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "⟦": "⟧", "⁅": "⁆", "@[": "]"}
CLOSERS = frozenset(OPENERS.values())
# A comment opener right after one of these symbol runs is a comment in Lean: no token of
# Lean's or Mathlib's table extends them with `-` or `/` (a longer token would swallow the
# opener). After any other symbol run the screen refuses rather than guess.
SAFE_BEFORE_COMMENT = frozenset({"<;>", ":=", "=>", ",", ";", "·", "←", "→", "↔"})
_HEX = frozenset("0123456789abcdefABCDEF")


class LexError(ValueError):
    """Text the screen refuses to reason about; the message says why."""


@dataclass(frozen=True)
class Token:
    kind: str  # ident | number | symbol | string | char | doc | attr | hashcmd
    text: str  # for ident: the name with escapes removed, parts joined by "."
    start: int
    end: int


@dataclass(frozen=True)
class FileScreen:
    reason: str | None        # None when the file may go to Lean
    target: str | None = None  # the target theorem's full name, as Lean syntax


# ---------------------------------------------------------------- Lean's character classes
def is_letter_like(c: str) -> bool:
    """Lean 4's `isLetterLike`: Greek (not λ Π Σ), Coptic, letterlike and math alphanumerics."""
    if len(c) != 1:
        return False
    v = ord(c)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB) or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
            or 0x3CA <= v <= 0x3FB or 0x1F00 <= v <= 0x1FFE or 0x2100 <= v <= 0x214F
            or 0x1D49C <= v <= 0x1D59F)


def is_subscript(c: str) -> bool:
    if len(c) != 1:
        return False
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C


def is_id_first(c: str) -> bool:
    # Lean's Char.isAlpha is ASCII only: `λaxiom` is the token `λ` then the keyword `axiom`.
    return len(c) == 1 and ((c.isascii() and c.isalpha()) or c == "_" or is_letter_like(c))


def is_id_rest(c: str) -> bool:
    return len(c) == 1 and ((c.isascii() and c.isalnum()) or c in "_'!?" or is_letter_like(c) or is_subscript(c))


def _is_symbol_char(c: str) -> bool:
    return not (c in " \n" or is_id_rest(c) or c in OPENERS or c in CLOSERS or c in "\"'«»")


def _check_characters(src: str) -> None:
    for i, c in enumerate(src):
        if c == "\n" or c == " ":
            continue
        cat = unicodedata.category(c)
        # Cc: control (tabs and lone carriage returns too; Lean refuses both), Cf: invisible
        # format characters (zero-width joiners, bidi overrides), Z*: odd spaces, Co/Cs/Cn.
        if cat in ("Cc", "Cf", "Co", "Cs", "Cn") or cat.startswith("Z"):
            raise LexError(f"character U+{ord(c):04X} ({cat}) at offset {i}")


def normalize_newlines(text: str) -> str:
    """CRLF to LF: what the checker sends to Lean is this text, so both read the same."""
    return text.replace("\r\n", "\n")


# ---------------------------------------------------------------- the lexer
class _Scanner:
    """One pass over src, token by token, as Lean's tokenFn after its whitespace function."""

    def __init__(self, src: str):
        self.src, self.n = src, len(src)

    def at(self, i: int) -> str:
        return self.src[i] if i < self.n else ""

    def nested_comment_end(self, i: int, opened_at: int) -> int:
        """After the `-/` closing a comment whose body starts at i (Lean nests them)."""
        depth = 1
        while i < self.n:
            pair = self.src[i:i + 2]
            if pair == "-/":
                depth, i = depth - 1, i + 2
                if depth == 0:
                    return i
            elif pair == "/-":
                depth, i = depth + 1, i + 2
            else:
                i += 1
        raise LexError(f"unterminated comment at offset {opened_at}")

    def check_not_glued(self, i: int) -> None:
        j = i
        while j > 0 and _is_symbol_char(self.src[j - 1]):
            j -= 1
        if j < i and self.src[j:i] not in SAFE_BEFORE_COMMENT:
            raise LexError(f"comment glued to the symbol {self.src[j:i]!r} at offset {i}")

    def escape(self, i: int, in_string: bool) -> int:
        """After the escape whose backslash is at i - 1 (Lean's quotedCharCoreFn)."""
        c = self.at(i)
        if c and c in "\\\"'rnt" or in_string and c == "{":
            return i + 1
        if c in ("x", "u") and c:
            digits = 2 if c == "x" else 4
            if all(self.at(i + k) in _HEX and self.at(i + k) for k in range(1, digits + 1)):
                return i + 1 + digits
        if in_string and c == "\n":  # a string gap: newline and the indentation after it
            i += 1
            while self.at(i) in (" ", "\n") and self.at(i):
                i += 1
            return i
        raise LexError(f"escape sequence at offset {i - 1}")

    def string(self, i: int) -> int:
        start, i = i, i + 1
        while i < self.n:
            c = self.src[i]
            if c == '"':
                return i + 1
            if c == "{":
                raise LexError(f"`{{` in a string literal at offset {i} (it may be interpolated)")
            i = self.escape(i + 1, True) if c == "\\" else i + 1
        raise LexError(f"unterminated string literal at offset {start}")

    def char(self, i: int) -> int:
        c = self.at(i + 1)
        if not c or c in "'\n":
            raise LexError(f"char literal at offset {i}")
        j = self.escape(i + 2, False) if c == "\\" else i + 2
        if self.at(j) != "'":
            raise LexError(f"unterminated char literal at offset {i}")
        return j + 1

    def raw_string(self, i: int) -> int:
        j = i + 1
        while self.at(j) == "#":
            j += 1
        hashes, close = j - i - 1, '"' + "#" * (j - i - 1)
        end = self.src.find(close, j + 1)
        if end < 0:
            raise LexError(f"unterminated raw string at offset {i}")
        if "\\" in self.src[j + 1:end]:
            raise LexError(f"backslash in a raw string at offset {i} (Lean versions read it differently)")
        return end + 1 + hashes

    def ident(self, i: int) -> tuple[int, str]:
        parts = []
        while True:
            if self.at(i) == "«":
                close = self.src.find("»", i + 1)
                if close < 0:
                    raise LexError(f"unterminated «name» at offset {i}")
                parts.append(self.src[i + 1:close])
                i = close + 1
            else:
                j = i + 1
                while j < self.n and is_id_rest(self.src[j]):
                    j += 1
                parts.append(self.src[i:j])
                i = j
            nxt = self.at(i + 1)
            if self.at(i) == "." and nxt and (is_id_first(nxt) or nxt == "«"):
                i += 1
            else:
                return i, ".".join(parts)

    def number(self, i: int) -> int:
        m = re.compile(r"0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?").match(self.src, i)
        return m.end()

    def tokens(self) -> Iterator[Token]:
        src, i = self.src, 0
        while i < self.n:
            c = src[i]
            two = src[i:i + 2]
            if c in " \n":
                i += 1
            elif two == "--":
                self.check_not_glued(i)
                j = src.find("\n", i)
                i = self.n if j < 0 else j
            elif two == "/-":
                self.check_not_glued(i)
                if self.at(i + 2) in ("-", "!") and self.at(i + 2):  # a doc comment: a token
                    j = self.nested_comment_end(i + 3, i)
                    yield Token("doc", src[i:j], i, j)
                    i = j
                else:
                    i = self.nested_comment_end(i + 2, i)
            elif c == '"':
                j = self.string(i)
                yield Token("string", src[i:j], i, j)
                i = j
            elif c == "'":
                j = self.char(i)
                yield Token("char", src[i:j], i, j)
                i = j
            elif c == "`":
                raise LexError(f"backquoted name or quotation at offset {i}")
            elif c == "r" and re.match(r'r#*"', src[i:i + 64]):
                j = self.raw_string(i)
                yield Token("string", src[i:j], i, j)
                i = j
            elif is_id_first(c) or c == "«":
                j, name = self.ident(i)
                yield Token("ident", name, i, j)
                i = j
            elif c.isascii() and c.isdigit():
                j = self.number(i)
                yield Token("number", src[i:j], i, j)
                i = j
            elif two == "@[":
                yield Token("attr", "@[", i, i + 2)
                i += 2
            elif c == "#" and (is_id_first(self.at(i + 1)) or self.at(i + 1) == "«"):
                j, name = self.ident(i + 1)
                yield Token("hashcmd", "#" + name, i, j)
                i = j
            elif c == "»":
                raise LexError(f"stray » at offset {i}")
            else:
                width = 2 if two == ":=" else 1
                yield Token("symbol", src[i:i + width], i, i + width)
                i += width


def iter_tokens(src: str) -> Iterator[Token]:
    """Tokens of src as Lean reads them (comments dropped, doc comments kept as `doc`).

    Identifiers come whole, dotted parts joined by "." with «» removed; numbers are Lean's
    numeric literals; other symbols come one character at a time (`:=` as one), which is
    finer than Lean and enough for the screen. Raises LexError on what it will not lex.
    """
    return _Scanner(src).tokens()


# ---------------------------------------------------------------- the screens
# Names Lean generates (bar.match_1, bar._sunfold, f._unsafe_rec, _private...): a proof
# has no business naming them, and LeanParanoia's AuxiliaryShadowing exploits do.
_AUXILIARY = re.compile(r"_(?!root_$).+|match_\d+|proof_\d+")


def _word_reason(tok: Token) -> str | None:
    if tok.kind == "hashcmd":
        return f"command `{tok.text}` at offset {tok.start}"
    if tok.kind != "ident":
        return None
    parts = tok.text.split(".")
    bad = next((p for p in parts if p in BANNED_WORDS or _AUXILIARY.fullmatch(p)), None)
    if bad is None and len(parts) == 1 and tok.text.startswith(BANNED_PREFIXES):
        bad = tok.text
    return f"`{bad}` at offset {tok.start}" if bad else None


def _prepare(text: str) -> list[Token]:
    if not text.strip():
        raise LexError("empty")
    if len(text) > MAX_TEXT_CHARS:
        raise LexError(f"longer than {MAX_TEXT_CHARS} characters")
    _check_characters(text)
    return list(iter_tokens(text))


def screen(text: str) -> str | None:
    """Why a signature (or a bare proof term) may not be sent to Lean; None when clean.

    Stricter than the file screen: no command keyword at all, no attribute, balanced
    brackets, so the text cannot end the declaration the verifier writes around it.
    """
    try:
        tokens = _prepare(text)
    except LexError as e:
        return str(e)
    depth = 0
    for tok in tokens:
        reason = _word_reason(tok)
        if reason:
            return reason
        if tok.kind == "attr" or tok.kind == "doc":
            return f"`{tok.text[:3]}` at offset {tok.start}"
        if tok.kind == "ident" and tok.text in COMMANDS:
            return f"`{tok.text}` at offset {tok.start}"
        if tok.kind == "symbol" and tok.text in "([{⟨⦃⟦⁅" + ")]}⟩⦄⟧⁆":
            depth += 1 if tok.text in OPENERS else -1
            if depth < 0:
                return f"unbalanced `{tok.text}` at offset {tok.start}"
    return "unbalanced brackets" if depth else None


class _FileWalk:
    """The file screen's state: scopes, the target, where attributes and options are."""

    def __init__(self, tokens: list[Token], text: str):
        self.toks, self.text = tokens, text
        self.scopes: list[tuple[str, str, str]] = []  # ("namespace" | "section", name, name as written)
        self.targets: list[str] = []

    def next_ident(self, k: int) -> Token | None:
        return self.toks[k + 1] if k + 1 < len(self.toks) and self.toks[k + 1].kind == "ident" else None

    def same_line(self, a: Token, b: Token) -> bool:
        return "\n" not in self.text[a.end:b.start]

    def run(self) -> FileScreen:
        k = 0
        while k < len(self.toks):
            tok = self.toks[k]
            if tok.kind == "attr" or tok.kind == "ident" and tok.text == "attribute":
                k, reason = self.attributes(k)
            elif tok.kind == "ident" and tok.text == "open" and self.next_ident(k) and self.next_ident(k).text == "scoped":
                k, reason = k + 2, None  # `open scoped X`: the one place `scoped` is fine
            else:
                reason = _word_reason(tok) or self.command(k)
                k += 1
            if reason:
                return FileScreen(reason)
        if self.scopes:
            kind, name, _ = self.scopes[-1]
            return FileScreen(f"{kind} {name or '(anonymous)'} is never closed")
        if len(self.targets) != 1:
            return FileScreen(f"{len(self.targets)} theorems named {THEOREM_NAME} (exactly one is needed)")
        return FileScreen(None, self.targets[0])

    def attributes(self, k: int) -> tuple[int, str | None]:
        """`@[a, b]` or `attribute [a] name`: every attribute on the allowlist."""
        tok = self.toks[k]
        if tok.kind == "ident":
            k += 1
            if k >= len(self.toks) or self.toks[k].text != "[":
                return k, f"`attribute` without `[` at offset {tok.start}"
        k += 1
        while k < len(self.toks) and self.toks[k].text != "]":
            t = self.toks[k]
            if t.kind == "ident" and t.text not in ALLOWED_ATTRS or t.kind not in ("ident", "symbol", "number"):
                return k, f"attribute `{t.text}` at offset {t.start}"
            if t.kind == "symbol" and t.text not in (",", "←", "-", "↓"):
                return k, f"`{t.text}` in an attribute at offset {t.start}"
            k += 1
        return k + 1, None if k < len(self.toks) else f"unclosed attribute at offset {tok.start}"

    def command(self, k: int) -> str | None:
        tok = self.toks[k]
        if tok.kind != "ident":
            return None
        word, nxt = tok.text, self.next_ident(k)
        if word == "set_option":
            if nxt is None:
                return f"`set_option` without an option at offset {tok.start}"
            if nxt.text not in ALLOWED_OPTIONS and not nxt.text.startswith(ALLOWED_OPTION_FAMILIES):
                return f"option `{nxt.text}` at offset {nxt.start}"
        elif word == "open" and nxt is not None and nxt.text == "private":
            return f"`open private` at offset {tok.start}"
        elif word in ("namespace", "section"):
            named = nxt is not None and nxt.text not in COMMANDS and self.same_line(tok, nxt)
            if word == "namespace" and not named:
                return f"`namespace` without a name at offset {tok.start}"
            self.scopes.append((word, nxt.text if named else "", self.text[nxt.start:nxt.end] if named else ""))
        elif word == "end":
            return self.end(k)
        elif word in ("theorem", "lemma") or word in DECLARES and nxt is not None:
            return self.declaration(k)
        return None

    def end(self, k: int) -> str | None:
        tok, nxt = self.toks[k], self.next_ident(k)
        name = nxt.text if nxt is not None and nxt.text not in COMMANDS and self.same_line(tok, nxt) else ""
        if nxt is not None and not name and nxt.text not in COMMANDS:
            return f"`end` followed by `{nxt.text}` on another line at offset {tok.start}"
        if not self.scopes:
            return f"`end` with no open namespace or section at offset {tok.start}"
        if self.scopes[-1][1] != name:
            return f"`end {name}` closes {self.scopes[-1][0]} {self.scopes[-1][1] or '(anonymous)'} at offset {tok.start}"
        self.scopes.pop()
        return None

    def declaration(self, k: int) -> str | None:
        tok, nxt = self.toks[k], self.next_ident(k)
        if nxt is None:
            return None if tok.text == "instance" else f"`{tok.text}` without a name at offset {tok.start}"
        if nxt.text.split(".")[-1] != THEOREM_NAME:
            return None
        if tok.text not in ("theorem", "lemma"):
            return f"`{tok.text} {nxt.text}`: the target must be a theorem (offset {tok.start})"
        before = self.toks[k - 1] if k else None
        if before is not None and before.kind == "ident" and before.text in ("private", "protected"):
            return f"`{before.text}` target at offset {before.start}"
        raw = self.text[nxt.start:nxt.end]
        prefix = "".join(written + "." for kind, _, written in self.scopes if kind == "namespace")
        self.targets.append(raw[len("_root_."):] if raw.startswith("_root_.") else prefix + raw)
        return None


def screen_file(text: str) -> FileScreen:
    """Screen a whole proof file (header imports already removed); see the module doc."""
    try:
        tokens = _prepare(text)
    except LexError as e:
        return FileScreen(str(e))
    return _FileWalk(tokens, text).run()


# ---------------------------------------------------------------- cutting Lean out of replies
_DECL = re.compile(r"\b(?:theorem|lemma)\s+(?:[\w'.«»]+\.)?" + THEOREM_NAME + r"(?![\w'!?.])")


def lean_blocks(reply: str) -> list[str]:
    """Fenced blocks tagged lean, lean4 or nothing, by fence lines (a regex pairs the closing
    fence of one block with the opening of the next). An unclosed block was cut off: dropped."""
    blocks: list[str] = []
    current: list[str] | None = None
    tag = ""
    for line in normalize_newlines(reply).split("\n"):
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


def extract_proof_file(reply: str) -> str | None:
    """The last Lean block declaring test_problem, newlines normalised; else None.

    The whole file is kept (helpers before and after, namespaces): the checker screens
    it, drops the imports the header already has and judges the target theorem.
    """
    block = _decl_block(reply)
    return None if block is None or not block.strip() else block


def extract_proof_body(reply: str) -> str | None:
    """What a prover wrote after its test_problem statement's `:=`, verbatim; else None."""
    block = _decl_block(reply)
    if block is None:
        return None
    for m in _DECL.finditer(block):
        cut = assign_offset(block, m.end())
        if cut is not None:
            body = block[cut:].rstrip()
            return body if body.strip() else None
    return None


def strip_header_imports(text: str, header: str) -> str:
    """text without its `import` lines that the header has (Lean takes imports only at the
    top of the first command); any other import stays, for the screen to refuse."""
    have = {ln.strip() for ln in header.split("\n") if ln.strip().startswith("import ")}
    return "\n".join("" if ln.strip() in have else ln for ln in text.split("\n"))


def normalized(text: str) -> str:
    """Whitespace-insensitive form, to spot duplicate candidates."""
    return " ".join(text.split())
