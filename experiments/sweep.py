"""`jury sweep`: a grid of training runs, each in its own folder, one after another.

    --grid key=v1,v2 ... × --seeds ──expand──> settings ──load_config──> every config checked
      for each run:  summary.yaml there? skip  :  checkpoint there? train(cfg, resume)  :  clear, train(cfg)
      then:          table (terminal), sweep_summary.csv / .json, plots/

    jury sweep --grid max_staleness=0,1,2 --grid verifier.fallback=reszero,zero --seeds 0,1 \\
               --out runs/sweep1 steps=20 generator.group_size=4

A run folder is named by its settings ("max_staleness=1__verifier.fallback=zero__seed=0"),
so running the same command again resumes: finished runs (summary.yaml, which `train`
writes only on success) are skipped, an unfinished one continues from its last
checkpoint (runs with checkpoint_every > 0) or is rerun from scratch. Every config is built and checked before
the first run starts, so a bad value fails in seconds, not hours into the sweep.
"""
from __future__ import annotations

import csv
import itertools
import json
import logging
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

log = logging.getLogger(__name__)

SUMMARY_KEYS = ["wall_s", "steps", "reward_first_fifth", "reward_last_fifth", "pass_rate_first_fifth",
                "pass_rate_last_fifth", "max_staleness_seen"]
# config keys that do not change what a run computes: a finished run still counts when they differ
NOT_COMPARED = {"run_dir", "progress", "tracking", "wandb.project", "wandb.entity", "wandb.mode"}

class SweepError(ValueError):
    """A grid or sweep folder that cannot be run; the message names the key or run."""


@dataclass(frozen=True)
class PlannedRun:
    name: str
    setting: dict      # grid key -> raw value as given, in grid order
    cfg: object        # RunConfig, with run_dir = <out>/<name>

    @property
    def run_dir(self) -> Path:
        return Path(self.cfg.run_dir)


def parse_grid(items: list[str], seeds: str | None = None) -> dict[str, list[str]]:
    """["a=1,2", "b.c=x"] and seeds "0,1" -> {"a": ["1", "2"], "b.c": ["x"], "seed": ["0", "1"]}."""
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        values = [v.strip() for v in _split_top(raw)]
        if not sep or not key or not all(values):
            raise SweepError(f"--grid {item!r}: expected key=v1,v2,... with no empty value")
        if key in grid:
            raise SweepError(f"--grid {key} given twice")
        if key == "run_dir":
            raise SweepError("--grid run_dir: the sweep names each run's folder itself")
        if len(set(values)) != len(values):
            raise SweepError(f"--grid {key}: a value is repeated in {values}")
        grid[key] = values
    if seeds is not None:
        if "seed" in grid:
            raise SweepError("seed is both in --grid and --seeds")
        values = [v.strip() for v in seeds.split(",")]
        if not all(v.isdigit() for v in values) or len(set(values)) != len(values):
            raise SweepError(f"--seeds {seeds!r}: expected distinct integers like 0,1,2")
        grid["seed"] = values
    return grid


def _split_top(raw: str) -> list[str]:
    """Split on commas outside brackets: "[4,1],[2,1]" -> ["[4,1]", "[2,1]"] (YAML lists and maps as values)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(raw):
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            parts.append(raw[start:i])
            start = i + 1
    parts.append(raw[start:])
    return parts


def expand(grid: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every combination, the last key varying fastest; an empty grid is one run."""
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def run_name(setting: dict[str, str]) -> str:
    """A folder name that reads as the setting: characters a shell or a path would trip on become _."""
    if not setting:
        return "base"
    return "__".join(f"{k}={re.sub(r'[^A-Za-z0-9._+-]', '_', v)}" for k, v in setting.items())


def plan(grid: dict[str, list[str]], overrides: list[str], out: str | Path,
         config_path: str | None = None) -> list[PlannedRun]:
    """Every run's config, built and checked now; refuses clashes before anything starts."""
    from jury.protocol.config import ConfigError
    from jury.protocol.config_load import load_config

    clash = sorted({o.partition("=")[0] for o in overrides} & (set(grid) | {"run_dir"}))
    if clash:
        raise SweepError(f"{clash[0]} is set by the sweep and also as an override; give it in one place")
    runs, names, same = [], set(), {}
    for setting in expand(grid):
        name = run_name(setting)
        if name in names:
            raise SweepError(f"two settings share the folder name {name}; make their values differ in "
                             f"letters, digits or ._+-")
        names.add(name)
        try:
            cfg = load_config(config_path, [*overrides, *(f"{k}={v}" for k, v in setting.items()),
                                            f"run_dir={Path(out) / name}"])
        except ConfigError as e:
            raise SweepError(f"run {name}: {e}") from None
        key = repr(replace(cfg, run_dir=""))  # two spellings of one value (1e-4, 0.0001) are one run
        if key in same:
            raise SweepError(f"runs {same[key]} and {name} have the same config: their values are one value "
                             "spelled twice; give it once")
        same[key] = name
        runs.append(PlannedRun(name, setting, cfg))
    for run in runs:
        _check_finished_matches(run)
    return runs


