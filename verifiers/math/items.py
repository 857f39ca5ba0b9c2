"""Tokens and answer items (stage 2 of the math verifier).

A normalised answer is tokenised, then split into items at top-level separators
(`,` `;` and the words "and"/"or"). Each item is cleaned before it is parsed:

    "\\text{only}x=0"                         -> "0"        (filler words, label x)
    "\\frac{84}{13}\\text{days}"              -> "\\frac{84}{13}"   (trailing unit text, kept
                                                              as a Unit when units.py knows it)
    "12^{\\text{th}}", "15th"                 -> "12", "15"  (ordinals)
    "(x,y,z)=(1,2,3)", "Paolo:18", "f(x)=2x"  -> labels dropped, their symbols kept
    "AB=4", "|AB|=1", "\\angle ABC=30", "V_1:V_2=11:21"  -> named quantities too
    "f(x)=1\\text{for all}x\\in\\mathbb{Z}"   -> "f(x)=1"   (quantifier qualifier)

An item that still holds free text after cleaning is a text item. Only the standard
library is used; nothing here evaluates anything.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from .units import Unit, letter_unit, read_unit


class ParseError(ValueError):
    """Not in the grammar; the caller falls back to text comparison."""


class LimitExceeded(ValueError):
    """Over a size limit (length, nesting, digits, exponent); check() says "error"."""


MAX_CHARS = 2_000
MAX_TOKENS = 600
MAX_NESTING = 40
MAX_NUMBER_DIGITS = 200
MAX_EXPONENT = 1_000  # 1e1000 is refused, as 10^{10^{10}} is by the evaluator
MAX_REPEAT_BLOCK = 6  # 0.142857142857... is 1/7


class Tok(NamedTuple):
    kind: str  # num | let (letter run) | cmd (\name) | op | text | row (\\) | begin | end
    text: str


GREEK = frozenset(
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa "
    "lambda mu nu xi rho sigma tau upsilon phi varphi chi psi omega Gamma Delta "
    "Theta Lambda Xi Sigma Phi Psi Omega ell".split()
)
CONNECTORS = frozenset({"and", "or"})
_FILLER = frozenset("only exactly the answer final is are solution solutions value values".split())
_QUALIFIER_START = frozenset({"for", "where", "with"})
_QUALIFIER_VOCAB = frozenset(
    "for all any every each some where with is are an a in and integer integers real "
    "reals number numbers positive negative nonnegative non natural rational complex "
    "constant constants arbitrary x n k m t".split()
)
_ORDINALS = frozenset({"th", "st", "nd", "rd"})
_UPPER_NAME = re.compile(r"[A-Z]{1,3}")  # points and the segments, angles, areas they name
_NAME_COMMANDS = frozenset({"angle", "measuredangle", "overline", "triangle", "vec", "overrightarrow"})
UNIT_WORDS = frozenset(
    "cm mm km kg mg ml day days hr hrs hour hours min mins minute minutes sec secs "
    "second seconds yuan dollars dollar cents units unit inches inch ft feet meters "
    "metres meter grams gram liters litres degrees deg miles mph kmh".split()
)
# Words that make a trailing text more than a unit: they scale the number or take it back
# ("5 \\text{ million}", "3 \\text{ (or 4)}", "5 \\text{ is wrong}"); such a tail is kept as text,
# never dropped as a unit. Comparatives are not here: "15 more apples" answers "how many more"
# (OPPOSITES parts "5 more" from "5 fewer" instead)
TAIL_MEANINGS = frozenset(
    "hundred hundreds thousand thousands million millions billion billions trillion trillions dozen dozens "
    "not no or wrong incorrect false except".split()
)
# words of a dropped tail that say opposite things of the same number: one on each side is unequal
OPPOSITES = (("more", "fewer"), ("more", "less"), ("older", "younger"), ("greater", "smaller"), ("greater", "less"),
             ("larger", "smaller"), ("higher", "lower"), ("above", "below"), ("profit", "loss"), ("gain", "loss"),
             ("north", "south"), ("east", "west"), ("increase", "decrease"), ("faster", "slower"),
             ("longer", "shorter"), ("heavier", "lighter"), ("before", "after"), ("earlier", "later"))
_TEXT_SYNONYMS = {
    "infinitely many": Tok("cmd", "infty"), "infinite": Tok("cmd", "infty"),
    "infinity": Tok("cmd", "infty"), "no solution": Tok("cmd", "emptyset"),
    "none": Tok("cmd", "emptyset"), "empty set": Tok("cmd", "emptyset"),
}
_OPS = frozenset("+-*/^_()[]{},;:=<>!|'%&")
_NUMBER = re.compile(r"\d*\.?\d*")
_OVERLINE = re.compile(r"\\overline\{(\d{1,12})\}")
_EXPONENT = re.compile(r"[eE]([-+]?)(\d{1,6})(?![\d.])")
_LETTERS = re.compile(r"[^\W\d_]+")  # unicode letters too: prose in any language is words
_NAME = re.compile(r"[A-Za-z]+")
_OPEN = frozenset({("op", "("), ("op", "["), ("op", "{"), ("cmd", "{")})
_CLOSE = frozenset({("op", ")"), ("op", "]"), ("op", "}"), ("cmd", "}")})


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


_SYMBOL_WORDS = re.compile(r"\\[a-z]+|[a-z0-9]+|[-+*/^=<>!|%]")
_HYPHEN = re.compile(r"(?<=[A-Za-z])-(?=[A-Za-z])")


def symbol_words(text: str) -> list[str]:
    """The words of a text with the operators and commands between them, lower case:
    what text that does not parse is compared by, so "a+b" and "a-b" differ. Brackets
    and punctuation are not words, nor is \\text; a hyphen between letters joins
    ("non-negative")."""
    return _SYMBOL_WORDS.findall(_HYPHEN.sub(" ", text.replace("\\text", " ")).lower())


def token_words(toks: list[Tok]) -> list[str]:
    """symbol_words of a token list (a command token holds its name without the backslash)."""
    return symbol_words(" ".join("\\" + t.text if t.kind == "cmd" else t.text for t in toks))


def check_nesting(s: str) -> None:
    depth = 0
    for ch in s:
        if ch in "([{":
            depth += 1
            if depth > MAX_NESTING:
                raise LimitExceeded(f"brackets nested deeper than {MAX_NESTING}")
        elif ch in ")]}":
            depth -= 1


def _group_end(s: str, start: int) -> int:
    """Index just past the brace group opening at s[start]; ParseError if unclosed."""
    depth = 0
    for k in range(start, len(s)):
        if s[k] == "{":
            depth += 1
        elif s[k] == "}":
            depth -= 1
            if depth == 0:
                return k + 1
    raise ParseError("unclosed brace")


def _command(s: str, i: int) -> tuple[Tok, int]:
    """The token for the backslash command at s[i] == '\\'."""
    if s.startswith("\\\\", i):
        return Tok("row", "\\\\"), i + 2
    m = _NAME.match(s, i + 1)
    if not m:
        return Tok("cmd", s[i + 1 : i + 2]), i + 2
    name, j = m.group(0), m.end()
    if name in ("text", "begin", "end"):
        while j < len(s) and s[j] == " ":
            j += 1
        if j >= len(s) or s[j] != "{":
            raise ParseError(f"\\{name} without a group")
        end = _group_end(s, j)
        body = s[j + 1 : end - 1].strip("{} ")
        return Tok(name, body), end
    return Tok("cmd", name), j


def _repeating(digits: str) -> tuple[str, str] | None:
    """(fixed part, repeated block) when the digits end in a block written at least
    twice: "1666" -> ("1", "6"), "0909" -> ("", "09"); None for "14159"."""
    for size in range(1, MAX_REPEAT_BLOCK + 1):
        if len(digits) >= 2 * size and digits[-size:] == digits[-2 * size : -size]:
            start = len(digits) - 2 * size
            while start > 0 and digits[start - 1] == digits[start - 1 + size]:
                start -= 1
            return digits[:start], digits[start : start + size]
    return None


def _number(s: str, i: int) -> tuple[str, int]:
    """The number literal at s[i] and the index past it. Besides digits and a point:
    a repeating decimal ("0.1\\overline{6}", or "0.1666\\cdots" whose digits end in a
    block written twice) becomes "0.1(6)"; other digits before \\cdots are a cut-off
    decimal, the digits written. Scientific notation ("4.2e1", "1.5E-3", "3e8") is read
    when the mantissa has a point or the exponent no sign: "2e-1" stays 2e - 1."""
    m = _NUMBER.match(s, i)
    text, j = m.group(0), m.end()
    if "." in text:
        whole, fraction = text.split(".")
        bar = _OVERLINE.match(s, j)
        if bar:
            return f"{whole}.{fraction}({bar.group(1)})", bar.end()
        if s.startswith("\\cdots", j) and fraction:
            rep = _repeating(fraction)
            j += len("\\cdots")
            return (f"{whole}.{rep[0]}({rep[1]})" if rep else text), j
    text = text.rstrip(".")
    sci = _EXPONENT.match(s, j)
    if sci and text and ("." in text or not sci.group(1)):
        if int(sci.group(2)) > MAX_EXPONENT:
            raise LimitExceeded("exponent too large")
        return text + "e" + sci.group(1) + sci.group(2), sci.end()
    return text, j


def tokenize(s: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch.isspace():
            i += 1
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and s[i + 1].isdigit()):
            text, i = _number(s, i)
            if len(text) > MAX_NUMBER_DIGITS:
                raise LimitExceeded("number literal too long")
            toks.append(Tok("num", text))
        elif ch.isalpha():
            m = _LETTERS.match(s, i)
            toks.append(Tok("let", m.group(0)))
            i = m.end()
        elif ch == "\\":
            tok, i = _command(s, i)
            toks.append(tok)
        elif ch in _OPS:
            toks.append(Tok("op", ch))
            i += 1
        else:
            raise ParseError(f"unexpected character {ch!r}")
        if len(toks) > MAX_TOKENS:
            raise LimitExceeded(f"more than {MAX_TOKENS} tokens")
    return toks


# --- items ----------------------------------------------------------------------


_TEXT_SEPARATORS = re.compile(r"((?:^|\s)(?:and|or)(?:\s|$)|[,;])")
_TEXT_CONNECTORS = re.compile(r"((?:^|\s)(?:and|or)(?:\s|$))")


def _split_text(tok: Tok, depth: int) -> list[Tok]:
    """A text token around "and"/"or" (and commas, at top level): separators at top
    level, words inside groups. A lone letter is a symbol: \\text{A, C} lists A and C."""
    content = tok.text.strip(" ,.")
    for phrase, repl in _TEXT_SYNONYMS.items():
        if content.lower() == phrase:
            return [repl]
    parts = (_TEXT_SEPARATORS if depth == 0 else _TEXT_CONNECTORS).split(content)
    out: list[Tok] = []
    for k, part in enumerate(parts):
        part = part.strip(" ")
        if k % 2 == 1:  # a separator: "and"/"or" kept as words (split_items says which joined two items)
            out.append(Tok("op", ",") if depth == 0 and part in (",", ";") else Tok("let", part))
        elif len(part) == 1 and part.isalpha() and len(parts) > 1:  # a listed letter, not a unit like m
            out.append(Tok("let", part))
        elif part.strip(","):
            out.append(Tok("text", part.strip(",")))
    return out


_AND = frozenset({"and", "land", "wedge"})  # a conjunction (the word, \\land, \\wedge): "x > 2 and x < 5" is one set, their intersection


def split_items(toks: list[Tok]) -> list[list[Tok]]:
    return [item for _, item in split_items_joined(toks)]


def split_items_joined(toks: list[Tok]) -> list[tuple[str, list[Tok]]]:
    """The top-level items, each with what joined it to the one before: "and" (a conjunction:
    "and", \\land, \\wedge), "or", "," (a comma or semicolon), or "" for the first."""
    items: list[tuple[str, list[Tok]]] = [("", [])]
    depth = 0
    for tok in toks:
        key = (tok.kind, tok.text)
        if key in _OPEN or tok.kind == "begin":
            depth += 1
        elif key in _CLOSE or tok.kind == "end":
            depth -= 1
        expanded = _split_text(tok, depth) if tok.kind == "text" else [tok]
        for t in expanded:
            at_top = depth == 0
            if at_top and (t in (Tok("op", ","), Tok("op", ";")) or (t.kind == "let" and t.text in CONNECTORS)
                           or (t.kind == "cmd" and t.text in _AND)):
                join = "," if t.kind == "op" else "and" if t.text in _AND else t.text
                items.append((join if items[-1][1] else items[-1][0] or join, []))
            else:
                items[-1][1].append(t)
    return [(join, item) for join, item in items if item]


def _is_fillers(tok: Tok) -> bool:
    return tok.kind in ("text", "let") and bool(words(tok.text)) and set(words(tok.text)) <= _FILLER


def _drop_ordinals(toks: list[Tok]) -> list[Tok]:
    """15th, 12^{th}, 12^{\\text{th}}, 11^th -> the number."""
    out: list[Tok] = []
    k = 0
    while k < len(toks):
        after_num = bool(out) and out[-1].kind == "num"
        rest = toks[k : k + 4]
        braced = len(rest) == 4 and [rest[0].text, rest[1].text, rest[3].text] == ["^", "{", "}"]
        if after_num and toks[k].kind in ("let", "text") and toks[k].text in _ORDINALS:
            k += 1
        elif after_num and braced and rest[2].text in _ORDINALS:
            k += 4
        elif after_num and len(rest) >= 2 and rest[0] == Tok("op", "^") and rest[1].text in _ORDINALS:
            k += 2
        else:
            out.append(toks[k])
            k += 1
    return out


def _symbol_name(tok: Tok) -> str | None:
    """The name of a one-letter or Greek symbol token."""
    if tok.kind == "let" and len(tok.text) == 1:
        return tok.text
    return tok.text if tok.kind == "cmd" and tok.text in GREEK else None


def _cut_qualifier(toks: list[Tok]) -> tuple[list[Tok], frozenset[str]]:
    """Drop "for all x in Z" / "for some integer t" tails made only of quantifier words;
    the symbols such a tail names are declared: bound there, free to be renamed."""
    for j in range(1, len(toks)):
        tok = toks[j]
        first = words(tok.text)[:1] if tok.kind in ("text", "let") else []
        if tok == Tok("cmd", "forall") or (first and first[0] in _QUALIFIER_START):
            tail = [w for t in toks[j:] if t.kind == "text" or (t.kind == "let" and len(t.text) > 1) for w in words(t.text)]
            if not set(tail) <= _QUALIFIER_VOCAB:
                return toks, frozenset()
            return toks[:j], _named(toks[j:])
    return toks, frozenset()


_SET_FONTS = frozenset({"mathbb", "Bbb", "mathbf"})


def _named(tail: list[Tok]) -> frozenset[str]:
    """The symbols a qualifier names: t in "for some integer t", x in "for all x \\in
    \\mathbb{R}" (not the R of the number set)."""
    names, k = set(), 0
    while k < len(tail):
        if tail[k].kind == "cmd" and tail[k].text in _SET_FONTS:
            k += 4 if k + 1 < len(tail) and tail[k + 1] == Tok("op", "{") else 2
            continue
        name = _symbol_name(tail[k])
        if name:
            names.add(name)
        k += 1
    return frozenset(names)


