"""The rule-based math verifier: is a model's final answer the reference answer?

    text ──extract_answer──> answer ──normalize──> cache key ──check──> verdict
                                                   └─answer_key──> vote key

How the verifier worker uses it (the worker owns the pool and the verdict cache):

    vote = extract_answer(response_text, unanchored=cfg)     # None: no final answer
    answer = extract_answer(response_text, reference_parts(reference), cfg)  # for the check:
                                                    # an answer boxed in parts, as many as the reference's
    key = (normalize(answer), normalize(reference), accept_rounded)
    judgement = (cache.get(key)                     # answer None -> "no_answer"
                 or quick_check(answer, reference)  # in-process, cheap; None = unsure
                 or pool.run(judge, answer, reference, accept_rounded, timeout=...))

`check` returns "correct", "incorrect", "no_answer" or "error" (inputs over a size
limit, exponents/factorials too large to compute); `judge` returns that verdict and
whether an accept needed the rounding tolerance. Both are pure and deterministic,
depends on its inputs only through their normal forms (so the cache is sound), never
evals model output, and imports sympy only for its last-resort symbolic step (small
trees only); the pool's per-check timeout is the backstop for the rest. An answer
or reference still wrapped in \\boxed{} is extracted first (a response by its last group
of boxes, or its last boxes as many as the reference has parts; a reference solution
by all its boxes: see extract).

`quick_check` decides only literal matches and plain numbers (integers, decimals,
a/b, \\frac{a}{b}) without parsing; whatever it returns, `check` returns too.

Rounding (`accept_rounded`, default False). An answer's decimal is the value written:
0.333 is not 1/3, 3.14159 (or 3.14159...) is not π, 1.3 is not 1.27. That is the
default because in RL a wrong accept is the worst error (the policy learns to round
instead of solving exactly), and because other verifiers (math-verify among them)
reject these by default, so rewards stay comparable. With accept_rounded=True a
decimal answer also matches a value that rounds or truncates to it (at least 3
significant digits, 2 when both sides are decimals), for datasets whose questions ask
for approximations; `judge` marks those accepts `rounded`, and the worker counts them
as verifier/rounded_accepts. Either way a decimal *reference* is taken as rounded to
its places (1587/52 meets "30.52"): the reference sets the precision, and an exact
answer is at least that precise. On HardVerify-Math the default rejects 4 answers
that TinyV labels correct (85.71 for 600/7, 1.3% for 1.27%, 165.5 for 165.47, 2.65
for 2.653): 219 accepted by default, 223 with accept_rounded.

`answer_key` is the majority-vote key: answers with equal keys are the same answer.
Exact values are keyed by their reduced rational ("0.5", "\\frac{2}{4}" -> "1/2";
several answers sorted: "3, 1" -> "1, 3"; labelled ones keep labels: "a=1, b=2", and a
value named by its variable keeps the name: "x=0.5" -> "x=1/2", which y = 0.5 is not),
with a unit in its base ("5 cm" -> "1/20 m"), a named tuple in its names' order
("(y, x) = (1, 2)" -> "(x, y)=(2, 1)") and a comparative after it ("5 more"); anything
else by its normal form; None when there is no answer (None, empty, over the size
limit). Keys that answer_key cannot make equal are merged by the checker's own check
(MathChecker.keys: "x=3" joins "3"); a gate reads the answer as written, not its key.

Stages: extract (final answer) -> normalize (lexical normal form) -> items (tokens,
items, labels, units) -> parse (trees) -> answer (whole answers, ±) ->
evaluate (exact / numeric / sympy) -> sets (intervals), solve (does an equation
determine its unknown) -> compare (views). Standard library, plus sympy lazily.
"""
from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from .answer import Parsed, parse_answer
from .compare import answers_equivalent
from .evaluate import EvalError, exact
from .items import GREEK, MAX_CHARS, OPPOSITES, LimitExceeded
from .extract import extract_answer, extract_reference
from .normalize import normalize

__all__ = ["extract_answer", "extract_reference", "reference_parts", "normalize", "check", "judge", "Judgement",
           "quick_check", "answer_key", "exact_value", "clear_caches", "VERDICTS"]

VERDICTS = ("correct", "incorrect", "no_answer", "error")
QUICK_MAX_CHARS = 200
_DECIMAL_COMMA = re.compile(r"-?\d+,\d+")
_DECIMAL_POINT = re.compile(r"-?\d*\.\d+")
_PLAIN_NUMBER = re.compile(r"(-?)(?:(\d+(?:\.\d+)?)|(\d+)/(\d+)|\\frac\{(\d+)\}\{(\d+)\})")


