"""The boxed answer of a completion, as the tiny model's warm-up measures it.

`verify.extract_answer` is the verifier's full extraction (several spellings,
"the answer is ..."); this is the strict one the tiny model's pass rate is defined by:
only a `\\boxed{}` counts.
"""
from __future__ import annotations

from jury.verifiers.math.extract import brace_group


def extract_boxed(text: str) -> str | None:
    """Contents of the last \\boxed{...} or \\fbox{...}, braces balanced; None if absent
    or if that last box was never closed (unlike the verifier, no earlier box stands in)."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    inner = brace_group(text, text.index("{", start))
    return None if inner is None else inner.strip()
