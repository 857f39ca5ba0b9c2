"""`jury make-tiny-model --model tiny-chain`: the tiny Llama for the long chain-of-thought task.

The same 4-layer, 128-wide Llama as `tiny` (models/tiny.py; head_dim 64 for vLLM's
CPU attention), in a folder of its own (~/.cache/jury-rl/tiny-chain), with:

- a tokenizer trained on the chain corpus and the synthetic one, every digit its own
  token: carries are then the same few digit facts at every position, instead of a
  lookup table of whole numbers a model this size cannot learn in minutes;
- max_positions covering the longest prompt plus worked solution (40 terms: about 130 +
  460 tokens);
- a supervised warm-up on worked solutions (`chain_solution`) that stops at the first
  check where the sampled pass rate (temperature 1.0, as a run samples) is in
  `pass_rate_range` overall, at least `target_pass_rate`, and falls with length: each
  term-count bucket passes no more often than the shorter one before it.

The pass rate is measured per term-count bucket (CHAIN_BUCKETS) on `eval_per_bucket`
fixed problems each, drawn from the task's own distribution within the bucket; the
overall rate weighs the buckets by how often the task draws them. pass_rate.json holds
both, and each bucket's solution length in tokens. A check that overshoots the range
falls back to the last checkpoint that was in it. Building is idempotent (a stamp of the
spec and the task's settings), like `tiny`'s.
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from jury.data.problems import PROMPT_SUFFIX, Problem
from jury.data.tasks import (CHAIN_BUCKETS, CHAIN_HIGH, CHAIN_LOW, CHAIN_TAIL, CHAIN_TERMS, CHAIN_WEIGHTS, CHAIN_WIDTH,
                             chain_problem, chain_solution, synthetic_problem, synthetic_solution)
from jury.models.build import build_model, default_path, train_tokenizer

STAMP = "jury_tiny_chain.json"


@dataclass(frozen=True)
class ChainModelSpec:
    hidden: int = 128
    layers: int = 4
    heads: int = 2                 # head_dim 64
    intermediate: int = 384
    vocab: int = 384
    max_positions: int = 1024      # the longest prompt + solution is about 650 tokens
    warmup_steps: int = 900        # at most (the learning rate decays over them); a check stops it earlier
    warmup_batch: int = 16         # problems per step: more steps for the minutes (steps, not tokens, were short)
    warmup_lr: float = 3e-3
    final_lr_ratio: float = 0.1    # the learning rate decays linearly to warmup_lr * this at warmup_steps
    train_tail: float = 2.0        # warm-up term counts ∝ n^-train_tail: fewer long problems than the task's 1.5, cheaper steps
    target_pass_rate: float = 0.2  # stop at the first check at or above this (inside the range, falling)
    pass_rate_range: tuple[float, float] = (0.1, 0.6)
    check_every: int = 50          # warm-up steps between pass-rate checks
    eval_per_bucket: int = 32      # problems per term-count bucket in each check
    seed: int = 0
    version: int = 1               # bump when the recipe changes, so caches rebuild

    def __post_init__(self):
        object.__setattr__(self, "pass_rate_range", tuple(self.pass_rate_range))


def chain_path() -> Path:
    return default_path().with_name("tiny-chain")


def task_settings() -> dict:
    """The task's settings in the build stamp: a change of the task rebuilds the model."""
    return {"terms": [CHAIN_TERMS.start, CHAIN_TERMS.stop - 1], "tail": CHAIN_TAIL, "values": [CHAIN_LOW, CHAIN_HIGH],
            "width": CHAIN_WIDTH, "buckets": [list(b) for b in CHAIN_BUCKETS], "solution": "from the last term down"}


def bucket_weights() -> list[float]:
    """How often the task draws a problem of each CHAIN_BUCKETS bucket."""
    total = sum(CHAIN_WEIGHTS)
    return [sum(w for n, w in zip(CHAIN_TERMS, CHAIN_WEIGHTS) if lo <= n <= hi) / total for lo, hi in CHAIN_BUCKETS]


def eval_sets(per_bucket: int) -> list[list[Problem]]:
    """Fixed problems per bucket, term counts drawn as the task draws them within the bucket."""
    sets = []
    for lo, hi in CHAIN_BUCKETS:
        rng = random.Random(f"chain-eval/{lo}-{hi}")
        counts = [n for n in CHAIN_TERMS if lo <= n <= hi]
        weights = [CHAIN_WEIGHTS[n - CHAIN_TERMS.start] for n in counts]
        sets.append([chain_problem(rng, rng.choices(counts, weights)[0]) for _ in range(per_bucket)])
    return sets


