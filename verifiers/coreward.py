"""CoReward's rewrites (Co-rewarding-I, Zhang et al. 2025): how an LLM is asked to rewrite a
problem, and how its reply is read. The reward itself is rewards.coreward; the driver asks for
rewrites ahead of admission (cluster/rewrite.py), unless the dataset has them (data.rewrite_key).

    outs = make_rewrites(client, ["Compute 18+19.", ...], max_tokens=2048, temperature=0.7)
    outs[0].rewrite        # the problem in other words, or None: the reply broke the format

As Co-rewarding-I does it (tmlr-group/Co-rewarding@6c60ea45, Co-rewarding-I/rewrite_questions.py):
the prompt is theirs verbatim (prompts/coreward_rewrite.txt), one sample per problem at
temperature 0.7, and the rewrite is the text between the first `### RESULT_START` and the first
`### RESULT_END` after `REWRITE:` (extract_between_markers). They drop a problem whose reply
fails to parse; here its task goes without a rewrite (cluster/rewrite.py counts it). Two
differences: their top_p 0.8 is not applied (the LLM clients take none), and an empty rewrite is
refused (theirs would keep it, an empty prompt).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from jury.verifiers.llm import LLMClient, fill, generate_checked, load_prompt

START, END = "### RESULT_START", "### RESULT_END"


@dataclass(frozen=True)
class RewriteResult:
    rewrite: str | None  # None: the reply had no well-formed result block
    tokens: int          # the rewriter's generated tokens (its cost)


def rewrite_prompt(question: str) -> str:
    # their prompt is the instruction, "\n", then the question stripped; the file ends in a newline
    return fill(load_prompt("coreward_rewrite").removesuffix("\n"), question=question.strip())


def parse_rewrite(reply: str) -> str | None:
    """The rewritten question of a reply, or None when the markers or `REWRITE:` are missing."""
    start, end = reply.find(START), reply.find(END)
    if start == -1 or end == -1 or end <= start:
        return None
    parts = reply[start + len(START):end].strip().split("REWRITE:", 1)
    if len(parts) != 2:
        return None
    return parts[1].strip() or None


def make_rewrites(client: LLMClient, problems: Sequence[str], *, max_tokens: int,
                  temperature: float = 0.7) -> list[RewriteResult]:
    """One rewrite per problem, one batched call."""
    outs = generate_checked(client, [rewrite_prompt(p) for p in problems], n=1, temperature=temperature,
                            max_tokens=max_tokens)
    return [RewriteResult(parse_rewrite(c.text), c.num_tokens) for (c,) in outs]
