"""`jury simulate` against measured runs on this machine: calibrate on one arm of a `jury bench`,
predict every arm of it, and check issue 28's bounds.

    python benchmarks/sim_predict.py --run [--out runs/sim-predict] [--only toy,chain] [--repeat 2]
    python benchmarks/sim_predict.py DIR [DIR ...]      # benches already run (each a `jury bench` folder)

`--run` runs each bench of BENCHES whose folder has no bench.json yet (about an hour alone on two
cores; a bench shares the cores with nothing else or its throughput says little), then reports. The
benches: the embedded default's toy task and the chain task (configs/chain.yaml), each at
max_staleness 0, 1, 2 and 4 under drain and at 4 under interrupt and inflight, and the toy task again
with two torch threads in the learner and with two epochs a step (the cost ratio between generation
and training moves).

Across machines (`--cross BASE,OTHER`, and after `--run` the toy bench against the two-thread one):
OTHER's arms predicted from BASE's calibration with only the learner's alone speed taken from OTHER
(its `learner_only` arm, the learner replayed alone), so the changed generator-to-learner cost ratio
is predicted without looking at OTHER's end-to-end runs; the sharing factors stay BASE's. A run whose
learner threads or engines differ from the run the factors were fitted to is outside the
calibration, and the model says so (Sharing.outside): the table says it under the rows.
`--predict BASE,OTHER` (after `--run` the toy bench against the two-epoch one) takes nothing of
OTHER's: a change the model prices itself (learner.epochs doubles the learner's work a step),
predicted before it is measured. Both print the async-over-sync ratio predicted and measured.

Forced staleness (`--forced RUN[,RUN]`, and after `--run` the FORCED runs, `jury train` with
`forced_staleness`): each group's staleness in `jury simulate` of the run's config against the run's
ledger. The schedule alone decides it, so the two must agree for every group.

Each bench is calibrated on itself (`jury simulate --calibration DIR --sharing-from max_staleness=1`:
the alone arms and its first end-to-end run give each role's alone costs, experiments/sim_costs.py,
and its max_staleness=1 run how much the roles slow each other when they overlap), and each of its
end-to-end runs is simulated from its own config.yaml. The two runs calibrated on are marked
"(fitted)" and not counted among the predictions. A row is within bounds when the predicted completions/s is within 15% of the measured
and the mean staleness within 0.3 versions, or within the run-to-run spread where that is wider (the
issue allows it). `--repeat N` runs each bench N times (folders NAME, NAME.r2, ...); a folder NAME.rK
given beside NAME is a repeat of it. An arm's spread is the largest of its repeats' completions/s over
the smallest, less 1 (and the range of their mean staleness); the prediction, from NAME's calibration,
is compared with NAME's measurement. `--each` calibrates on every repeat in turn (each predicting its
own runs): one bench run is a noisy calibration, and this shows by how much. With it each
calibration is also judged as a plan uses it: each run's completions/s over the calibration run's,
predicted against measured, the bound widened to how much that measured ratio moved between the
repeats (a calibration run that ran fast moves every prediction made from it).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

STALENESS = ["--staleness", "0,1,2,4", "--sync-modes", "drain,interrupt,inflight"]
# forced staleness: `jury train` runs (no bench: the costs do not matter, the schedule decides), each
# group's staleness predicted against the run's ledger, which must agree exactly
FORCED = {
    "toy-forced": ["steps=30", "forced_staleness={0: 1, 1: 1, 2: 1, 4: 1}"],
    "chain-forced": ["--config", "configs/chain.yaml", "steps=12", "forced_staleness={0: 1, 3: 2}",
                     "generator.sync_mode=inflight"],
}
BENCHES = {
    "toy": ["--steps", "30", *STALENESS],
    "chain": ["--config", "configs/chain.yaml", "--steps", "20", *STALENESS],
    "toy-learner2threads": ["--steps", "30", *STALENESS, "learner.threads=2"],
    "toy-epochs2": ["--steps", "30", *STALENESS, "learner.epochs=2"],
    # the other sync modes at max_staleness 1 and 2 (a bench runs the modes at its largest
    # bound only): predicted from the toy bench's calibration, nothing of these read but their configs
    "toy-modes1": ["--steps", "30", "--staleness", "1", "--sync-modes", "drain,interrupt,inflight"],
    "toy-modes2": ["--steps", "30", "--staleness", "2", "--sync-modes", "drain,interrupt,inflight"],
}
PREDICTED = ("toy-epochs2", "toy-modes1", "toy-modes2")  # after --run: each predicted from toy's calibration
THROUGHPUT_BOUND = 0.15  # predicted completions/s within 15% of the measured
STALENESS_BOUND = 0.3    # mean staleness within 0.3 versions
# the run the sharing factors are fitted to: asynchronous, so generation and training overlap in it
SHARING_FROM = "max_staleness=1"


def verdicts(rows: dict[str, dict], spreads: dict[str, tuple[float, float]] | None = None) -> list[dict]:
    """against_bench's rows -> one verdict per run: the ratio of predicted to measured completions/s,
    the staleness difference, and whether both are within bounds: 15% and 0.3 versions, or the run's
    spread over repeats (spreads: run -> (completions/s spread, staleness range)) where that is wider."""
    out = []
    for name, values in rows.items():
        (p_cps, m_cps), (p_st, m_st) = values["completions_per_s"], values["staleness_mean"]
        ratio = p_cps / m_cps if m_cps else float("inf")
        spread = (spreads or {}).get(name)
        cps_bound, st_bound = (max(THROUGHPUT_BOUND, spread[0]), max(STALENESS_BOUND, spread[1])) if spread \
            else (THROUGHPUT_BOUND, STALENESS_BOUND)
        out.append({"run": name, "predicted": p_cps, "measured": m_cps, "ratio": ratio,
                    "staleness": (p_st, m_st), "spread": spread, "bound": cps_bound, "bound_staleness": st_bound,
                    "within": abs(ratio - 1) <= cps_bound + 1e-12 and abs(p_st - m_st) <= st_bound + 1e-12,
                    "outside_calibration": values.get("outside_calibration", []),
                    "interrupted": values.get("interrupted")})
    return out


def spreads(folders: list[Path]) -> tuple[dict[str, tuple[float, float]], dict[str, list[float]]]:
    """Each arm's run-to-run spread over repeats of one bench: run -> (largest completions/s over the
    smallest, less 1; the range of mean staleness), and run -> every repeat's completions/s. Arms run
    once are left out."""
    measured: dict[str, list[tuple[float, float]]] = {}
    for folder in folders:
        for name, v in json.loads((folder / "bench.json").read_text()).items():
            if name.startswith("end_to_end/") and "completions_per_s" in v:
                measured.setdefault(name.removeprefix("end_to_end/"), []).append(
                    (v["completions_per_s"], v.get("staleness_mean", 0.0)))
    out = {}
    for name, values in measured.items():
        cps, st = [c for c, _ in values], [s for _, s in values]
        if len(values) > 1 and min(cps) > 0:
            out[name] = (max(cps) / min(cps) - 1, max(st) - min(st))
    return out, {name: [c for c, _ in values] for name, values in measured.items()}


def relative_spreads(folders: list[Path], base: str) -> dict[str, tuple[float, list[float]]]:
    """Each arm's completions/s over its own bench's run `base` (the calibration run), in every repeat
    of one bench: run -> (the spread of that ratio, largest over smallest less 1; the ratio in each
    repeat). A calibration carries its run's noise into every prediction made from it, so a model
    calibrated on one repeat can miss an arm of another by as much as this ratio moves between
    repeats, however right the model is. Arms run once, and `base` itself, are left out."""
    ratios: dict[str, list[float]] = {}
    for folder in folders:
        runs = {k.removeprefix("end_to_end/"): v.get("completions_per_s", 0.0)
                for k, v in json.loads((folder / "bench.json").read_text()).items() if k.startswith("end_to_end/")}
        if runs.get(base, 0.0) > 0:
            for name, cps in runs.items():
                if name != base and cps > 0:
                    ratios.setdefault(name, []).append(cps / runs[base])
    return {name: (max(r) / min(r) - 1, r) for name, r in ratios.items() if len(r) > 1}


def relative(rows: list[dict], base: str, spread: dict[str, tuple[float, list[float]]],
             fitted: tuple[str, ...]) -> tuple[str, int, int]:
    """The predicted runs judged as a plan uses them: each one's completions/s over the calibration
    run's (`base`), predicted against measured, within 15% or within that measured ratio's spread over
    the repeats where wider, and the mean staleness within its bound as before. (line, within, of)"""
    by = {r["run"]: r for r in rows}
    if base not in by:
        return "", 0, 0
    parts, inside = [], 0
    predicted = [r for r in rows if r["run"] not in fitted and r["run"] in spread]
    for r in predicted:
        p = r["predicted"] / by[base]["predicted"]
        m = r["measured"] / by[base]["measured"]
        ok = abs(p / m - 1) <= max(THROUGHPUT_BOUND, spread[r["run"]][0]) + 1e-12 and \
            abs(r["staleness"][0] - r["staleness"][1]) <= r["bound_staleness"] + 1e-12
        inside += ok
        parts.append(f"{r['run']} {p:.2f} / {m:.2f} (spread {spread[r['run']][0]:.0%}) {'yes' if ok else 'no'}")
    line = (f"\nOver {base}'s completions/s, predicted / measured, within 15% or the spread of the measured "
            f"ratio over the repeats where wider: {'; '.join(parts)}. {inside} of {len(predicted)}")
    return line, inside, len(predicted)


def restarts(folders: list[Path]) -> dict[str, list[int | None]]:
    """Each run under sync_mode=interrupt (its config's, whatever the run's name), the groups its
    generators started over at the syncs, in every repeat of one bench (their counters in each run's
    metrics; None where the metrics hold none)."""
    from jury.experiments.sim_costs import interrupted_groups, run_folder
    from jury.protocol.config_load import load_run_config

    out: dict[str, list[int | None]] = {}
    for folder in folders:
        for name, v in json.loads((folder / "bench.json").read_text()).items():
            if not name.startswith("end_to_end/") or "run_dir" not in v:
                continue
            run_dir = run_folder(folder, v["run_dir"])
            if (run_dir / "config.yaml").is_file() and \
                    load_run_config(str(run_dir)).generator.sync_mode == "interrupt":
                out.setdefault(name.removeprefix("end_to_end/"), []).append(interrupted_groups(run_dir))
    return out


def repeats_of(folders: list[Path]) -> dict[Path, list[Path]]:
    """Folders grouped by bench: NAME.r2, NAME.r3 ... are repeats of NAME (a repeat given without
    its NAME stands alone)."""
    names = {f.name: f for f in folders}
    groups: dict[Path, list[Path]] = {}
    for f in folders:
        base, _, k = f.name.rpartition(".r")
        if base and k.isdigit() and base in names:
            groups.setdefault(names[base], [names[base]]).append(f)
        else:
            groups.setdefault(f, [f])
    return groups


def table(bench: str, factors: tuple[float, float], rows: list[dict],
          repeats: dict[str, list[float]] | None = None, fitted: tuple[str, ...] = (),
          restarted_each: dict[str, list[int]] | None = None) -> str:
    """The rows as a markdown table; runs named in `fitted` were calibrated on (their verdict says
    so) and are not counted among the predictions. Under it, the groups each interrupt run started
    over, predicted / measured (in each repeat, from `restarted_each`)."""
    spread = any(r.get("spread") for r in rows)
    lines = [f"\n### {bench} (sharing factors fitted: learner {factors[0]:.3g}, generator {factors[1]:.3g})\n",
             "| run | completions/s, predicted / measured | ratio |"
             + (" measured in each repeat | spread |" if spread else "")
             + " mean staleness, predicted / measured | within bounds |",
             "|---|---|---|" + ("---|---|" if spread else "") + "---|---|"]
    for r in rows:
        extra = ""
        if spread:
            each = ", ".join(f"{c:.3g}" for c in (repeats or {}).get(r["run"], []))
            extra = f" {each} | {r['spread'][0]:.0%} |" if r.get("spread") else " | |"
        verdict = ("yes" if r["within"] else "no") + (" (fitted)" if r["run"] in fitted else "")
        lines.append(f"| {r['run']} | {r['predicted']:.3g} / {r['measured']:.3g} | {r['ratio']:.2f} |{extra} "
                     f"{r['staleness'][0]:.2f} / {r['staleness'][1]:.2f} | {verdict} |")
    restarted = [f"{r['run']} {r['interrupted'][0]:.0f} / "
                 + ", ".join("?" if n is None else str(n)
                             for n in (restarted_each or {}).get(r["run"], [r["interrupted"][1]]))
                 for r in rows if r.get("interrupted")]
    if restarted:  # the interrupt mode's staleness follows how many groups start over
        lines.append(f"\nGroups started over at a sync, predicted / measured: {'; '.join(restarted)}")
    outside = sorted({why for r in rows for why in r.get("outside_calibration", [])})
    if outside:
        lines.append(f"\nOutside the calibration (the model warns so): {'; '.join(outside)}")
    predicted = [r for r in rows if r["run"] not in fitted]
    inside = sum(r["within"] for r in predicted)
    wider = " (or the run-to-run spread, where wider)" if spread else ""
    also = f"; calibrated on {', '.join(f for f in fitted if any(r['run'] == f for r in rows))}" if fitted else ""
    lines.append(f"\n{inside} of {len(predicted)} predicted runs within {THROUGHPUT_BOUND:.0%} and {STALENESS_BOUND} "
                 f"versions{wider}{also}")
    return "\n".join(lines)


def speedup(rows: list[dict], which: str) -> float:
    """The fastest asynchronous run's completions/s over the synchronous run's (max_staleness=0)."""
    sync = next(r[which] for r in rows if r["run"] == "max_staleness=0")
    return max(r[which] for r in rows if r["run"] != "max_staleness=0") / sync


def speedup_line(rows: list[dict]) -> str:
    """Predicted and measured async-over-sync speedups, each of its own fastest run, and where the
    two fastest runs differ, the prediction of the run measured fastest: two maxima alone could agree
    while coming from different arms."""
    ratio = lambda which, run: run[which] / next(r[which] for r in rows if r["run"] == "max_staleness=0")  # noqa: E731
    fast = {w: max((r for r in rows if r["run"] != "max_staleness=0"), key=lambda r: r[w]) for w in ("predicted", "measured")}
    line = (f"\nasync over sync, completions/s: predicted {speedup(rows, 'predicted'):.2f}x, "
            f"measured {speedup(rows, 'measured'):.2f}x")
    if fast["predicted"]["run"] != fast["measured"]["run"]:
        run = fast["measured"]
        line += (f" (fastest predicted {fast['predicted']['run']}, measured {run['run']}, "
                 f"which was predicted {ratio('predicted', run):.2f}x)")
    return line


def fitted_runs(folder: Path, sharing_from: str) -> tuple[str, ...]:
    """The runs of a bench that its calibration fits to: its first max_staleness (the alone costs)
    and, when given, the runs the sharing factors are fitted to."""
    from jury.experiments.simulate import sharing_names

    first = json.loads((folder / "bench.json").read_text())["config"]["staleness"][0]
    return (f"max_staleness={first}",) + (tuple(sharing_names(str(folder), sharing_from)) if sharing_from else ())


def left_out(folder: Path, cores: bool = False, fits: dict | None = None) -> tuple[dict[str, dict], object]:
    """Every run of a bench predicted with the sharing factors of the others (leave one out): each
    asynchronous run from the median of the factors fitted to the bench's other asynchronous runs,
    never its own; the synchronous calibration run (fitted: the alone costs) from all of them.
    Returns against_bench's rows and the costs with the factors pooled over every asynchronous run."""
    from jury.experiments.sim_costs import asynchronous_runs
    from jury.experiments.simulate import ASYNC_RUNS, against_bench, calibrated, sharing_names

    names = asynchronous_runs(str(folder))
    if len(names) < 2:
        raise ValueError(f"{folder}: leave one out needs two asynchronous runs or more (it has "
                         f"{', '.join(names) or 'none'})")
    fits = {} if fits is None else fits
    everything = calibrated(str(folder), sharing_from=ASYNC_RUNS, cores=cores, fits=fits)
    runs = [k.removeprefix("end_to_end/") for k in json.loads((folder / "bench.json").read_text())
            if k.startswith("end_to_end/")]
    rows = against_bench(str(folder), everything, only=tuple(r for r in runs if r not in names))
    for name in names:
        others = ";".join(sharing_names(str(folder), ASYNC_RUNS, exclude=(name,)))
        rows.update(against_bench(str(folder), calibrated(str(folder), sharing_from=others, cores=cores, fits=fits),
                                  only=(name,)))
    return rows, everything


