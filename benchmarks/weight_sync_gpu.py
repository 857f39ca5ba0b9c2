"""The weight plane's sending half on one GPU: `jury simulate`'s per-bucket latency, measured.

    python benchmarks/weight_sync_gpu.py                       # Qwen3-1.7B's tensors, NCCL, buckets 16..1024 MB
    python benchmarks/weight_sync_gpu.py --tiny --backend gloo --receivers 1   # a CPU smoke run

`jury simulate` prices a sync as 2·P bytes over the link plus `bucket_latency_s` (5 ms, an
assumption in configs/simulate/hardware.yaml) per bucket. This runs the learner's own
`WeightSender` (layout, the ready handshake through the group's store, each bucket gathered with
torch.cat and broadcast, polled to completion) over tensors of the model's shape (random bf16, on the
device), once per `--bucket-mb`, `--repeats` times each, and fits sync time = buckets · latency +
bytes / rate by least squares over every bucket size.

With one GPU the group has the sender alone (NCCL refuses two ranks on one device), so the wire
costs nothing and what is measured is the sender's own per-bucket cost: the gather, the store's
round trips, the launch and the polling. The engine's load of a bucket (vLLM's `load_weights`) and
the link are not in it. `--receivers K` adds K receiving processes (actors/weight_sync.WeightGroup,
each bucket copied into its tensors as a load would), for gloo on the CPU.

It also runs the plane's recovery on the real backend, as cluster/pipeline.py does it: after the
timed syncs the group is aborted (`WeightSender.abort`, as a failed sync does), a new sender with its
own store is made and joined, and one more sync must go through. Prints one JSON line (and writes it with --json).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

QWEN3_1_7B = dict(hidden=2048, layers=28, intermediate=6144, heads=16, kv_heads=8, head_dim=128, vocab=151936)
TINY = dict(hidden=64, layers=2, intermediate=128, heads=4, kv_heads=2, head_dim=16, vocab=1003)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="nccl", choices=("nccl", "gloo"))
    p.add_argument("--bucket-mb", default="16,64,256,1024", help="bucket sizes to time, MB")
    p.add_argument("--repeats", type=int, default=3, help="timed syncs per bucket size, after one warm-up")
    p.add_argument("--receivers", type=int, default=0, help="receiving processes (gloo only: one GPU)")
    p.add_argument("--tiny", action="store_true", help="a two-layer model's tensors")
    p.add_argument("--json", default="")
    args = p.parse_args()
    if args.repeats < 1 or args.receivers < 0:
        p.error("--repeats is at least 1 (each size needs a timed sync) and --receivers at least 0")
    try:
        sizes = [float(x) for x in args.bucket_mb.split(",")]
    except ValueError:
        p.error(f"--bucket-mb {args.bucket_mb!r}: comma-separated sizes in MB, e.g. 16,64,256")
    if not sizes or min(sizes) <= 0:
        p.error(f"--bucket-mb {args.bucket_mb!r}: every size above 0")
    return args


def shapes(m: dict) -> list[tuple[str, list[int]]]:
    """Qwen3's parameters in the order the learner names them (tied head: sent once, as embed_tokens)."""
    h, hd = m["hidden"], m["head_dim"]
    out = [("model.embed_tokens.weight", [m["vocab"], h])]
    for i in range(m["layers"]):
        pre = f"model.layers.{i}."
        out += [(pre + "input_layernorm.weight", [h]),
                (pre + "self_attn.q_proj.weight", [m["heads"] * hd, h]),
                (pre + "self_attn.k_proj.weight", [m["kv_heads"] * hd, h]),
                (pre + "self_attn.v_proj.weight", [m["kv_heads"] * hd, h]),
                (pre + "self_attn.q_norm.weight", [hd]), (pre + "self_attn.k_norm.weight", [hd]),
                (pre + "self_attn.o_proj.weight", [h, m["heads"] * hd]),
                (pre + "post_attention_layernorm.weight", [h]),
                (pre + "mlp.gate_proj.weight", [m["intermediate"], h]),
                (pre + "mlp.up_proj.weight", [m["intermediate"], h]),
                (pre + "mlp.down_proj.weight", [h, m["intermediate"]])]
    return out + [("model.norm.weight", [h])]


def receive(host, port, world, rank, backend, plan, ports, done):
    """A receiving rank: join, then for each sync take its buckets and copy each tensor out; at the
    plan's None, abort and join the new group whose port comes from `ports` (the plane re-formed)."""
    import torch

    from jury.actors.weight_sync import WeightGroup

    group = WeightGroup(host, port, world, rank, backend, "cpu", timeout_s=120)
    group.join()
    for update in plan:
        if update is None:  # the plane is re-formed: a new sender, store and group
            group.abort()
            group = WeightGroup(host, ports.get(timeout=120), world, rank, backend, "cpu", timeout_s=120)
            group.join()
            continue
        for _, parts in group.buckets(update["version"], update["dtypes"], update["shapes"], update["buckets"]):
            for _, t in parts:
                torch.empty_like(t).copy_(t)
    done.put(rank)