def falls_with_length(rates: list[float]) -> bool:
    """Each bucket passes no more often than the shorter one before it, and the longest
    less often than the shortest."""
    return all(b <= a for a, b in zip(rates, rates[1:])) and rates[-1] < rates[0]


def acceptable(overall: float, rates: list[float], spec: ChainModelSpec) -> bool:
    lo, hi = spec.pass_rate_range
    return lo <= overall <= hi and falls_with_length(rates)


def build_chain_tokenizer(spec: ChainModelSpec, rng: random.Random):
    corpus = []
    for _ in range(4000):
        p = chain_problem(rng)
        corpus.append(p.problem + PROMPT_SUFFIX + chain_solution(p))
        q = synthetic_problem(rng)
        corpus.append(q.problem + PROMPT_SUFFIX + synthetic_solution(q))
    return train_tokenizer(corpus, spec.vocab, split_digits=True)


def _rows(tokenizer, problems: list[Problem]) -> list[tuple[list[int], int]]:
    """(prompt + solution + eos ids, prompt length) per problem."""
    rows = []
    for p in problems:
        prompt = tokenizer(p.problem + PROMPT_SUFFIX)["input_ids"]
        completion = tokenizer(chain_solution(p), add_special_tokens=False)["input_ids"]
        rows.append((prompt + completion + [tokenizer.eos_token_id], len(prompt)))
    return rows


def _loss(model, tokenizer, rows, micro_tokens: int):
    """Token-mean cross-entropy on the completions; rows sorted by length and cut into
    micro-batches of about `micro_tokens` padded tokens (long tails waste little padding).
    Calls backward per micro-batch; returns the mean loss."""
    import torch

    rows = sorted(rows, key=lambda r: len(r[0]))
    total = sum(len(ids) - n for ids, n in rows)
    loss_sum, start = 0.0, 0
    while start < len(rows):
        end = start + 1
        while end < len(rows) and len(rows[end][0]) * (end + 1 - start) <= micro_tokens:
            end += 1
        part = rows[start:end]
        width = len(part[-1][0])
        ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r, _ in part])
        mask = torch.tensor([[0] * n + [1] * (len(r) - n) + [0] * (width - len(r)) for r, n in part])
        logits = model(input_ids=ids).logits[:, :-1]
        per_token = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none")
        loss = (per_token * mask[:, 1:].reshape(-1)).sum() / total
        loss.backward()
        loss_sum += loss.item()
        start = end
    return loss_sum


def sampled_pass_rates(model, tokenizer, sets: list[list[Problem]], temperature: float = 1.0,
                       skip_below: float = 0.0) -> list[float]:
    """Per bucket, the share of sampled completions whose last \\boxed{} holds the answer. When
    the shortest bucket passes less often than `skip_below`, the others are not sampled (nan):
    a check whose rate falls with length cannot then reach an overall rate of skip_below."""
    import torch

    tokenizer.padding_side = "left"
    rates = []
    for problems in sets:
        if rates and rates[0] < skip_below:
            rates.append(float("nan"))
            continue
        longest = max(len(tokenizer(chain_solution(p), add_special_tokens=False)["input_ids"]) for p in problems)
        enc = tokenizer([p.problem + PROMPT_SUFFIX for p in problems], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=longest + 8, do_sample=True, temperature=temperature,
                                 top_k=0, pad_token_id=tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        rates.append(sum(boxed_value(t) == int(p.answer) for t, p in zip(texts, problems)) / len(problems))
    return rates


def boxed_value(text: str) -> int | None:
    """The integer in the completion's last \\boxed{} (0078 is 78), or None."""
    from jury.protocol.boxed import extract_boxed

    boxed = extract_boxed(text)
    return int(boxed) if boxed and boxed.isdigit() else None


def _say(progress: bool, text: str):
    if progress:
        print(f"tiny-chain: {text}", file=sys.stderr, flush=True)


def warm_up(model, tokenizer, spec: ChainModelSpec, rng: random.Random, progress=True) -> dict:
    """Supervised steps on worked solutions until a check is acceptable at or above the
    target; returns that check (the model holds the weights it was made with).

    Until the shortest bucket passes at least the target, the longer ones are not sampled:
    with rates that fall with length the overall rate cannot reach it. So a check costs a
    second or two until the end, when the long buckets' few hundred tokens are sampled.
    """
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=spec.warmup_lr)
    # linear decay to final_lr_ratio: the noise of a constant rate kept single tokens uncertain, and
    # at temperature 1 every token of a long solution must come out right
    decay = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: 1 - (1 - spec.final_lr_ratio) * min(1.0, i / spec.warmup_steps))
    train_weights = [n ** -spec.train_tail for n in CHAIN_TERMS]
    sets, weights = eval_sets(spec.eval_per_bucket), bucket_weights()
    best, t0 = None, time.time()
    for step in range(1, spec.warmup_steps + 1):
        opt.zero_grad()
        problems = [chain_problem(rng, rng.choices(CHAIN_TERMS, train_weights)[0]) for _ in range(spec.warmup_batch)]
        loss = _loss(model, tokenizer, _rows(tokenizer, problems), micro_tokens=2048)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        decay.step()
        last = step == spec.warmup_steps
        if step % spec.check_every and not last:
            continue
        model.eval()
        rates = sampled_pass_rates(model, tokenizer, sets,
                                   skip_below=spec.pass_rate_range[0] if last else spec.target_pass_rate)
        model.train()
        overall = sum(w * r for w, r in zip(weights, rates) if r == r)  # nan: not sampled
        check = {"step": step, "loss": loss, "overall": overall, "rates": rates}
        _say(progress, f"warm-up step {step}: loss {loss:.3f}, sampled pass rate {overall:.2f} "
                       f"(by terms {' '.join(f'{r:.2f}' for r in rates)}), {time.time() - t0:.0f} s")
        if acceptable(overall, rates, spec):
            best = (check, {k: v.detach().clone() for k, v in model.state_dict().items()})
            if overall >= spec.target_pass_rate:
                break
        elif overall > spec.pass_rate_range[1]:
            break  # overshot: the last acceptable check, if any, stands
    if best is None:
        raise RuntimeError(f"tiny-chain warm-up found no check with a pass rate in {spec.pass_rate_range} that falls "
                           f"with length (last: {overall:.2f}, by terms {rates})")
    check, state = best
    model.load_state_dict(state)
    return check


