"""Lexing untrusted Lean text as Lean 4's own parser does, or refusing it.

The first stage of the screen (screen.py). Lean has no separate lexer: its parser reads a
token where a parser asks for one (src/Lean/Parser/Basic.lean: whitespace,
finishCommentBlock, tokenFnAux, mkTokenAndFixPos). What decides whether a stretch of text
is code or not is the same everywhere, and this module follows it:

  - whitespace: spaces, newlines, `--` to the end of the line, nested `/- -/`;
  - `/--` and `/-!` are tokens, and the whitespace after a token (comments included) is
    consumed before the next parser runs, so a doc comment's body starts after the
    comments that follow `/--`, not right after it (Term.lean: docComment := "/--" >>
    commentBody);
  - string and char literals with their escapes, raw strings `r#"..."#`, numbers with
    Lean's bases, exponents and field indices (`h.1.2`), `«escaped»` names.

After a lexing error Lean does not stop: Module.parseCommand resumes where the error left
the position, often inside what the screen took for a literal, and runs what it finds. So
what Lean would report as a lexing error is refused here, and so is what Lean versions
lex differently (string gaps, `_` in numbers, `\\` or `"` in raw strings) or what depends on
tokens the screen cannot see (a comment opener or a quote glued to a symbol, which a longer
token of Lean's or Mathlib's table may swallow). Also refused: tabs and lone carriage
returns (Lean refuses both), invisible characters, strings that may be interpolated (a
`{`), and backquoted names and quotations (meta code). tests/verifiers/lean/lean_lexer_ref.py
transliterates Lean's functions; the tests fuzz this lexer against it.

    for tok in iter_tokens(src):   # raises LexError on what it will not lex
        tok.kind   # ident | number | symbol | string | char | doc | attr | hashcmd
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterator

OPENERS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "⟦": "⟧", "⁅": "⁆", "@[": "]"}
CLOSERS = frozenset(OPENERS.values())
# A comment opener right after one of these symbol runs is a comment in Lean: no token of
# Lean's or Mathlib's table extends them with `-` or `/` (a longer token would swallow the
# opener). After any other symbol run the screen refuses rather than guess. The same holds
# for a quote, but after the runs Mathlib's table ends with one (QUOTE_TOKEN_STEMS). `/--` is here for the line
# comment glued to a doc comment's opener (`/----`): no token extends the opener.
SAFE_BEFORE_COMMENT = frozenset({"<;>", ":=", "=>", ",", ";", "·", "←", "→", "↔", "/--"})
SAFE_BEFORE_QUOTE = SAFE_BEFORE_COMMENT | {"=", "==", "≠", "::", "++"}
# Symbol runs that Mathlib's table extends with a quote into one token (`⁻¹'`, `∑'`, `∏'`): the quote
# after them is that token's end, never a char literal (with Mathlib in the header, as the gate's is)
QUOTE_TOKEN_STEMS = ("⁻¹", "∑", "∏")
# The `#` commands a proof may leave in (commands.py says why): whole tokens in Lean's table.
HASH_COMMANDS = frozenset({"#check", "#check_failure", "#print", "#reduce", "#synth", "#simp", "#norm_num", "#whnf"})
_QUOTABLE = frozenset("\\\"'rnt")  # Lean's isQuotableCharDefault
_HEX = frozenset("0123456789abcdefABCDEF")
_BASES = {"b": frozenset("01"), "o": frozenset("01234567"), "x": _HEX}


class LexError(ValueError):
    """Text the screen refuses to reason about; the message says why."""


class HashCommandError(LexError):
    """A `#` command off the allowlist (the screen adds the reason)."""

    def __init__(self, word: str, offset: int):
        super().__init__(f"`{word}` at offset {offset}: a `#` command that is not on the allowlist")
        self.word, self.offset = word, offset


@dataclass(frozen=True)
class Token:
    kind: str  # ident | number | symbol | string | char | doc | attr | hashcmd
    text: str  # for ident: the name with escapes removed, parts joined by "."
    start: int
    end: int


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
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A


def reads_differently(c: str) -> bool:
    """Name characters in some Lean versions and not in others: newer ones add Latin-1 and
    Latin Extended-A letters and `ⱼ` (Init/Meta/Defs.lean at 024d2419), older ones had `ⁿ`.
    Outside comments and literals the screen refuses them: it cannot know where Lean's
    name ends, and a name Lean cuts short leaves a keyword behind it."""
    if len(c) != 1:
        return False
    v = ord(c)
    return (0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7)) or 0x100 <= v <= 0x17F or v in (0x2C7C, 0x207F)


def is_id_first(c: str) -> bool:
    # Lean's Char.isAlpha is ASCII only: `λaxiom` is the token `λ` then the keyword `axiom`.
    return len(c) == 1 and ((c.isascii() and c.isalpha()) or c == "_" or is_letter_like(c))


def is_id_rest(c: str) -> bool:
    return len(c) == 1 and ((c.isascii() and c.isalnum()) or c in "_'!?" or is_letter_like(c) or is_subscript(c))


def is_digit(c: str) -> bool:  # Char.isDigit: ASCII only
    return len(c) == 1 and "0" <= c <= "9"


def _is_symbol_char(c: str) -> bool:
    return not (c in " \n" or is_id_rest(c) or c in OPENERS or c in CLOSERS or c in "\"'«»")


_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e\n]")
_ASCII_ID_REST = re.compile(r"[A-Za-z0-9_'!?]*")


def check_characters(src: str) -> None:
    for m in _NOT_PRINTABLE_ASCII.finditer(src):  # printable ASCII and newlines are fine
        i, c = m.start(), m.group()
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

    def __init__(self, src: str, hash_words: frozenset[str]):
        self.src, self.n, self.hash_words = src, len(src), hash_words

    def at(self, i: int) -> str:
        return self.src[i] if i < self.n else ""

    # ------------------------------------------------------------ whitespace and comments
    def whitespace(self, i: int) -> int:
        """Where the next token starts: Lean's `whitespace` (doc comments are tokens)."""
        while i < self.n:
            two = self.src[i:i + 2]
            if self.src[i] in " \n":
                i += 1
            elif two == "--":
                self.check_not_glued(i)
                j = self.src.find("\n", i)
                i = self.n if j < 0 else j
            elif two == "/-" and self.at(i + 2) not in ("-", "!") or two == "/-" and i + 2 >= self.n:
                self.check_not_glued(i)
                i = self.nested_comment_end(i + 2, i)
            else:
                return i
        return i

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

    def glued_run(self, i: int) -> str:
        """The symbol characters right before offset i."""
        j = i
        while j > 0 and _is_symbol_char(self.src[j - 1]):
            j -= 1
        return self.src[j:i]

    def check_not_glued(self, i: int) -> None:
        run = self.glued_run(i)
        if run and run not in SAFE_BEFORE_COMMENT:
            raise LexError(f"comment glued to the symbol {run!r} at offset {i}")

    def doc(self, i: int) -> int:
        """`/--` or `/-!`: the token, the whitespace after it (comments included), then a
        body that nests like a block comment, as mkTokenAndFixPos and commentBody read it."""
        self.check_not_glued(i)
        return self.nested_comment_end(self.whitespace(i + 3), i)

    # ------------------------------------------------------------ literals
    def escape(self, i: int) -> int:
        """After the escape whose backslash is at i - 1 (Lean's quotedCharCoreFn)."""
        c = self.at(i)
        if c and c in _QUOTABLE:
            return i + 1
        if c in ("x", "u") and c:
            digits = 2 if c == "x" else 4
            if all(self.at(i + k) and self.at(i + k) in _HEX for k in range(1, digits + 1)):
                return i + 1 + digits
        if c == "\n":  # a gap: absent from older Lean, one newline only in newer
            raise LexError(f"string gap at offset {i - 1} (Lean versions read it differently)")
        raise LexError(f"escape sequence at offset {i - 1}")

    def string(self, i: int) -> int:
        start, i = i, i + 1
        while i < self.n:
            c = self.src[i]
            if c == '"':
                return i + 1
            if c == "{":
                raise LexError(f"`{{` in a string literal at offset {i} (it may be interpolated)")
            i = self.escape(i + 1) if c == "\\" else i + 1
        raise LexError(f"unterminated string literal at offset {start}")

    def char(self, i: int) -> int:
        run = self.glued_run(i)
        if run and run not in SAFE_BEFORE_QUOTE:
            raise LexError(f"quote glued to the symbol {run!r} at offset {i}")
        c = self.at(i + 1)
        if not c or c in "'\n":
            raise LexError(f"char literal at offset {i}")
        j = self.escape(i + 2) if c == "\\" else i + 2
        if self.at(j) != "'":
            raise LexError(f"unterminated char literal at offset {i}")
        return j + 1

    def raw_string(self, i: int) -> int:
        j = i + 1
        while self.at(j) == "#":
            j += 1
        hashes = j - i - 1
        end = self.src.find('"' + "#" * hashes, j + 1)
        if end < 0:
            raise LexError(f"unterminated raw string at offset {i}")
        body = self.src[j + 1:end]
        # Older Lean reads `r#"` as `r`, `#` and a string ending at the first quote, with escapes
        if "\\" in body or '"' in body:
            raise LexError(f"backslash or quote in a raw string at offset {i} (Lean versions read it differently)")
        return end + 1 + hashes

    # ------------------------------------------------------------ numbers
    def lean_number(self, i: int) -> int:
        """End of the numeric literal at i as numberFnAux reads it; LexError where it errs."""
        def digits(j: int, ok: frozenset | None, need: bool) -> int:  # takeDigitsFn
            while True:
                c = self.at(j)
                if c == "_":
                    need, j = True, j + 1
                elif c and (is_digit(c) if ok is None else c in ok):
                    need, j = False, j + 1
                elif need:
                    raise LexError(f"malformed number at offset {j}")
                else:
                    return j

        if self.src[i] == "0" and self.at(i + 1).lower() in _BASES and self.at(i + 1):
            return digits(i + 2, _BASES[self.at(i + 1).lower()], True)
        j = digits(i + 1, None, False)
        if self.at(j) == ".":
            j += 1
            if is_digit(self.at(j)):
                j = digits(j, None, False)
        if self.at(j) in ("e", "E") and self.at(j):
            k = j + 2 if self.at(j + 1) in ("+", "-") and self.at(j + 1) else j + 1
            if not is_digit(self.at(k)):
                raise LexError(f"malformed number at offset {j}")
            j = digits(k, None, False)
        return j

    def number(self, i: int, before: Token | None, dot: Token | None) -> int:
        glued = (dot is not None and dot.text == "." and dot.end == i and before is not None
                 and before.end == dot.start and self.src[i] != "0"
                 and (before.kind in ("ident", "number", "string", "char") or before.text in CLOSERS))
        if glued:
            # Lean's `proj` reads a field index here (digits only) when what precedes is a
            # term, and numberFn's literal when it is a keyword; the screen does not know
            # every keyword, so it refuses where the two readings put a name in other places.
            end = i + 1
            while is_digit(self.at(end)):
                end += 1
            try:
                other = self.lean_number(i)
            except LexError:
                return end  # numberFn errs where the field index ends or at an `e`: same boundary
            if any(is_id_first(c) for c in self.src[end:other]):
                raise LexError(f"field index or number at offset {i} (Lean's reading depends on the context)")
            return end
        end = self.lean_number(i)
        if "_" in self.src[i:end]:
            raise LexError(f"`_` in a number at offset {i} (Lean versions read it differently)")
        return end

    # ------------------------------------------------------------ names
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
                while True:  # ASCII runs by regex, the rest by Lean's classes
                    j = _ASCII_ID_REST.match(self.src, j).end()
                    if j < self.n and not self.src[j].isascii() and is_id_rest(self.src[j]):
                        j += 1
                    else:
                        break
                parts.append(self.src[i:j])
                i = j
            nxt = self.at(i + 1)
            if self.at(i) == "." and nxt and (is_id_first(nxt) or nxt == "«"):
                i += 1
            else:
                return i, ".".join(parts)

    def is_raw_start(self, i: int) -> bool:
        while self.at(i) == "#":
            i += 1
        return self.at(i) == '"'

    # ------------------------------------------------------------ the token loop
    def tokens(self) -> Iterator[Token]:
        src, i = self.src, 0
        last: list[Token | None] = [None, None]  # the two tokens before, for field indices
        while True:
            i = self.whitespace(i)
            if i >= self.n:
                return
            tok = self.token(i, *last)
            last = [last[1], tok]
            yield tok
            i = tok.end

    def token(self, i: int, before: Token | None, prev: Token | None) -> Token:
        src, c = self.src, self.src[i]
        two = src[i:i + 2]
        if two == "/-":  # whitespace() stopped here: a doc comment
            j = self.doc(i)
            return Token("doc", src[i:j], i, j)
        if c == '"':
            j = self.string(i)
            return Token("string", src[i:j], i, j)
        if c == "'":
            # Mathlib's tokens that hold a quote (the header imports Mathlib): `''` (Set.image; Lean
            # never reads a quote followed by a quote as a char literal) and `⁻¹'`, `∑'`, `∏'`, whose
            # quote ends the token (Set.preimage, tsum, tprod)
            if self.glued_run(i).endswith(QUOTE_TOKEN_STEMS):  # first: Lean's longest match began there
                return Token("symbol", "'", i, i + 1)
            if two == "''":
                return Token("symbol", "''", i, i + 2)
            j = self.char(i)
            return Token("char", src[i:j], i, j)
        if is_digit(c):
            j = self.number(i, before, prev)
            return Token("number", src[i:j], i, j)
        if c == "`":
            raise LexError(f"backquoted name or quotation at offset {i}")
        if c == "r" and self.is_raw_start(i + 1):
            j = self.raw_string(i)
            return Token("string", src[i:j], i, j)
        if is_id_first(c) or c == "«":
            j, name = self.ident(i)
            return Token("ident", name, i, j)
        if two == "@[":
            return Token("attr", "@[", i, i + 2)
        if c == "#" and is_id_first(self.at(i + 1)):
            # Where Lean's `#` token ends depends on its table (`#eval` then `0x`...), so
            # only the allowed ones, whole tokens of Lean's, are read; the rest is refused
            j = i + 2
            while j < self.n and is_id_rest(self.src[j]):
                j += 1
            if src[i:j] not in self.hash_words:
                raise HashCommandError(src[i:j], i)
            return Token("hashcmd", src[i:j], i, j)
        if c == "»":
            raise LexError(f"stray » at offset {i}")
        if reads_differently(c):
            raise LexError(f"character {c!r} at offset {i}: Lean versions differ on whether it is part of a name")
        width = 2 if two == ":=" else 1
        return Token("symbol", src[i:i + width], i, i + width)


def iter_tokens(src: str, hash_words: frozenset[str] = HASH_COMMANDS) -> Iterator[Token]:
    """Tokens of src as Lean reads them (comments dropped, doc comments kept as `doc`).

    Identifiers come whole, dotted parts joined by "." with «» removed; numbers are Lean's
    numeric literals or field indices; other symbols come one character at a time (`:=` as
    one), which is finer than Lean and enough for the screen. Raises LexError on what it
    will not lex.
    """
    return _Scanner(src, hash_words).tokens()
