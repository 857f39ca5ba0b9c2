"""Lexical normalisation (stage 1 of the math verifier, after extract).

`normalize` maps an answer to one canonical string. The canonical string is the verdict-cache key, so
`verify.check` compares normalised strings only: two answers with the same
normal form always get the same verdict. `normalize` is idempotent.

Normalisation is purely lexical (no parsing): dataset escape damage (`\\f` read as a
form feed), unicode maths, `$`/`\\left`/`\\dfrac`/spacing spellings, ASCII spellings
(`>=`, `<=`, `!=`, `oo`, "28 percent", "pct"), text wrappers (`\\mathrm`, `\\mbox` ...
all become `\\text{...}`), thousands separators, trailing full stops. Structural rules
(labels, units, intervals) live in items/parse.

Digit groups, where a comma or a space could mean two things:
  * "12,345" (no space, groups of three after the first) is one number, 12345, when it
    is the whole answer; "12, 345" (a comma and a space) is a list of two numbers, and
    its normal form keeps that space, so the two never share a cache key;
  * "12 345 678" (single spaces, groups of three) is one number: nobody writes a
    product of two literals with a space;
  * "5!=120" keeps its factorial: `!=` is "not equal" except after a digit or a
    closing bracket.
  The decimal comma ("1,22") is decided in verify, where both sides are known.
Standard library only.
"""
from __future__ import annotations

import re


# Command names that take part in the grammar; used to repair `\\frac` written as
# `\\\\frac` and to decide what a `\\text{...}` holding a function name means.
FUNCTION_NAMES = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan arccot sinh cosh tanh "
    "log ln lg exp max min gcd lcm".split()
)
_KNOWN_COMMANDS = FUNCTION_NAMES | frozenset(
    "frac dfrac tfrac sqrt pi infty cdot times div pm mp le leq ge geq ne neq "
    "left right bigg big Big Bigg text mathrm circ theta alpha beta gamma".split()
)

# Unicode spellings -> LaTeX. Applied character by character (after control repair).
_UNICODE = {
    "π": r"\pi ", "∞": r"\infty ", "≤": r"\le ", "≥": r"\ge ", "≠": r"\ne ",
    "×": r"\times ", "÷": r"\div ", "·": r"\cdot ", "−": "-", "–": "-", "—": "-",
    "∪": r"\cup ", "∩": r"\cap ", "√": r"\sqrt ", "°": r"^\circ ", "∀": r"\forall ",
    "∈": r"\in ", "＞": ">", "＜": "<", "（": "(", "）": ")", "，": ",", "：": ":",
    "＝": "=", "±": r"\pm ", "∓": r"\mp ", "≈": r"\approx ", "θ": r"\theta ",
    "α": r"\alpha ", "β": r"\beta ", "γ": r"\gamma ", "λ": r"\lambda ",
    "ρ": r"\rho ", "φ": r"\varphi ", "′": "'", "″": "''", "⩽": r"\le ",
    "⩾": r"\ge ", "∅": r"\emptyset ", "…": r"\cdots ", "⋯": r"\cdots ",
    "\u3000": " ", "\u00a0": " ",
}
_CIRCLED = {chr(0x2460 + k): str(k + 1) for k in range(20)}  # ① .. ⑳

# Control characters that a JSON or Python string escape made out of `\\t`, `\\f`,
# `\\b`, `\\a`, `\\v`, `\\r` (e.g. `\\frac` stored as form feed + "rac").
_CONTROL = {"\t": "t", "\x0c": "f", "\x08": "b", "\x07": "a", "\x0b": "v", "\r": "r"}
_NEWLINE_COMMANDS = ("neq", "ne ", "nu", "nabla", "not", "neg", "exists")

