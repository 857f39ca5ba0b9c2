"""TinyV in add-on mode (TinyV §4, Figure 5): rules first, a small LLM second.

Everything the rules do not call "correct" goes to the model, which is asked whether the
answer is a false negative; "correct" stays correct without a call. That includes a response
the rules found no answer in (no_answer): TinyV's own pipeline asks about those too, its answer
reader always returning some text (uw-nsl/TinyV@dae2c7bd, verl/utils/reward_score/prime_math:
match_answer, then tinyv.py's add-on branch), and the paper names language and format as the
false negatives it recovers. The model is shown the response's final statement then
(`final_statement`); with `ask_unanswered=False` (verifier.tinyv_unanswered=zero) such a
response stays wrong without a call. The prompt is the paper's Figure 8 template, kept in
prompts/tinyv.txt. One batched call per group:

    items = [TinyVItem(problem, label, answer, check(answer, label), text) for answer, text in ...]
    accepted = tinyv_verify(client, items)     # list[bool | None], one per item
    view = GroupView(..., tinyv=accepted)      # rewards.tinyv reads it

Result per item: True (rules or model accept), False (model rejects, or nothing to show
it), None (not decidable: the rules said "error"/"timeout", or the reply named neither
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
FINAL_STATEMENT_CHARS = 300  # an answer-less response is shown this much of its last sentence, at most
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_PLACEHOLDER = re.compile(r"\{\{(QUESTION|GROUND_TRUTH_ANSWER|MODEL_ANSWER)\}\}")
_VERDICT_WORD = re.compile(r"\b(true|false)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TinyVItem:
    question: str
    ground_truth: str
    model_answer: str | None  # the final answer the label check read (None: it found none)
    rule_verdict: str  # math_verify.check kind (or the worker's "timeout")
    response: str = ""  # the sample's text: its final statement is shown when there is no answer


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


def final_statement(text: str) -> str:
    """What the model is shown of a response with no answer the rules could read: the last
    sentence of its last non-empty line after any reasoning block, at most FINAL_STATEMENT_CHARS
    of its end ("So the total is twelve."); "" when there is none. TinyV's reader cuts the text
    after the final statement's last "is", "=" or ":"; the whole sentence keeps what it refers to."""
    lines = [line.strip() for line in strip_reasoning(text).splitlines() if line.strip()]
    if not lines:
        return ""
    sentences = [x for x in _SENTENCE_BREAK.split(lines[-1]) if x.strip()]
    return sentences[-1][-FINAL_STATEMENT_CHARS:] if sentences else ""


def shown_answer(item: TinyVItem, ask_unanswered: bool = True) -> str | None:
    """What the model is asked about for this item, or None when it is not asked: a rule "correct"
    (it stands), an "error"/"timeout" (undecidable), or nothing to show it."""
    if item.rule_verdict not in ("incorrect", "no_answer"):
        return None
    if item.model_answer is not None:
        return item.model_answer
    return (final_statement(item.response) or None) if ask_unanswered else None


def tinyv_verify(client: LLMClient, items: Sequence[TinyVItem], *, max_tokens: int = 8,
                 ask_unanswered: bool = True) -> list[bool | None]:
    """Add-on cascade over a batch: asks the model about every item the rules do not accept."""
    results: list[bool | None] = []
    asked: list[int] = []
    prompts: list[str] = []
    for k, item in enumerate(items):
        shown = shown_answer(item, ask_unanswered)
        if item.rule_verdict == "correct":
            results.append(True)
        elif shown is not None:
            results.append(None)  # filled from the reply below
            asked.append(k)
            prompts.append(build_prompt(item.question, item.ground_truth, shown))
        elif item.rule_verdict in ("incorrect", "no_answer"):
            results.append(False)
        else:
            results.append(None)
    if prompts:
        replies = client.generate(prompts, n=1, temperature=0.0, max_tokens=max_tokens)
        if len(replies) != len(prompts):
            raise RuntimeError(f"LLM client answered {len(replies)} of {len(prompts)} prompts")
        for k, completions in zip(asked, replies):
            results[k] = parse_reply(completions[0].text) if completions else None
    return results