_NUMBER_SETS = frozenset("ZNRQC")


def declaration(toks: list[Tok]) -> str | None:
    """The parameter an item such as "k \\in \\mathbb{Z}" declares (written after the answer:
    "x = \\frac{\\pi}{2} + k\\pi, k \\in \\mathbb{Z}"), or None."""
    if len(toks) < 3 or toks[1] != Tok("cmd", "in") or _symbol_name(toks[0]) is None:
        return None
    rest = toks[2:]
    if rest[0].kind == "cmd" and rest[0].text in _SET_FONTS:
        rest = rest[2:] if len(rest) > 2 and rest[1] == Tok("op", "{") else rest[1:]
    if rest and rest[0].kind == "let" and rest[0].text in _NUMBER_SETS:
        return _symbol_name(toks[0])
    return None


def _unit_letters(tok: Tok) -> bool:
    """A unit written without \\text after a number: "5 cm", "3 hours", and "90 \\text{min}"
    (which normalize made the command \\min: a function name with nothing to apply to)."""
    if tok == Tok("cmd", "min"):
        return True
    return tok.kind == "let" and (tok.text.lower() in UNIT_WORDS or letter_unit(tok.text))


def _drop_units(toks: list[Tok]) -> tuple[list[Tok], Unit | None, str]:
    """Trailing unit text after a quantity ("5.4 square units", "864 inches^2", "2.65 m",
    "5cm^2"): the quantity's tokens, and the unit the tail names when units.py knows
    all of it (None for "square units", "yuan (A)", or no tail)."""
    cut = len(toks)
    while cut > 1:
        last = toks[cut - 1]
        powered = cut > 3 and toks[cut - 2] == Tok("op", "^") and last.kind == "num"
        if powered and (toks[cut - 3].kind == "text" or (_unit_letters(toks[cut - 3]) and toks[cut - 4].kind == "num")):
            cut -= 3
        elif last.kind == "text" and any(t.kind != "text" for t in toks[: cut - 1]):
            cut -= 1
        elif _unit_letters(last) and toks[cut - 2].kind == "num":
            cut -= 1
        else:
            break
    tail = " ".join(t.text for t in toks[cut:])
    unit = read_unit(tail) if tail else None
    if unit is None and TAIL_MEANINGS & {w.lower() for w in _LETTERS.findall(tail)}:
        return toks, None, ""  # not a unit: the tail changes what the number says
    return toks[:cut], unit, tail


