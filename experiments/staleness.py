"""`jury staleness RUN_DIR`: what staleness does to the data the learner sees.

Reads the run's ledger.jsonl (one row per trained group, rows with an error left out: which version generated it,
which step trained it, its length, pass rate, reward and its wall-clock life) and
answers, per staleness bucket k = step - version_start:

- how many groups were trained k versions stale;
- their mean completion length, pass rate (difficulty) and reward, next to the same
  numbers over every group of the run: a bucket that differs from the whole is biased
  (in an asynchronous run, long or hard groups finish late and so arrive stale);
- the time they spent at the verifier (queue + check) and its share of the group's
  life from generation start to training: staleness accrues in wall time, and this
  says how much of it the verifier is responsible for.

Under batch admission without dynamic sampling every group the generators produced is
trained exactly once (the learner drops only duplicate copies), so "all groups" is both the
generated and the trained population; the buckets split it by how stale each group was
when trained. The ledger holds trained groups only: under continuous admission with
`over_budget=drop` (groups past max_staleness are dropped, long ones most) and under dynamic
sampling (flat groups are filtered), what was generated and never trained is not in it, so
"all groups" is the trained population and the bias the drop or the filter causes does not show
here (the run's `learner/stale_dropped` and `dynamic/filtered_frac` count those groups).

Length buckets: generated against trained. Over a whole run of batch admission nothing
generated goes untrained, so a length can only be starved within a staleness bucket: long reasoning
that is trained only stale gets no fresh updates. Groups fall in length buckets by their
mean completion tokens (powers of two: [16, 32), [32, 64), ...). For staleness bucket k:

- trained: the groups trained k versions stale, their share of each length bucket;
- generated: what the same policy versions generated, each version (`version_start`)
  weighted by how many of bucket k's groups it made. In a run where every version's
  groups are trained at one staleness the two are equal; where a version's long groups
  are trained later than its short ones (they finish last), the fresh bucket's trained
  share of long groups falls below its generated share.

A length bucket is starved at staleness k when its trained share there is below
`starve_ratio` (default STARVE_RATIO) times its generated share, at least
`starve_min_groups` (default STARVE_MIN_GROUPS) of its groups were expected there (its
generated share times the bucket's groups; fewer is noise), and the buckets staler than k
trained more of it than expected: it was pushed to later, staler steps (short groups
missing from the stalest bucket, because they were all trained fresh, are no starvation).
Each starved pair is printed as a warning and listed under "starved" in the report.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

FIELDS = ("length", "pass_rate", "reward", "verify_wait_s", "verify_s", "verify_share")
STARVE_RATIO = 0.5       # trained share below this times the generated share: starved
STARVE_MIN_GROUPS = 4.0  # ... when at least this many groups of the length were expected at that staleness


def read_ledger(run_dir: str | Path) -> list[dict]:
    path = Path(run_dir) / "ledger.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir}: no ledger.jsonl")
    from jury.cluster.metrics import read_jsonl

    return read_jsonl(path)  # a last line cut in half by a crash is skipped, as every reader does


def _mean(xs) -> float:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else math.nan


def _weighted_mean(pairs) -> float:
    """Mean of x weighted by w over (x, w), NaN and None left out."""
    pairs = [(x, w) for x, w in pairs if x is not None and not (isinstance(x, float) and math.isnan(x)) and w > 0]
    total = sum(w for _, w in pairs)
    return sum(x * w for x, w in pairs) / total if total else math.nan


def length_bucket(length: float) -> int:
    """The lower edge of a group's length bucket: a power of two (0 for empty completions)."""
    return 0 if length < 1 else 2 ** int(math.log2(length))


def length_label(lo: int) -> str:
    return f"[{lo}, {max(1, 2 * lo)})"


def staleness_report(rows: list[dict], starve_ratio: float = STARVE_RATIO,
                     starve_min_groups: float = STARVE_MIN_GROUPS) -> dict:
    """{"buckets": {k: {"groups", "share", field means..., "<field>_vs_all", "generated", "lengths"}},
    "all": {...}, "lengths": {...}, "starved": [...], "settings": {...}}; see the module's docstring."""
    # a group the engine refused or the verifier left unscored has a ledger row (with its error) but
    # was not trained: it is no evidence of what staleness does to training
    rows = [r for r in rows if ("staleness" in r or {"step", "version_start"} <= r.keys()) and not r.get("error")]
    for n, r in enumerate(rows, 1):
        r.setdefault("staleness", r["step"] - r["version_start"])  # ledgers written before the field existed
        if isinstance(r["staleness"], bool) or not isinstance(r["staleness"], int) or r["staleness"] < 0:
            raise ValueError(f"ledger row {n} (of the rows with no error): staleness must be a whole number >= 0, "
                             f"got {r['staleness']!r}")
        length = r.get("length")
        if length is not None and (isinstance(length, bool) or not isinstance(length, (int, float))
                                   or not 0 <= length < math.inf):
            raise ValueError(f"ledger row {n} (of the rows with no error): length must be a number >= 0, got {length!r}")
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
    report = {"buckets": buckets, "all": everyone, "lengths": _run_lengths(rows), "starved": [],
              "settings": {"starve_ratio": starve_ratio, "starve_min_groups": starve_min_groups,
                           "length_buckets": "mean completion tokens, powers of two",
                           "generated": "groups of the same policy versions, weighted by the bucket's groups from each"}}
    if rows and all("version_start" in r and "length" in r for r in rows):
        for k, b in buckets.items():
            b["generated"], b["lengths"] = _generated_vs_trained(rows, k)
        _mark_starved(report, starve_ratio, starve_min_groups)
    return report