def _final_answer(answer: str, reference: str) -> str | None:
    """check() also accepts a whole boxed response: it extracts first, with the
    reference's number of parts (an answer boxed in parts is one set of parts)."""
    if "\\boxed" in answer or "\\fbox" in answer:
        return extract_answer(answer, parts=reference_parts(reference))
    return answer


def reference_parts(reference: str) -> int:
    """How many parts the reference's answer has: its items ("1, 2" and "x=1, y=2" have
    two), or the members of a lone tuple or set ("(5, 1)", "\\{2, 3\\}"). What
    extract_answer(text, parts=...) needs when the text is checked against it."""
    r = _normal_reference(reference) if len(reference) <= 10 * MAX_CHARS else ""
    if not r or len(r) > MAX_CHARS:
        return 1
    try:
        items = _parsed(r).items
    except (LimitExceeded, RecursionError, EvalError):
        return 1
    if len(items) == 1 and items[0].node[0] in ("tuple", "set"):
        return max(1, len(items[0].node[1]))
    return len(items)


def _reference_answer(reference: str) -> str:
    """A boxed reference solution's answer is all its boxes (it boxes nothing else)."""
    if "\\boxed" in reference or "\\fbox" in reference:
        return extract_reference(reference) or ""
    return reference


@lru_cache(maxsize=4096)
def _normal_reference(reference: str) -> str:
    # the worker asks reference_parts, then checks G samples against one reference
    return normalize(_reference_answer(reference))


@lru_cache(maxsize=4096)
def _parsed(normalized: str) -> Parsed:
    # references repeat G times per group; answers repeat when the policy agrees
    return parse_answer(normalized)


def clear_caches() -> None:
    """Forget parsed answers and normalised references (benchmarks measure cold checks)."""
    _parsed.cache_clear()
    _normal_reference.cache_clear()


class Judgement(NamedTuple):
    verdict: str  # one of VERDICTS
    rounded: bool  # "correct" only because the answer's decimals were read as rounded


def judge(answer: str | None, reference: str, accept_rounded: bool = False) -> Judgement:
    """The verdict for an answer against the reference, and whether an accept needed
    the rounding tolerance (only ever with accept_rounded)."""
    if answer is None:
        return Judgement("no_answer", False)
    if len(answer) > 10 * MAX_CHARS or len(reference) > 10 * MAX_CHARS:
        return Judgement("error", False)
    answer = _final_answer(answer, reference)
    if answer is None:
        return Judgement("no_answer", False)
    a, r = normalize(answer), _normal_reference(reference)
    if not a:
        return Judgement("no_answer", False)
    if not r or len(a) > MAX_CHARS or len(r) > MAX_CHARS:
        return Judgement("error", False)
    if a == r:
        return Judgement("correct", False)
    a, r = _decimal_comma(a, r), _decimal_comma(r, a)
    try:
        if answers_equivalent(_parsed(a), _parsed(r)):
            return Judgement("correct", False)
        if accept_rounded and answers_equivalent(_parsed(a), _parsed(r), accept_rounded=True):
            return Judgement("correct", True)
        return Judgement("incorrect", False)
    except (LimitExceeded, RecursionError, EvalError):
        return Judgement("error", False)


def check(answer: str | None, reference: str, *, accept_rounded: bool = False) -> str:
    """Verdict for an extracted answer against the reference answer."""
    return judge(answer, reference, accept_rounded).verdict


def _decimal_comma(s: str, other: str) -> str:
    """"1,22" is the decimal 1.22 when the other side is a number written with a point;
    otherwise the list 1, 22. (Groups of three, "1,234", were made thousands by normalize.)"""
    if _DECIMAL_COMMA.fullmatch(s) and _DECIMAL_POINT.fullmatch(other):
        return s.replace(",", ".")
    return s


def _plain_value(s: str) -> tuple[Fraction, bool] | None:
    """(value, is_decimal) for a plain signed number, else None."""
    m = _PLAIN_NUMBER.fullmatch(s)
    if not m:
        return None
    sign = -1 if m.group(1) else 1
    if m.group(2) is not None:
        return sign * Fraction(m.group(2)), "." in m.group(2)
    num, den = (m.group(3), m.group(4)) if m.group(3) is not None else (m.group(5), m.group(6))
    if int(den) == 0:
        return None
    return sign * Fraction(int(num), int(den)), False


