"""Forced staleness x off-policy correction on the chain task: the table and plots of docs/results.md.

    python benchmarks/staleness_corrections.py --run  [--out runs/chain-corrections] [--steps 30]
                                               [--corrections decoupled]   # one arm only
    python benchmarks/staleness_corrections.py DIR    # the report of runs already in DIR

`--run` trains the grid with `jury sweep` (resumable: run it again and finished runs are
skipped), then reports. Every run has the same seeded problem stream, so at a given step two
runs train the same problems: the difference between their pass rates is the policy's, not
the draw's. With `forced_staleness=k` the batch trained at step s was sampled by policy s - k.

Per setting (k, correction), over its seeds: the pass rate of the batches the initial policy
sampled (steps 0..k: the same policy in every run of a seed, so their spread is sampling
noise; so is the spread of k = 0's rows, whose corrections compute `none`'s update), of the
batches trained in the first and last third of the run, on all problems and on the 2-3 term
ones (where the tiny model's reward is: it fails the longer ones at first), wall time, and
what the correction saw: ESS of the importance weights, the shares of tokens clipped,
truncated and masked, the learner-behaviour KL and the number of versions a trajectory spans.

    corrections.png   pass rate (running mean) against step and wall time, a panel per k
    offpolicy.png     ESS, clip, mask, KL against k, a line per correction
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections import defaultdict
from itertools import islice
from pathlib import Path

CORRECTIONS = ["none", "tis_token", "mask_token", "decoupled"]
# (k values, seeds, corrections) in the order they are trained: the most off-policy setting first,
# so a grid cut short still holds the comparison that matters most; k = 0 with a correction last
# (one policy: the weights are 1 up to vLLM's numerics, a check that the corrections then agree)
GRID = [([0], "0", ["none"]), ([8], "0", CORRECTIONS), ([2], "0", CORRECTIONS), ([0], "1", ["none"]),
        ([8], "1", CORRECTIONS), ([4], "0", CORRECTIONS), ([1], "0", CORRECTIONS), ([2, 4, 1], "1", CORRECTIONS),
        ([0], "0,1", CORRECTIONS[1:])]
OFF_POLICY = ["learner/is_ess", "learner/clip_frac", "learner/tis_frac", "learner/mask_frac", "learner/behav_kl",
              "learner/version_span_mean", "learner/version_span_max"]
SHORT = (2, 3)  # the term counts the warmed-up model solves at first (tiny-chain's pass_rate.json)


def sweep_commands(out: str, steps: int, lr: float, corrections: list[str] = CORRECTIONS) -> list[list[str]]:
    """The grid's sweeps in GRID's order, each cut to `corrections` (one arm can be rerun alone after
    its code changed, with every other setting as the rest of the grid had it)."""
    common = [f"steps={steps}", "learner.minibatches=2", "generator.sync_mode=drain", f"learner.lr={lr}",
              "progress=false"]
    config = str(Path(__file__).resolve().parents[1] / "configs" / "chain.yaml")
    return [[sys.executable, "-m", "jury.experiments.cli", "sweep", "--config", config, "--grid", f"forced_staleness={','.join(map(str, ks))}",
             "--grid", f"learner.correction={','.join(cs)}", "--seeds", seeds, "--out", out, *common]
            for ks, seeds, cs in ((ks, seeds, [c for c in cs if c in corrections]) for ks, seeds, cs in GRID) if cs]


def run_summary(run_dir: Path) -> dict:
    """One run: its setting, pass rates by thirds, off-policy means, and the curves to plot."""
    import yaml

    from jury.data.tasks import chain_problems, chain_terms
    from jury.cluster.metrics import read_metrics

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    rows = [r for r in read_metrics(run_dir) if "step" in r]
    ledger = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines() if line.strip()]
    k = max(cfg.get("forced_staleness") or {0: 1})
    # the problem of each ledger row, from the same seeded stream the feeder drew it from
    n_problems = 1 + max((r["index"] for r in ledger), default=0)
    terms = [len(chain_terms(p.problem)) for p in islice(chain_problems(cfg["seed"]), n_problems)]
    short_by_step: dict[int, list[float]] = defaultdict(list)
    for r in ledger:
        if r.get("error") is None and SHORT[0] <= terms[r["index"]] <= SHORT[1] and not math.isnan(r["pass_rate"]):
            short_by_step[r["step"]].append(r["pass_rate"])
    steps = [r["step"] for r in rows]
    curve = {"step": steps, "time_s": [r["time_s"] for r in rows],
             "pass_rate": [r.get("reward/pass_rate", math.nan) for r in rows],
             "short_pass_rate": [_mean(short_by_step.get(s, [])) for s in steps]}
    third = max(1, len(rows) // 3)
    out = {"run": run_dir.name, "k": k, "correction": cfg["learner"]["correction"], "seed": cfg["seed"],
           "lr": cfg["learner"]["lr"], "steps": len(rows), "wall_s": rows[-1]["time_s"] if rows else math.nan,
           # steps 0..k trained batches the initial policy sampled, identical in every run of a seed but
           # for vLLM's scheduling: their spread across corrections is the noise floor of the comparison
           "pass_v0": _mean(curve["pass_rate"][:k + 1]),
           "pass_first": _mean(curve["pass_rate"][:third]), "pass_last": _mean(curve["pass_rate"][-third:]),
           "short_first": _mean([x for s in steps[:third] for x in short_by_step.get(s, [])]),
           "short_last": _mean([x for s in steps[-third:] for x in short_by_step.get(s, [])]),
           "curve": curve}
    # off-policy statistics once the stale batches arrive (steps >= k); the first k batches are version 0
    later = [r for r in rows if r["step"] >= k] or rows
    for key in OFF_POLICY:
        vals = [r[key] for r in later if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
        out[key.split("/")[1]] = (max(vals) if key.endswith("_max") else _mean(vals)) if vals else math.nan
    return out


def _mean(xs) -> float:
    xs = [x for x in xs if isinstance(x, (int, float)) and math.isfinite(x)]
    return sum(xs) / len(xs) if xs else math.nan


def by_setting(runs: list[dict]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in sorted(runs, key=lambda r: (r["k"], CORRECTIONS.index(r["correction"])
                                         if r["correction"] in CORRECTIONS else 99, r["seed"])):
        groups[(r["k"], r["correction"])].append(r)
    return groups


def table(runs: list[dict]) -> str:
    cols = ["k", "correction", "seeds", "pass_v0", "pass_first", "pass_last", "short_first", "short_last", "wall_s",
            "is_ess", "clip_frac", "tis_frac", "mask_frac", "behav_kl", "version_span_mean", "version_span_max"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for (k, corr), rs in by_setting(runs).items():
        cells = [str(k), corr, ",".join(str(r["seed"]) for r in rs)]
        for c in cols[3:]:
            vals = [r[c] for r in rs]
            cells.append(" / ".join(_fmt(v, c) for v in vals))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(v, col: str) -> str:
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "-"
    if col == "wall_s":
        return f"{v:.0f}"
    if col == "behav_kl":
        return f"{v:.1e}"
    return f"{v:.3f}" if col != "version_span_max" else f"{v:.0f}"


def plot(runs: list[dict], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jury.experiments.plots import running_mean

    colours = {c: matplotlib.colormaps["tab10"](i) for i, c in enumerate(CORRECTIONS)}
    ks = sorted({r["k"] for r in runs})
    fig, axes = plt.subplots(3, len(ks), figsize=(4.2 * len(ks), 10), squeeze=False, sharey="row")
    for j, k in enumerate(ks):
        for r in (r for r in runs if r["k"] == k):
            c, style = colours.get(r["correction"], "grey"), "-" if r["seed"] == 0 else "--"
            label = f"{r['correction']} seed {r['seed']}"
            for i, (x, y) in enumerate([("step", "pass_rate"), ("step", "short_pass_rate"), ("time_s", "pass_rate")]):
                pts = [(a, b) for a, b in zip(r["curve"][x], r["curve"][y]) if math.isfinite(b)]
                if pts:
                    axes[i, j].plot([p[0] for p in pts], running_mean([p[1] for p in pts], 5), style, color=c,
                                    label=label)
        axes[0, j].set_title(f"forced staleness k = {k}")
        for i, (xl, yl) in enumerate([("learner step", "pass rate, all problems"),
                                      ("learner step", "pass rate, 2-3 terms"),
                                      ("wall time (s)", "pass rate, all problems")]):
            axes[i, j].set_xlabel(xl)
            axes[i, 0].set_ylabel(yl + "\n(running mean of 5 steps)")
            axes[i, j].grid(alpha=0.3)
        axes[0, j].legend(fontsize=7)
    fig.suptitle(f"chain task, learning rate {runs[0]['lr']:g}: each batch trained k versions after it was sampled")
    fig.tight_layout()
    files = [out / "corrections.png"]
    fig.savefig(files[0], dpi=90)
    plt.close(fig)

    keys = ["is_ess", "clip_frac", "mask_frac", "behav_kl"]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.8))
    groups = by_setting(runs)
    for ax, key in zip(axes, keys):
        for corr in CORRECTIONS:
            pts = [(k, _mean([r[key] for r in rs])) for (k, c), rs in groups.items() if c == corr]
            pts = [p for p in pts if math.isfinite(p[1])]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colours[corr], label=corr)
        ax.set_xlabel("forced staleness k")
        ax.set_ylabel(key + " (mean over steps >= k)")
        ax.grid(alpha=0.3)
    if axes[1].get_legend_handles_labels()[0]:  # clip_frac: the one panel every correction draws in
        axes[1].legend(fontsize=8)
    fig.suptitle("what the importance weights looked like at each staleness")
    fig.tight_layout()
    files.append(out / "offpolicy.png")
    fig.savefig(files[1], dpi=90)
    plt.close(fig)
    return files


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", nargs="?", help="a folder of run folders (a jury sweep's --out)")
    p.add_argument("--run", action="store_true", help="train the grid first (jury sweep, resumable)")
    p.add_argument("--out", default="runs/chain-corrections")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--corrections", default=",".join(CORRECTIONS),
                   help="with --run, train only these arms of the grid (comma-separated)")
    args = p.parse_args(argv)
    root = Path(args.dir or args.out)
    corrections = args.corrections.split(",")
    if unknown := set(corrections) - set(CORRECTIONS):
        p.error(f"--corrections: unknown {sorted(unknown)}; the grid's are {CORRECTIONS}")
    if args.run:
        for cmd in sweep_commands(str(root), args.steps, args.lr, corrections):
            print("$ jury " + " ".join(cmd[3:]), flush=True)
            subprocess.run(cmd, check=False)  # a failed run is in the sweep's summary; go on with the rest
    dirs = sorted(d.parent for d in root.glob("*/summary.yaml"))
    if not dirs:
        print(f"{root}: no finished run folders (summary.yaml)", file=sys.stderr)
        return 2
    runs = [run_summary(d) for d in dirs]
    print(table(runs))
    (root / "corrections.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "curve"} for r in runs],
                                                      indent=1))
    print("plots: " + " ".join(map(str, plot(runs, root))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