def _balanced_end(toks: list[Tok], k: int) -> int:
    """Index past the group opened at toks[k]; -1 if it does not close."""
    depth = 0
    for j in range(k, len(toks)):
        key = (toks[j].kind, toks[j].text)
        depth += key in _OPEN
        depth -= key in _CLOSE
        if depth == 0:
            return j + 1
    return -1


def _is_simple_label(toks: list[Tok]) -> bool:
    """x, x_1, a_{k-1}, \\alpha_p, f(x), T(10), (P(x))."""
    if not toks:
        return False
    head = toks[0]
    if not ((head.kind == "let" and len(head.text) == 1) or (head.kind == "cmd" and head.text in GREEK)):
        return False
    k = 1
    if k < len(toks) and toks[k] == Tok("op", "_"):
        k = _balanced_end(toks, k + 1) if k + 1 < len(toks) and toks[k + 1] == Tok("op", "{") else k + 2
    if 0 < k < len(toks) and toks[k] == Tok("op", "("):
        k = _balanced_end(toks, k)
    return k == len(toks)


def _is_name_label(toks: list[Tok]) -> bool:
    """A named quantity of geometry: AB, ABC, P_1, \\angle ABC, \\overline{AB}, |AB|."""
    if len(toks) >= 3 and toks[0] == toks[-1] == Tok("op", "|"):
        return _is_name_label(toks[1:-1])
    if toks and toks[0].kind == "cmd" and toks[0].text in _NAME_COMMANDS:
        toks = toks[1:]
        if len(toks) >= 3 and toks[0] == Tok("op", "{") and _balanced_end(toks, 0) == len(toks):
            toks = toks[1:-1]
    if not toks or toks[0].kind != "let" or not _UPPER_NAME.fullmatch(toks[0].text):
        return False
    return len(toks) == 1 or _is_simple_label([Tok("let", "X")] + toks[1:])  # a subscript: A_1


