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


class LocalLLMClient:
    """An LLMClient on an in-process vLLM engine (`jury select`, scripts): no Ray needed."""

    def __init__(self, model: str, *, max_model_len: int = 4096, seed: int = 0, dtype: str = "auto"):
        import os

        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        from vllm import LLM

        self.llm = LLM(model=model, max_model_len=max_model_len, seed=seed, dtype=dtype, enforce_eager=True)
        self.tokenizer = self.llm.get_tokenizer()
        self.calls = 0

    def _template(self, prompt: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                      add_generation_prompt=True)
        return prompt

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0,
                 max_tokens: int = 512) -> list[list[Completion]]:
        from vllm import SamplingParams

        self.calls += 1
        params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens)
        outs = self.llm.generate([self._template(p) for p in prompts], params, use_tqdm=False)
        return [[Completion(c.text, len(c.token_ids)) for c in o.outputs] for o in outs]

    def close(self):
        self.llm.llm_engine.engine_core.shutdown(timeout=30)
