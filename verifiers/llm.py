"""The one interface every LLM-backed verifier role uses (TinyV, the Lean gate's
autoformalizer / consistency checker / prover, LLM judges, DeRL's planner and judge).

Verifier code depends only on this protocol; the wiring (`jury.cluster`) hands in a
client backed by a vLLM engine in a Ray actor. Tests use small scripted clients that
honour the same contract.

    client = ...                      # an LLMClient
    outs = client.generate(prompts, n=4, temperature=0.7, max_tokens=256)
    for prompt, completions in zip(prompts, outs):
        assert len(completions) == 4  # n completions per prompt, in order
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


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
