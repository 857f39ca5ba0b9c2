"""PPO with a value model (one sample per prompt) against GRPO (eight) on the chain task, over the same
number of generated samples: the figures of docs/results.md.

    python benchmarks/ppo_chain.py --run [--out runs/ppo-chain] [--steps 20]
    python benchmarks/ppo_chain.py DIR      # the report of runs already in DIR

Both runs are configs/chain.yaml (tiny-chain, ground-truth reward, staleness up to 2, inflight syncs,
lr 1e-4), 64 samples a step, evaluated every 5 steps on 32 held-out problems x 4 samples:
`grpo` takes 8 prompts x G = 8 (learner.advantage=grpo), `gae` 64 prompts x 1
(learner.advantage=gae generator.group_size=1, the critic at verl's defaults). So at every step both
have generated the same number of samples and made the same number of optimizer steps. The report:
held-out pass@1 against samples generated and wall time, the trained samples' pass rate per half,
the critic's metrics, and the learner's time per step (the critic's share of it).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import run_set

RUNS = {"grpo": ["learner.advantage=grpo"],
        "gae": ["learner.advantage=gae", "generator.group_size=1", "batch_groups=64"]}
EVAL = ["eval.every=5", "eval.problems=32", "eval.samples=4"]
SAMPLES_PER_STEP = 64


def commands(out: Path, steps: int) -> dict[str, list[str]]:
    config = str(Path(__file__).resolve().parents[1] / "configs" / "chain.yaml")
    return {name: [sys.executable, "-m", "jury.experiments.cli", "train", "--config", config, f"steps={steps}",
                   f"run_dir={out / name}", "progress=false", *EVAL, *overrides] for name, overrides in RUNS.items()}


def summary(run_dir: Path) -> dict:
    import yaml

    from jury.cluster.metrics import read_metrics

    rows = read_metrics(run_dir)
    half = max(1, len(rows) // 2)
    mean = lambda xs: sum(xs) / len(xs) if xs else math.nan  # noqa: E731
    done = yaml.safe_load((run_dir / "summary.yaml").read_text())
    critic = [r for r in rows if "critic/value_loss" in r]
    return {"steps": len(rows),
            "pass_first": mean([r["reward/pass_rate"] for r in rows[:half]]),
            "pass_second": mean([r["reward/pass_rate"] for r in rows[half:]]),
            "train_s": mean([r["learner/train_s"] for r in rows[2:]]),  # the first steps warm up
            "critic_s": mean([r.get("learner/critic_s", 0.0) for r in rows[2:]]),
            "explained_var": [round(r["critic/explained_var"], 3) for r in critic[:: max(1, len(critic) // 5)]],
            "value_loss": [round(r["critic/value_loss"], 4) for r in critic[:: max(1, len(critic) // 5)]],
            "wall_s": done.get("wall_s", math.nan), "startup_s": done.get("startup_s", math.nan),
            "eval": [((r["step"] + 1) * SAMPLES_PER_STEP, r["time_s"], r["eval/pass@1"])
                     for r in rows if "eval/pass@1" in r]}


def report(root: Path) -> str:
    lines = ["| run | steps | trained pass rate 1st half | 2nd half | learner s/step (critic) | wall s (start-up) |",
             "|---|---|---|---|---|---|"]
    curves, critics = [], []
    for name in RUNS:
        if not (root / name / "summary.yaml").is_file():
            continue
        s = summary(root / name)
        lines.append(f"| {name} | {s['steps']} | {s['pass_first']:.3f} | {s['pass_second']:.3f} | "
                     f"{s['train_s']:.2f} ({s['critic_s']:.2f}) | {s['wall_s']:.0f} ({s['startup_s']:.0f}) |")
        curves.append(f"{name}: " + ", ".join(f"{n} samples {t:.0f}s {p:.3f}" for n, t, p in s["eval"]))
        if s["value_loss"]:
            critics.append(f"{name}: value loss {s['value_loss']}, explained variance {s['explained_var']}")
    return "\n".join(lines + ["", "held-out pass@1 (samples generated, time_s, pass@1):", *curves, "", *critics])


def main(argv=None) -> int:
    return run_set.main(argv, doc=__doc__, out="runs/ppo-chain", steps=20, commands=commands, report=report)


if __name__ == "__main__":
    sys.exit(main())
