"""The boxed answer of a completion, as the tiny model's warm-up measures it.

`math_verify.extract_answer` is the verifier's full extraction (several spellings,
"the answer is ..."); this is the strict one the tiny model's pass rate is defined by:
only a `\\boxed{}` counts.
"""
from __future__ import annotations


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
