"""The LLMClients the verifier roles use: an LLMServer actor, an OpenAI-compatible endpoint.

Verifier code sees only `jury.verifiers.llm.LLMClient`; these adapters, built by the
driver and handed to a verifier worker (or kept by the driver: CoReward's rewriter), turn
its calls into Ray calls or HTTP requests.
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
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

        from jury.actors.cpu_engine import in_process_cpu_engine

        with in_process_cpu_engine():  # on the CPU: the engine in this process, none to start beside it
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


class OpenAIClient:
    """An LLMClient on an OpenAI-compatible endpoint (`vllm serve`, a hosted API), over HTTP with the
    standard library (verifier.llm_endpoints). `url` is the full route: `.../chat/completions` sends
    each prompt as one user message and the server applies the model's chat template (what
    LLMServer does here); `.../completions` sends the prompt as is. One request per prompt, n
    completions each, `concurrency` requests at a time. A failed request raises, naming the URL.
    Per-completion token counts are the response's usage.completion_tokens split evenly over its n
    choices (the protocol reports only their total). Picklable: it travels to the verifier workers."""

    def __init__(self, url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 600.0,
                 concurrency: int = 8):
        if not url.rstrip("/").endswith("/completions"):
            raise ValueError(f"an OpenAI-compatible URL ends in /chat/completions or /completions, got {url!r}")
        self.url, self.model, self.api_key_env = url.rstrip("/"), model, api_key_env
        self.chat = self.url.endswith("/chat/completions")
        self.timeout_s, self.concurrency = timeout_s, concurrency
        self.calls = 0

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0,
                 max_tokens: int = 512) -> list[list[Completion]]:
        if not prompts:
            return []
        with ThreadPoolExecutor(min(self.concurrency, len(prompts))) as pool:
            outs = list(pool.map(lambda p: self._one(p, n, temperature, max_tokens), prompts))
        self.calls += len(prompts)
        return outs

    def _one(self, prompt: str, n: int, temperature: float, max_tokens: int) -> list[Completion]:
        body = {"model": self.model, "n": n, "temperature": temperature, "max_tokens": max_tokens}
        body.update({"messages": [{"role": "user", "content": prompt}]} if self.chat else {"prompt": prompt})
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                reply = json.load(response)
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:300]
            raise RuntimeError(f"{self.url} (model {self.model}): HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise RuntimeError(f"{self.url} (model {self.model}): {e}") from None
        choices = sorted(reply.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != n:
            raise RuntimeError(f"{self.url} (model {self.model}): {len(choices)} choices for n={n}")
        tokens = int((reply.get("usage") or {}).get("completion_tokens") or 0)
        texts = [(c.get("message") or {}).get("content") if self.chat else c.get("text") for c in choices]
        return [Completion(t or "", tokens // n) for t in texts]
