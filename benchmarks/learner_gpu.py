"""One learner rank's DeepSpeed bf16 step on one GPU: its gradient against fp32, and its speed.

    python benchmarks/learner_gpu.py                         # Qwen3-1.7B shape, ZeRO-1, bf16, fp32 accumulation
    python benchmarks/learner_gpu.py --zero 2
    python benchmarks/learner_gpu.py --zero 0 --accum bf16  # the only accumulation DeepSpeed allows at stage 0
    python benchmarks/learner_gpu.py --tiny                  # a two-layer model on the CPU: a smoke run
    python benchmarks/learner_gpu.py --model Qwen2.5-32B --layers 4 --no-grad-check
                                                             # another shape of configs/simulate/models.yaml,
                                                             # its first layers only (what one GPU holds)

No generator, verifier or Ray: the learner's own code on a constructed batch. The model has
Qwen3-1.7B's shape (hidden 2048, 28 layers, vocabulary 151,936, tied head) with random weights
(no download); `--model` takes another shape from configs/simulate/models.yaml (built as a Qwen3
decoder: a Qwen2.5 shape gets Qwen3's q/k norms and no qkv bias, a few thousand parameters a layer),
and `--layers` keeps its first layers, for shapes whose optimizer state one GPU cannot hold. The
batch: `--rows` completions of random tokens whose lengths are spread evenly over 1..`--max-new`
after a `--prompt`-token prompt, with random advantages.

1. Gradient. The bf16 engine and an fp32 copy of the same weights (the bf16 values, widened)
   take the same mini-batch of `--grad-rows` rows in micro-batches of `--grad-micro-batch`, through
   `grpo.micro_loss`, the learner's loss. DeepSpeed's fp32 gradient at the accumulation boundary
   (`safe_get_full_grad`, before the step) is compared with the fp32 model's: relative L2 error
   and cosine over all parameters. Beside it, the same bf16 model in plain torch (no DeepSpeed,
   each micro-batch's gradient added in fp32) against the fp32 model and against DeepSpeed's: what
   bf16 arithmetic alone costs.
2. Speed. `update.train_shard`, the learner's step (one mini-batch, one epoch, the optimizer step
   included), on the whole batch, once to warm up and `--steps` times timed. Reported: tokens/s
   (all positions the model reads, and completion tokens), and MFU = model FLOPs / time / peak,
   against both the datasheet peak (--peak-tflops, the H100/H200 dense bf16 figure) and a bf16
   matmul measured in the same process. Model FLOPs, without the fused head's recompute:
   6 x (parameters less the embedding) x all positions + 6 x H x V x completion tokens (the head
   runs on completion rows only) + 6 x layers x heads x head_dim x sum over rows of L(L + 1) (causal
   attention: a position t multiplies t keys and t values, 4·t·heads·head_dim FLOPs a layer, so
   2·L(L + 1)·heads·head_dim a row's forward; three forwards' worth with the backward). Until 2026-11-27
   the last term was half that (L^2 / 2): MFUs measured before then are low by 1.3% of themselves at
   the default batch, more at longer rows. An untied head's parameters are counted in the head term
   only, as `jury simulate` counts them. `mfu_less_optimizer` is the same FLOPs over the step less
   its optimizer step: what configs/simulate/hardware.yaml's `train_mfu` means. Until 2026-11-27 (the
   sixth GPU session) the learner's `optimizer_s` also held the last micro-batch's backward, still
   queued on the GPU when its clock was read (more of it, the fewer and larger the micro-batches).
Prints one JSON line (and writes it with --json).
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time

QWEN3_1_7B = dict(hidden_size=2048, num_hidden_layers=28, intermediate_size=6144, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True,
                  max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6)
TINY = dict(hidden_size=64, num_hidden_layers=2, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=1003, tie_word_embeddings=True,
            max_position_embeddings=512, rope_theta=1e6, rms_norm_eps=1e-6)


def model_spec(name: str, layers: int) -> dict:
    """transformers' Qwen3Config keywords for a shape of configs/simulate/models.yaml, cut to `layers`."""
    if name == "Qwen3-1.7B-Base":
        spec = dict(QWEN3_1_7B)
    else:
        from jury.experiments.sim_gpu import load_model
        from jury.protocol.config import ConfigError

        try:
            m = load_model(name)
        except ConfigError as e:
            raise SystemExit(f"learner_gpu: --model {name!r}: {e}")
        if m.experts:
            raise SystemExit(f"learner_gpu: --model {name!r} is a mixture of {m.experts} experts; this benchmark "
                             "builds dense Qwen3 layers only")
        spec = dict(hidden_size=m.hidden, num_hidden_layers=m.layers, intermediate_size=m.intermediate,
                    num_attention_heads=m.heads, num_key_value_heads=m.kv_heads, head_dim=m.head_dim,
                    vocab_size=m.vocab, tie_word_embeddings=m.tied_embeddings, max_position_embeddings=40960,
                    rope_theta=1e6, rms_norm_eps=1e-6)
    if layers:
        if layers > spec["num_hidden_layers"]:
            raise SystemExit(f"learner_gpu: --layers {layers}: {name} has {spec['num_hidden_layers']}")
        spec["num_hidden_layers"] = layers
    return spec


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--zero", type=int, default=1, choices=(0, 1, 2))
    p.add_argument("--accum", choices=("fp32", "bf16"), default="fp32",
                   help="gradient accumulation dtype (DeepSpeed refuses fp32 at ZeRO-0)")
    p.add_argument("--rows", type=int, default=64, help="completions in the timed batch")
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens per row")
    p.add_argument("--max-new", type=int, default=1024, help="longest completion")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--grad-rows", type=int, default=16, help="rows of the gradient check's mini-batch")
    p.add_argument("--grad-micro-batch", type=int, default=2,
                   help="the gradient check's micro-batch: several, so that accumulation counts")
    p.add_argument("--steps", type=int, default=3, help="timed steps")
    p.add_argument("--peak-tflops", type=float, default=989.0,
                   help="datasheet dense bf16 peak (H100/H200 SXM: 989)")
    p.add_argument("--model", default="Qwen3-1.7B-Base",
                   help="a shape in configs/simulate/models.yaml (Qwen3-1.7B-Base: the default above)")
    p.add_argument("--layers", type=int, default=0, help="keep only the model's first LAYERS (0: all)")
    p.add_argument("--no-grad-check", action="store_true",
                   help="skip part 1 (its fp32 copy and gradients need about 3x the model's memory again)")
    p.add_argument("--tiny", action="store_true", help="a two-layer model on the CPU (smoke run)")
    p.add_argument("--json", default="", help="also write the result here")
    args = p.parse_args()
    if args.layers < 0:
        p.error(f"--layers {args.layers}: a count of layers, or 0 for all")
    if args.tiny:
        args.rows, args.prompt, args.max_new, args.micro_batch, args.grad_rows, args.steps = 8, 8, 24, 4, 8, 1
        args.grad_micro_batch = 1
    return args