def _stamp(spec: ChainModelSpec) -> dict:
    return {"spec": json.loads(json.dumps(asdict(spec))), "task": task_settings()}


def is_built(path: str | Path | None = None, spec: ChainModelSpec = ChainModelSpec()) -> bool:
    """Whether the folder holds a finished build of this spec for this task."""
    path = Path(path) if path else chain_path()
    return (path / STAMP).exists() and json.loads((path / STAMP).read_text()) == _stamp(spec)


def make_tiny_chain_model(path: str | Path | None = None, spec: ChainModelSpec = ChainModelSpec(),
                          progress=True) -> Path:
    """Build (or reuse) the tiny-chain model folder and return its path."""
    path = Path(path) if path else chain_path()
    stamp = _stamp(spec)
    if is_built(path, spec):
        return path
    import torch

    # one thread: the same build on any machine (sums split over threads round differently), and
    # on a shared 2-core machine two threads ran 7 to 15 times slower than one
    torch.set_num_threads(1)
    t0 = time.time()
    rng = random.Random(spec.seed)
    tokenizer = build_chain_tokenizer(spec, rng)
    model = build_model(spec, tokenizer)
    _say(progress, f"tokenizer ({len(tokenizer)} tokens, digits split) and a {spec.layers}-layer "
                   f"{spec.hidden}-wide Llama in {time.time() - t0:.0f} s; warm-up on worked chain sums")
    check = warm_up(model, tokenizer, spec, rng, progress)
    build_s = time.time() - t0
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "pass_rate.json").write_text(json.dumps(pass_rate_record(tokenizer, spec, check, build_s), indent=2))
    (tmp / STAMP).write_text(json.dumps(stamp, indent=2))
    if path.exists():
        import shutil

        shutil.rmtree(path)
    tmp.rename(path)  # a half-built folder is never mistaken for a cached one
    _say(progress, f"built in {build_s:.0f} s: {path}")
    return path


def pass_rate_record(tokenizer, spec: ChainModelSpec, check: dict, build_s: float) -> dict:
    sets = eval_sets(spec.eval_per_bucket)
    buckets = {}
    for (lo, hi), weight, rate, problems in zip(CHAIN_BUCKETS, bucket_weights(), check["rates"], sets):
        lengths = [len(tokenizer(chain_solution(p), add_special_tokens=False)["input_ids"]) for p in problems]
        buckets[f"{lo}-{hi}"] = {"terms": [lo, hi], "pass_rate": rate, "task_share": weight,
                                 "problems": len(problems), "solution_tokens_mean": sum(lengths) / len(lengths),
                                 "solution_tokens_max": max(lengths)}
    return {"sampled_pass_rate": check["overall"], "temperature": 1.0, "by_terms": buckets,
            "falls_with_length": falls_with_length(check["rates"]), "warmup_steps": check["step"],
            "warmup_loss": check["loss"], "build_s": round(build_s, 1)}
