"""`jury simulate --sweep`: the generator:learner split of a GPU count against max_staleness.

    jury simulate --config C --hardware h100-sxm --sweep --gpus 16 --staleness 0,1,2,4

Each point is one simulation with num_generators = g / tensor_parallel_size engines and
learner.num_ranks = N - g, at one max_staleness; with --hardware its costs are recomputed for that
split (the learner's ZeRO traffic and the engines' KV room change with it), with a calibration or a
costs file they stay (the learner's time per token is divided over its ranks by the simulator). One
more point is the colocated synchronous baseline the peers compare against: every GPU generates, then
every GPU trains (max_staleness 0, N engines' worth and N ranks, taking turns), with --hardware at
efficiency.colocated_train of a dedicated learner's speed a GPU (1 unless given: verl's own tables
put its colocated trainer at 0.50-0.60, docs/simulate.md). The table and
sweep.png put throughput against mean staleness, one line per split, and the recommendation is the
split with the most tokens/s at each staleness bound.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Callable

from jury.protocol.config import ConfigError, RunConfig

# one simulation's report for a config, and whether its learner trains on the engines' GPUs
# (simulate.py hands it in: this module does not import the simulator, which imports it for --sweep)
Evaluate = Callable[[RunConfig, bool], dict]
COLUMNS = ("split", "max_staleness", "tokens_per_s", "completions_per_s", "staleness_mean", "step_s",
           "idle/generator", "idle/learner")


def default_splits(total: int, tp: int) -> list[int]:
    """Generator GPUs at each eighth of the total, in whole engines, leaving the learner at least one."""
    out = sorted({tp * max(1, round(total * k / 8 / tp)) for k in range(1, 8)})
    return [g for g in out if g <= total - 1]


def with_split(cfg: RunConfig, generator_gpus: int, learner_gpus: int, max_staleness: int) -> RunConfig:
    tp = cfg.generator.tensor_parallel_size
    if generator_gpus % tp:
        raise ConfigError(f"--sweep: {generator_gpus} generator GPUs is not a whole number of engines "
                          f"of generator.tensor_parallel_size={tp}")
    return dataclasses.replace(cfg, num_generators=generator_gpus // tp, max_staleness=max_staleness,
                               learner=dataclasses.replace(cfg.learner, num_ranks=learner_gpus))


def point(cfg: RunConfig, evaluate: Evaluate, split: str, colocated: bool = False) -> dict:
    r = evaluate(cfg, colocated)
    # what the simulation of this point says of itself (assumptions, a wait past the driver's timeouts)
    notes = [*r.get("assumptions", []), *(f"outside the calibration: {o}" for o in r.get("outside_calibration", []))]
    return {"split": split, "max_staleness": cfg.max_staleness, **{k: r[k] for k in COLUMNS[2:]}, "notes": notes}


def sweep(cfg: RunConfig, total: int, staleness: list[int], evaluate: Evaluate,
          splits: list[int] | None = None) -> list[dict]:
    """One row per (split, max_staleness), then the colocated synchronous baseline's row."""
    if total < 2:
        raise ConfigError(f"--gpus must be >= 2 (a generator and a learner), got {total}")
    tp = cfg.generator.tensor_parallel_size
    rows = []
    splits = list(dict.fromkeys(splits)) if splits else None  # a split or bound given twice is one row
    staleness = list(dict.fromkeys(staleness))
    for g in splits or default_splits(total, tp):
        if not 1 <= g <= total - 1:
            raise ConfigError(f"--splits: {g} generator GPUs of --gpus {total} leaves "
                              f"{'no generator' if g < 1 else 'no learner'}")
        for k in staleness:
            rows.append(point(with_split(cfg, g, total - g, k), evaluate, f"{g}:{total - g}"))
    colocated = with_split(cfg, tp * (total // tp), total, 0)
    rows.append(point(colocated, evaluate, f"colocated {total}", colocated=True))
    return rows


def recommend(rows: list[dict]) -> dict[int, dict]:
    """For each staleness bound, the split row with the most tokens/s (the colocated row excluded:
    it is the baseline, not a split)."""
    best: dict[int, dict] = {}
    for r in rows:
        if r["split"].startswith("colocated"):
            continue
        k = r["max_staleness"]
        if k not in best or r["tokens_per_s"] > best[k]["tokens_per_s"]:
            best[k] = r
    return best


def sweep_table(rows: list[dict]) -> str:
    def cell(v):
        return f"{v:.4g}" if isinstance(v, float) and math.isfinite(v) else str(v)

    width = {c: max(len(c), *(len(cell(r[c])) for r in rows)) for c in COLUMNS}
    lines = ["  ".join(f"{c:>{width[c]}}" for c in COLUMNS)]
    lines += ["  ".join(f"{cell(r[c]):>{width[c]}}" for c in COLUMNS) for r in rows]
    base = next(r for r in rows if r["split"].startswith("colocated"))
    for k, r in sorted(recommend(rows).items()):
        lines.append(f"recommended at max_staleness={k}: generator:learner {r['split']} "
                     f"({r['tokens_per_s']:.4g} tokens/s, {r['tokens_per_s'] / base['tokens_per_s']:.2f}x "
                     f"the {base['split']} synchronous baseline; mean staleness {r['staleness_mean']:.2f})")
    return "\n".join(lines)


def plot_sweep(rows: list[dict], path: Path):
    """Throughput against mean staleness: one line per split through its staleness bounds, the
    colocated synchronous baseline as a horizontal line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for split in dict.fromkeys(r["split"] for r in rows):
        pts = [r for r in rows if r["split"] == split]
        if split.startswith("colocated"):
            ax.axhline(pts[0]["tokens_per_s"], color="black", ls=":", lw=1, label=f"{split} (sync)")
            continue
        ax.plot([r["staleness_mean"] for r in pts], [r["tokens_per_s"] for r in pts], marker="o", label=split)
        for r in pts:
            ax.annotate(f"k={r['max_staleness']}", (r["staleness_mean"], r["tokens_per_s"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("mean staleness (versions)")
    ax.set_ylabel("trained tokens/s")
    ax.set_title("generator:learner GPUs, max_staleness k")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
