"""How fast the learner's loss trains one batch cut into micro-batches of different row counts, and
under which attention kernel: the question the fifth GPU session left (docs/results.md), where
micro-batches of two long padded rows ran at 20% MFU and those of one or four at 23%.

    python benchmarks/learner_shapes.py                      # Qwen3-1.7B's shape on a GPU
    python benchmarks/learner_shapes.py --tiny               # a two-layer model on the CPU (smoke run)

No DeepSpeed: plain torch autograd through `grpo.micro_loss` (the learner's loss, its fused LM head)
on learner_gpu.py's batches (`--rows` completions spread evenly over 1..`--max-new` after a
128-token prompt), cut by `update.length_sorted_rows` as the learner cuts them. Each case is timed
`--reps` times after one warm-up pass; the best is reported, as positions (prompt and completion
tokens, padding left out) per second. `--backends` forces scaled_dot_product_attention's kernel
(default: PyTorch's own choice; efficient, cudnn, flash, math): a padded micro-batch carries a mask,
which flash attention does not take, while a single row needs none and runs causal. One JSON
document is printed (and written with --json).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learner_gpu import QWEN3_1_7B, TINY, make_batch  # noqa: E402

BACKENDS = ("default", "efficient", "cudnn", "flash", "math")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="16x4096:1,2,4;8x8192:1;64x1024:8",
                   help="ROWSxMAX_NEW:MICRO_BATCHES, separated by ';'")
    p.add_argument("--backends", default="default,efficient,cudnn",
                   help=f"attention kernels to force, of {', '.join(BACKENDS)}")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--tiny", action="store_true", help="a two-layer model on the CPU (smoke run)")
    p.add_argument("--json", default="")
    args = p.parse_args()
    bad = sorted(set(args.backends.split(",")) - set(BACKENDS))
    if bad:
        p.error(f"--backends: unknown {', '.join(bad)} (known: {', '.join(BACKENDS)})")
    try:
        args.case_list = cases(args.cases, args.tiny)
    except ValueError:
        p.error(f"--cases {args.cases!r}: each ROWSxMAX_NEW:MICRO_BATCHES of positive integers, e.g. 16x4096:1,2,4")
    return args


def cases(spec: str, tiny: bool) -> list[tuple[int, int, int]]:
    out = []
    for part in spec.split(";"):
        shape, micro = part.split(":")
        rows, max_new = (int(x) for x in shape.split("x"))
        if min(rows, max_new) < 1:
            raise ValueError(part)
        if tiny:  # the same cuts, lengths a CPU trains in seconds
            max_new = max(8, max_new // 128)
        micros = [int(m) for m in micro.split(",")]
        if min(micros) < 1:
            raise ValueError(part)
        out.extend((rows, max_new, m) for m in micros)
    return out


def main():
    args = parse_args()
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from jury.learner.grpo import micro_loss, use_fused_head
    from jury.learner.update import length_sorted_rows
    from jury.protocol.config import LearnerConfig
    from jury.protocol.plan import Sampling

    device = torch.device("cpu" if args.tiny else "cuda")
    spec = TINY if args.tiny else QWEN3_1_7B
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(Qwen3Config(**spec)).to(torch.bfloat16)
    use_fused_head(model)
    kernels = {"efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timed(batch, micro: int, backend: str) -> list[float]:
        cfg = LearnerConfig(dtype="bfloat16", zero_stage=1, micro_batch=micro, lr=1e-6, grad_clip=0.0)
        sampling = Sampling(1.0, 1.0, int(batch.input_ids.shape[1]))
        rows = torch.arange(batch.input_ids.shape[0], device=device)
        chunks = length_sorted_rows(batch, rows, micro)
        tokens, seqs = float(batch.completion.sum()), float(len(rows))
        times = []
        for _ in range(args.reps + 1):
            sync()
            t0 = time.perf_counter()
            for idx in chunks:
                with sdpa_kernel([kernels[backend]]) if backend != "default" else contextlib.nullcontext():
                    loss, _ = micro_loss(model, batch, idx, cfg, total_tokens=tokens, total_seqs=seqs,
                                         sampling=sampling)
                    loss.backward()
            sync()
            times.append(time.perf_counter() - t0)
            model.zero_grad(set_to_none=True)
        return times

    rows_out = []
    print(f"{'rows x max_new':>15} {'micro':>5} {'backend':>9} {'best s':>8} {'positions/s':>12}")
    for rows, max_new, micro in args.case_list:
        a = argparse.Namespace(rows=rows, max_new=max_new, prompt=128 if not args.tiny else 8)
        batch = make_batch(a, spec["vocab_size"], device)
        positions = float(batch.attention.sum())
        for backend in args.backends.split(","):
            row = {"rows": rows, "max_new": max_new, "micro_batch": micro, "backend": backend, "positions": positions}
            try:
                times = timed(batch, micro, backend)
            except RuntimeError as e:  # a kernel that cannot take this shape or device
                model.zero_grad(set_to_none=True)
                row["error"] = str(e).splitlines()[0][:200]
                print(f"{rows:>6} x {max_new:<6} {micro:>5} {backend:>9} {'-':>8} {row['error'][:60]}")
            else:
                best = min(times[1:])
                row.update(times_s=times, best_s=best, positions_per_s=positions / best)
                print(f"{rows:>6} x {max_new:<6} {micro:>5} {backend:>9} {best:8.3f} {positions / best:12,.0f}")
            rows_out.append(row)
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "model": "tiny" if args.tiny else "Qwen3-1.7B shape, random weights",
              "rows": rows_out}
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