def _is_ratio_label(toks: list[Tok]) -> bool:
    """V_1:V_2, AE:EC, a:b:c (the left side of "V_1:V_2 = 11:21")."""
    parts, part = [], []
    for t in toks:
        if t == Tok("op", ":"):
            parts.append(part)
            part = []
        else:
            part.append(t)
    parts.append(part)
    return len(parts) > 1 and all(_is_simple_label(p) or _is_name_label(p) for p in parts)


def _is_word_label(toks: list[Tok]) -> bool:
    """Maximum, Paolo, Sequence 1 (a word of four or more letters, maybe numbered)."""
    if not toks or toks[0].kind not in ("let", "text") or len(toks[0].text) < 4:
        return False
    return len(toks) == 1 or (len(toks) == 2 and toks[1].kind == "num")


def _is_tuple_label(toks: list[Tok]) -> bool:
    if len(toks) < 3 or toks[0] != Tok("op", "(") or _balanced_end(toks, 0) != len(toks):
        return False
    parts = split_items(toks[1:-1])
    return len(parts) > 1 and all(_is_simple_label(p) for p in parts)


# "Answer: 5" frames the value; "Maximum: 5, Minimum: 1" names two
_FRAMING_LABELS = frozenset("answer answers final solution solutions result results total".split())