def make_batch(args, vocab: int, device, seed: int = 0):
    import torch

    from jury.learner.grpo import Batch

    g = torch.Generator().manual_seed(seed)
    n = args.rows
    lengths = torch.linspace(1, args.max_new, n).round().long()
    width = args.prompt + int(lengths.max())
    ids = torch.randint(0, vocab, (n, width), generator=g)
    attn = torch.zeros(n, width, dtype=torch.long)
    comp = torch.zeros(n, width - 1)
    for i, c in enumerate(lengths.tolist()):
        attn[i, : args.prompt + c] = 1
        comp[i, args.prompt - 1: args.prompt - 1 + c] = 1
    behav = -torch.rand(n, width - 1, generator=g) * 4 * comp
    adv = torch.randn(n, generator=g)
    batch = Batch(ids, attn, comp, behav, adv, torch.zeros(n), n // 8 or 1)
    return Batch(*(t.to(device) if isinstance(t, torch.Tensor) else t for t in
                   (batch.input_ids, batch.attention, batch.completion, batch.behav_logp, batch.advantages,
                    batch.rewards, batch.num_groups, batch.in_loss, batch.penalty)))


def body_params(params: int, spec: dict) -> int:
    """The parameters model_flops counts at every position: all but the embedding (which reads no
    FLOPs) and an untied head (counted on completion positions only, as the tied one is)."""
    tables = 1 if spec["tie_word_embeddings"] else 2
    return params - tables * spec["vocab_size"] * spec["hidden_size"]


def model_flops(spec: dict, params_less_embedding: int, batch) -> float:
    lengths = batch.attention.sum(1).double()
    positions = float(lengths.sum())
    completion = float(batch.completion.sum())
    # causal attention: QK and AV each 2·t·heads·head_dim FLOPs at position t, summed over t: L·(L + 1) a row
    attn = 6 * spec["num_hidden_layers"] * spec["num_attention_heads"] * spec["head_dim"] * float((lengths * (lengths + 1)).sum())
    return 6 * params_less_embedding * positions + 6 * spec["hidden_size"] * spec["vocab_size"] * completion + attn


def matmul_tflops(device) -> float | None:
    import torch

    if device.type != "cuda":
        return None
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 2 * 8192**3 * 10 / (time.perf_counter() - t0) / 1e12


def compare(got: dict, want: dict) -> dict:
    """Relative L2 error and cosine of one gradient against another, over the parameters both have."""
    err2 = ref2 = dot = got2 = 0.0
    for n, g in got.items():
        g, w = g.double().flatten(), want[n].double().flatten()
        err2 += float((g - w).square().sum())
        ref2 += float(w.square().sum())
        got2 += float(g.square().sum())
        dot += float((g * w).sum())
    return {"rel_l2_error": math.sqrt(err2 / ref2) if ref2 else None,
            "cosine": dot / math.sqrt(ref2 * got2) if ref2 and got2 else None,
            "reference_norm": math.sqrt(ref2), "norm": math.sqrt(got2)}


def main():
    args = parse_args()
    os.environ.setdefault("DS_ACCELERATOR", "cpu" if args.tiny else "cuda")
    import deepspeed
    import torch
    from deepspeed.utils import safe_get_full_grad
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from jury.learner.grpo import micro_loss, use_fused_head
    from jury.learner.learner import _init_distributed, deepspeed_config
    from jury.learner.shard import plan_shards, send_shards
    from jury.learner.update import _before_forward, length_sorted_rows, train_shard
    from jury.protocol.config import LearnerConfig
    from jury.protocol.plan import Sampling

    device = torch.device("cpu" if args.tiny else "cuda")
    spec = TINY if args.tiny else model_spec(args.model, args.layers)
    _init_distributed("gloo" if args.tiny else "nccl", 0, 1, None)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(Qwen3Config(**spec)).to(torch.bfloat16)
    use_fused_head(model)
    params = sum(p.numel() for p in model.parameters())
    params_less_embedding = body_params(params, spec)
    batch = make_batch(args, spec["vocab_size"], device)
    sampling = Sampling(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new)
    cfg = LearnerConfig(dtype="bfloat16", zero_stage=max(args.zero, 1), micro_batch=args.micro_batch,
                        grad_clip=0.0, lr=1e-6)
    ds_config = deepspeed_config(cfg)
    ds_config["zero_optimization"]["stage"] = args.zero
    if args.accum == "bf16":
        ds_config.pop("data_types", None)
    label = f"ZeRO-{args.zero}, bf16 weights, {args.accum} gradient accumulation"

    # 1. the gradient of one mini-batch, bf16 engine against fp32 weights of the same values
    rows = torch.arange(args.grad_rows, device=device)
    chunks = length_sorted_rows(batch, rows, args.grad_micro_batch)
    tokens, seqs = float(batch.completion[rows].sum()), float(args.grad_rows)

    def loss_of(module, idx):
        loss, _ = micro_loss(module, batch, idx, cfg, total_tokens=tokens, total_seqs=seqs, sampling=sampling)
        return loss

    grad = None
    if not args.no_grad_check:
        with torch.device(device):
            ref = Qwen3ForCausalLM(Qwen3Config(**spec))
        ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
        use_fused_head(ref)
        for idx in chunks:
            loss_of(ref, idx).backward()
        want = {n: p.grad.detach().clone() for n, p in ref.named_parameters()}
        del ref
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()

        # the same bf16 model in plain torch (no DeepSpeed), each micro-batch's gradient added in fp32:
        # what bf16 arithmetic alone costs, to tell it from anything DeepSpeed does
        plain = {n: torch.zeros_like(p, dtype=torch.float32) for n, p in model.named_parameters()}
        for idx in chunks:
            loss_of(model, idx).backward()
            for n, p in model.named_parameters():
                if p.grad is not None:
                    plain[n] += p.grad.float()
                    p.grad = None

    engine, *_ = deepspeed.initialize(model=model, model_parameters=[p for p in model.parameters()],
                                      config=ds_config)
    if not args.no_grad_check:
        engine.train()
        for i, idx in enumerate(chunks):
            engine.set_gradient_accumulation_boundary(i == len(chunks) - 1)
            _before_forward(engine)
            engine.backward(loss_of(engine.module, idx), scale_wrt_gas=False)
        deepspeed_grad, missing = {}, []
        for n, p in engine.module.named_parameters():
            got = safe_get_full_grad(p)
            if got is None:
                missing.append(n)
            else:
                deepspeed_grad[n] = got.detach().float().clone()
        engine.step()
        grad = {**compare(deepspeed_grad, want), "params_without_grad": missing[:5],
                "rows": args.grad_rows, "micro_batches": len(chunks), "completion_tokens": tokens,
                "plain_torch_bf16_vs_fp32": compare(plain, want),
                "deepspeed_vs_plain_torch_bf16": compare(deepspeed_grad, plain)}
        del plain, deepspeed_grad, want

    # 2. the learner's step on the whole batch
    shard = send_shards(batch, plan_shards(batch, 1, 1), device)
    times, split = [], []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for step in range(args.steps + 1):
        timers = {}
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        train_shard(engine, shard, cfg, ref_model=None, sampling=sampling, pad_id=0, timers=timers)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step:  # the first is the warm-up (Triton autotuning, allocator)
            times.append(time.perf_counter() - t0)
            split.append(timers)
    step_s = statistics.median(times)  # of two steps, their mean (the upper one was taken before)
    flops = model_flops(spec, params_less_embedding, batch)
    opt_s = statistics.median(t.get("optimizer_s", 0.0) for t in split)
    positions, completion = float(batch.attention.sum()), float(batch.completion.sum())
    measured = matmul_tflops(device)
    result = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "setting": label,
        "torch": torch.__version__, "deepspeed": deepspeed.__version__,
        "model": "tiny" if args.tiny else f"{args.model} shape, random weights, {spec['num_hidden_layers']} layers",
        "params": params,
        "gradient": grad,
        "step": {"rows": args.rows, "positions": positions, "completion_tokens": completion,
                 "micro_batch": args.micro_batch, "median_s": step_s, "steps": times,
                 # medians over the timed steps, as median_s (they were the last step's)
                 "forward_backward_s": statistics.median(t.get("forward_backward_s", 0.0) for t in split),
                 "optimizer_s": opt_s, "steps_split": split,
                 "positions_per_s": positions / step_s, "completion_tokens_per_s": completion / step_s,
                 "model_tflops": flops / step_s / 1e12,
                 "mfu_datasheet": flops / step_s / (args.peak_tflops * 1e12),
                 "mfu_less_optimizer": flops / (step_s - opt_s) / (args.peak_tflops * 1e12),
                 "matmul_tflops_measured": measured,
                 "mfu_measured_matmul": flops / step_s / (measured * 1e12) if measured else None,
                 "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9 if device.type == "cuda" else None},
    }
    line = json.dumps(result)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
