"""A Lean 4 tokeniser transliterated from Lean's own parser, function by function, as a test
oracle: the screen's lexer must agree with it on what is code.

Sources (leanprover/lean4, read at these commits):
  src/Lean/Parser/Basic.lean   00c1b82722b50e9b1ae4999ccc97f932b2788b51
      whitespace, finishCommentBlock, stringGapFn, quotedCharCoreFn, isQuotableCharDefault,
      charLitFnAux, strLitFnAux, isRawStrLitStart, rawStrLitFnAux, takeDigitsFn,
      decimalNumberFn (parseOptDot, parseOptExp), bin/octal/hexNumberFn, numberFnAux,
      isIdCont, isToken, mkTokenAndFixPos, mkIdResult, identFnAux, tokenFnAux
  src/Lean/Parser/Term.lean    00ca0dde5c27b634fe959c03fbd1fe48aae9370e
      commentBody := rawFn (finishCommentBlock 1) (trailingWs := true)
      docComment  := "/--" >> ppSpace >> commentBody
  src/Lean/Parser/Command.lean moduleDoc := "/-!" >> commentBody
  src/Lean/Parser/Types.lean   fieldIdxFn (a nonzero digit, then digits: `h.1.2`)
  src/Init/Meta/Defs.lean      024d2419f3147f8458bc347f0bf18a9b61396b14
      isLetterLike, isSubScriptAlnum, isIdFirst, isIdRest (this version reads Latin-1 and
      Latin Extended-A letters and `ⱼ` as name characters; older ones do not)
  src/Lean/Parser/Module.lean  parseCommand: after an error, parsing restarts where the error
      left the position, or one token on (consumeInput; one character when that token does
      not lex) when the failed command consumed nothing

    Python here                  Lean there
    whitespace()                 whitespace
    finish_comment_block()       finishCommentBlock
    string_gap()                 stringGapFn
    quoted_char()                quotedCharCoreFn (isQuotableCharDefault)
    str_lit(), char_lit()        strLitFnAux, charLitFnAux
    raw_str_lit()                isRawStrLitStart + rawStrLitFnAux
    number(), take_digits()      numberFnAux, decimalNumberFn, takeDigitsFn
    field_idx()                  fieldIdxFn, where the `proj` trailing parser reads it
    ident()                      identFnAux + isIdCont + isToken (keywords win ties)
    token()                      tokenFnAux, then mkTokenAndFixPos; for `/--` and `/-!` the
                                 whitespace after the token (comments included) comes
                                 before the body, then commentBody

The doc-comment rule is the one a screen gets wrong most easily: `mkTokenAndFixPos` runs
`whitespace` after every token, `/--` included, so a line comment right after `/--` is
skipped before `finishCommentBlock` starts counting, and a `-/` inside that line comment
does not end the doc comment.

Symbol tokens come from a token table, as in Lean; TOKENS holds core Lean's and the ones
Mathlib proofs commonly use (a file whose symbols Lean would read with other tokens is not
what the fuzz generates). Errors raise LeanLexError with Lean's position; `recover=True`
instead records an `error` token and restarts as Module.parseCommand does, which is what
Lean goes on to read (and run) after a lexing error.

    for tok in tokenize(src): tok.kind, tok.start, tok.end, tok.text
    # kind: ident | keyword | symbol | string | char | number | fieldidx | name | doc | moddoc | error
"""
from __future__ import annotations

from dataclasses import dataclass


