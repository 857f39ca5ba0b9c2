"""The one interface every LLM-backed verifier role uses (TinyV, the Lean gate's
autoformalizer / consistency checker / prover, LLM judges, DeRL's planner and judge).

Verifier code depends only on this protocol; the wiring (`jury.cluster`) hands in a
client backed by a vLLM engine in a Ray actor. Tests use small scripted clients that
honour the same contract.

    client = ...                      # an LLMClient
    outs = client.generate(prompts, n=4, temperature=0.7, max_tokens=256)
    for prompt, completions in zip(prompts, outs):
        assert len(completions) == 4  # n completions per prompt, in order

And the prompt plumbing they share: the papers' prompts live in prompts/*.txt
(`load_prompt`), are filled without str.format (`fill`), sent with a shape check
(`generate_checked`), and their replies read after any reasoning (`strip_reasoning`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from jury.protocol.prompt_files import fill, read_prompt_file  # noqa: F401  (fill: re-exported)


@dataclass(frozen=True)
class Completion:
    text: str
    num_tokens: int  # generated tokens, for the cost accounting the papers report


class LLMClient(Protocol):
    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> list[list[Completion]]:
        """n completions for each prompt, outer list in prompt order. Blocking."""
        ...


PROMPT_DIR = Path(__file__).parent / "prompts"


@functools.cache
def load_prompt(name: str) -> str:
    """The text of prompts/<name>.txt without its leading `#` lines, which cite the source."""
    return read_prompt_file(PROMPT_DIR / f"{name}.txt")


def strip_reasoning(text: str) -> str:
    """The part of a reply after a reasoning model's thinking, where the verdict lives."""
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        # Thinking cut off by max_tokens: whatever precedes it is prompt echo, not a verdict.
        return text.split("<think>", 1)[0]
    return text


def generate_checked(
    client: LLMClient, prompts: Sequence[str], *, n: int, temperature: float, max_tokens: int
) -> list[list[Completion]]:
    """client.generate, refusing replies that break the protocol's shape (fail loudly inside)."""
    if not prompts:
        return []
    outs = client.generate(prompts, n=n, temperature=temperature, max_tokens=max_tokens)
    shape = [len(o) for o in outs]
    if len(outs) != len(prompts) or any(k != n for k in shape):
        raise RuntimeError(f"LLM client returned {shape} completions for {len(prompts)} prompts x n={n}")
    return outs