def _mark_starved(report: dict, ratio: float, min_groups: float):
    """Sets each (staleness, length) pair's "starved" and lists the starved ones."""
    ks = list(report["buckets"])
    for i, k in enumerate(ks):
        for label, v in report["buckets"][k]["lengths"].items():
            staler = [report["buckets"][j]["lengths"].get(label) for j in ks[i + 1:]]
            pushed_later = sum(x["trained_groups"] for x in staler if x) > sum(x["expected_groups"] for x in staler if x)
            v["starved"] = (v["expected_groups"] >= min_groups and v["trained_share"] < ratio * v["generated_share"]
                            and pushed_later)
            if v["starved"]:
                report["starved"].append({"staleness": k, "length": label, **{f: v[f] for f in (
                    "trained_share", "generated_share", "trained_groups", "expected_groups")}})


def _run_lengths(rows: list[dict]) -> dict:
    """The whole run per length bucket: groups, share, mean length and pass rate."""
    out = {}
    for lo in sorted({length_bucket(r["length"]) for r in rows if r.get("length") is not None}):
        part = [r for r in rows if r.get("length") is not None and length_bucket(r["length"]) == lo]
        out[length_label(lo)] = {"groups": len(part), "share": len(part) / len(rows),
                                 "length": _mean(r["length"] for r in part),
                                 "pass_rate": _mean(r.get("pass_rate") for r in part)}
    return out


def _generated_vs_trained(rows: list[dict], k: int) -> tuple[dict, dict]:
    """Staleness bucket k against what its policy versions generated: (means, per length bucket)."""
    trained = [r for r in rows if r["staleness"] == k]
    made_by: dict[int, int] = {}  # version -> groups it generated (the whole ledger)
    for r in rows:
        made_by[r["version_start"]] = made_by.get(r["version_start"], 0) + 1
    from_version: dict[int, int] = {}  # version -> groups of this bucket it generated
    for r in trained:
        from_version[r["version_start"]] = from_version.get(r["version_start"], 0) + 1
    # each generated group's weight: its version's share of the bucket, spread over the version's groups
    weight = [from_version.get(r["version_start"], 0) / len(trained) / made_by[r["version_start"]] for r in rows]
    generated = {"length": _weighted_mean((r["length"], w) for r, w in zip(rows, weight)),
                 "pass_rate": _weighted_mean((r.get("pass_rate"), w) for r, w in zip(rows, weight))}
    lengths = {}
    for lo in sorted({length_bucket(r["length"]) for r, w in zip(rows, weight) if w > 0}):
        ours = [r for r in trained if length_bucket(r["length"]) == lo]
        theirs = [(r, w) for r, w in zip(rows, weight) if w > 0 and length_bucket(r["length"]) == lo]
        gen_share = sum(w for _, w in theirs)
        expected = gen_share * len(trained)
        share = len(ours) / len(trained)
        lengths[length_label(lo)] = {
            "trained_groups": len(ours), "expected_groups": expected, "trained_share": share,
            "generated_share": gen_share, "trained_length": _mean(r["length"] for r in ours),
            "generated_length": _weighted_mean((r["length"], w) for r, w in theirs),
            "trained_pass_rate": _mean(r.get("pass_rate") for r in ours),
            "generated_pass_rate": _weighted_mean((r.get("pass_rate"), w) for r, w in theirs)}
    return generated, lengths


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


def format_lengths(report: dict) -> str:
    """Per staleness bucket and length bucket: trained against generated by the same policy
    versions (groups, share, mean length, pass rate), then a warning per starved pair."""
    if not any("lengths" in b for b in report["buckets"].values()):
        return ""
    lines = ["trained at each staleness vs generated by the same policy versions, by length "
             "(mean completion tokens of a group)",
             f"{'stale':>5}  {'tokens':<11}{'groups':>7}{'expected':>9}{'share':>7}{'gen share':>10}"
             f"{'length':>8}{'gen len':>8}{'pass':>6}{'gen pass':>9}"]
    for k, b in report["buckets"].items():
        for label, v in b["lengths"].items():
            lines.append(f"{k:>5}  {label:<11}{v['trained_groups']:>7}{v['expected_groups']:>9.1f}"
                         f"{v['trained_share']:>7.2f}{v['generated_share']:>10.2f}{v['trained_length']:>8.1f}"
                         f"{v['generated_length']:>8.1f}{v['trained_pass_rate']:>6.2f}{v['generated_pass_rate']:>9.2f}"
                         + ("  STARVED" if v["starved"] else ""))
        g = b["generated"]
        lines.append(f"{k:>5}  {'all':<11}{b['groups']:>7}{b['groups']:>9.1f}{1:>7.2f}{1:>10.2f}{b['length']:>8.1f}"
                     f"{g['length']:>8.1f}{b['pass_rate']:>6.2f}{g['pass_rate']:>9.2f}")
    s = report["settings"]
    for x in report["starved"]:
        lines.append(f"WARNING: length {x['length']} tokens is starved at staleness {x['staleness']}: "
                     f"{x['trained_share']:.0%} of the groups trained there vs {x['generated_share']:.0%} generated by "
                     f"the same policy versions ({x['trained_groups']} groups, {x['expected_groups']:.1f} expected; "
                     f"threshold {s['starve_ratio']}x, --starve-ratio)")
    return "\n".join(lines)


