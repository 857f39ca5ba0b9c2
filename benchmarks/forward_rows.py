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


def batches(run_dir: Path, steps: int, cfg, pad_id: int) -> list:
    """Each recorded step's batch as the learner collates it (grpo.collate: rows in the order it got
    them, right-padded)."""
    from jury.learner.grpo import collate
    from jury.protocol.record import read_record

    out = []
    for path in sorted((run_dir / "record").glob("step-*.msgpack"))[:steps]:
        b = collate(read_record(str(path)), cfg.learner, pad_id)
        if b is not None:
            out.append(b)
    return out


def contiguous(b, micro_batch: int) -> list:
    """The pass's micro-batches before: rows as they come."""
    import torch

    return list(torch.arange(b.input_ids.shape[0]).split(micro_batch))


def positions(b, chunks) -> int:
    return sum(len(rows) * int(b.attention[rows].sum(1).max()) for rows in chunks)


def timed(model, b, chunks) -> float:
    """The no-grad pass of update.forward_pass over `chunks`, each cut to its longest row."""
    import torch

    from jury.learner.grpo import token_logprobs

    t0 = time.perf_counter()
    with torch.no_grad():
        for rows in chunks:
            width = int(b.attention[rows].sum(1).max())
            token_logprobs(model, b.input_ids[rows][:, :width], b.attention[rows][:, :width],
                           b.completion[rows][:, : width - 1])
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

    from jury.learner.update import pass_rows
    from jury.models.registry import resolve_model
    from jury.protocol.config_load import load_run_config

    if not (args.run_dir / "config.yaml").is_file():
        ap.error(f"{args.run_dir}: not a run folder (no config.yaml)")
    cfg = load_run_config(str(args.run_dir))
    micro_batch = args.micro_batch or cfg.learner.micro_batch
    torch.set_num_threads(cfg.learner.threads)
    model = AutoModelForCausalLM.from_pretrained(resolve_model(cfg.model, progress=False), dtype=torch.float32).eval()
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    steps = batches(args.run_dir, args.steps, cfg, pad_id)
    if not steps:
        ap.error(f"{args.run_dir}: no record/step-*.msgpack (run it with record_groups=true)")
    orders = {"contiguous": [contiguous(b, micro_batch) for b in steps],
              "by length": [pass_rows(b, micro_batch) for b in steps]}
    counted = {name: sum(positions(b, c) for b, c in zip(steps, o)) for name, o in orders.items()}
    seconds = {name: [] for name in orders}
    timed(model, steps[0], orders["contiguous"][0])  # warm-up
    for _ in range(args.repeats):
        for name, o in orders.items():
            seconds[name].append(sum(timed(model, b, c) for b, c in zip(steps, o)))
    tokens = sum(int(b.attention.sum()) for b in steps)
    report = {"run_dir": str(args.run_dir), "steps": len(steps), "micro_batch": micro_batch, "tokens": tokens,
              "positions": counted, "seconds": seconds,
              "positions_ratio": counted["contiguous"] / counted["by length"],
              "seconds_ratio": min(seconds["contiguous"]) / min(seconds["by length"])}
    for name in orders:
        print(f"{name:<11} positions {counted[name]:>9,} ({counted[name] / tokens:.2f} a token)  "
              f"seconds {', '.join(f'{s:.2f}' for s in seconds[name])}")
    print(f"contiguous / by length: positions {report['positions_ratio']:.2f}x, "
          f"seconds (best of each) {report['seconds_ratio']:.2f}x")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
