"""Learner-only throughput at 1 and 2 ranks, ZeRO 0 and 3, side by side in one run.

    python benchmarks/learner_ranks.py [--steps 8] [--out runs/bench-learner] [--sync]

Each configuration replays the same recorded batches (`jury replay`, synchronous, no
generator or verifier): tokens/s, and the time per step split into forward+backward,
gradient reduction (DeepSpeed's allreduce, ZeRO 0-2; under ZeRO-3 the reduce-scatter runs
inside backward) and the optimizer step. `--sync` adds a weight sync at each ranks x ZeRO
setting (`jury check-sync`: gather and broadcast time into one vLLM engine). The batches are
synthetic completions of very different lengths (1 to 120 tokens, as in the equivalence
test), so the split across ranks by tokens is exercised. On 2 CPU cores no speed-up is
expected from a second rank: the figure to watch is its overhead.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

CONFIGS = [(1, 0), (2, 0), (1, 3), (2, 3)]


def record(run: Path, steps: int, groups: int, g: int, seed: int = 0):
    """A run folder with a config and `steps` recorded batches of varied completion lengths."""
    from jury.protocol.config_load import load_config, to_dict
    from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup, Verdict
    from jury.protocol.record import write_record

    rng = np.random.default_rng(seed)
    cfg = load_config(None, [f"batch_groups={groups}", f"generator.group_size={g}", "generator.max_new_tokens=120",
                             "max_model_len=256", "max_prompt_tokens=64", "learner.micro_batch=16", "progress=false"])
    (run / "record").mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg)))
    for step in range(steps):
        batch = []
        for j in range(groups):
            index = step * groups + j
            samples = []
            for _ in range(g):
                n = int(rng.choice([1, 3, 40, 120]))
                samples.append(Sample(rng.integers(5, 300, size=n).astype(np.int32),
                                      rng.uniform(-4, -0.1, size=n).astype(np.float32), "", "length"))
            task = PromptTask(f"t{index}", index, "p", "1", "bench")
            group = RolloutGroup(task, rng.integers(5, 300, size=6).astype(np.int32), samples, step, step, "g", 0.1)
            batch.append(ScoredGroup(group, [Verdict("correct", "bench", 0.0)] * g,
                                     rng.integers(0, 2, size=g).astype(np.float32), "bench", None, 0.0, None, 1, 0.0))
        write_record(str(run / "record" / f"step-{step:06d}.msgpack"), batch)


def learner_only(run: Path, ranks: int, zero: int, warmup: int = 1) -> dict:
    from jury.experiments.replay import replay

    out = run / f"replay-r{ranks}-z{zero}"
    replay(str(run), str(out), progress=False, overrides=[f"learner.num_ranks={ranks}", f"learner.zero_stage={zero}"])
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")][warmup:]
    mean = lambda k: float(np.mean([r[k] for r in rows]))  # noqa: E731
    train_s = sum(r["learner/train_s"] for r in rows)
    return {"ranks": ranks, "zero": zero, "tokens_per_s": sum(r["learner/tokens"] for r in rows) / train_s,
            "step_s": train_s / len(rows), "forward_backward_s": mean("learner/forward_backward_s"),
            "reduce_s": mean("learner/reduce_s"), "optimizer_s": mean("learner/optimizer_s")}


def sync(ranks: int, zero: int, model: str) -> dict:
    from jury.cluster.pipeline import Pipeline
    from jury.experiments.check_sync import check_sync
    from jury.protocol.config_load import load_config

    cfg = load_config(None, ["steps=1", "batch_groups=1", "progress=false", f"learner.num_ranks={ranks}",
                             f"learner.zero_stage={zero}", "bucket_mb=1"])
    pipe = Pipeline(cfg, model)
    try:
        pipe.start()
        got = check_sync(pipe)
    finally:
        pipe.close()
    return {"ranks": ranks, "zero": zero, "gather_s": got["sync/gather_s"], "broadcast_s": got["sync/broadcast_s"],
            "total_s": got["sync/total_s"], "gap_after": got["gap_after"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--out", default="runs/bench-learner")
    p.add_argument("--sync", action="store_true", help="also time a weight sync at each setting")
    args = p.parse_args(argv)
    from jury.models.tiny import make_tiny_model

    model = str(make_tiny_model(progress=False))
    run = Path(args.out)
    record(run, args.steps, args.groups, args.group_size)
    rows = [learner_only(run, r, z) for r, z in CONFIGS]
    base = {z: next(x for x in rows if x["ranks"] == 1 and x["zero"] == z) for z in (0, 3)}
    print(f"{'ranks':>5} {'ZeRO':>4} {'tokens/s':>9} {'s/step':>7} {'fwd+bwd':>8} {'reduce':>7} {'optim':>7} "
          f"{'vs 1 rank':>9}")
    for x in rows:
        x["vs_one_rank"] = x["tokens_per_s"] / base[x["zero"]]["tokens_per_s"]
        print(f"{x['ranks']:>5} {x['zero']:>4} {x['tokens_per_s']:>9.0f} {x['step_s']:>7.3f} "
              f"{x['forward_backward_s']:>8.3f} {x['reduce_s']:>7.3f} {x['optimizer_s']:>7.3f} {x['vs_one_rank']:>8.2f}x")
    report = {"learner_only": rows}
    if args.sync:
        report["sync"] = [sync(r, z, model) for r, z in CONFIGS]
        print(f"\n{'ranks':>5} {'ZeRO':>4} {'gather s':>9} {'bcast s':>8} {'total s':>8} {'gap':>8}")
        for x in report["sync"]:
            print(f"{x['ranks']:>5} {x['zero']:>4} {x['gather_s']:>9.4f} {x['broadcast_s']:>8.4f} {x['total_s']:>8.3f} "
                  f"{x['gap_after']:>8.1e}")
    (run / "learner_ranks.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