# (pattern, replacement, trigger), applied in order; a rule runs only when its trigger
# text occurs (a substring test is far cheaper than a regex pass that finds nothing)
_SIMPLE_SUBS = [
    (r"\\\$", " ", "\\$"),
    (r">=", r"\\ge ", ">="),
    (r"<=", r"\\le ", "<="),
    (r"(?<![\d)}\]!])!=", r"\\ne ", "!="),
    (r"(?<![A-Za-z\\])oo(?![A-Za-z])", r"\\infty ", "oo"),
    (r"\.\.\.", r"\\cdots ", "..."),
    (r"\\(?:displaystyle|textstyle|limits|nolimits)", "", "\\"),
    (r"\\[hv]?phantom\s*\{[^{}]*\}", "", "phantom"),  # space the width of its content, nothing shown

    (r"\\(?:left|right|bigg|Bigg|big|Big)[lr]?(?![a-zA-Z])\.?", "", "\\"),
    (r"\\[dt]frac(?![a-zA-Z])", r"\\frac", "frac"),
    (r"\\[dt]binom(?![a-zA-Z])", r"\\binom", "binom"),
    (r"\\(?:leqslant|leq)(?![a-zA-Z])", r"\\le", "\\leq"),
    (r"\\(?:geqslant|geq)(?![a-zA-Z])", r"\\ge", "\\geq"),
    (r"\\neq(?![a-zA-Z])", r"\\ne", "\\neq"),
    (r"\\lt(?![a-zA-Z])", "<", "\\lt"),
    (r"\\gt(?![a-zA-Z])", ">", "\\gt"),
    (r"\\(?:textcirc|degree)(?![a-zA-Z])", r"^\\circ", "\\"),
    (r"\^\{\s*\\circ\s*\}", r"^\\circ", "^"),
    (r"\^\s*\^\\circ", r"^\\circ", "^"),
    (r"\\%", "%", "\\%"),
    (r"\\(?:mid|vert)(?![a-zA-Z])", "|", "\\"),
    (r"\\colon(?![a-zA-Z])", ":", "\\colon"),
    (r"\\lbrace(?![a-zA-Z])", r"\\{", "\\lbrace"),
    (r"\\rbrace(?![a-zA-Z])", r"\\}", "\\rbrace"),
    (r"\\(?:ldots|dots|cdots|dotsc|dotsb)(?![a-zA-Z])", r"\\cdots ", "dots"),
    (r"\\varnothing(?![a-zA-Z])", r"\\emptyset", "\\varnothing"),
    # a negative space joins: "12,\\!000" is twelve thousand, and so is "12,\\! 000": TeX
    # ignores spaces in maths, so the space typed after the command must not reach the
    # comma-space rule below and make a list of it
    (r"\\!\s*", "", "\\!"),
    (r"\\(?:,|;|:| |quad(?![a-zA-Z])|qquad(?![a-zA-Z]))", " ", "\\"),
    (r"~", " ", "~"),
    (r"\{,\}", "", "{,}"),
    (r"\\(?:\[|\]|\(|\))", " ", "\\"),
    (r"\$", " ", "$"),
    (r"<sup>(.*?)</sup>", r"^{\1}", "<sup>"),
    (r"<sub>(.*?)</sub>", r"_{\1}", "<sub>"),
]
_SIMPLE_SUBS = [(re.compile(p), r, trigger) for p, r, trigger in _SIMPLE_SUBS]

_TEXT_WRAPPER = re.compile(
    r"\\(?:text|textrm|textbf|textit|textnormal|mathrm|mathbf|mathit|mbox|"
    r"operatorname|mathsf|mathtt)\s*\{([^{}]*)\}"
)
# exactly two: `\\\\frac` is escaping damage, while three are a row break then `\\frac`
_BACKSLASH_BEFORE_CMD = re.compile(r"(?<!\\)\\\\(?=(?:" + "|".join(sorted(_KNOWN_COMMANDS)) + r")(?![a-zA-Z]))")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_SPACE_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?: \d{3})+(?!\d)")
_THREE_DIGITS = re.compile(r"\d{3}(?!\d)")
_WRAPPED_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*")
_PERCENT_WORD = re.compile(r"(?<=\d)(?:\\text\{(?:percent|per cent|pct)\}|(?:percent|per cent|pct)(?![A-Za-z]))")
_ONE_CHAR_GROUP = re.compile(r"([\^_])\{([A-Za-z0-9])\}(?![A-Za-z0-9])")  # not \log_{3}81
_FRAC_DIGITS = re.compile(r"\\frac(\d)(\d)(?!\d)")
_ROW = "\x00"  # placeholder for `\\\\` while spacing commands are removed
_STRAY_PERIOD = re.compile(r"(?<!\d)\.(?!\d)")


def _repair_controls(s: str) -> str:
    """Undo string-escape damage: a control char followed by letters was a backslash."""
    if s.isprintable():
        return s
    out = []
    for k, ch in enumerate(s):
        nxt = s[k + 1 : k + 8]
        if ch in _CONTROL and nxt[:1].isalpha():
            out.append("\\" + _CONTROL[ch])
        elif ch == "\n" and nxt.startswith(_NEWLINE_COMMANDS):
            out.append("\\n")
        else:
            out.append(ch)
    return "".join(out)