def _word_label(toks: list[Tok]) -> set[str]:
    """A word label's name ("maximum", "sequence 1"), so that "Maximum: 5, Minimum: 1" is not
    "Maximum: 1, Minimum: 5"; none for a word that only frames the answer ("Answer: 5")."""
    words = " ".join(t.text.lower() for t in toks)
    return set() if toks[0].text.lower() in _FRAMING_LABELS else {"word:" + words}


def _indexed_name(toks: list[Tok]) -> str | None:
    """"a_1" for a_1 or a_{1}: a letter with a numbered subscript names one term of an indexed
    family (a_1 is not a_2), where a_n or a_{k-1} names the family by its index."""
    if len(toks) == 3 and toks[1] == Tok("op", "_") and toks[2].kind == "num":
        number = toks[2].text
    elif len(toks) == 5 and toks[1:3] == [Tok("op", "_"), Tok("op", "{")] and toks[3].kind == "num" \
            and toks[4] == Tok("op", "}"):
        number = toks[3].text
    else:
        return None
    head = toks[0]
    named = (head.kind == "let" and (len(head.text) == 1 or _UPPER_NAME.fullmatch(head.text))) \
        or (head.kind == "cmd" and head.text in GREEK)
    return f"{head.text}_{number}" if named and number.isdigit() else None