def quick_check(answer: str | None, reference: str) -> str | None:
    """The verdict for literal matches and plain numbers, else None (ask `check`)."""
    if answer is None:
        return "no_answer"
    too_long = len(answer) > QUICK_MAX_CHARS or len(reference) > QUICK_MAX_CHARS
    if too_long or any(box in text for box in ("\\boxed", "\\fbox") for text in (answer, reference)):
        return None
    a, r = normalize(answer), normalize(reference)
    if not a:
        return "no_answer"
    if a == r and r:
        return "correct"
    va, vr = _plain_value(a), _plain_value(r)
    if va is None or vr is None:
        return None
    if va[0] == vr[0]:
        return "correct"
    if not va[1] and not vr[1]:  # decimals may still match by rounding: check decides
        return "incorrect"
    return None


def _item_key(node) -> str | None:
    if node[0] == "tuple":
        keys = [_item_key(n) for n in node[1]]
        return None if None in keys else "(" + ", ".join(keys) + ")"
    value = exact(node) if node[0] not in ("text", "rel") else None
    return None if value is None else str(value)


_OPPOSED = frozenset(w for pair in OPPOSITES for w in pair)


def _keyed_item(item) -> str | None:
    """An item's vote key: its exact value, in its unit's base when it has one ("5 cm" and "0.05 m"
    are "1/20 m", "5 kg" is "5000 g": check calls 5 cm and 5 kg two answers), a named tuple's values in
    its names' sorted order ("(y, x) = (1, 2)" is "(x, y)=(2, 1)"), and the comparatives after it
    ("5 more" is not "5 fewer"); None when the value is not exact."""
    node = item.node
    if item.names and node[0] == "tuple":  # (y, x) = (1, 2) names x = 2, y = 1
        order = sorted(range(len(item.names)), key=lambda k: item.names[k].lower())
        node = ("tuple", tuple(node[1][k] for k in order))
        names = "(" + ", ".join(item.names[k] for k in order) + ")="
    else:
        names = ""
    if item.unit is not None and node[0] not in ("tuple", "text", "rel"):
        value = exact(node)
        if value is None:
            return None
        key = f"{value * item.unit.scale} " + "·".join(f"{d}^{p}" if p != 1 else d for d, p in item.unit.dims)
    else:
        key = _item_key(node)
        if key is None:
            return None
    tail = sorted({w.lower() for w in re.findall(r"[A-Za-z]+", item.tail)} & _OPPOSED)
    return names + key + "".join(" " + w for w in tail)


def _normalized_final(answer: str | None) -> str | None:
    """The final answer normalised, or None when there is none or it is over the size limit."""
    if answer is None:
        return None
    if "\\boxed" in answer or "\\fbox" in answer:  # a vote reads no reference: the last group of boxes
        answer = extract_answer(answer)
    a = normalize(answer) if answer is not None and len(answer) <= 10 * MAX_CHARS else ""
    return a if a and len(a) <= MAX_CHARS else None


def answer_key(answer: str | None) -> str | None:
    """Majority-vote key: equal keys mean the same answer; None when there is none."""
    a = _normalized_final(answer)
    if a is None:
        return None
    try:
        items = _parsed(a).items
        keys = [_keyed_item(item) for item in items]
    except (LimitExceeded, RecursionError, EvalError):
        return a
    if not keys or None in keys:
        return a
    labels = [item.labels for item in items]
    if len(labels) > 1 and all(labels) and len(set(labels)) == len(labels):  # "a=1, b=2" is not "a=2, b=1"
        keys = [",".join(sorted(lab)) + "=" + k for lab, k in zip(labels, keys)]
    elif len(items) == 1 and _variable_names(items[0]):  # "y = 3" is another unknown's value than "x = 3"
        keys = [",".join(sorted(_variable_names(items[0]))) + "=" + keys[0]]
    return keys[0] if len(keys) == 1 else ", ".join(sorted(keys))


_VARIABLE = re.compile(r"[A-Za-z]|[A-Za-z]_\d+|" + "|".join(sorted(GREEK)))


def _variable_names(item) -> frozenset:
    """The variables an item's label names ("x" of "x = 3", "a_1" of "a_1 = 2"), lower case (models
    write N for n); none for a definition, a word or a geometric name (as compare's rule)."""
    if item.args or item.names or not item.labels or not all(_VARIABLE.fullmatch(n) for n in item.labels):
        return frozenset()
    return frozenset(n.lower() for n in item.labels)


def exact_value(answer: str | None) -> Fraction | None:
    """A single rational answer's exact value ("x=-1.5", "\\frac{-6}{4}" -> -3/2), else
    None (several answers, irrational, unparsable, over the limits). For proof gates."""
    a = _normalized_final(answer)
    if a is None:
        return None
    try:
        items = _parsed(a).items
        if len(items) != 1 or items[0].node[0] in ("text", "rel", "tuple", "set", "interval", "matrix"):
            return None
        return exact(items[0].node)
    except (LimitExceeded, RecursionError, EvalError):
        return None