def main():
    args = parse_args()
    import torch

    from jury.learner.weight_sender import WeightSender

    cuda = args.backend == "nccl"
    if cuda and not torch.cuda.is_available():
        sys.exit("weight_sync_gpu.py: NCCL needs a CUDA device (use --backend gloo on the CPU)")
    if cuda and args.receivers:
        sys.exit("weight_sync_gpu.py: NCCL refuses two ranks on one GPU; --receivers is for gloo")
    device = torch.device("cuda" if cuda else "cpu")
    named = [(n, torch.randn(s, device=device, dtype=torch.float32).to(torch.bfloat16))
             for n, s in shapes(TINY if args.tiny else QWEN3_1_7B)]
    tensors = dict(named)
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    sizes = [float(x) for x in args.bucket_mb.split(",")]
    # every sync, in order, that the receivers take part in: None marks the abort and the new group
    updates = []
    for mb in sizes:
        for _ in range(args.repeats + 1):
            updates.append(WeightSender.layout(named, len(updates) + 1, int(mb * (1 << 20))))
    world = 1 + args.receivers
    sender = WeightSender("127.0.0.1", world, backend=args.backend, timeout_s=120)
    plan = [dict(version=u.version, dtypes=u.dtypes, shapes=u.shapes, buckets=u.buckets) for u in updates]
    after = WeightSender.layout(named, len(updates) + 1, int(sizes[-1] * (1 << 20)))
    plan += [None, dict(version=after.version, dtypes=after.dtypes, shapes=after.shapes, buckets=after.buckets)]
    ctx, done, ports, procs = mp.get_context("spawn"), None, None, []
    if args.receivers:
        done, ports = ctx.Queue(), ctx.Queue()
        procs = [ctx.Process(target=receive, args=("127.0.0.1", sender.port, world, r, args.backend, plan, ports,
                                                   done))
                 for r in range(1, world)]
        for p in procs:
            p.start()
    sender.connect()
    rows = []
    for i, update in enumerate(updates):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        timing = sender.broadcast(update, tensors)
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        if i % (args.repeats + 1):  # the first sync of each size warms it up
            rows.append({"bucket_mb": sizes[i // (args.repeats + 1)], "buckets": len(update.buckets),
                         "seconds": wall, **timing})
    # recovery as cluster/pipeline.py does it: the group is aborted (a failed sync does that), and a
    # new sender, store and group are formed, which the receivers join
    sender.abort()
    sender = WeightSender("127.0.0.1", world, backend=args.backend, timeout_s=120)
    for _ in procs:
        ports.put(sender.port)
    sender.connect()
    recovered = sender.broadcast(after, tensors)
    sender.abort()
    for p in procs:
        p.join(timeout=120)
    received = sorted(done.get(timeout=5) for _ in procs) if procs else []
    # sync time = buckets · latency + bytes / rate, least squares over every timed sync
    a = torch.tensor([[r["buckets"], r["bytes"]] for r in rows], dtype=torch.float64)
    y = torch.tensor([r["seconds"] for r in rows], dtype=torch.float64)
    latency, per_byte = torch.linalg.lstsq(a, y[:, None]).solution.flatten().tolist()
    by_size = {}
    for r in rows:
        by_size.setdefault(r["bucket_mb"], []).append(r)
    table = [{"bucket_mb": mb, "buckets": rs[0]["buckets"],
              "median_s": statistics.median(r["seconds"] for r in rs),
              "gather_s": statistics.median(r["gather_s"] for r in rs),
              "broadcast_s": statistics.median(r["broadcast_s"] for r in rs),
              "ready_s": statistics.median(r["ready_s"] for r in rs)} for mb, rs in by_size.items()]
    result = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "backend": args.backend, "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
              "model": "tiny" if args.tiny else "Qwen3-1.7B", "bytes": nbytes, "receivers": args.receivers,
              "received_by": received, "table": table,
              "fit": {"bucket_latency_s": latency, "bytes_per_s": 1 / per_byte if per_byte > 0 else None},
              "recovered_after_abort": {"bytes": recovered["bytes"], "buckets": len(after.buckets)},
              "rows": rows}
    print(f"{'bucket MB':>9} {'buckets':>7} {'sync ms':>8} {'gather':>7} {'bcast':>7} {'ready':>7}", file=sys.stderr)
    for r in table:
        print(f"{r['bucket_mb']:9g} {r['buckets']:7d} {1e3 * r['median_s']:8.2f} {1e3 * r['gather_s']:7.2f} "
              f"{1e3 * r['broadcast_s']:7.2f} {1e3 * r['ready_s']:7.2f}", file=sys.stderr)
    print(f"fit: {1e3 * latency:.3f} ms a bucket + bytes at "
          f"{(1 / per_byte / 1e9) if per_byte > 0 else float('inf'):.1f} GB/s; recovery after abort: "
          f"{recovered['bytes'] / 1e6:.1f} MB synced", file=sys.stderr)
    line = json.dumps(result)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    sys.exit(main())