def _label_symbols(toks: list[Tok]) -> set[str]:
    """The names a label gives: its letters and Greek letters, AB as one name, a_1 as one."""
    indexed = _indexed_name(toks)
    if indexed is not None:
        return {indexed}
    return {t.text for t in toks if (t.kind == "let" and (len(t.text) == 1 or _UPPER_NAME.fullmatch(t.text)))
            or (t.kind == "cmd" and t.text in GREEK)}


def _is_label(toks: list[Tok]) -> bool:
    """What may stand left of "=" (or \\in, \\approx) as the name of the answer."""
    return (_is_simple_label(toks) or _is_tuple_label(toks) or _is_word_label(toks)
            or _is_name_label(toks) or _is_ratio_label(toks))


def _top_level(toks: list[Tok], seps: tuple) -> int:
    """Index of the first separator outside brackets, or -1."""
    depth = 0
    for k, tok in enumerate(toks):
        key = (tok.kind, tok.text)
        depth += key in _OPEN
        depth -= key in _CLOSE
        if depth == 0 and key in seps:
            return k
    return -1


def _definition_args(label: list[Tok]) -> tuple[str, ...]:
    """The variables a definition binds, in order: x in "f(x) =", x and y in "g(x, y) =",
    n in "a_n =" (none in "T(10) =" or "x_1 =")."""
    if not _is_simple_label(label) or len(label) < 3:
        return ()
    if label[1] == Tok("op", "_"):
        inner = label[3:-1] if label[2] == Tok("op", "{") else label[2:3]
        name = _symbol_name(inner[0]) if len(inner) == 1 else None
        return (name,) if name else ()
    if label[1] != Tok("op", "("):
        return ()
    names = tuple(_symbol_name(t) for t in label[2:-1:2])
    commas = all(t == Tok("op", ",") for t in label[3:-1:2])
    return names if names and None not in names and commas else ()


