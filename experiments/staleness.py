"""`jury staleness RUN_DIR`: what staleness does to the data the learner sees.

Reads the run's ledger.jsonl (one row per trained group: which version generated it,
which step trained it, its length, pass rate, reward and its wall-clock life) and
answers, per staleness bucket k = step - version_start:

- how many groups were trained k versions stale;
- their mean completion length, pass rate (difficulty) and reward, next to the same
  numbers over every group of the run: a bucket that differs from the whole is biased
  (in an asynchronous run, long or hard groups finish late and so arrive stale);
- the time they spent at the verifier (queue + check) and its share of the group's
  life from generation start to training: staleness accrues in wall time, and this
  says how much of it the verifier is responsible for.

Every group the generators produced is trained exactly once (the learner drops only
duplicate copies), so "all groups" is both the generated and the trained population;
the buckets split it by how stale each group was when trained.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

FIELDS = ("length", "pass_rate", "reward", "verify_wait_s", "verify_s", "verify_share")


def read_ledger(run_dir: str | Path) -> list[dict]:
    path = Path(run_dir) / "ledger.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir}: no ledger.jsonl")
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
    return rows


def _mean(xs) -> float:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else math.nan


def staleness_report(rows: list[dict]) -> dict:
    """{"buckets": {k: {"groups", "share", field means..., "<field>_vs_all"}}, "all": {...}}."""
    rows = [r for r in rows if "staleness" in r or {"step", "version_start"} <= r.keys()]
    for r in rows:
        r.setdefault("staleness", r["step"] - r["version_start"])  # ledgers written before the field existed
    everyone = {f: _mean(r.get(f) for r in rows) for f in FIELDS}
    everyone["groups"] = len(rows)
    buckets = {}
    for k in sorted({r["staleness"] for r in rows}):
        part = [r for r in rows if r["staleness"] == k]
        b = {"groups": len(part), "share": len(part) / len(rows)}
        for f in FIELDS:
            b[f] = _mean(r.get(f) for r in part)
            b[f"{f}_vs_all"] = b[f] - everyone[f]
        buckets[k] = b
    return {"buckets": buckets, "all": everyone}


def format_report(report: dict) -> str:
    head = f"{'stale':>5}{'groups':>8}{'share':>7}{'length':>9}{'Δlen':>7}{'pass':>7}{'Δpass':>7}" \
           f"{'reward':>8}{'Δrew':>7}{'verify s':>10}{'queue s':>9}{'verify share':>14}"
    lines = [head]

    def row(name, b, deltas):
        d = (lambda f: f"{b[f + '_vs_all']:>+7.2f}") if deltas else (lambda f: f"{'':>7}")
        lines.append(f"{name:>5}{b['groups']:>8}{b.get('share', 1.0):>7.2f}{b['length']:>9.1f}{d('length')}"
                     f"{b['pass_rate']:>7.2f}{d('pass_rate')}{b['reward']:>8.3f}{d('reward')}"
                     f"{b['verify_s']:>10.3f}{b['verify_wait_s']:>9.3f}{b['verify_share']:>14.1%}")

    for k, b in report["buckets"].items():
        row(str(k), b, True)
    row("all", report["all"], False)
    return "\n".join(lines)


def plot_report(report: dict, path: str | Path) -> Path:
    """Group counts per staleness, and each bucket's length, pass rate and reward against the whole run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = list(report["buckets"])
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    axes[0].bar([str(k) for k in ks], [report["buckets"][k]["groups"] for k in ks], color="tab:blue")
    axes[0].set_title("groups trained at each staleness")
    for ax, field, title in zip(axes[1:], ("length", "pass_rate", "reward"),
                                ("completion length", "pass rate (difficulty)", "reward")):
        ax.bar([str(k) for k in ks], [report["buckets"][k][field] for k in ks], color="tab:orange")
        ax.axhline(report["all"][field], color="black", linestyle="--", linewidth=1, label="all groups")
        ax.set_title(title)
        ax.legend(loc="lower right", fontsize=8)
    for ax in axes:
        ax.set_xlabel("staleness (versions)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def add_command(sub):
    p = sub.add_parser("staleness", help="staleness-bias table and plot of a run (from its ledger.jsonl)")
    p.add_argument("run_dir")
    p.add_argument("--json", default="", help="also write the report here")
    p.add_argument("--plot", default="", help="PNG path (default RUN_DIR/staleness_bias.png)")
    p.set_defaults(func=_main)


def _main(args) -> int:
    try:
        report = staleness_report(read_ledger(args.run_dir))
    except (FileNotFoundError, ValueError) as e:
        print(f"jury staleness: {e}", file=sys.stderr)
        return 2
    if not report["buckets"]:
        print(f"jury staleness: {args.run_dir}: the ledger is empty", file=sys.stderr)
        return 2
    print(format_report(report))
    print(plot_report(report, args.plot or Path(args.run_dir) / "staleness_bias.png"))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0
