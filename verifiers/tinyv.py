"""TinyV in add-on mode (TinyV §4, Figure 5): rules first, a small LLM second.

Only answers the rules call "incorrect" go to the model, which is asked whether the
answer is a false negative; "correct" stays correct without a call, and an answer the
rules could not extract (no_answer) stays wrong. The prompt is the paper's Figure 8
template, kept in prompts/tinyv.txt. One batched call per group:

    items = [TinyVItem(problem, label, answer, check(answer, label)) for answer in answers]
    accepted = tinyv_verify(client, items)     # list[bool | None], one per item
    view = GroupView(..., tinyv=accepted)      # rewards.tinyv reads it

Result per item: True (rules or model accept), False (model rejects, or no answer),
None (not decidable: the rules said "error"/"timeout", or the reply named neither
True nor False). Depends only on the LLMClient protocol in llm.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from .llm import LLMClient, strip_reasoning

PROMPT_PATH = Path(__file__).with_name("prompts") / "tinyv.txt"
MAX_FIELD_CHARS = 4_000  # keeps one rambling answer from blowing up the verifier's context
_PLACEHOLDER = re.compile(r"\{\{(QUESTION|GROUND_TRUTH_ANSWER|MODEL_ANSWER)\}\}")
_VERDICT_WORD = re.compile(r"\b(true|false)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TinyVItem:
    question: str
    ground_truth: str
    model_answer: str | None  # the extracted final answer
    rule_verdict: str  # math_verify.check kind (or the worker's "timeout")


@lru_cache(maxsize=1)
def load_template() -> str:
    return PROMPT_PATH.read_text(encoding="utf-8").rstrip("\n")


def build_prompt(question: str, ground_truth: str, model_answer: str) -> str:
    """Figure 8 with the three fields filled in one pass (a field that itself contains
    `{{...}}` is not substituted again)."""
    fields = {
        "QUESTION": question[:MAX_FIELD_CHARS],
        "GROUND_TRUTH_ANSWER": ground_truth[:MAX_FIELD_CHARS],
        "MODEL_ANSWER": model_answer[:MAX_FIELD_CHARS],
    }
    return _PLACEHOLDER.sub(lambda m: fields[m.group(1)], load_template())


def parse_reply(text: str) -> bool | None:
    """The verifier's label: the last standalone True/False in the reply after any reasoning
    block (TinyV-Think writes its analysis first), or None when there is none."""
    found = _VERDICT_WORD.findall(strip_reasoning(text))
    return None if not found else found[-1].lower() == "true"


def tinyv_verify(client: LLMClient, items: Sequence[TinyVItem], *, max_tokens: int = 8) -> list[bool | None]:
    """Add-on cascade over a batch: asks the model about rule "incorrect" items only."""
    results: list[bool | None] = []
    asked: list[int] = []
    prompts: list[str] = []
    for k, item in enumerate(items):
        if item.rule_verdict == "correct":
            results.append(True)
        elif item.rule_verdict == "no_answer" or (item.rule_verdict == "incorrect" and item.model_answer is None):
            results.append(False)
        elif item.rule_verdict == "incorrect":
            results.append(None)  # filled from the reply below
            asked.append(k)
            prompts.append(build_prompt(item.question, item.ground_truth, item.model_answer))
        else:
            results.append(None)
    if prompts:
        replies = client.generate(prompts, n=1, temperature=0.0, max_tokens=max_tokens)
        if len(replies) != len(prompts):
            raise RuntimeError(f"LLM client answered {len(replies)} of {len(prompts)} prompts")
        for k, completions in zip(asked, replies):
            results[k] = parse_reply(completions[0].text) if completions else None
    return results
