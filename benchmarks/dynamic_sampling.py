"""DAPO's dynamic sampling against none on the chain task: the figures of docs/results.md.

    python benchmarks/dynamic_sampling.py --run [--out runs/dynamic-sampling] [--steps 12]
    python benchmarks/dynamic_sampling.py DIR      # the report of runs already in DIR

Both runs are configs/chain.yaml (tiny-chain, G = 8, 8 groups a step, ground-truth reward, staleness
up to 2, inflight syncs), evaluated every 4 steps on 32 held-out problems x 4 samples; `dynamic`
adds dynamic_sampling=true with max_refills=8. The report: the held-out pass@1 against step and wall
time, the trained groups' pass rate per half (under dynamic sampling that is the kept groups', biased
towards the middle: flat groups are all right or all wrong), the generation each run paid
(completion tokens trained, and the refills'), the groups filtered and the batches left short.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import run_set

RUNS = {"none": [], "dynamic": ["dynamic_sampling=true", "max_refills=8"]}
EVAL = ["eval.every=4", "eval.problems=32", "eval.samples=4"]


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
    trained = sum(r["rollout/tokens"] for r in rows)  # the trained groups' completion tokens
    extra = sum(r.get("dynamic/extra_tokens", 0.0) for r in rows)  # every refill's, kept or filtered
    done = yaml.safe_load((run_dir / "summary.yaml").read_text())
    return {"steps": len(rows),
            # a step skipped (every group flat up to the refill cap) trained nothing: its rate is nan
            "pass_first": mean([r["reward/pass_rate"] for r in rows[:half] if not math.isnan(r["reward/pass_rate"])]),
            "pass_second": mean([r["reward/pass_rate"] for r in rows[half:] if not math.isnan(r["reward/pass_rate"])]),
            "filtered": mean([r.get("dynamic/filtered_frac", 0.0) for r in rows]),
            "refills": sum(r.get("dynamic/refills", 0.0) for r in rows),
            "short": sum(r.get("dynamic/short_groups", 0.0) for r in rows),
            "trained_tokens": trained, "extra_tokens": extra,
            "wall_s": done.get("wall_s", math.nan), "startup_s": done.get("startup_s", math.nan),
            "eval": [(r["step"], r["time_s"], r["eval/pass@1"]) for r in rows if "eval/pass@1" in r]}


def report(root: Path) -> str:
    lines = ["| run | steps | pass rate 1st half | 2nd half | groups filtered | refills | short groups | "
             "tokens trained | refills' tokens | wall s (start-up) |", "|---|---|---|---|---|---|---|---|---|---|"]
    curves = []
    for name in RUNS:
        if not (root / name / "summary.yaml").is_file():
            continue
        s = summary(root / name)
        lines.append(f"| {name} | {s['steps']} | {s['pass_first']:.3f} | {s['pass_second']:.3f} | {s['filtered']:.2f} | "
                     f"{s['refills']:g} | {s['short']:g} | {s['trained_tokens']:.0f} | {s['extra_tokens']:.0f} | "
                     f"{s['wall_s']:.0f} ({s['startup_s']:.0f}) |")
        curves.append(f"{name}: " + ", ".join(f"step {step} {t:.0f}s {p:.3f}" for step, t, p in s["eval"]))
    return "\n".join(lines + ["", "held-out pass@1 (step, time_s, pass@1):", *curves])


def main(argv=None) -> int:
    return run_set.main(argv, doc=__doc__, out="runs/dynamic-sampling", steps=12, commands=commands, report=report)


if __name__ == "__main__":
    sys.exit(main())