def strip_labels(toks: list[Tok]) -> tuple[list[Tok], frozenset[str], tuple[str, ...], tuple[str, ...]]:
    """Drop leading "lhs =" / "lhs \\in" labels (chains too: x=y=z=v), then "Word:" ones.
    "=" is looked for first, so the ratio in "V_1:V_2=11:21" is a label, not a word.
    Returns the tokens left, the labels' symbols, the variables of a definition and the names
    of a tuple label in their order."""
    labels: set[str] = set()
    args: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    while True:
        cut = _top_level(toks, (("op", "="), ("cmd", "in"), ("cmd", "approx")))
        if not (0 < cut < len(toks) - 1 and _is_label(toks[:cut])):
            cut = _top_level(toks, (("op", ":"),))
            if not (0 < cut < len(toks) - 1 and _is_word_label(toks[:cut])):
                break
        labels |= _label_symbols(toks[:cut])
        if toks[cut] == Tok("op", ":") and _is_word_label(toks[:cut]):
            labels |= _word_label(toks[:cut])
        if toks[cut] == Tok("op", "="):
            args = args or _definition_args(toks[:cut])
            order = order or _tuple_names(toks[:cut])
        toks = toks[cut + 1 :]
    return toks, frozenset(labels), args, order


def _tuple_names(label: list[Tok]) -> tuple[str, ...]:
    """The names of a tuple label in their order ("(y, x)" -> ("y", "x")), when each is one
    symbol; () otherwise."""
    if not _is_tuple_label(label):
        return ()
    parts = split_items(label[1:-1])
    names = tuple(" ".join(t.text for t in p) for p in parts)
    return names if all(len(p) == 1 for p in parts) and len(set(names)) == len(names) else ()


class Prepared(NamedTuple):
    toks: list  # of Tok: what is left to parse
    labels: frozenset  # symbols named by dropped labels ("x" in "x = 3")
    is_text: bool  # free text is left: compared as words
    unit: Unit | None  # the unit cut off the end, when units.py knows it
    args: tuple  # variables bound by a definition label, in order ("x" in "f(x) = x^2")
    declared: frozenset  # symbols a dropped qualifier declares ("t" in "... for some integer t")
    order: tuple = ()  # a tuple label's names in their order ("(y, x) = (1, 2)": ("y", "x"))
    tail: str = ""  # the text dropped after the quantity ("years older" in "5 \\text{ years older}")


def prepare_item(toks: list[Tok]) -> Prepared:
    """Clean one item's tokens."""
    while toks and _is_fillers(toks[0]):
        toks = toks[1:]
    toks = _drop_ordinals(toks)
    toks, declared = _cut_qualifier(toks)
    toks, unit, tail = _drop_units(toks)
    if not toks:
        return Prepared(toks, frozenset(), True, None, (), declared)
    toks, labels, args, order = strip_labels(toks)
    is_text = any(t.kind == "text" for t in toks)
    return Prepared(toks, labels, is_text, unit, args, declared, order, tail)
