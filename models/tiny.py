"""`jury make-tiny-model`: a small Llama built here, since nothing can be downloaded.

A byte-level BPE tokenizer trained on the synthetic task, a 4-layer Llama with
head_dim 64 (vLLM's CPU attention refuses smaller heads), and a short supervised
warm-up so that the sampled pass rate lands between 0 and 1: RL needs both
successes and failures in a group to have a signal. The measured pass rate is
written next to the weights.

The warm-up writes only `boxed_share` of its answers in \boxed{}, the rest bare. A
bare answer counts as no answer, so the model starts out knowing more arithmetic
than it gets credit for: RL on a couple of CPU minutes can then visibly raise the
pass rate (by learning the format and sharpening what it knows), which is what the
embedded default is meant to show. `pass_rate.json` records both rates. Building is idempotent: a stamp of the build settings
is checked and a matching folder is reused.

`tiny-chat` (`make_tiny_chat_model`) is the same model, weights and tokenizer copied, with a
chat template added: for testing prompts that go through one. `tiny` itself has none, so
its plain prompts, and everything that asks it questions, stay as they were.

`tiny-chain` (models/chain.py) is a model of the same shape for the long
chain-of-thought task (`dataset: chain`), with its own tokenizer, warm-up and folder.
models/registry.py builds any of the three by its `model:` name.
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from jury.data.problems import PROMPT_SUFFIX
from jury.data.tasks import synthetic_problem, synthetic_solution
from jury.models.build import build_model, default_path, train_tokenizer

STAMP = "jury_tiny_model.json"
CHAT_STAMP = "jury_tiny_chat.json"
# a plain-text chat layout (no special tokens: the vocabulary has none to spare); no BOS in it,
# since the tokenizer adds <s> itself
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{{ '<|' + m['role'] + '|>\\n' + m['content'] + '\\n' }}"
    "{%- if m['role'] == 'assistant' -%}{{ eos_token }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|assistant|>\\n' }}{%- endif -%}"
)


@dataclass(frozen=True)
class TinyModelSpec:
    hidden: int = 128
    layers: int = 4
    heads: int = 2  # head_dim = hidden / heads = 64
    intermediate: int = 384
    vocab: int = 384
    max_positions: int = 4096  # RoPE has no learned positions; long verifier prompts (TinyV) must fit
    warmup_steps: int = 1500
    warmup_batch: int = 64
    warmup_lr: float = 1e-3
    target_pass_rate: float = 0.2  # stop the warm-up once sampling passes this often
    boxed_share: float = 0.4       # share of warm-up answers written in \boxed{}
    seed: int = 0
    version: int = 3  # bump when the recipe changes, so caches rebuild


def build_tokenizer(spec: TinyModelSpec, rng: random.Random):
    corpus = []
    for _ in range(20000):
        p = synthetic_problem(rng)
        corpus.append(p.problem + PROMPT_SUFFIX + synthetic_solution(p))
    return train_tokenizer(corpus, spec.vocab)


def _batch(tokenizer, problems, rng: random.Random, boxed_share: float):
    """Token ids of prompt + solution + eos, and a loss mask on the completion only."""
    import torch

    rows, masks = [], []
    for p in problems:
        prompt = tokenizer(p.problem + PROMPT_SUFFIX)["input_ids"]
        text = synthetic_solution(p) if rng.random() < boxed_share else p.answer
        completion = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = prompt + completion + [tokenizer.eos_token_id]
        rows.append(ids)
        masks.append([0] * len(prompt) + [1] * (len(completion) + 1))
    width = max(map(len, rows))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    mask = torch.tensor([m + [0] * (width - len(m)) for m in masks])
    return ids, mask


def sampled_rates(model, tokenizer, problems, temperature: float = 1.0) -> tuple[float, float]:
    """(pass rate, answer rate): shares of sampled completions that box the right answer,
    and that state it at all (boxed or bare)."""
    import torch

    from jury.protocol.boxed import extract_boxed

    tokenizer.padding_side = "left"
    prompts = [p.problem + PROMPT_SUFFIX for p in problems]
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(
            **enc, max_new_tokens=12, do_sample=True, temperature=temperature, top_k=0,
            pad_token_id=tokenizer.pad_token_id,
        )
    texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    boxed = sum(extract_boxed(t) == p.answer for t, p in zip(texts, problems))
    stated = sum((extract_boxed(t) or t.strip()) == p.answer for t, p in zip(texts, problems))
    return boxed / len(problems), stated / len(problems)


def warm_up(model, tokenizer, spec: TinyModelSpec, rng: random.Random, progress=True) -> tuple[int, float, float]:
    """Supervised steps until the sampled pass rate reaches the target (or steps run out)."""
    import torch
    from tqdm import tqdm

    opt = torch.optim.AdamW(model.parameters(), lr=spec.warmup_lr)
    eval_set = [synthetic_problem(random.Random(10_000 + i)) for i in range(256)]
    rate, stated, step = 0.0, 0.0, 0
    bar = tqdm(total=spec.warmup_steps, desc="warm-up", disable=not progress)
    for step in range(1, spec.warmup_steps + 1):
        ids, mask = _batch(tokenizer, [synthetic_problem(rng) for _ in range(spec.warmup_batch)], rng,
                           spec.boxed_share)
        logits = model(input_ids=ids).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
        )
        loss = (loss * mask[:, 1:].reshape(-1)).sum() / mask[:, 1:].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", pass_rate=f"{rate:.2f}")
        if step % 25 == 0:
            model.eval()
            rate, stated = sampled_rates(model, tokenizer, eval_set)
            model.train()
            if rate >= spec.target_pass_rate:
                break
    bar.close()
    return step, rate, stated


def make_tiny_model(path: str | Path | None = None, spec: TinyModelSpec = TinyModelSpec(), progress=True) -> Path:
    """Build (or reuse) the tiny model folder and return its path."""
    path = Path(path) if path else default_path()
    stamp = path / STAMP
    if stamp.exists() and json.loads(stamp.read_text()).get("spec") == asdict(spec):
        return path
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    rng = random.Random(spec.seed)
    tokenizer = build_tokenizer(spec, rng)
    model = build_model(spec, tokenizer)
    steps, rate, stated = warm_up(model, tokenizer, spec, rng, progress=progress)
    if not 0.0 < rate < 1.0:
        raise RuntimeError(f"warm-up ended with pass rate {rate}: RL needs it strictly between 0 and 1")
    tmp = path.with_name(path.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "pass_rate.json").write_text(json.dumps(
        {"sampled_pass_rate": rate, "sampled_answer_rate_boxed_or_bare": stated, "temperature": 1.0,
         "eval_problems": 256, "warmup_steps": steps, "boxed_share": spec.boxed_share}, indent=2))
    (tmp / STAMP).write_text(json.dumps({"spec": asdict(spec)}, indent=2))
    if path.exists():
        import shutil

        shutil.rmtree(path)
    tmp.rename(path)  # a half-built folder is never mistaken for a cached one
    return path


def make_tiny_chat_model(path: str | Path | None = None, progress=True) -> Path:
    """The tiny model's folder copied with a chat template added (`model: tiny-chat`); rebuilt
    when the tiny model or the template changes, never touching the tiny model's own folder."""
    import shutil

    base = make_tiny_model(progress=progress)
    path = Path(path) if path else base.with_name("tiny-chat")
    stamp = {"tiny": json.loads((base / STAMP).read_text()), "chat_template": CHAT_TEMPLATE}
    if (path / CHAT_STAMP).exists() and json.loads((path / CHAT_STAMP).read_text()) == stamp:
        return path
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(base, tmp)  # a few MB
    (tmp / "chat_template.jinja").write_text(CHAT_TEMPLATE)  # transformers reads it beside tokenizer.json
    (tmp / CHAT_STAMP).write_text(json.dumps(stamp, indent=2))
    shutil.rmtree(path, ignore_errors=True)
    try:
        tmp.rename(path)
    except OSError:  # another process put it there first
        shutil.rmtree(tmp, ignore_errors=True)
    return path
