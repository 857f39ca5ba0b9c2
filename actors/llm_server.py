"""An LLM served by a vLLM engine in a Ray actor, for the verifier roles.

TinyV, the Lean gate's autoformalizer / consistency checker / prover, LLM judges and
DeRL's planner all ask a model questions; each gets one of these. It answers whole
batches of prompts with n completions each; prompts are wrapped in the model's chat
template when it has one (instruction-tuned verifiers expect it). Its lifecycle is
protocol/lifecycle.py's (pid, stop).
"""
from __future__ import annotations

import asyncio
import os
import time


def engine_args(model_path: str, *, max_model_len: int = 4096, dtype: str = "auto", seed: int = 0,
                enforce_eager: bool = True, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                on_gpus: bool = False) -> dict:
    """vLLM's AsyncEngineArgs of a server. gpu_memory_utilization: its share of each of its GPUs'
    memory (the CPU build sizes by VLLM_CPU_KVCACHE_SPACE); tensor parallel over GPUs runs its
    workers as Ray actors in the server's placement group (cluster/placement.py)."""
    return dict(model=model_path, max_model_len=max_model_len, dtype=dtype, seed=seed, enforce_eager=enforce_eager,
                tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
                disable_log_stats=True,
                **({"distributed_executor_backend": "ray"} if tensor_parallel_size > 1 and on_gpus else {}))


class LLMServer:
    def __init__(self, model_path: str, **kwargs):
        """kwargs: engine_args' (max_model_len, gpu_memory_utilization, tensor_parallel_size, ...)."""
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        from jury.actors.cpu_engine import cpu_engine_layout
        from jury.protocol.reaper import start_reaper

        self._reaper = start_reaper()  # the engine's processes end with this actor, however it ends
        with cpu_engine_layout(kwargs.get("tensor_parallel_size", 1)):  # on the CPU: one process, pinned
            self.engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args(model_path, **kwargs)))
        self.tokenizer = None
        self.calls = self.prompts = self.tokens = 0
        self.busy_s = 0.0

    async def _template(self, prompt: str) -> str:
        if self.tokenizer is None:
            self.tokenizer = self.engine.tokenizer
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                      add_generation_prompt=True)
        return prompt

    async def _one(self, prompt: str, params, rid: str) -> list[tuple[str, int]]:
        final = None
        from jury.actors.generator import render

        prompt = await render(self.engine, {"prompt": await self._template(prompt)})
        async for out in self.engine.generate(prompt, params, request_id=rid):
            final = out
        return [(c.text, len(c.token_ids)) for c in final.outputs]

    async def generate(self, prompts: list[str], n: int = 1, temperature: float = 0.0,
                       max_tokens: int = 512) -> list[list[tuple[str, int]]]:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens,
                                output_kind=RequestOutputKind.FINAL_ONLY)
        t0 = time.perf_counter()
        outs = await asyncio.gather(*[self._one(p, params, f"llm-{t0}-{i}") for i, p in enumerate(prompts)])
        self.calls += 1
        self.prompts += len(prompts)
        self.tokens += sum(k for out in outs for _, k in out)
        self.busy_s += time.perf_counter() - t0
        return outs

    async def stats(self) -> dict:
        return {"calls": self.calls, "prompts": self.prompts, "tokens": self.tokens, "busy_s": self.busy_s}

    async def pid(self) -> int:
        return os.getpid()

    async def stop(self):
        from jury.actors.cpu_engine import stop_grace_s

        self.engine.shutdown(timeout=stop_grace_s())