def cores_note(costs) -> str:
    sh = costs.sharing
    return f", cores model: {sh.cores} cores, engine load {sh.engine_load:.2f}" if sh.cores else ""


def cross(base: Path, other: Path, sharing_from: str = "", cores: bool = False) -> str:
    from dataclasses import replace

    from jury.experiments.sim_costs import calibration_run, run_epochs
    from jury.experiments.simulate import against_bench, calibrated

    costs = calibrated(str(base), sharing_from=sharing_from, cores=cores)
    # OTHER's learner alone against BASE's, per trained token and epoch (learner_only's tokens/s covers
    # every epoch of a step): BASE's token_s scaled by it, so that what BASE's calibration put on top
    # of learner_only (its synchronous run's learner in the pipeline) carries to OTHER as a ratio
    speed = {b: json.loads((b / "bench.json").read_text())["learner_only"]["tokens_per_s"]
             * run_epochs(calibration_run(str(b))) for b in (base, other)}
    costs = replace(costs, learner=replace(costs.learner, token_s=costs.learner.token_s * speed[base] / speed[other]))
    beside = sorted(f for f in other.parent.glob(f"{other.name}.r*") if (f / "bench.json").is_file())
    spread, each = spreads([other, *repeats_of([other, *beside])[other][1:]])
    rows = verdicts(against_bench(str(other), costs), spread)
    text = table(f"{other.name} predicted from {base.name}'s calibration and its own learner alone{cores_note(costs)}",
                 (costs.sharing.learner, costs.sharing.generator), rows, each)
    if any(r["run"] == "max_staleness=0" for r in rows):
        text += speedup_line(rows)
    return text


