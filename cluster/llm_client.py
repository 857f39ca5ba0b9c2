"""The LLMClient the verifier roles use, backed by an LLMServer actor.

Verifier code sees only `jury.verifiers.llm.LLMClient`; this adapter, built by the
driver and handed to a verifier worker, turns its calls into Ray calls.
"""
from __future__ import annotations

from typing import Sequence

from jury.verifiers.llm import Completion


class RayLLMClient:
    def __init__(self, server, timeout_s: float = 600.0):
        self.server, self.timeout_s = server, timeout_s

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0,
                 max_tokens: int = 512) -> list[list[Completion]]:
        import ray

        outs = ray.get(self.server.generate.remote(list(prompts), n, temperature, max_tokens),
                       timeout=self.timeout_s)
        return [[Completion(text, k) for text, k in out] for out in outs]
