"""Answer extraction and the first exact/numeric checker (cheap, in-process).

`extract_boxed` takes the last `\\boxed{...}` with nested braces. The full rule-based
verifier lives in `math_verify`; this module is the fast path it builds on.
"""
from __future__ import annotations

from fractions import Fraction

MAX_ANSWER_CHARS = 10_000  # longer "answers" are refused before any parsing


def extract_boxed(text: str) -> str | None:
    """Contents of the last \\boxed{...} or \\fbox{...}, braces balanced; None if absent."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth, j = 1, i
    while j < len(text):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
        j += 1
    return None  # unbalanced: the model never closed its box


def exact_number(s: str) -> Fraction | None:
    """An integer, decimal or a/b written plainly, as an exact rational; else None."""
    s = s.strip().replace(",", "").replace(" ", "")
    if not s or len(s) > 64:
        return None
    try:
        if "/" in s:
            num, den = s.split("/", 1)
            return Fraction(int(num), int(den))
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def simple_check(answer: str | None, reference: str) -> str:
    """correct | incorrect | no_answer: exact string, then exact numeric comparison."""
    if answer is None:
        return "no_answer"
    if len(answer) > MAX_ANSWER_CHARS:
        return "incorrect"
    if answer.strip() == reference.strip():
        return "correct"
    a, r = exact_number(answer), exact_number(reference)
    if a is not None and r is not None:
        return "correct" if a == r else "incorrect"
    return "incorrect"