def _map_unicode(s: str) -> str:
    if s.isascii():
        return s
    out = []
    for k, ch in enumerate(s):
        if ch in _CIRCLED:  # circled choice numbers: "②③" is the list "2, 3"
            prev_circled = k > 0 and s[k - 1] in _CIRCLED
            out.append(("," if prev_circled else "") + _CIRCLED[ch])
        else:
            out.append(_UNICODE.get(ch, ch))
    return "".join(out)


def _canonical_text(match: re.Match) -> str:
    """One spelling for every text wrapper; a wrapped function name is that function."""
    body = " ".join(match.group(1).split())
    if re.fullmatch(r"\([A-Za-z]\)", body):  # a choice label: \text{(B)} is B
        body = body[1]
    if body in FUNCTION_NAMES:
        return "\\" + body + " "
    if _WRAPPED_NUMBER.fullmatch(body):  # \textbf{42}, \text{-3.5}: a number, bold or not
        return " " + body + " "
    if len(body) == 1 and body.isalpha() and body not in "mgslhL":
        return body  # \mathrm{e}, \mathrm{d}: a letter, not a word (m, g, s ... are units)
    return "\\text{" + body + "}" if body else " "


def _squeeze_spaces(s: str) -> str:
    """Drop whitespace except where it separates two words or two numbers."""
    s = " ".join(s.split())
    if " " not in s:
        return s
    out = []
    for k, ch in enumerate(s):
        if ch != " ":
            out.append(ch)
            continue
        left, right = s[k - 1], s[k + 1]
        keep = left.isalnum() and right.isalnum() and not (left.isdigit() and right.isalpha())
        # "12, 345" is a list: squeezed, it would read as the number 12,345; and "1, 5" as the decimal
        # comma 1,5 (= 1.5), which a decimal on the other side would then equal
        keep = keep or (left == "," and s[k - 2 : k - 1].isdigit() and right.isdigit())
        if keep:
            out.append(" ")
    return "".join(out)


def _text_bodies_squeezed(s: str) -> str:
    """Inside \\text{...} keep single spaces (words), trimmed."""
    return re.sub(r"\\text\{\s*([^{}]*?)\s*\}", lambda m: "\\text{" + " ".join(m.group(1).split()) + "}", s)


def normalize(answer: str) -> str:
    """The canonical string form of an answer: the cache key and the base vote key."""
    # One pass can create new matches for another rule (a removed space joins `\\`
    # and `cdot`), so run to a fixpoint: that is what makes normalize idempotent.
    s = answer
    for _ in range(8):
        out = _normalize_once(s)
        if out == s:
            break
        s = out
    return s


# an aligned block, one equation a row: its rows as a list, the alignment marks gone ("x &= 3 \\\\ y &= 4"
# is "x = 3, y = 4")
_ALIGNED = re.compile(r"\\begin\{(aligned|align\*?|gathered|split)\}(.*?)\\end\{\1\}", re.DOTALL)


def _aligned_rows(m: re.Match) -> str:
    return ", ".join(row.replace("&", " ").strip() for row in m.group(2).split("\\\\") if row.strip())


def _normalize_once(answer: str) -> str:
    s = _map_unicode(_repair_controls(answer))
    if "\\begin" in s:
        s = _ALIGNED.sub(_aligned_rows, s)
    if "\\\\" in s:
        s = _BACKSLASH_BEFORE_CMD.sub(r"\\", s)
        s = s.replace("\\\\", _ROW)  # protect matrix row breaks from the spacing rules
    for pattern, repl, trigger in _SIMPLE_SUBS:
        if trigger in s:
            s = pattern.sub(repl, s)
    for _ in range(3 if "\\" in s else 0):  # nested wrappers: \text{\textbf{x}}
        s2 = _TEXT_WRAPPER.sub(_canonical_text, s)
        if s2 == s:
            break
        s = s2
    s = _squeeze_spaces(s)
    if " " in s:
        s = _SPACE_THOUSANDS.sub(lambda m: m.group(0).replace(" ", ""), s)
    if "\\text" in s:
        s = _text_bodies_squeezed(s)
    if "pct" in s or "per" in s:
        s = _PERCENT_WORD.sub("%", s)
    if "{" in s:
        s = _ONE_CHAR_GROUP.sub(r"\1\2", s)
    if "\\frac" in s:
        s = _FRAC_DIGITS.sub(r"\\frac{\1}{\2}", s)
    if "." in s:
        s = _STRAY_PERIOD.sub("", s)
    s = s.rstrip(" ,;.^").lstrip(" ,;").replace(_ROW, "\\\\")
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    return s
