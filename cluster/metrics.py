"""metrics.jsonl: one line per learner step, names like `learner/loss`, `reward/mean`.

Nested dicts (histograms, verdict counts) stay nested in the JSON line; the progress
bar shows the few numbers a person watches. Each row also goes to the run's experiment
trackers (cluster/tracking.py), if any.
"""
from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from pathlib import Path


class MetricsLog:
    def __init__(self, run_dir: Path, total_steps: int, progress: bool = True, initial: int = 0, trackers=None):
        from tqdm import tqdm

        self.trackers = trackers  # cluster.tracking.Trackers; the caller closes them after the summary
        self.path = Path(run_dir) / "metrics.jsonl"
        self.file = open(self.path, "a", encoding="utf-8")
        self.t0 = time.time()
        self.bar = tqdm(total=total_steps, initial=initial, desc="train", unit="step", disable=not progress,
                        dynamic_ncols=True)

    def log(self, step: int, metrics: dict):
        row = {"step": step, "time_s": round(time.time() - self.t0, 3), **metrics}
        self.file.write(json.dumps(row, default=_plain) + "\n")
        self.file.flush()
        if self.trackers:
            self.trackers.log(step, row)
        self.bar.update(1)
        self.bar.set_postfix_str(
            f"reward {_fmt(metrics.get('reward/mean'))} pass {_fmt(metrics.get('reward/pass_rate'))} "
            f"stale {_fmt(metrics.get('staleness/mean'), 1)} tok/s {_fmt(metrics.get('perf/tokens_per_s'), 0)}")

    def close(self):
        self.bar.close()
        self.file.close()


def read_metrics(run_dir) -> list[dict]:
    with open(Path(run_dir) / "metrics.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _fmt(x, digits=2):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def _plain(x):
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"{type(x)} is not JSON")


@contextlib.contextmanager
def stage(what: str, show: bool = True):
    """A start-up stage on stderr: `jury train: <what> ...`, then `... ready (N s)` (or nothing)."""
    t0 = time.perf_counter()
    if show:
        print(f"jury train: {what} ...", file=sys.stderr, flush=True)
    yield
    if show:
        print(f"jury train: {what} ready ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