def predict(base: Path, other: Path, sharing_from: str = "", cores: bool = False) -> str:
    """OTHER's runs predicted from BASE's calibration alone, nothing of OTHER measured first: for a
    change the model prices itself (learner.epochs, batch_groups, group_size), a prediction made
    before the measurement."""
    from jury.experiments.simulate import against_bench, calibrated

    costs = calibrated(str(base), sharing_from=sharing_from, cores=cores)
    rows = verdicts(against_bench(str(other), costs))
    text = table(f"{other.name} predicted from {base.name}'s calibration alone{cores_note(costs)}",
                 (costs.sharing.learner, costs.sharing.generator), rows)
    if any(r["run"] == "max_staleness=0" for r in rows):
        text += speedup_line(rows)
    return text


def report(folders: list[Path], sharing_from: str = "", cores: bool = False, each_repeat: bool = False,
           leave_one_out: bool = False) -> str:
    """A table per bench, calibrated on NAME and compared with NAME's runs (the bounds widened to the
    spread over its repeats). `each_repeat`: a bench with repeats is calibrated on each repeat in
    turn, each compared with its own runs, and a last line counts the rows within bounds under each
    calibration: how much a prediction moves with the one run it was calibrated on. `leave_one_out`:
    each asynchronous run predicted from the factors of the bench's other asynchronous runs
    (left_out; `sharing_from` is then not used), so that only the synchronous run is fitted to."""
    from jury.experiments.simulate import against_bench, calibrated

    parts = []
    for folder, group in repeats_of(folders).items():
        spread, each = spreads(group)
        counts, over = [], []
        for member in group if each_repeat else [folder]:
            name = member.name + (f", {len(group)} repeats" if len(group) > 1 else "")
            if leave_one_out:
                measured, costs = left_out(member, cores)
                fitted = fitted_runs(member, "")
                name += (", leave one out: each asynchronous run predicted from the median of the others' factors; "
                         "of all of them")
            else:
                costs = calibrated(str(member), sharing_from=sharing_from, cores=cores)
                measured, fitted = against_bench(str(member), costs), fitted_runs(member, sharing_from)
            rows = verdicts(measured, spread)
            parts.append(table(name + cores_note(costs), (costs.sharing.learner, costs.sharing.generator), rows, each,
                               fitted, restarts(group)))
            predicted = [r for r in rows if r["run"] not in fitted]
            counts.append((member.name, sum(r["within"] for r in predicted), len(predicted)))
            if each_repeat and len(group) > 1:
                line, k, m = relative(rows, fitted[0], relative_spreads(group, fitted[0]), fitted)
                parts.append(line)
                over.append((member.name, k, m))
        if len(counts) > 1:
            parts.append(f"\n{folder.name} calibrated on each of its {len(counts)} repeats in turn, predicted runs "
                         f"within bounds: " + "; ".join(f"{n}: {k} of {m}" for n, k, m in counts)
                         + f" ({sum(k for _, k, _ in counts)} of {sum(m for _, _, m in counts)})")
            parts.append(f"over its {fitted[0]} run: " + "; ".join(f"{n}: {k} of {m}" for n, k, m in over)
                         + f" ({sum(k for _, k, _ in over)} of {sum(m for _, _, m in over)})")
    return "\n".join(parts)


