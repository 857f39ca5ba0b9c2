"""A Lean 4 tokeniser transliterated from Lean's own parser (src/Lean/Parser/Basic.lean),
function by function, as a test oracle: the screen's lexer must agree with it.

    whitespace          ->  whitespace()        (`--` to newline; `/-` nested block comment;
                                                 `/--` and `/-!` are tokens, not whitespace)
    finishCommentBlock  ->  finish_comment_block()  (nesting: `/-` +1, `-/` -1, left to right)
    tokenFnAux          ->  token()             (string, char, number, name literal, raw
                                                 string, else identifier or symbol token)
    strLitFnAux, quotedCharCoreFn, charLitFnAux, rawStrLitFnAux, identFnAux, mkIdResult
    docComment / moduleDoc  ->  the body after `/--` or `/-!` is finishCommentBlock

Symbol tokens come from a token table, as in Lean; TOKENS holds core Lean's and the ones
Mathlib proofs commonly use. A lexing error (unterminated literal, tab, bad escape) raises
LeanLexError: Lean reports an error there, so such text can never check.

    for tok in tokenize(src): tok.kind, tok.start, tok.end, tok.text
    # kind: ident | keyword | symbol | string | char | number | name | doc | moddoc
"""
from __future__ import annotations

from dataclasses import dataclass


class LeanLexError(ValueError):
    pass


@dataclass(frozen=True)
class RefToken:
    kind: str
    start: int
    end: int
    text: str


KEYWORDS = frozenset("""
theorem lemma def abbrev example instance structure class inductive axiom opaque namespace section
end open set_option universe variable import prelude by at fun have show from with match if then else
do let in where termination_by decreasing_by calc suffices obtain mutual private protected noncomputable
partial unsafe attribute local scoped macro macro_rules syntax elab elab_rules notation infix infixl
infixr prefix postfix deriving extends sorry admit native_decide run_tac run_cmd run_elab run_meta
initialize builtin_initialize export omit include nonrec instance_priority
""".split())

TOKENS = frozenset("""
:= => <;> <|> ← <- -> → ↔ <-> ∀ ∃ λ · . .. ... , ; : :: ( ) [ ] { } ⟨ ⟩ @[ @ # #[ + - * / % ^
= == ≠ != < > ≤ ≥ <= >= ∧ ∨ ¬ ∘ × ∑ ∏ ∈ ∉ ⊆ ⊂ ∩ ∪ \\ | || && ++ <+: <:+ <:+: ▸ $ <$> >>= |>. |> <|
? ! _ ?_ /-- /-! ⁻¹ √ ∣ ‹ › ⦃ ⦄ ↑ ⇑ ↥ ∞ ∫ ∂ ⌊ ⌋ ⌈ ⌉ ≃ ≅ ⊢ ⊤ ⊥ ∅ ≈ ≡ % %[ ![ #eval #print #check #exit
#reduce #guard_msgs #synth #help #lint #find #where
""".split()) | KEYWORDS


def is_letter_like(c: str) -> bool:
    v = ord(c)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB) or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
            or 0x3CA <= v <= 0x3FB or 0x1F00 <= v <= 0x1FFE or 0x2100 <= v <= 0x214F or 0x1D49C <= v <= 0x1D59F)


def is_subscript_alnum(c: str) -> bool:
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C


def is_alpha(c: str) -> bool:  # Char.isAlpha: ASCII only
    return "a" <= c <= "z" or "A" <= c <= "Z"


def is_id_first(c: str) -> bool:
    return is_alpha(c) or c == "_" or is_letter_like(c)


def is_id_rest(c: str) -> bool:
    return is_alpha(c) or c.isascii() and c.isdigit() or c in "_'!?" or is_letter_like(c) or is_subscript_alnum(c)