class LeanLexError(ValueError):
    def __init__(self, pos: int, message: str):
        super().__init__(f"{message} at {pos}")
        self.pos = pos


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
initialize builtin_initialize export omit include nonrec instance_priority Type Prop Sort
""".split())

TOKENS = frozenset("""
:= => <;> <|> ← <- -> → ↔ <-> ∀ ∃ λ · . .. ... , ; : :: ( ) [ ] { } ⟨ ⟩ @[ @ # #[ + - * / % ^
= == ≠ != < > ≤ ≥ <= >= ∧ ∨ ¬ ∘ × ∑ ∏ ∈ ∉ ⊆ ⊂ ∩ ∪ \\ | || && ++ <+: <:+ <:+: ▸ $ <$> >>= |>. |> <|
? ! _ ?_ /-- /-! ⁻¹ √ ∣ ‹ › ⦃ ⦄ ↑ ⇑ ↥ ∞ ∫ ∂ ⌊ ⌋ ⌈ ⌉ ≃ ≅ ⊢ ⊤ ⊥ ∅ ≈ ≡ % %[ ![ #eval #print #check #exit
#reduce #guard_msgs #synth #help #lint #find #where #check_failure #simp #norm_num #whnf
'' ⁻¹' ∑' ∏'
""".split()) | KEYWORDS

_CLOSERS = frozenset(")]}⟩")


def is_letter_like(c: str) -> bool:
    v = ord(c)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB) or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
            or 0x3CA <= v <= 0x3FB or 0x1F00 <= v <= 0x1FFE or 0x2100 <= v <= 0x214F or 0x1D49C <= v <= 0x1D59F
            or 0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7) or 0x100 <= v <= 0x17F)


def is_subscript_alnum(c: str) -> bool:
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C


def is_alpha(c: str) -> bool:  # Char.isAlpha: ASCII only
    return "a" <= c <= "z" or "A" <= c <= "Z"


def is_digit(c: str) -> bool:  # Char.isDigit: ASCII only
    return "0" <= c <= "9"


def is_hex(c: str) -> bool:
    return is_digit(c) or "a" <= c <= "f" or "A" <= c <= "F"


def is_id_first(c: str) -> bool:
    return is_alpha(c) or c == "_" or is_letter_like(c)


def is_id_rest(c: str) -> bool:
    return is_alpha(c) or is_digit(c) or c in "_'!?" or is_letter_like(c) or is_subscript_alnum(c)


def is_whitespace(c: str) -> bool:  # Char.isWhitespace
    return c in " \t\r\n"


class Lexer:
    def __init__(self, src: str, tokens=TOKENS):
        self.src, self.n, self.tokens = src, len(src), tokens
        self.max_tok = max(len(t) for t in tokens)

    def get(self, i: int) -> str:
        return self.src[i] if i < self.n else "\0"  # String.get past the end: a default char

    # ---------------------------------------------------------------- whitespace and comments
    def finish_comment_block(self, i: int, nesting: int) -> int:
        while True:
            if i >= self.n:
                raise LeanLexError(i, "unterminated comment")
            curr, j = self.src[i], i + 1
            if curr == "-":
                if j >= self.n:
                    raise LeanLexError(i, "unterminated comment")
                if self.src[j] == "/":
                    if nesting == 1:
                        return j + 1
                    nesting, i = nesting - 1, j + 1
                else:
                    i = j
            elif curr == "/":
                if j >= self.n:
                    raise LeanLexError(i, "unterminated comment")
                if self.src[j] == "-":
                    nesting, i = nesting + 1, j + 1
                else:
                    i = j
            else:
                i = j

    def whitespace(self, i: int) -> int:
        while i < self.n:
            curr = self.src[i]
            if curr == "\t":
                raise LeanLexError(i, "tabs are not allowed")
            if curr == "\r":
                raise LeanLexError(i, "isolated carriage returns are not allowed")
            if is_whitespace(curr):
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
                    return i  # "/--" and "/-!" doc comments are actual tokens
                i = self.finish_comment_block(i + 2, 1)
            else:
                return i
        return i

    # ---------------------------------------------------------------- literals
    def string_gap(self, i: int, seen_newline: bool) -> int:
        while i < self.n:
            curr = self.src[i]
            if curr == "\n":
                if seen_newline:
                    raise LeanLexError(i, "unexpected additional newline in string gap")
                seen_newline = True
            elif not is_whitespace(curr):
                if seen_newline:
                    return i
                raise LeanLexError(i, "expecting newline in string gap")
            i += 1
        return i  # strLitFnAux reports the end of input

    def quoted_char(self, i: int, in_string: bool) -> int:
        if i >= self.n:
            raise LeanLexError(i, "unexpected end of input")
        curr = self.src[i]
        if curr in "\\\"'rnt":
            return i + 1
        if curr in "xu":
            for k in range(1, (2 if curr == "x" else 4) + 1):
                if not is_hex(self.get(i + k)) or i + k >= self.n:
                    raise LeanLexError(i + k, "invalid hexadecimal numeral")
            return i + 1 + (2 if curr == "x" else 4)
        if in_string and curr == "\n":
            return self.string_gap(i, False)
        raise LeanLexError(i, "invalid escape sequence")

    def str_lit(self, start: int) -> int:
        i = start + 1
        while True:
            if i >= self.n:
                raise LeanLexError(start, "unterminated string literal")
            curr, i = self.src[i], i + 1
            if curr == '"':
                return i
            if curr == "\\":
                i = self.quoted_char(i, True)

    def char_lit(self, start: int) -> int:
        i = start + 1
        if i >= self.n:
            raise LeanLexError(i, "unexpected end of input")
        curr, i = self.src[i], i + 1
        if curr == "\\":
            i = self.quoted_char(i, False)
        if self.get(i) != "'" or i >= self.n:
            raise LeanLexError(min(i + 1, self.n), "missing end of character literal")
        return i + 1

    def is_raw_start(self, i: int) -> bool:
        while self.get(i) == "#":
            i += 1
        return self.get(i) == '"'

    def raw_str_lit(self, start: int) -> int:
        i, num = start + 1, 0
        while self.get(i) == "#":
            num, i = num + 1, i + 1
        i += 1  # the opening quote (isRawStrLitStart held)
        closing = None  # None: normalState; k: closingState after k hashes
        while True:
            if i >= self.n:
                raise LeanLexError(start, "unterminated raw string literal")
            curr, i = self.src[i], i + 1
            if closing is None:
                if curr == '"':
                    if num == 0:
                        return i
                    closing = 0
            elif curr == "#":
                if closing + 1 == num:
                    return i
                closing += 1
            else:
                closing = 0 if curr == '"' else None

    # ---------------------------------------------------------------- numbers
    def take_digits(self, i: int, digit, need_digit: bool) -> int:
        while True:
            if i >= self.n:
                if need_digit:
                    raise LeanLexError(i, "unexpected end of input")
                return i
            curr = self.src[i]
            if curr == "_":
                need_digit, i = True, i + 1
            elif digit(curr):
                need_digit, i = False, i + 1
            elif need_digit:
                raise LeanLexError(i, "unexpected character")
            else:
                return i

    def number(self, start: int) -> int:
        if self.src[start] == "0" and self.get(start + 1) in "bBoOxX" and start + 1 < self.n:
            digit = {"b": lambda c: c in "01", "o": lambda c: "0" <= c <= "7", "x": is_hex}[self.src[start + 1].lower()]
            return self.take_digits(start + 2, digit, True)
        i = self.take_digits(start + 1, is_digit, False)
        if self.get(i) not in ".eE" or i >= self.n:
            return i
        if self.get(i) == ".":  # parseOptDot: the dot is part of the literal even without digits
            i += 1
            if is_digit(self.get(i)):
                i = self.take_digits(i, is_digit, False)
        if self.get(i) in "eE" and i < self.n:  # parseOptExp
            j = i + 1
            if self.get(j) in "+-":
                j += 1
            if not is_digit(self.get(j)):
                raise LeanLexError(i, "missing exponent digits in scientific literal")
            i = self.take_digits(j, is_digit, False)
        return i

    def field_idx(self, start: int) -> int:
        i = start + 1
        while is_digit(self.get(i)):
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
                    raise LeanLexError(i + 1, "unterminated identifier escape")
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

    def is_projection(self, i: int, prev: list[RefToken]) -> bool:
        """A digit the `proj` trailing parser reads as a field index: after a `.` glued to a term."""
        if len(prev) < 2 or self.src[i] == "0":
            return False
        dot, before = prev[-1], prev[-2]
        return (dot.text == "." and dot.end == i and before.end == dot.start
                and (before.kind in ("ident", "string", "char", "number", "fieldidx")
                     or before.kind == "symbol" and before.text in _CLOSERS))

    def token(self, i: int, prev: list[RefToken]) -> RefToken:
        curr = self.src[i]
        if curr == '"':
            return RefToken("string", i, (j := self.str_lit(i)), self.src[i:j])
        if curr == "'" and self.get(i + 1) != "'":
            return RefToken("char", i, (j := self.char_lit(i)), self.src[i:j])
        if is_digit(curr):
            if self.is_projection(i, prev):
                return RefToken("fieldidx", i, (j := self.field_idx(i)), self.src[i:j])
            return RefToken("number", i, (j := self.number(i)), self.src[i:j])
        if curr == "`" and (is_id_first(self.get(i + 1)) or self.get(i + 1) == "«"):
            end, _ = self.ident(i + 1)
            return RefToken("name", i, end, self.src[i:end])
        if curr == "r" and self.is_raw_start(i + 1):
            return RefToken("string", i, (j := self.raw_str_lit(i)), self.src[i:j])
        tk = self.match_token(i)
        found = self.ident(i)
        if found is not None and not (tk is not None and len(tk) >= found[0] - i):
            return RefToken("ident", i, found[0], found[1])
        if tk is None:
            raise LeanLexError(i, "unknown token")
        end = i + len(tk)
        if tk in ("/--", "/-!"):
            # mkTokenAndFixPos consumes the whitespace (comments too) after the token;
            # only then does commentBody start counting nesting
            end = self.finish_comment_block(self.whitespace(end), 1)
            return RefToken("doc" if tk == "/--" else "moddoc", i, end, self.src[i:end])
        return RefToken("keyword" if tk in KEYWORDS or tk[0] == "#" else "symbol", i, end, tk)

    def tokens_all(self, recover: bool = False) -> list[RefToken]:
        out: list[RefToken] = []
        i = 0
        while True:
            try:
                i = self.whitespace(i)
            except LeanLexError as e:
                if not recover:
                    raise
                out.append(RefToken("error", e.pos, e.pos, str(e)))
                i = e.pos + 1  # the character whitespace refuses is skipped as a token that does not lex
                continue
            if i >= self.n:
                return out
            try:
                tok = self.token(i, out)
            except LeanLexError as e:
                if not recover:
                    raise
                out.append(RefToken("error", e.pos, e.pos, str(e)))
                # Module.parseCommand: resume where the error left the position; an error at
                # the token's own start skips one character (consumeInput on a bad token)
                i = e.pos if e.pos > i else i + 1
                continue
            out.append(tok)
            i = tok.end


def tokenize(src: str, tokens=TOKENS, *, recover: bool = False) -> list[RefToken]:
    return Lexer(src, tokens).tokens_all(recover)


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