def forced(run_dir: Path) -> str:
    from jury.experiments.simulate import against_forced_run

    r = against_forced_run(str(run_dir))
    verdict = "exact" if not r["differ"] else f"{len(r['differ'])} differ (task indices {r['differ'][:10]})"
    hist = lambda h: " ".join(f"{k}:{n}" for k, n in h.items())  # noqa: E731
    return (f"\n### {run_dir.name} (forced staleness)\n\n{r['same']} of {r['groups']} groups trained at the "
            f"staleness the model gives them: {verdict}. Groups per staleness, predicted {hist(r['predicted'])}; "
            f"measured {hist(r['measured'])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="`jury bench` folders already run")
    ap.add_argument("--run", action="store_true", help="run the benches missing under --out, then report")
    ap.add_argument("--out", type=Path, default=Path("runs/sim-predict"))
    ap.add_argument("--only", default="", help=f"comma-separated bench and run names (of "
                                               f"{', '.join([*BENCHES, *FORCED])})")
    ap.add_argument("--cross", default="", metavar="BASE,OTHER",
                    help="predict OTHER from BASE's calibration and OTHER's learner alone")
    ap.add_argument("--predict", default="", metavar="BASE,OTHER[;BASE,OTHER...]",
                    help="predict OTHER from BASE's calibration alone (a change the model prices: learner.epochs, "
                         "the sync mode, max_staleness)")
    ap.add_argument("--repeat", type=int, default=1, help="run each bench this many times (NAME, NAME.r2, ...)")
    ap.add_argument("--forced", default="", metavar="RUN[,RUN]",
                    help="forced-staleness run folders: each group's staleness predicted against the ledger's")
    ap.add_argument("--sharing-from", default=SHARING_FROM, metavar="RUN[;RUN...]|async",
                    help=f"the run or runs of each bench the sharing factors are fitted to ({SHARING_FROM}; 'async' "
                         "for the median over every asynchronous run; '' for the calibration run, max_staleness=0, "
                         "as before 2026-11-27)")
    ap.add_argument("--leave-one-out", action="store_true",
                    help="in the DIR reports, each asynchronous run predicted from the median sharing factors of the "
                         "bench's other asynchronous runs (--sharing-from is then not used): the calibration is the "
                         "whole bench but the run predicted")
    ap.add_argument("--each", action="store_true",
                    help="a bench with repeats (NAME.r2 ...): calibrate on each repeat in turn, not on NAME alone")
    ap.add_argument("--cores", action="store_true",
                    help="the learner slowed by the cores model (Sharing.learner_rate), not by its factor")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: each bench runs at least once (--repeat >= 1)")
    for name in ("cross", "predict"):
        value = getattr(args, name)
        pairs = value.split(";") if name == "predict" else [value]  # --predict: pairs separated by ';'
        if value and any(len(pair.split(",")) != 2 or not all(pair.split(",")) for pair in pairs):
            ap.error(f"--{name} {value}: two bench folders, BASE,OTHER" + ("[;BASE,OTHER...]" * (name == "predict")))
    if args.run:
        only = [n for n in args.only.split(",") if n]
        unknown = [n for n in only if n not in BENCHES and n not in FORCED]
        if unknown:
            ap.error(f"--only {','.join(unknown)}: not a bench or run of this benchmark "
                     f"({', '.join([*BENCHES, *FORCED])})")
        names = [n for n in only if n in BENCHES] if only else list(BENCHES)
        runs = [(n, n if k == 1 else f"{n}.r{k}") for n in names for k in range(1, args.repeat + 1)]
        for name, folder_name in runs:
            folder = args.out / folder_name
            if not (folder / "bench.json").is_file():
                cmd = [sys.executable, "-m", "jury.experiments.cli", "bench", *BENCHES[name], "--out", str(folder)]
                print(" ".join(cmd), flush=True)
                subprocess.run(cmd, check=False)
        folders = [args.out / f for _, f in runs if (args.out / f / "bench.json").is_file()]
        for name, overrides in FORCED.items():
            if only and name not in only:
                continue
            run = args.out / name
            if not (run / "summary.yaml").is_file():  # written at the run's end (a ledger from its start)
                cmd = [sys.executable, "-m", "jury.experiments.cli", "train", *overrides, f"run_dir={run}"]
                print(" ".join(cmd), flush=True)
                subprocess.run(cmd, check=False)
            if (run / "summary.yaml").is_file():
                args.forced = ",".join(filter(None, [args.forced, str(run)]))
        if {"toy", "toy-learner2threads"} <= {f.name for f in folders} and not args.cross:
            args.cross = f"{args.out / 'toy'},{args.out / 'toy-learner2threads'}"
        if not args.predict:
            args.predict = ";".join(f"{args.out / 'toy'},{args.out / name}" for name in PREDICTED
                                    if {"toy", name} <= {f.name for f in folders})
        # a bench predicted from another's calibration is not calibrated on itself (it may have no
        # synchronous run to calibrate on)
        folders = [f for f in folders if f.name.partition(".r")[0] not in PREDICTED[1:]]
    else:
        folders = args.dirs
    if not folders and not args.cross and not args.predict and not args.forced:
        ap.error("no bench folder to report (give DIRs, --cross, --predict, --forced or --run)")
    for flag, named in (("DIR", [str(f) for f in folders]), ("--cross", args.cross.split(",") if args.cross else []),
                        ("--predict", args.predict.replace(";", ",").split(",") if args.predict else [])):
        for folder in named:
            if not (Path(folder) / "bench.json").is_file():
                ap.error(f"{flag} {folder}: no bench.json there (a `jury bench` folder, or a bench name after --run)")
    if folders:
        try:
            print(report(folders, args.sharing_from, args.cores, args.each, args.leave_one_out))
        except ValueError as e:  # a run the bench lacks, or too few asynchronous runs to leave one out
            ap.error(str(e))
    if args.cross:
        base, other = (Path(x) for x in args.cross.split(","))
        print(cross(base, other, args.sharing_from, args.cores))
    for pair in filter(None, args.predict.split(";")):
        base, other = (Path(x) for x in pair.split(","))
        print(predict(base, other, args.sharing_from, args.cores))
    inexact = 0
    for run in filter(None, args.forced.split(",")):
        try:
            text = forced(Path(run))
        except (ValueError, FileNotFoundError) as e:  # not a run folder, or not a forced one
            ap.error(f"--forced {run}: {e}")
        print(text)
        inexact += ": exact." not in text
    return 1 if inexact else 0  # the schedule decides forced staleness: a difference is a defect


if __name__ == "__main__":
    raise SystemExit(main())
