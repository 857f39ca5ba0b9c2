"""`jury plot`: PNG plots from run folders (matplotlib's Agg backend: no display needed).

    curves.png      reward/mean and reward/pass_rate against step and against wall time
    throughput.png  perf/tokens_per_s against max_staleness: what staleness buys in speed
    staleness.png   share of groups at each staleness (staleness/hist summed over steps)
    eval.png        eval/pass@1, eval/pass@k and eval/distinct_answers against step (runs with eval.every)
    offpolicy.png   the importance weights' ESS, the clipped, truncated and masked token shares and the
                    learner-behaviour KL against step (runs with learner.correction other than none)
    monitor.png     the reward-hacking monitor (runs with it on): the reward's precision and recall
                    against the labels (overall and by staleness), consensus, short paid answers,
                    length, entropy and the KLs against step, thresholds dashed, each warning's onset

Runs are told apart by the config keys whose values differ between them (read from
each folder's config.yaml); runs that differ only in their seed share a label and a
colour, so a setting's seeds read as one band.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

# keys that never make two runs different settings
NOT_A_SETTING = {"run_dir", "progress", "seed", "tracking", "wandb.project", "wandb.entity", "wandb.mode",
                 "eval.every", "eval.problems", "eval.samples", "eval.temperature", "eval.max_new_tokens"}


@dataclass
class Run:
    path: Path
    config: dict       # flattened: "generator.group_size" -> 4
    rows: list[dict]   # metrics.jsonl
    label: str = ""    # the run's setting, e.g. "max_staleness=1, verifier.fallback=zero"


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v and all(isinstance(x, str) for x in v):  # a section; {k: w} is a value
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def run_dirs(paths: list) -> list[Path]:
    """Each path is a run folder (has metrics.jsonl) or a sweep folder holding run folders."""
    out = []
    for p in map(Path, paths):
        if (p / "metrics.jsonl").exists():
            out.append(p)
            continue
        inner = sorted(q.parent for q in p.glob("*/metrics.jsonl"))
        if not inner:
            raise FileNotFoundError(f"{p}: no metrics.jsonl in it or in its sub-folders")
        out.extend(inner)
    return out


def load_runs(paths: list) -> list[Run]:
    from jury.cluster.metrics import read_metrics
    from jury.protocol.config_load import read_yaml

    runs = []
    for p in run_dirs(paths):
        cfg_file = p / "config.yaml"
        config = flatten(read_yaml(str(cfg_file))) if cfg_file.exists() else {}  # broken YAML: named
        runs.append(Run(p, config, read_metrics(p)))
    varying = varying_keys([r.config for r in runs])
    for r in runs:
        r.label = setting_label(r.config, varying) or (r.path.name if len(runs) == 1 else "all runs")
    return runs


def varying_keys(configs: list[dict]) -> list[str]:
    keys = sorted({k for c in configs for k in c} - NOT_A_SETTING)
    return [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]


def setting_label(config: dict, keys: list[str]) -> str:
    return ", ".join(f"{k}={config.get(k)}" for k in keys)


def mean_throughput(rows: list[dict]) -> float:
    """Mean perf/tokens_per_s; the first step is left out when there are others, since it
    also waits for the empty pipeline to fill."""
    vals = [r["perf/tokens_per_s"] for r in rows if _finite(r.get("perf/tokens_per_s"))]
    if len(vals) > 1:
        vals = vals[1:]
    return sum(vals) / len(vals) if vals else math.nan


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _colours(labels: list[str]) -> dict[str, tuple]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {lab: cmap(i % 10) for i, lab in enumerate(dict.fromkeys(labels))}


def _series(rows: list[dict], x: str, y: str) -> tuple[list, list]:
    pts = [(r[x], r[y]) for r in rows if _finite(r.get(x)) and _finite(r.get(y))]
    return [p[0] for p in pts], [p[1] for p in pts]


def running_mean(ys: list[float], window: int = 0) -> list[float]:
    """Mean of the last `window` values at each point (default: a tenth of the series, at least 1)."""
    window = window or max(1, len(ys) // 10)
    out, total = [], 0.0
    for i, y in enumerate(ys):
        total += y - (ys[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def plot_curves(runs: list[Run], path: Path) -> Path:
    """Reward and pass rate against step (top) and wall time (bottom), a colour per setting."""
    import matplotlib.pyplot as plt

    colours = _colours([r.label for r in runs])
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharey="col")
    panels = [("step", "reward/mean"), ("step", "reward/pass_rate"),
              ("time_s", "reward/mean"), ("time_s", "reward/pass_rate")]
    for ax, (x, y) in zip(axes.flat, panels):
        seen = set()
        for r in runs:
            xs, ys = _series(r.rows, x, y)
            # per-step values are noisy (8 groups a step): faint dots, and a running mean to read
            ax.plot(xs, ys, color=colours[r.label], marker=".", linestyle="none", alpha=0.25, markersize=3)
            # seeds of one setting share a colour; the legend names each setting once
            ax.plot(xs, running_mean(ys), color=colours[r.label], linewidth=2,
                    label=None if r.label in seen else r.label)
            seen.add(r.label)
        ax.set_xlabel("learner step" if x == "step" else "wall time since the first step (s)")
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("reward and pass rate (dots: each step; lines: running mean over a tenth of the run)")
    return _save(fig, path)


def throughput_points(runs: list[Run]) -> dict[str, dict[float, list[float]]]:
    """Per setting (staleness keys aside): mean staleness trained -> mean tokens/s of each run."""
    staleness_keys = ("max_staleness", "forced_staleness")
    keys = [k for k in varying_keys([r.config for r in runs]) if k not in staleness_keys]
    groups: dict[str, dict[float, list[float]]] = {}
    for r in runs:
        tps = mean_throughput(r.rows)
        stale = [row["staleness/mean"] for row in r.rows if _finite(row.get("staleness/mean"))]
        if _finite(tps):
            group = setting_label(r.config, keys) or "all runs"
            # older metrics without staleness/mean: the bound stands in for it
            x = round(sum(stale) / len(stale), 1) if stale else float(r.config.get("max_staleness", 0))
            groups.setdefault(group, {}).setdefault(x, []).append(tps)
    return groups


def plot_throughput(runs: list[Run], path: Path) -> Path:
    """Mean tokens/s against the mean staleness of the groups trained (whether a bound or forced
    staleness set it): a dot per run, a line through each setting's means."""
    import matplotlib.pyplot as plt

    groups = throughput_points(runs)
    colours = _colours(list(groups))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for group, by_s in groups.items():
        xs = sorted(by_s)
        for s in xs:
            ax.scatter([s] * len(by_s[s]), by_s[s], color=colours[group], alpha=0.5, s=18)
        ax.plot(xs, [sum(by_s[s]) / len(by_s[s]) for s in xs], color=colours[group], marker="o", label=group)
    ax.set_xlabel("mean staleness of the groups trained (versions)")
    ax.set_ylabel("perf/tokens_per_s (mean over steps)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("throughput against staleness: the trade-off")
    return _save(fig, path)


def staleness_shares(runs: list[Run]) -> dict[str, dict[int, float]]:
    """Per setting: share of groups consumed at each staleness, over all its steps and seeds."""
    counts: dict[str, dict[int, int]] = {}
    for r in runs:
        c = counts.setdefault(r.label, {})
        for row in r.rows:
            for s, n in (row.get("staleness/hist") or {}).items():
                c[int(s)] = c.get(int(s), 0) + n
    return {lab: {s: n / sum(c.values()) for s, n in sorted(c.items())} for lab, c in counts.items() if c}


def plot_staleness(runs: list[Run], path: Path) -> Path:
    import matplotlib.pyplot as plt

    shares = staleness_shares(runs)
    colours = _colours(list(shares))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    width = 0.8 / max(1, len(shares))
    for i, (lab, share) in enumerate(shares.items()):
        xs = [s + (i - (len(shares) - 1) / 2) * width for s in share]
        ax.bar(xs, list(share.values()), width=width, color=colours[lab], label=lab)
    ax.set_xlabel("staleness (learner version - policy version of the group)")
    ax.set_ylabel("share of groups")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3, axis="y")
    if shares:
        ax.legend(fontsize=8)
    ax.set_title("staleness of consumed groups")
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)  # a sweep makes many figures in one process
    return path


