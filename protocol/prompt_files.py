"""Prompt files and filling them: shared by the verifier roles' prompts (verifiers/prompts/)
and the training templates (data/templates/).

A prompt file is UTF-8 text whose leading `#` lines cite its source and are not part of
the prompt. Standard library only.
"""
from __future__ import annotations

import re
from pathlib import Path


def read_prompt_file(path: Path) -> str:
    """The text of a prompt file without its leading `#` lines."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].startswith("#"):
        start += 1
    return "".join(lines[start:])


_FIELD = re.compile(r"\{(\w+)\}")


def fill(template: str, **fields: str) -> str:
    """Substitute `{name}` for the given fields, in one pass.

    Not str.format: the papers' prompts carry LaTeX braces (`\\boxed{final answer}`), and a
    single pass never re-expands a placeholder that happens to appear inside a solution.
    """
    missing = [k for k in fields if "{" + k + "}" not in template]
    if missing:
        raise KeyError(f"template has no placeholder for {missing}")
    return _FIELD.sub(lambda m: fields.get(m.group(1), m.group(0)), template)
