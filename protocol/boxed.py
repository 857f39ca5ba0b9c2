"""The boxed answer of a completion: `\\boxed{...}` with its braces balanced.

Below every role and every model: the tiny models measure their pass rate with
`extract_boxed` (only a box counts), and the math verifier's full extraction
(verifiers/math/extract.py: several spellings, "the answer is ...") finds its boxes
with `group_end`. Standard library only.
"""
from __future__ import annotations

import re

_BRACES = re.compile(r"[{}]")


def group_end(text: str, start: int, limit: int) -> int | None:
    """Index past the brace that closes the group opening at text[start] == '{', or None
    when it does not close before `limit`."""
    depth = 0
    for m in _BRACES.finditer(text, start, limit):
        depth += 1 if m.group(0) == "{" else -1
        if depth == 0:
            return m.end()
    return None


def brace_group(text: str, start: int, limit: int | None = None) -> str | None:
    """Content of the brace group opening at text[start] == '{', or None when it does
    not close before `limit` (the end of the text by default)."""
    end = group_end(text, start, len(text) if limit is None else limit)
    return None if end is None else text[start + 1 : end - 1]


def extract_boxed(text: str) -> str | None:
    """Contents of the last \\boxed{...} or \\fbox{...}, braces balanced; None if absent
    or if that last box was never closed (unlike the verifier, no earlier box stands in)."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    inner = brace_group(text, text.index("{", start))
    return None if inner is None else inner.strip()