class Lexer:
    def __init__(self, src: str, tokens=TOKENS):
        self.src, self.n, self.tokens = src, len(src), tokens
        self.max_tok = max(len(t) for t in tokens)

    def get(self, i: int) -> str:
        return self.src[i] if i < self.n else "\0"  # String.get past the end: default char

    # ---------------------------------------------------------------- whitespace
    def finish_comment_block(self, i: int, nesting: int) -> int:
        while True:
            if i >= self.n:
                raise LeanLexError("unterminated comment")
            curr, i = self.src[i], i + 1
            if curr == "-":
                if i >= self.n:
                    raise LeanLexError("unterminated comment")
                if self.src[i] == "/":
                    i += 1
                    nesting -= 1
                    if nesting == 0:
                        return i
            elif curr == "/":
                if i >= self.n:
                    raise LeanLexError("unterminated comment")
                if self.src[i] == "-":
                    i += 1
                    nesting += 1

    def whitespace(self, i: int) -> int:
        while i < self.n:
            curr = self.src[i]
            if curr == "\t":
                raise LeanLexError("tabs are not allowed")
            if curr == "\r":
                raise LeanLexError("carriage return")  # the gate normalises CRLF before Lean
            if curr in " \n":
                i += 1
            elif curr == "-":
                if self.get(i + 1) != "-":
                    return i
                j = self.src.find("\n", i + 2)
                i = self.n if j < 0 else j
            elif curr == "/":
                if self.get(i + 1) != "-":
                    return i
                if self.get(i + 2) in "-!":
                    return i  # `/--` and `/-!` are tokens
                i = self.finish_comment_block(i + 2, 1)
            else:
                return i
        return i

    # ---------------------------------------------------------------- literals
    def quoted_char(self, i: int, in_string: bool) -> int:
        curr = self.get(i)
        quotable = "\\\"'rnt" + ("{" if in_string else "")
        if curr in quotable and curr != "\0":
            return i + 1
        if curr in "xu":
            digits = 2 if curr == "x" else 4
            for k in range(1, digits + 1):
                if self.get(i + k) not in "0123456789abcdefABCDEF" or self.get(i + k) == "\0":
                    raise LeanLexError("invalid hex escape")
            return i + 1 + digits
        if in_string and curr == "\n":
            i += 1
            while self.get(i) in " \n" and i < self.n:
                i += 1
            return i
        raise LeanLexError("invalid escape sequence")

    def string(self, i: int) -> int:
        while True:
            if i >= self.n:
                raise LeanLexError("unterminated string literal")
            curr, i = self.src[i], i + 1
            if curr == '"':
                return i
            if curr == "\\":
                i = self.quoted_char(i, True)

    def char(self, i: int) -> int:
        if i >= self.n:
            raise LeanLexError("unterminated char literal")
        curr, i = self.src[i], i + 1
        if curr == "\\":
            i = self.quoted_char(i, False)
        if self.get(i) != "'" or i >= self.n:
            raise LeanLexError("missing end of character literal")
        return i + 1

    def raw_string(self, i: int) -> int:
        num = 0
        while self.get(i) == "#":
            num, i = num + 1, i + 1
        if self.get(i) != '"':
            raise LeanLexError("bad raw string")
        i += 1
        while True:
            if i >= self.n:
                raise LeanLexError("unterminated raw string")
            curr, i = self.src[i], i + 1
            if curr == '"':
                closing = 0
                while closing < num and self.get(i) == "#":
                    closing, i = closing + 1, i + 1
                if closing == num:
                    return i

    def is_raw_start(self, i: int) -> bool:
        while self.get(i) == "#":
            i += 1
        return self.get(i) == '"'

    def number(self, i: int) -> int:
        if self.get(i) == "0" and self.get(i + 1) in "xXbBoO":
            i += 2
            while self.get(i).isalnum() and self.get(i).isascii():
                i += 1
            return i
        while self.get(i).isascii() and self.get(i).isdigit():
            i += 1
        if self.get(i) == "." and self.get(i + 1).isascii() and self.get(i + 1).isdigit():
            i += 1
            while self.get(i).isascii() and self.get(i).isdigit():
                i += 1
        if self.get(i) in "eE" and (self.get(i + 1).isdigit() or self.get(i + 1) in "+-" and self.get(i + 2).isdigit()):
            i += 2
            while self.get(i).isascii() and self.get(i).isdigit():
                i += 1
        return i

    # ---------------------------------------------------------------- identifiers and tokens
    def match_token(self, i: int) -> str | None:
        for length in range(min(self.max_tok, self.n - i), 0, -1):
            if self.src[i:i + length] in self.tokens:
                return self.src[i:i + length]
        return None

    def ident(self, i: int) -> tuple[int, str] | None:
        """End and text of the identifier at i (parts, escapes and dots), or None."""
        start, parts = i, []
        while True:
            curr = self.get(i)
            if curr == "«":
                j = self.src.find("»", i + 1)
                if j < 0:
                    raise LeanLexError("unterminated identifier escape")
                parts.append(self.src[i + 1:j])
                i = j + 1
            elif is_id_first(curr) and i < self.n:
                j = i + 1
                while j < self.n and is_id_rest(self.src[j]):
                    j += 1
                parts.append(self.src[i:j])
                i = j
            else:
                return None if i == start else (i, ".".join(parts))
            if self.get(i) == "." and (is_id_first(self.get(i + 1)) or self.get(i + 1) == "«") and i + 1 < self.n:
                i += 1
            else:
                return i, ".".join(parts)

    def token(self, i: int) -> RefToken:
        curr = self.src[i]
        if curr == '"':
            return RefToken("string", i, (j := self.string(i + 1)), self.src[i:j])
        if curr == "'" and self.get(i + 1) != "'":
            return RefToken("char", i, (j := self.char(i + 1)), self.src[i:j])
        if curr.isascii() and curr.isdigit():
            return RefToken("number", i, (j := self.number(i)), self.src[i:j])
        if curr == "`" and (is_id_first(self.get(i + 1)) or self.get(i + 1) == "«"):
            end, _ = self.ident(i + 1)
            return RefToken("name", i, end, self.src[i:end])
        if curr == "r" and self.is_raw_start(i + 1):
            return RefToken("string", i, (j := self.raw_string(i + 1)), self.src[i:j])
        tk = self.match_token(i)
        found = self.ident(i)
        if found is not None and not (tk is not None and len(tk) >= found[0] - i):
            return RefToken("ident", i, found[0], found[1])
        if tk is None:
            raise LeanLexError(f"unknown token at {i}: {curr!r}")
        end = i + len(tk)
        if tk in ("/--", "/-!"):
            end = self.finish_comment_block(end, 1)
            return RefToken("doc" if tk == "/--" else "moddoc", i, end, self.src[i:end])
        return RefToken("keyword" if tk in KEYWORDS or tk[0] == "#" else "symbol", i, end, tk)

    def tokens_all(self) -> list[RefToken]:
        out, i = [], self.whitespace(0)
        while i < self.n:
            tok = self.token(i)
            out.append(tok)
            i = self.whitespace(tok.end)
        return out


def tokenize(src: str, tokens=TOKENS) -> list[RefToken]:
    return Lexer(src, tokens).tokens_all()


def strip_comments(src: str) -> str:
    """src with every comment (block, line, doc) blanked to spaces, newlines kept: what the
    double elaborates. Lexing errors leave src as it is (Lean reports them anyway)."""
    try:
        toks = tokenize(src)
    except LeanLexError:
        return src
    out, last = [], 0
    for t in toks:
        out.append("".join(c if c == "\n" else " " for c in src[last:t.start]))
        text = src[t.start:t.end]
        out.append("".join(c if c == "\n" else " " for c in text) if t.kind in ("doc", "moddoc") else text)
        last = t.end
    out.append("".join(c if c == "\n" else " " for c in src[last:]))
    return "".join(out)