def _check_finished_matches(run: PlannedRun) -> None:
    """A finished run is only reused when it was trained with this very config."""
    import yaml

    from jury.protocol.config_load import read_yaml, to_dict
    from jury.experiments.plots import flatten

    if not (run.run_dir / "summary.yaml").exists():
        return
    done = flatten(read_yaml(str(run.run_dir / "config.yaml")))  # broken YAML: a ConfigError naming it
    want = flatten(yaml.safe_load(yaml.safe_dump(to_dict(run.cfg))))  # the round trip train's copy took
    # keys on one side only come from a config schema that changed since; the run's values are what count
    diff = sorted(k for k in set(done) & set(want) if k not in NOT_COMPARED and done[k] != want[k])
    if diff:
        k = diff[0]
        raise SweepError(f"run {run.name} finished earlier with {k}={done.get(k)!r}, this sweep asks for "
                         f"{want.get(k)!r} ({len(diff)} keys differ); use another --out")


def _clear(run_dir: Path) -> None:
    """Remove an unfinished run's folder. `train` writes config.yaml before anything else, so a
    non-empty folder without one is not a run's, and is left alone."""
    if not run_dir.exists():
        return
    if any(run_dir.iterdir()) and not (run_dir / "config.yaml").exists():
        raise SweepError(f"{run_dir} is in the way: it holds files but no run's config.yaml; "
                         f"move it or remove it")
    shutil.rmtree(run_dir)


def run_sweep(runs: list[PlannedRun], train: Callable | None = None,
              say: Callable[[str], None] = print) -> list[dict]:
    """Train each run that has not finished; one row per run (status done/skipped/failed)."""
    import yaml

    if train is None:
        from jury.cluster.driver import train
    rows = []
    for i, run in enumerate(runs, 1):
        head = f"[{i}/{len(runs)}] {run.name}"
        if (run.run_dir / "summary.yaml").exists():
            say(f"{head}: finished earlier, skipped")
            rows.append(_row(run, "skipped", yaml.safe_load((run.run_dir / "summary.yaml").read_text())))
            continue
        resume = (run.run_dir / "latest_checkpoint").exists()
        if not resume:
            _clear(run.run_dir)
        say(f"{head}: {'resuming from its checkpoint' if resume else 'training'}")
        try:
            rows.append(_row(run, "done", train(run.cfg, resume=str(run.run_dir)) if resume else train(run.cfg)))
        except Exception as e:  # one broken setting must not cost the rest of a long sweep
            log.exception("sweep: run %s failed", run.name)
            say(f"{head}: FAILED: {type(e).__name__}: {e}")
            rows.append(_row(run, "failed", {}, error=f"{type(e).__name__}: {e}"))
    return rows


def _row(run: PlannedRun, status: str, summary: dict, error: str = "") -> dict:
    from jury.experiments.plots import mean_throughput

    row = {"run": run.name, **run.setting, "status": status}
    row.update({k: summary.get(k) for k in SUMMARY_KEYS})
    metrics = run.run_dir / "metrics.jsonl"
    if status != "failed" and metrics.exists():
        from jury.cluster.metrics import read_metrics

        row["tokens_per_s"] = mean_throughput(read_metrics(run.run_dir))
    else:
        row["tokens_per_s"] = None
    row["error"] = error
    return row


def write_summary(rows: list[dict], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    csv_path, json_path = out / "sweep_summary.csv", out / "sweep_summary.json"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    json_path.write_text(json.dumps(rows, indent=2))
    return csv_path, json_path


def table(rows: list[dict]) -> str:
    cols = ["run", "status", "reward_last_fifth", "pass_rate_last_fifth", "max_staleness_seen", "tokens_per_s",
            "wall_s"]
    cells = [cols] + [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _cell(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _run(args, train: Callable | None = None) -> int:
    """The command; `train` is the driver's unless a test hands in its own."""
    out = Path(args.out)
    try:
        runs = plan(parse_grid(args.grid, args.seeds), args.overrides, out, args.config)
    except (SweepError, OSError) as e:
        print(f"jury sweep: {e}", file=sys.stderr)
        return 2
    print(f"jury sweep: {len(runs)} runs in {out}, every config checked")
    if args.dry_run:
        print("\n".join(r.name for r in runs))
        return 0
    try:
        rows = run_sweep(runs, train)
    except SweepError as e:
        print(f"jury sweep: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("jury sweep: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    csv_path, json_path = write_summary(rows, out)
    print(table(rows))
    print(f"summary: {csv_path} {json_path}")
    finished = [r.run_dir for r, row in zip(runs, rows) if row["status"] != "failed"]
    if finished:
        from jury.experiments.plots import plot_runs

        print("plots: " + " ".join(map(str, plot_runs(finished, out / "plots"))))
    return 1 if any(r["status"] == "failed" for r in rows) else 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="train a grid of settings, one run folder each (resumable)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="a config key and its values; repeat for more keys")
    p.add_argument("--seeds", default=None, help="comma-separated seeds, one run per seed and setting")
    p.add_argument("--config", default=None, help="YAML config file every run starts from")
    p.add_argument("--out", required=True, help="the sweep's folder; run it again to resume")
    p.add_argument("--dry-run", action="store_true", help="check every config and list the runs, train nothing")
    p.add_argument("overrides", nargs="*", help="key=value overrides shared by every run")
    p.set_defaults(func=_run)
