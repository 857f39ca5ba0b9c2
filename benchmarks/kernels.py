"""Benchmark the three kernel layers against eager PyTorch, torch.compile and Liger-Kernel.

    python benchmarks/kernels.py                      # the issue's sizes, on the GPU
    python benchmarks/kernels.py --tiny --impls eager,ours   # CPU smoke check

Layer 1 (group advantage, per token) and layer 2 (policy loss forward+backward) are
memory-bound: they are timed on --seqs x --seq-len tokens (large by default, so that
launch latency does not hide bandwidth) and reported in TB/s of compulsory traffic,
against a measured copy bandwidth. Layer 3 is the whole hidden -> log-probs -> GRPO
loss -> dH, dW step at --tokens x --hidden x --vocab, reported in effective TFLOP/s
(6 N H V: logits, dH, dW; ours also recomputes the logits, 8 N H V in all) against a
measured bf16 matmul. Peak memory is the CUDA high-water mark above the inputs.
Layer "head" is the fused LM head alone (chosen-token log-prob and entropy, no loss) at the
same sizes, forward and backward timed apart, against plain bf16 matmuls of the same shapes
(forward z = H W^T, 2NHV; backward dH = dZ W and dW = dZ^T H, 4NHV) and against the unfused
torch path (fp32 logits, log_softmax, gather, entropy); ours recomputes the logits in its
backward, so its backward rate counts 4NHV of the 6NHV it runs.
Prints a table and writes JSON (--json).
"""

import argparse
import json
import os
import statistics
import time

import torch

from jury import kernels
from jury.kernels import reference

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
IMPLS = ("eager", "compile", "liger", "ours")
# Layer 2 runs every option (behaviour and reference log-probs read); layer 3 runs the
# DAPO clip that Liger's fused GRPO loss also computes.
POLICY_KWARGS = dict(clip_low=0.2, clip_high=0.28, dual_clip=3.0, tis_cap=2.0, kl_coef=0.01)
LM_HEAD_POLICY_KWARGS = dict(clip_low=0.2, clip_high=0.28)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=16384, help="layer 3: completion tokens N")
    p.add_argument("--hidden", type=int, default=4096, help="layer 3: hidden size H")
    p.add_argument("--vocab", type=int, default=151936, help="layer 3: vocabulary V")
    p.add_argument("--seq-len", type=int, default=1024, help="layer 3: tokens per sequence "
                   "(N / seq-len sequences); layers 1-2: see --elementwise-seq-len")
    p.add_argument("--seqs", type=int, default=2048, help="layers 1-2: sequences")
    p.add_argument("--elementwise-seq-len", type=int, default=4096, help="layers 1-2: tokens per sequence")
    p.add_argument("--group-size", type=int, default=16, help="layer 1: completions per prompt")
    p.add_argument("--dtype", choices=DTYPES, default="bf16", help="hidden/head dtype (layer 3)")
    p.add_argument("--layers", default="1,2,3,head", help="comma list of layers to run (1, 2, 3, head)")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma list from {IMPLS}")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5, help="timed iterations (median reported)")
    p.add_argument("--tiny", action="store_true",
                   help="tiny sizes for a CPU smoke run (overrides the size flags)")
    p.add_argument("--json", default="runs/kernels_benchmark.json", help="output file")
    args = p.parse_args()
    if args.tiny:
        args.tokens, args.hidden, args.vocab, args.seq_len = 256, 64, 1003, 64
        args.seqs, args.elementwise_seq_len, args.group_size = 32, 257, 8
    if args.tokens % args.seq_len or args.seqs % args.group_size:
        p.error("--tokens must be a multiple of --seq-len and --seqs of --group-size")
    return args


