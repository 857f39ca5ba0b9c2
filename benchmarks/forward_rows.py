"""The learner's no-grad passes (recompute_old's proximal log-probs, the self-rewards' forward, the
critic's values) over a recorded run's batches: micro-batches of contiguous rows against
micro-batches of similar lengths (`update.pass_rows`), side by side in one process.

    python benchmarks/forward_rows.py RUN_DIR [--steps 20] [--repeats 3] [--micro-batch N]

RUN_DIR is a run made with record_groups=true (every `jury bench` run is), on its own model. Each
micro-batch is padded to its longest row, so rows of a group (one prompt, completions of any
length) together pad each pass to the group's longest; sorted by length, a pass pads to rows like
its own. Reported: the positions each order reads (rows x the pass's width, over every batch) and
the seconds of `grpo.token_logprobs` over them, the two orders alternating `--repeats` times.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def batches(run_dir: Path, steps: int) -> list[list[list[int]]]:
    """Each recorded step's rows, prompt and completion token ids, in the order the learner got them."""
    from jury.protocol.record import read_record

    out = []
    for path in sorted((run_dir / "record").glob("step-*.msgpack"))[:steps]:
        out.append([list(g.group.rewrite_prompt_ids if s.view else g.group.prompt_ids) + list(s.token_ids)
                    for g in read_record(str(path)) for s in g.group.samples])  # CoReward: view 1 its rewrite
    return out


def passes(rows: list[list[int]], micro_batch: int, by_length: bool) -> list[list[list[int]]]:
    order = sorted(range(len(rows)), key=lambda i: len(rows[i])) if by_length else range(len(rows))
    ordered = [rows[i] for i in order]
    return [ordered[i:i + micro_batch] for i in range(0, len(ordered), micro_batch)]


def timed(model, chunks: list[list[list[int]]], pad_id: int) -> float:
    import torch

    from jury.learner.grpo import token_logprobs

    t0 = time.perf_counter()
    with torch.no_grad():
        for chunk in chunks:
            width = max(len(r) for r in chunk)
            ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            attention = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, r in enumerate(chunk):
                ids[i, :len(r)], attention[i, :len(r)] = torch.tensor(r), 1
            completion = attention[:, 1:].float()
            token_logprobs(model, ids, attention, completion)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--micro-batch", type=int, default=0, help="default: the run's learner.micro_batch")
    args = ap.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM

    from jury.models.registry import resolve_model
    from jury.protocol.config_load import load_run_config

    if not (args.run_dir / "config.yaml").is_file():
        ap.error(f"{args.run_dir}: not a run folder (no config.yaml)")
    cfg = load_run_config(str(args.run_dir))
    micro_batch = args.micro_batch or cfg.learner.micro_batch
    torch.set_num_threads(cfg.learner.threads)
    model = AutoModelForCausalLM.from_pretrained(resolve_model(cfg.model, progress=False), dtype=torch.float32).eval()
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    steps = batches(args.run_dir, args.steps)
    if not steps:
        ap.error(f"{args.run_dir}: no record/step-*.msgpack (run it with record_groups=true)")
    orders = {name: [passes(rows, micro_batch, name == "by length") for rows in steps]
              for name in ("contiguous", "by length")}
    positions = {name: sum(len(c) * max(len(r) for r in c) for chunks in o for c in chunks) for name, o in orders.items()}
    seconds = {name: [] for name in orders}
    timed(model, orders["contiguous"][0], pad_id)  # warm-up
    for _ in range(args.repeats):
        for name, o in orders.items():
            seconds[name].append(sum(timed(model, chunks, pad_id) for chunks in o))
    tokens = sum(len(r) for rows in steps for r in rows)
    report = {"run_dir": str(args.run_dir), "steps": len(steps), "micro_batch": micro_batch, "tokens": tokens,
              "positions": positions, "seconds": seconds,
              "positions_ratio": positions["contiguous"] / positions["by length"],
              "seconds_ratio": min(seconds["contiguous"]) / min(seconds["by length"])}
    for name in orders:
        print(f"{name:<11} positions {positions[name]:>9,} ({positions[name] / tokens:.2f} a token)  "
              f"seconds {', '.join(f'{s:.2f}' for s in seconds[name])}")
    print(f"contiguous / by length: positions {report['positions_ratio']:.2f}x, "
          f"seconds (best of each) {report['seconds_ratio']:.2f}x")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