def plot_runs(paths: list, out: str | Path) -> list[Path]:
    """Every plot for these run (or sweep) folders, written into `out`; returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    runs = [r for r in load_runs(paths) if r.rows]
    if not runs:
        raise ValueError(f"no metrics rows in {', '.join(map(str, paths))}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [plot_curves(runs, out / "curves.png"), plot_throughput(runs, out / "throughput.png"),
             plot_staleness(runs, out / "staleness.png")]
    if any("eval/pass@1" in row for r in runs for row in r.rows):
        files.append(plot_eval(runs, out / "eval.png"))
    if any("learner/is_ess" in row for r in runs for row in r.rows):
        files.append(plot_offpolicy(runs, out / "offpolicy.png"))
    if any("shadow/precision" in row for r in runs for row in r.rows):
        files.append(plot_monitor(runs, out / "monitor.png"))
    return files


# the monitor's panels: (title, [(metric, the monitor.* setting of its absolute threshold or None)])
MONITOR_PANELS = (
    ("reward vs labels", [("shadow/precision", "min_precision"), ("shadow/recall", None),
                          ("reward/pass_rate", None)]),
    ("precision by staleness", [("shadow/precision/stale*", "min_precision")]),
    ("consensus", [("shadow/consensus", None), ("shadow/consensus_wrong", "max_consensus_wrong"),
                   ("shadow/consensus_unproved", "max_consensus_unproved")]),
    ("answers without reasoning", [("shadow/short_paid", "max_short_rewarded")]),
    ("length", [("rollout/completion_len", None), ("shadow/median_len", None)]),
    ("entropy", [("learner/entropy", None)]),
    ("KL", [("learner/approx_kl", None), ("learner/behav_kl", None), ("learner/initial_kl", None)]),
)


def plot_monitor(runs: list[Run], path: Path) -> Path:
    """The reward-hacking monitor (cluster/monitor.py): a panel per signal's metrics against step (a
    running mean), a colour per run and a line style per metric, the absolute thresholds dashed
    (grey), and a dotted vertical line at each warning (in the first panel, named when few)."""
    import matplotlib.pyplot as plt

    colours = _colours([r.label for r in runs])
    styles = ("-", "--", ":", "-.")
    fig, axes = plt.subplots(2, 4, figsize=(20, 8))
    for ax, (title, metrics) in zip(axes.flat, MONITOR_PANELS):
        for r in runs:
            keys = [(k, setting) for m, setting in metrics
                    for k in (sorted({k for row in r.rows for k in row if k.startswith(m[:-1])}) if m.endswith("*")
                              else [m])]
            for i, (key, setting) in enumerate(keys):
                xs, ys = _series(r.rows, "step", key)
                if xs:  # per-step shares of 8 groups are noisy: a running mean over a thirtieth of the run
                    ax.plot(xs, running_mean(ys, max(3, len(ys) // 30)), color=colours[r.label],
                            linestyle=styles[i % len(styles)], label=key if len(runs) == 1 else f"{r.label}: {key}")
        thresholds = {s for _, s in metrics if s}
        for r in runs[:1]:
            for setting in thresholds:
                if _finite(r.config.get(f"monitor.{setting}")):
                    ax.axhline(r.config[f"monitor.{setting}"], color="grey", linestyle="--", linewidth=1)
        ax.set_title(title)
        ax.set_xlabel("learner step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=6)
    first, last = axes.flat[0], axes.flat[-1]
    for r in runs:
        onsets = [(row["step"], key.removeprefix("monitor/onset/")) for row in r.rows for key in row
                  if key.startswith("monitor/onset/")]
        for step, name in onsets:
            first.axvline(step, color=colours[r.label], linestyle=":", linewidth=1)
            if len(onsets) <= 12:  # named while they can be read
                first.annotate(name, (step, 0.02), fontsize=6, rotation=90, xycoords=("data", "axes fraction"))
    last.axis("off")
    fig.suptitle("reward-hacking monitor (running means): thresholds dashed, warnings dotted (named when few)")
    return _save(fig, path)


OFF_POLICY_PANELS = ("learner/is_ess", "learner/clip_frac", "learner/tis_frac", "learner/mask_frac", "learner/behav_kl")


def plot_offpolicy(runs: list[Run], path: Path) -> Path:
    """What the off-policy correction saw at each step: ESS of the importance weights, the shares of
    tokens clipped, truncated and masked, and the learner-behaviour KL; a running mean per run.
    Runs without a correction have no such metrics (clip_frac aside) and draw only there."""
    return _step_panels(runs, list(OFF_POLICY_PANELS), path, smooth=True,
                        title="off-policy corrections: what the importance weights looked like "
                              "(running mean over a tenth of the run)")


def plot_eval(runs: list[Run], path: Path) -> Path:
    """Evaluation during training: pass@1, pass@k (k = eval.samples) and distinct answers per problem."""
    keys = ["eval/pass@1", next((k for r in runs for row in r.rows for k in row
                                 if k.startswith("eval/pass@") and k != "eval/pass@1"), "eval/pass@1"),
            "eval/distinct_answers"]
    return _step_panels(runs, keys, path, smooth=False,
                        title="evaluation during training (held-out problems, the run's own generators)")


def _step_panels(runs: list[Run], keys: list[str], path: Path, smooth: bool, title: str) -> Path:
    """A panel per metric against step, a colour per setting (seeds share it and one legend entry):
    a running mean line (smooth) or each logged point (eval rows come every eval.every steps)."""
    import matplotlib.pyplot as plt

    colours = _colours([r.label for r in runs])
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys) if smooth else 5 * len(keys), 4))
    for ax, y in zip(axes, keys):
        seen = set()
        for r in runs:
            xs, ys = _series([row for row in r.rows if y in row], "step", y)
            if not xs:
                continue
            label = None if r.label in seen else r.label
            if smooth:
                ax.plot(xs, running_mean(ys), color=colours[r.label], label=label)
            else:
                ax.plot(xs, ys, color=colours[r.label], marker="o", label=label)
            seen.add(r.label)
        ax.set_xlabel("learner step")
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7 if smooth else 8)
    fig.suptitle(title)
    return _save(fig, path)


def _run(args) -> int:
    try:
        files = plot_runs(args.run_dirs, args.out)
    except (ValueError, OSError) as e:
        print(f"jury plot: {e}", file=sys.stderr)
        return 2
    for f in files:
        print(f)
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("plot", help="PNG plots (reward, pass rate, throughput, staleness) from run folders")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folders, or sweep folders holding them")
    p.add_argument("--out", required=True, help="folder for the PNG files")
    p.set_defaults(func=_run)
