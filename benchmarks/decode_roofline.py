"""`jury simulate`'s generation formula against one GPU: decode steps and prefills of a model's shape.

    python benchmarks/decode_roofline.py                     # Qwen3-1.7B-Base's shape, h100-sxm's figures
    python benchmarks/decode_roofline.py --hardware h200 --json decode.json
    python benchmarks/decode_roofline.py --tiny              # a two-layer shape on the CPU: a smoke run

`jury simulate --hardware` prices a decode step of n sequences at mean context c as
max((weight bytes + n·c·KV bytes) / (HBM bandwidth · decode_bandwidth) + overhead, n · FLOPs / (peak ·
inference_mfu)) and a prefill at `inference_mfu` (experiments/sim_gpu.py). decode_bandwidth (0.6) and
inference_mfu (0.5) are assumptions in configs/simulate/hardware.yaml. This measures what the card
does on the same work:

- a decoder of the model's shape (configs/simulate/models.yaml) written in plain torch with random
  bf16 weights: RMSNorm, fused QKV with Qwen3's q/k norms and rotary, grouped-query attention over a
  KV cache of context c, a gated MLP, the LM head over the whole vocabulary and a greedy pick;
- one decode step for n sequences captured in a CUDA graph (vLLM's decode runs in CUDA graphs),
  replayed --iters times; the median replay is the step time;
- a prefill of --prefill-rows prompts of each --prompt length (causal attention, grouped-query SDPA
  without copying K and V per query head, no graph).

For each it prints the time, jury simulate's prediction (with the step overhead, which a graph
replay does not pay, set to 0), the bytes moved over the time as a fraction of the datasheet's HBM
bandwidth, and the FLOPs over the time as a fraction of its bf16 peak. Without --fuse the step is
bound by its kernel count (each norm and the rotary are a dozen small kernels: 2,114 a step for
Qwen3-1.7B, 18% of the bandwidth at n = 1 on an H100); --fuse compiles them into one kernel each, as
an engine's are (510). Neither is an engine: an engine adds its scheduler, paged KV and sampling,
and has attention kernels of its own. --profile prints where one step's device time goes. One JSON
document is printed (and written with --json).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time

TINY = dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=1003,
            tied_embeddings=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="Qwen3-1.7B-Base", help="a name in configs/simulate/models.yaml")
    p.add_argument("--hardware", default="h100-sxm", help="a card in configs/simulate/hardware.yaml")
    p.add_argument("--batches", default="1,8,32,64,128,256", help="running sequences n")
    p.add_argument("--contexts", default="512,2048", help="context c of every sequence")
    p.add_argument("--max-cache-tokens", type=int, default=300_000, help="skip n·c above this (KV memory)")
    p.add_argument("--prompt", default="1024", help="prompt lengths of the prefills, comma-separated")
    p.add_argument("--prefill-rows", type=int, default=16)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the whole decode step first (inductor also rewrites the attention)")
    p.add_argument("--fuse", action="store_true",
                   help="torch.compile the norms, rotary and SiLU-mul only (fused, as an engine's kernels are); "
                        "matmuls and attention stay cuBLAS and SDPA")
    p.add_argument("--profile", action="store_true",
                   help="also print where the GPU's time goes in the first decode shape: matmuls, attention, the rest")
    p.add_argument("--tiny", action="store_true", help="a two-layer shape on the CPU, no graph")
    p.add_argument("--json", default="")
    return p.parse_args()


class Decoder:
    """A Qwen3-shaped decoder's weights, random bf16, and its forward for new tokens over a KV cache."""

    def __init__(self, m, device, dtype):
        import torch

        g = torch.Generator(device=device).manual_seed(0)

        def w(*shape):
            return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * 0.02).to(dtype)

        self.m, self.q_per_kv = m, m.heads // m.kv_heads
        qkv = (m.heads + 2 * m.kv_heads) * m.head_dim
        self.layers = [dict(ln1=torch.ones(m.hidden, device=device, dtype=dtype), wqkv=w(qkv, m.hidden),
                            qn=torch.ones(m.head_dim, device=device, dtype=dtype),
                            kn=torch.ones(m.head_dim, device=device, dtype=dtype),
                            wo=w(m.hidden, m.heads * m.head_dim),
                            ln2=torch.ones(m.hidden, device=device, dtype=dtype),
                            wgu=w(2 * m.intermediate, m.hidden), wd=w(m.hidden, m.intermediate))
                       for _ in range(m.layers)]
        self.embed = w(m.vocab, m.hidden)
        self.head = self.embed if m.tied_embeddings else w(m.vocab, m.hidden)
        self.norm = torch.ones(m.hidden, device=device, dtype=dtype)
        inv = 1.0 / (1e6 ** (torch.arange(0, m.head_dim, 2, device=device, dtype=torch.float32) / m.head_dim))
        self.inv_freq = inv

    def weight_bytes(self) -> int:
        tensors = [t for layer in self.layers for t in layer.values()] + [self.embed, self.norm]
        if self.head is not self.embed:
            tensors.append(self.head)
        return sum(t.numel() * t.element_size() for t in tensors)

    def fuse(self):
        import torch

        torch._dynamo.config.recompile_limit = 64  # one compile per shape (n, heads) of each
        self._rms = torch.compile(self._rms, dynamic=False)
        self._rotate = torch.compile(self._rotate, dynamic=False)
        self._silu_mul = torch.compile(self._silu_mul, dynamic=False)

    @staticmethod
    def _silu_mul(gate, up):
        import torch.nn.functional as F

        return F.silu(gate) * up

    @staticmethod
    def _rms(x, w):
        import torch

        return (x.float() * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    def _rotate(self, x, pos):
        import torch

        ang = pos.float()[..., None] * self.inv_freq            # [..., T, hd/2]
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        a, b = x[..., ::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)

    def decode(self, tokens, pos, caches):
        """One new token per sequence: tokens [n], pos [n] (where it goes), caches [(K, V)] of
        [n, kv_heads, c, head_dim] each; attends over the whole cache. Returns the greedy next tokens."""
        import torch
        import torch.nn.functional as F

        m, n = self.m, tokens.shape[0]
        x = self.embed[tokens]                                    # [n, H]
        for layer, (kc, vc) in zip(self.layers, caches):
            h = self._rms(x, layer["ln1"]) @ layer["wqkv"].t()
            q, k, v = h.split([m.heads * m.head_dim, m.kv_heads * m.head_dim, m.kv_heads * m.head_dim], -1)
            q = self._rotate(self._rms(q.view(n, m.heads, m.head_dim), layer["qn"]), pos[:, None])
            k = self._rotate(self._rms(k.view(n, m.kv_heads, m.head_dim), layer["kn"]), pos[:, None])
            idx = pos.view(n, 1, 1, 1).expand(n, m.kv_heads, 1, m.head_dim)
            kc.scatter_(2, idx, k.unsqueeze(2))
            vc.scatter_(2, idx, v.view(n, m.kv_heads, 1, m.head_dim))
            # grouped-query attention as q_per_kv query rows per KV head (no copy of K or V)
            a = F.scaled_dot_product_attention(q.view(n, m.kv_heads, self.q_per_kv, m.head_dim), kc, vc)
            x = x + a.reshape(n, m.heads * m.head_dim) @ layer["wo"].t()
            gate, up = (self._rms(x, layer["ln2"]) @ layer["wgu"].t()).chunk(2, -1)
            x = x + self._silu_mul(gate, up) @ layer["wd"].t()
        return (self._rms(x, self.norm) @ self.head.t()).argmax(-1)

    def prefill(self, tokens):
        """Causal forward of prompts [rows, T]; returns the next token of each (the KV is not kept)."""
        import torch
        import torch.nn.functional as F

        m, (rows, t) = self.m, tokens.shape
        pos = torch.arange(t, device=tokens.device)
        x = self.embed[tokens]
        for layer in self.layers:
            h = self._rms(x, layer["ln1"]) @ layer["wqkv"].t()
            q, k, v = h.split([m.heads * m.head_dim, m.kv_heads * m.head_dim, m.kv_heads * m.head_dim], -1)
            q = self._rotate(self._rms(q.view(rows, t, m.heads, m.head_dim), layer["qn"]).transpose(1, 2), pos)
            k = self._rotate(self._rms(k.view(rows, t, m.kv_heads, m.head_dim), layer["kn"]).transpose(1, 2), pos)
            v = v.view(rows, t, m.kv_heads, m.head_dim).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # K, V not copied
            x = x + a.transpose(1, 2).reshape(rows, t, m.heads * m.head_dim) @ layer["wo"].t()
            gate, up = (self._rms(x, layer["ln2"]) @ layer["wgu"].t()).chunk(2, -1)
            x = x + (F.silu(gate) * up) @ layer["wd"].t()
        return (self._rms(x[:, -1], self.norm) @ self.head.t()).argmax(-1)


def timed(fn, iters: int, cuda: bool) -> float:
    """Median seconds of `fn()` over `iters` runs after two warm-ups."""
    import torch

    times = []
    for i in range(iters + 2):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def kernel_shares(fn, cuda: bool) -> dict:
    """Seconds of device time per kind of kernel in one call of `fn` (torch.profiler), by name:
    matmuls (cuBLAS/CUTLASS gemm and gemv), attention (flash / memory-efficient), the rest."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    out = {"matmul": 0.0, "attention": 0.0, "other": 0.0, "kernels": 0, "top": []}
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", 0) if cuda else e.self_cpu_time_total
        if not t:
            continue
        name = e.key.lower()
        kind = ("attention" if any(w in name for w in ("flash", "fmha", "sdpa", "attention", "attn"))
                else "matmul" if any(w in name for w in ("gemm", "gemv", "xmma", "cutlass", "nvjet", "matmul", "addmm"))
                else "other")
        out[kind] += t / 1e6
        out["kernels"] += e.count
        out["top"].append((t / 1e6, e.count, e.key[:60]))
    out["top"] = sorted(out["top"], reverse=True)[:8]
    return out


def main():
    args = parse_args()
    import torch

    from jury.experiments.sim_gpu import ModelShape, decode_step_s, load_hardware, load_model, prefill_s

    cuda = not args.tiny
    if cuda and not torch.cuda.is_available():
        sys.exit("decode_roofline.py: no CUDA device (use --tiny for the CPU smoke run)")
    device = torch.device("cuda" if cuda else "cpu")
    m = ModelShape(**TINY) if args.tiny else load_model(args.model)
    if m.experts:
        sys.exit(f"decode_roofline.py: {args.model} is a mixture of {m.experts} experts; the measured decoder "
                 "is dense layers only")
    gpu = load_hardware(args.hardware)["generator"]
    gpu = dataclasses.replace(gpu, efficiency=dataclasses.replace(gpu.efficiency, decode_step_overhead_s=0.0))
    dec = Decoder(m, device, torch.bfloat16)
    if args.fuse:
        dec.fuse()
    wbytes = dec.weight_bytes()
    rows, profile = [], None
    for c in (int(x) for x in args.contexts.split(",")):
        for n in (int(x) for x in args.batches.split(",")):
            if n * c > args.max_cache_tokens:
                continue
            caches = [(torch.randn(n, m.kv_heads, c, m.head_dim, device=device, dtype=torch.bfloat16),
                       torch.randn(n, m.kv_heads, c, m.head_dim, device=device, dtype=torch.bfloat16))
                      for _ in range(m.layers)]
            tokens = torch.randint(0, m.vocab, (n,), device=device)
            pos = torch.full((n,), c - 1, device=device)
            decode = torch.compile(dec.decode, dynamic=False) if args.compile else dec.decode
            if cuda:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(2):
                        decode(tokens, pos, caches)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    decode(tokens, pos, caches)
                step = graph.replay
            else:
                def step():
                    decode(tokens, pos, caches)
            t = timed(step, args.iters, cuda)
            if args.profile and not rows:  # after the warm-ups: compiled kernels, not their compilation
                profile = kernel_shares(lambda: decode(tokens, pos, caches), cuda)
            kv_bytes = n * c * m.kv_bytes_per_token()
            flops = n * m.forward_flops(c)
            rows.append({"phase": "decode", "n": n, "context": c, "measured_s": t,
                         "predicted_s": decode_step_s(m, gpu, 1, n, c),
                         "tokens_per_s": n / t, "bytes": wbytes + kv_bytes,
                         "hbm_fraction": (wbytes + kv_bytes) / t / gpu.hbm_bytes_per_s,
                         "flop_fraction": flops / t / gpu.bf16_flops})
            del caches, step
            if cuda:
                del graph
                torch.cuda.empty_cache()
    for length in (int(x) for x in args.prompt.split(",")):
        prompts = torch.randint(0, m.vocab, (args.prefill_rows, length), device=device)
        t = timed(lambda: dec.prefill(prompts), max(3, args.iters // 5), cuda)
        flops = args.prefill_rows * m.prefill_flops(length)  # the head on the last position, as prefill runs it
        rows.append({"phase": "prefill", "n": args.prefill_rows, "context": length, "measured_s": t,
                     "predicted_s": args.prefill_rows * prefill_s(m, gpu, 1, length),
                     "tokens_per_s": args.prefill_rows * length / t, "flop_fraction": flops / t / gpu.bf16_flops})
    for r in rows:
        r["measured_over_predicted"] = r["measured_s"] / r["predicted_s"]
    result = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "model": "tiny" if args.tiny else args.model, "hardware_figures": args.hardware,
              "weight_bytes": wbytes, "kv_bytes_per_token": m.kv_bytes_per_token(),
              "assumed": {"decode_bandwidth": gpu.efficiency.decode_bandwidth,
                          "inference_mfu": gpu.efficiency.inference_mfu},
              "compiled": "whole step" if args.compile else "elementwise" if args.fuse else "no", "first_decode_kernel_seconds": profile, "rows": rows}
    print(f"{'phase':8} {'n':>4} {'ctx':>5} {'ms':>8} {'predicted':>9} {'ratio':>6} {'HBM %':>6} {'FLOP %':>6}",
          file=sys.stderr)
    for r in rows:
        hbm = f"{100 * r['hbm_fraction']:6.1f}" if "hbm_fraction" in r else f"{'':6}"
        print(f"{r['phase']:8} {r['n']:4d} {r['context']:5d} {1e3 * r['measured_s']:8.3f} "
              f"{1e3 * r['predicted_s']:9.3f} {r['measured_over_predicted']:6.2f} {hbm} "
              f"{100 * r['flop_fraction']:6.1f}", file=sys.stderr)
    if profile:
        print(f"first decode shape, one step outside the graph, device time (s): {profile}", file=sys.stderr)
    line = json.dumps(result)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