def plot_report(report: dict, path: str | Path) -> Path:
    """Group counts per staleness, and each bucket's length, pass rate and reward against the whole run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = list(report["buckets"])
    with_lengths = all("lengths" in b for b in report["buckets"].values())
    fig, axes = plt.subplots(1, 4 + with_lengths, figsize=(16 + 5 * with_lengths, 3.6))
    axes[0].bar([str(k) for k in ks], [report["buckets"][k]["groups"] for k in ks], color="tab:blue")
    axes[0].set_title("groups trained at each staleness")
    for ax, field, title in zip(axes[1:], ("length", "pass_rate", "reward"),
                                ("completion length", "pass rate (difficulty)", "reward")):
        ax.bar([str(k) for k in ks], [report["buckets"][k][field] for k in ks], color="tab:orange")
        ax.axhline(report["all"][field], color="black", linestyle="--", linewidth=1, label="all groups")
        ax.set_title(title)
        ax.legend(loc="lower right", fontsize=8)
    for ax in axes[:4]:
        ax.set_xlabel("staleness (versions)")
    if with_lengths:
        _plot_lengths(axes[4], report)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_lengths(ax, report: dict):
    """Per length bucket, each staleness bucket's trained share (bars) and generated share (markers)."""
    labels = list(report["lengths"])
    ks = list(report["buckets"])
    width = 0.8 / max(1, len(ks))
    for i, k in enumerate(ks):
        lengths = report["buckets"][k]["lengths"]
        xs = [j + (i - (len(ks) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, [lengths.get(lab, {}).get("trained_share", 0.0) for lab in labels], width,
               label=f"trained, staleness {k}")
        ax.scatter(xs, [lengths.get(lab, {}).get("generated_share", 0.0) for lab in labels], marker="_", s=120,
                   color="black", zorder=3, label="generated by the same versions" if i == 0 else None)
    ax.set_xticks(range(len(labels)), labels, rotation=30, fontsize=7)
    ax.set_xlabel("mean completion tokens of a group")
    ax.set_title("share of groups by length")
    ax.legend(fontsize=7)


def add_command(sub):
    p = sub.add_parser("staleness", help="staleness-bias table and plot of a run (from its ledger.jsonl)")
    p.add_argument("run_dir")
    p.add_argument("--json", default="", help="also write the report here")
    p.add_argument("--plot", default="", help="PNG path (default RUN_DIR/staleness_bias.png)")
    p.add_argument("--starve-ratio", type=float, default=STARVE_RATIO,
                   help="a length bucket is starved at a staleness where its trained share is below this times its "
                        f"generated share (default {STARVE_RATIO})")
    p.add_argument("--starve-min-groups", type=float, default=STARVE_MIN_GROUPS,
                   help="... and at least this many of its groups were expected there; fewer is noise "
                        f"(default {STARVE_MIN_GROUPS:g})")
    p.set_defaults(func=_main)


def _main(args) -> int:
    plot = Path(args.plot or Path(args.run_dir) / "staleness_bias.png")
    if plot.suffix.lower() != ".png":
        plot = plot.with_name(plot.name + ".png")  # what matplotlib would write: said as written
    try:
        if not 0 <= args.starve_ratio <= 1:  # nan too
            raise ValueError(f"--starve-ratio {args.starve_ratio}: a share in [0, 1]")
        if not 0 <= args.starve_min_groups < math.inf:
            raise ValueError(f"--starve-min-groups {args.starve_min_groups}: a count >= 0")
        for out in [plot] + ([Path(args.json)] if args.json else []):
            if not out.parent.is_dir():
                raise FileNotFoundError(f"{out}: its folder {out.parent} does not exist")
        rows = read_ledger(args.run_dir)
        report = staleness_report(rows, args.starve_ratio, args.starve_min_groups)
    except (FileNotFoundError, ValueError) as e:
        print(f"jury staleness: {e}", file=sys.stderr)
        return 2
    if not report["buckets"]:
        why = "every row has an error (refused or unscored groups: nothing trained)" \
            if rows and all(r.get("error") for r in rows) else "the ledger is empty"
        print(f"jury staleness: {args.run_dir}: {why}", file=sys.stderr)
        return 2
    print(format_report(report))
    lengths = format_lengths(report)
    if lengths:
        print("\n" + lengths)
    print(plot_report(report, plot))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0