# ---------------------------------------------------------------- measurement

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(fn, device, warmup, iters):
    """(median seconds, peak bytes above what was allocated before, or None on CPU)."""
    for _ in range(warmup):
        fn()
    sync(device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() - base if device.type == "cuda" else None
    return statistics.median(times), peak


def ceilings(device, warmup, iters):
    """Measured copy bandwidth (bytes/s) and bf16 matmul rate (FLOP/s) of this device."""
    n = (1 << 28) if device.type == "cuda" else (1 << 22)
    src = torch.empty(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    copy_s, _ = measure(lambda: dst.copy_(src), device, warmup, iters)
    m = 8192 if device.type == "cuda" else 512
    a = torch.randn(m, m, device=device, dtype=torch.bfloat16)
    b = torch.randn(m, m, device=device, dtype=torch.bfloat16)
    mm_s, _ = measure(lambda: a @ b, device, warmup, iters)
    return {"copy_bytes_per_s": 2 * n * 4 / copy_s, "bf16_flop_per_s": 2 * m**3 / mm_s}


# ---------------------------------------------------------------- workloads

def eager_lm_head_loss(hidden, weight, targets, old, adv, mask, policy_loss):
    """The plain PyTorch step: full (N, V) logits in fp32, then the same policy loss."""
    logp_all = (hidden @ weight.T).float().log_softmax(dim=-1)
    logp = logp_all.gather(1, targets[:, None]).squeeze(1)
    entropy = -(logp_all.exp() * logp_all).sum(dim=-1)
    loss, _ = policy_loss(logp.view(mask.shape), old, adv, mask, **LM_HEAD_POLICY_KWARGS)
    return loss, entropy


def ours_lm_head_loss(hidden, weight, targets, old, adv, mask):
    logp, entropy, _ = kernels.lm_head_logprobs(hidden, weight, targets)
    loss, _ = kernels.policy_loss(logp.view(mask.shape), old, adv, mask, **LM_HEAD_POLICY_KWARGS)
    return loss, entropy


def liger_lm_head_loss(b, t):
    from liger_kernel.chunked_loss import LigerFusedLinearGRPOLoss

    liger = LigerFusedLinearGRPOLoss(beta=0.0, use_ref_model=False, loss_type="bnpo",
                                     epsilon_low=0.2, epsilon_high=0.28)

    def step(hidden, weight, targets, old, adv, mask):
        loss, _ = liger(hidden.view(b, t, -1), weight, targets.view(b, t), mask, adv,
                        old_per_token_logps=old)
        return loss, None
    return step


def layer3_step(impl, args, inputs):
    b, t = inputs["mask"].shape
    if impl == "eager":
        fn = lambda *x: eager_lm_head_loss(*x, reference.policy_loss)
    elif impl == "compile":
        fn = torch.compile(lambda *x: eager_lm_head_loss(*x, reference.policy_loss))
    elif impl == "liger":
        fn = liger_lm_head_loss(b, t)
    else:
        fn = ours_lm_head_loss
    hidden, weight = inputs["hidden"], inputs["weight"]

    def step():
        hidden.grad = weight.grad = None
        loss, _ = fn(hidden, weight, inputs["targets"], inputs["old"], inputs["adv"],
                     inputs["mask"])
        loss.backward()
        return loss
    return step


def layer3_inputs(args, device):
    n, h, v = args.tokens, args.hidden, args.vocab
    dtype = DTYPES[args.dtype]
    b, t = n // args.seq_len, args.seq_len
    return {
        "hidden": torch.randn(n, h, device=device, dtype=dtype).requires_grad_(),
        "weight": (torch.randn(v, h, device=device) / h**0.5).to(dtype).requires_grad_(),
        "targets": torch.randint(0, v, (n,), device=device),
        "old": -torch.rand(b, t, device=device) * 12,
        "adv": torch.randn(b, device=device),
        "mask": torch.ones(b, t, dtype=torch.bool, device=device),
    }


def layer2_inputs(args, device):
    b, t = args.seqs, args.elementwise_seq_len
    old = -torch.rand(b, t, device=device) * 5
    return {
        "logp": (old + 0.1 * torch.randn_like(old)).requires_grad_(),
        "old": old, "adv": torch.randn(b, device=device),
        "mask": torch.rand(b, t, device=device) > 0.1,
        "behav_logp": old + 0.1 * torch.randn_like(old),
        "ref_logp": old + 0.1 * torch.randn_like(old),
    }


def layer2_step(impl, inputs):
    fn = {"eager": reference.policy_loss, "compile": torch.compile(reference.policy_loss),
          "ours": kernels.policy_loss}[impl]
    logp = inputs["logp"]

    def step():
        logp.grad = None
        loss, _ = fn(logp, inputs["old"], inputs["adv"], inputs["mask"],
                     behav_logp=inputs["behav_logp"], ref_logp=inputs["ref_logp"], **POLICY_KWARGS)
        loss.backward()
        return loss
    return step


def layer1_step(impl, args, device):
    groups = args.seqs // args.group_size
    rewards = torch.randint(0, 2, (groups, args.group_size), device=device).float()
    mask = torch.rand(groups, args.group_size, args.elementwise_seq_len, device=device) > 0.1
    fn = {"eager": reference.group_advantage, "compile": torch.compile(reference.group_advantage),
          "ours": kernels.group_advantage}[impl]
    return lambda: fn(rewards, mode="grpo", mask=mask)


# ---------------------------------------------------------------- the LM head alone

def eager_head(hidden, weight, targets):
    logp_all = (hidden @ weight.T).float().log_softmax(dim=-1)
    return logp_all.gather(1, targets[:, None]).squeeze(1), -(logp_all.exp() * logp_all).sum(dim=-1)


def ours_head(hidden, weight, targets):
    logp, entropy, _ = kernels.lm_head_logprobs(hidden, weight, targets)
    return logp, entropy


def head_rows(args, device):
    """Rows of layer "head": the same-shape matmuls, then eager and ours, forward and backward."""
    inputs = layer3_inputs(args, device)
    hidden, weight, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    n, h, v = args.tokens, args.hidden, args.vocab
    fwd_flop, bwd_flop = 2 * n * h * v, 4 * n * h * v
    rows = []
    with torch.no_grad():
        hd, wd = hidden.detach(), weight.detach()
        z = torch.empty(n, v, device=device, dtype=hd.dtype)
        mm_fwd, _ = measure(lambda: torch.mm(hd, wd.T, out=z), device, args.warmup, args.iters)
        dz, dh, dw = torch.randn_like(z), torch.empty_like(hd), torch.empty_like(wd)
        del z
        mm_bwd, _ = measure(lambda: (torch.mm(dz, wd, out=dh), torch.mm(dz.T, hd, out=dw)), device,
                            args.warmup, args.iters)
        del dz, dh, dw
    ceiling = {"forward": fwd_flop / mm_fwd, "backward": bwd_flop / mm_bwd}
    rows.append({"layer": "head", "impl": "matmul", "phase": "forward", "ms": mm_fwd * 1e3, "peak_gb": None,
                 "rate": ceiling["forward"] / 1e12, "unit": "TFLOP/s", "of_ceiling": 1.0})
    rows.append({"layer": "head", "impl": "matmul", "phase": "backward", "ms": mm_bwd * 1e3, "peak_gb": None,
                 "rate": ceiling["backward"] / 1e12, "unit": "TFLOP/s", "of_ceiling": 1.0})
    g_logp, g_ent = torch.randn(n, device=device), torch.randn(n, device=device)
    for impl, fn in (("eager", eager_head), ("ours", ours_head)):
        try:
            def forward():
                return fn(hidden, weight, targets)

            def forward_backward():
                hidden.grad = weight.grad = None
                logp, entropy = fn(hidden, weight, targets)
                ((logp * g_logp).sum() + (entropy * g_ent).sum()).backward()

            fwd_s, fwd_peak = measure(forward, device, args.warmup, args.iters)
            both_s, both_peak = measure(forward_backward, device, args.warmup, args.iters)
        except Exception as exc:  # an OOM of the eager path must not end the run
            rows.append({"layer": "head", "impl": impl, "phase": "-", "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        bwd_s = both_s - fwd_s
        for phase, seconds, flop, peak, of in (
                ("forward", fwd_s, fwd_flop, fwd_peak, fwd_flop / fwd_s / ceiling["forward"]),
                ("backward", bwd_s, bwd_flop, None, bwd_flop / bwd_s / ceiling["backward"]),
                ("fwd+bwd", both_s, fwd_flop + bwd_flop, both_peak,
                 (fwd_flop + bwd_flop) / both_s / ((fwd_flop + bwd_flop) / (mm_fwd + mm_bwd)))):
            rows.append({"layer": "head", "impl": impl, "phase": phase, "ms": seconds * 1e3,
                         "peak_gb": None if peak is None else peak / 1e9, "rate": flop / seconds / 1e12,
                         "unit": "TFLOP/s", "of_ceiling": of})
        hidden.grad = weight.grad = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


# ---------------------------------------------------------------- driver

def run_layer(layer, impl, args, device, ceiling):
    """One table row: time, memory and rate of one implementation of one layer."""
    row = {"layer": layer, "impl": impl}
    tokens = args.seqs * args.elementwise_seq_len
    if layer == 3:
        inputs = layer3_inputs(args, device)
        step = layer3_step(impl, args, inputs)
        work, unit = 6 * args.tokens * args.hidden * args.vocab, "TFLOP/s"
        ceiling_rate = ceiling["bf16_flop_per_s"]
    elif impl == "liger":
        return None  # Liger's GRPO kernels start from logits: compared in layer 3 only
    elif layer == 2:
        step = layer2_step(impl, layer2_inputs(args, device))
        # logp, old, behav, ref read (fp32) + bool mask + grad written; advantages per row.
        work, unit = tokens * (4 * 4 + 1 + 4), "TB/s"
        ceiling_rate = ceiling["copy_bytes_per_s"]
    else:
        step = layer1_step(impl, args, device)
        work, unit = tokens * (1 + 4), "TB/s"  # bool mask read, fp32 advantage written
        ceiling_rate = ceiling["copy_bytes_per_s"]
    seconds, peak = measure(step, device, args.warmup, args.iters)
    rate = work / seconds
    row.update(ms=seconds * 1e3, peak_gb=None if peak is None else peak / 1e9,
               rate=rate / 1e12, unit=unit, of_ceiling=rate / ceiling_rate)
    return row


def print_table(rows, ceiling):
    print(f"ceilings: copy {ceiling['copy_bytes_per_s'] / 1e12:.2f} TB/s, "
          f"bf16 matmul {ceiling['bf16_flop_per_s'] / 1e12:.1f} TFLOP/s "
          "(layer head: of the same-shape matmul of its phase)")
    print(f"{'layer':>5} {'impl':>8} {'phase':>9} {'ms':>10} {'peak GB':>8} {'rate':>14} {'of ceiling':>10}")
    for r in rows:
        phase = r.get("phase", "fwd+bwd")
        if "error" in r:
            print(f"{r['layer']:>5} {r['impl']:>8} {phase:>9}  {r['error']}")
            continue
        peak = "-" if r["peak_gb"] is None else f"{r['peak_gb']:.2f}"
        print(f"{r['layer']:>5} {r['impl']:>8} {phase:>9} {r['ms']:>10.3f} {peak:>8} "
              f"{r['rate']:>7.3f} {r['unit']:<7}{r['of_ceiling']:>9.0%}")


def main():
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"device {device}, kernels backend: {kernels.backend(torch.empty(0, device=device))}")
    ceiling = ceilings(device, args.warmup, args.iters)
    rows = []
    for layer in args.layers.split(","):
        if layer == "head":
            rows.extend(head_rows(args, device))
            continue
        layer = int(layer)
        for impl in args.impls.split(","):
            try:
                row = run_layer(layer, impl, args, device, ceiling)
            except Exception as exc:  # a missing Liger or an OOM must not end the run
                row = {"layer": layer, "impl": impl, "error": f"{type(exc).__name__}: {exc}"[:200]}
            if row is not None:
                rows.append(row)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    print_table(rows, ceiling)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"args": vars(args), "device": str(device), "ceilings": ceiling, "rows": rows},
                  f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
