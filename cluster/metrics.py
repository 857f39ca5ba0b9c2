"""metrics.jsonl: one line per learner step, names like `learner/loss`, `reward/mean`.

Nested dicts (histograms, verdict counts) stay nested in the JSON line; the progress
bar shows the few numbers a person watches. Each row also goes to the run's experiment
trackers (cluster/tracking.py), if any.

Records are whole lines or nothing (JsonlFile): a write that fails (a full disk) is cut back to
where the file was, and the run stops naming the path and the free space. A crash can still
leave half a line at the end (the process killed mid-write): every reader (read_jsonl) skips a
torn last line with a warning naming the file and the line.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path

from jury.cluster.errors import DiskFull

log = logging.getLogger(__name__)


class JsonlFile:
    """An append-only JSON-lines file whose records are written whole or not at all."""

    def __init__(self, path: Path):
        self.path = Path(path)
        # unbuffered: a failed write leaves nothing behind in a buffer to be flushed, torn, later
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, rows: list[dict]):
        if not rows:
            return
        data = "".join(json.dumps(r, default=_plain) + "\n" for r in rows).encode("utf-8")
        start = os.lseek(self.fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            os.fsync(self.fd)
        except OSError as e:  # cut back to the last whole record, then stop saying where and why
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, start)
            raise DiskFull(f"cannot write {self.path} ({e.strerror or e}); "
                           f"{free_space(self.path)} free there") from None

    def close(self):
        with contextlib.suppress(OSError):
            os.close(self.fd)


def free_space(path: Path) -> str:
    for p in (Path(path), *Path(path).parents):
        if p.exists():
            return f"{shutil.disk_usage(p).free / 2**20:.1f} MiB"
    return "unknown"


def read_jsonl(path) -> list[dict]:
    """Every record of a JSON-lines file; a last line cut in half (a crash mid-write) is skipped
    with a warning naming the file and the line. A bad line anywhere else is an error naming both."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if all(not rest.strip() for rest in lines[n:]):
                log.warning("%s:%d: the last record is cut short (a crash while writing it?); skipped", path, n)
                break
            raise ValueError(f"{path}:{n}: not a JSON record ({e.msg})") from None
        if not isinstance(row, dict):  # valid JSON, but no record: every line this project writes is an object
            raise ValueError(f"{path}:{n}: not a record (a JSON object), got {type(row).__name__}: {line.strip()[:80]}")
        rows.append(row)
    return rows


class MetricsLog:
    def __init__(self, run_dir: Path, total_steps: int, progress: bool = True, initial: int = 0, trackers=None,
                 elapsed_s: float = 0.0):
        """`elapsed_s`: the time_s a resumed run's last kept row has; its clock goes on from there (the
        time the run was down is not counted), so its rows' time_s never step back."""
        from tqdm import tqdm

        self.trackers = trackers  # cluster.tracking.Trackers; the caller closes them after the summary
        self.path = Path(run_dir) / "metrics.jsonl"
        self.file = JsonlFile(self.path)
        self.t0 = time.time() - elapsed_s
        self.bar = tqdm(total=total_steps, initial=initial, desc="train", unit="step", disable=not progress,
                        dynamic_ncols=True)

    def log(self, step: int, metrics: dict):
        row = {"step": step, "time_s": round(time.time() - self.t0, 3), **metrics}
        self.file.append([row])
        if self.trackers:
            self.trackers.log(step, row)
        self.bar.update(1)
        self.bar.set_postfix_str(
            f"reward {_fmt(metrics.get('reward/mean'))} pass {_fmt(metrics.get('reward/pass_rate'))} "
            f"stale {_fmt(metrics.get('staleness/mean'), 1)} tok/s {_fmt(metrics.get('perf/tokens_per_s'), 0)}")

    def say(self, line: str):
        """A line for the person watching the run (stderr), above the progress bar, not through it."""
        self.bar.write(line, file=sys.stderr)

    def close(self):
        self.bar.close()
        self.file.close()


def read_metrics(run_dir) -> list[dict]:
    return read_jsonl(Path(run_dir) / "metrics.jsonl")


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
