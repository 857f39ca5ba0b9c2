"""Experiment trackers fed beside metrics.jsonl, which stays the record (`tracking: [tensorboard, wandb]`).

    trackers = open_trackers(cfg, run_dir, first_step)  # the run's config goes in here
    for step ...:
        metrics.log(step, row)                           # MetricsLog: metrics.jsonl, then trackers.log(step, row)
    trackers.summary(summary)                            # summary.yaml's dict, once the run is done
    trackers.files(pngs)                                 # the run's plots
    trackers.close()                                     # always; W&B marks a run without a summary failed

Names: every metric keeps its metrics.jsonl name. A nested dict (`staleness/hist`,
`verifier/verdicts`) becomes one scalar per key under its name (`staleness/hist/0`,
`verifier/verdicts/correct`), and a dict whose keys are all integers, a histogram over
integers, is also written as a histogram under its own name (`staleness/hist`), one bucket
per integer. Values: ints, floats, bools (as 0 or 1) and numpy or torch scalars; NaN and
inf go as they are, as metrics.jsonl holds them (both trackers store and read them back);
strings, None and lists are skipped. TensorBoard stores scalars as float32 (exact integers up to 2**24).

Where: TensorBoard writes run_dir/tensorboard/; W&B writes run_dir/wandb/ and uploads when
online (wandb.mode). A resumed run retrains the steps after its checkpoint: TensorBoard
hides the old events from that step on (purge_step), and W&B, whose steps only go up, gets
a new run named `<run folder>@<step>` in the run folder's group.

Both packages are imported only when named in `tracking` (extra `track` in pyproject).
"""
from __future__ import annotations

import json
import logging
import math
import netrc
import os
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import yaml

from jury.protocol.config import RunConfig
from jury.protocol.config_load import to_dict

log = logging.getLogger(__name__)


class Tracker(Protocol):
    """One experiment tracker, started with the run's config (TRACKERS[name](run_dir, cfg, first_step)):

        for step, row in ...: tracker.log(step, row)  # via MetricsLog.log
        tracker.summary(summary); tracker.files(pngs)  # once the run is done
        tracker.close()                                # always
    """

    def log(self, step: int, row: dict) -> None: ...      # one metrics.jsonl row
    def summary(self, values: dict) -> None: ...          # summary.yaml's dict
    def files(self, paths: list[Path]) -> None: ...       # PNGs as images; other files as text or files
    def close(self) -> None: ...


def open_trackers(cfg: RunConfig, run_dir: Path, first_step: int = 0) -> Trackers:
    """The trackers `cfg.tracking` names, started with the run's config; a missing package is an ImportError."""
    opened: list = []
    try:
        for name in cfg.tracking:
            opened.append(TRACKERS[name](Path(run_dir), cfg, first_step))
    except BaseException:
        Trackers(opened).close()
        raise
    return Trackers(opened)


class Trackers:
    """The run's trackers as one: each call goes to every tracker."""

    def __init__(self, trackers: list):
        self.trackers = trackers

    def __len__(self) -> int:
        return len(self.trackers)

    def log(self, step: int, row: dict) -> None:
        for t in self.trackers:
            t.log(step, row)

    def summary(self, values: dict) -> None:
        for t in self.trackers:
            t.summary(values)

    def files(self, paths: list[Path]) -> None:
        for t in self.trackers:
            t.files([Path(p) for p in paths])

    def close(self) -> None:
        """Close every tracker, even after one fails to; the first failure is raised after."""
        error = None
        for t in self.trackers:
            try:
                t.close()
            except Exception as e:  # noqa: PERF203  (the others must still be closed)
                error = error or e
        self.trackers = []
        if error:
            raise error


# ── what a row becomes ──
def scalars(row: dict, prefix: str = "") -> tuple[dict[str, float], dict[str, dict[int, float]]]:
    """A metrics row as (name -> number, name -> {integer: count}); see the module docstring."""
    numbers: dict[str, float] = {}
    hists: dict[str, dict[int, float]] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            inner, inner_hists = scalars(value, name + "/")
            numbers.update(inner)
            hists.update(inner_hists)
            counts = _integer_counts(value)
            if counts:
                hists[name] = counts
        elif (x := _number(value)) is not None:
            numbers[name] = x
    return numbers, hists


def _number(value) -> float | None:
    if isinstance(value, (bool, int, float)):
        return float(value)
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:  # numpy or torch scalar
        return _number(value.item())
    return None


def _integer_counts(d: dict) -> dict[int, float] | None:
    """{0: 5, 1: 3} (or {"0": 5, ...}, as read back from JSON) -> {0: 5.0, 1: 3.0}; None if not a histogram."""
    try:
        counts = {int(k): _number(v) for k, v in d.items()}
    except (TypeError, ValueError):
        return None
    if not counts or any(v is None or not math.isfinite(v) or v < 0 for v in counts.values()):
        return None
    return counts


def _buckets(counts: dict[int, float]) -> tuple[list[int], list[float]]:
    """Every integer from the smallest to the largest key, with its count (0 where absent)."""
    keys = range(min(counts), max(counts) + 1)
    return list(keys), [counts.get(k, 0.0) for k in keys]


def _code_block(data) -> str:
    """YAML as a Markdown code block (TensorBoard's text tab renders Markdown)."""
    text = yaml.safe_dump(data, sort_keys=False) if not isinstance(data, str) else data
    return "\n".join("    " + line for line in text.splitlines())


# ── TensorBoard ──
class TensorBoardTracker:
    """Event files in run_dir/tensorboard/ (torch's SummaryWriter, which needs the tensorboard package).

    Scalars and histograms per step; the config and the summary as text (`config`, `summary`);
    PNGs as images (`plots/<name>`), other files as text (`files/<name>`).
    """

    def __init__(self, run_dir: Path, cfg: RunConfig, first_step: int = 0):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ImportError(f"tracking: tensorboard needs the tensorboard package "
                              f"(pip install 'jury-rl[track]'): {e}") from None
        self.dir = run_dir / "tensorboard"
        # purge_step: a resumed run retrains from first_step; readers then drop older events from there on
        self.writer = SummaryWriter(str(self.dir), purge_step=first_step or None, flush_secs=30)
        self.last_step = first_step
        self.writer.add_text("config", _code_block(to_dict(cfg)), global_step=first_step)

    def log(self, step: int, row: dict) -> None:
        numbers, hists = scalars({k: v for k, v in row.items() if k != "step"})
        for name, x in numbers.items():
            self.writer.add_scalar(name, x, global_step=step)
        for name, counts in hists.items():
            keys, n = _buckets(counts)
            total = sum(n)
            if total == 0:
                continue
            present = [k for k, c in zip(keys, n) if c > 0]
            self.writer.add_histogram_raw(
                name, min=min(present), max=max(present), num=total, sum=sum(k * c for k, c in zip(keys, n)),
                sum_squares=sum(k * k * c for k, c in zip(keys, n)),
                bucket_limits=[k + 0.5 for k in keys], bucket_counts=n, global_step=step)
        self.last_step = step

    def summary(self, values: dict) -> None:
        self.writer.add_text("summary", _code_block(values), global_step=self.last_step)

    def files(self, paths: list[Path]) -> None:
        for p in paths:
            if p.suffix.lower() == ".png":
                import numpy as np
                from PIL import Image

                with Image.open(p) as im:
                    pixels = np.asarray(im.convert("RGB"))  # (H, W, 3) uint8
                self.writer.add_image(f"plots/{p.stem}", pixels, global_step=self.last_step, dataformats="HWC")
            else:
                self.writer.add_text(f"files/{p.name}", _code_block(p.read_text(encoding="utf-8")),
                                     global_step=self.last_step)

    def close(self) -> None:
        self.writer.close()


# ── Weights & Biases ──
def wandb_mode(mode: str, env=None) -> str:
    """auto -> "online" where a user has logged in (WANDB_API_KEY, or the W&B host in the netrc
    file), else "offline"; WANDB_MODE=online|offline|disabled in the environment decides auto too."""
    env = os.environ if env is None else env
    if mode != "auto":
        return mode
    if env.get("WANDB_MODE") in ("online", "offline", "disabled"):
        return env["WANDB_MODE"]
    if env.get("WANDB_API_KEY"):
        return "online"
    host = urlsplit(env.get("WANDB_BASE_URL") or "https://api.wandb.ai").netloc
    path = env.get("NETRC") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".netrc")
    try:
        creds = netrc.netrc(path).authenticators(host)  # (login, account, password): the key is the password
        return "online" if creds and creds[2] else "offline"
    except FileNotFoundError:
        return "offline"
    except (netrc.NetrcParseError, OSError) as e:
        log.warning("wandb: cannot read %s (%s); running offline", path, e)
        return "offline"


class WandbTracker:
    """A W&B run in run_dir/wandb/ (offline) or on the W&B server (online).

    The config is the run's config; history rows are the metrics (histograms as wandb.Histogram);
    the summary goes into the run's summary; files are saved with the run, PNGs also logged as
    images (`plots/<name>`) at the last step.
    """

    def __init__(self, run_dir: Path, cfg: RunConfig, first_step: int = 0):
        try:
            import wandb
        except ImportError as e:
            raise ImportError(f"tracking: wandb needs the wandb package (pip install 'jury-rl[track]'): {e}") from None
        self.wandb = wandb
        self.mode = wandb_mode(cfg.wandb.mode)
        name = run_dir.resolve().name
        self.run = wandb.init(
            project=cfg.wandb.project, entity=cfg.wandb.entity or None, dir=str(run_dir), mode=self.mode,
            name=f"{name}@{first_step}" if first_step else name, group=name, job_type="train",
            config=to_dict(cfg),
            # console off: wrapping the driver's stdout would fight the progress bar it redraws;
            # symlink off: saved files are hard links or copies, so an offline run keeps them to sync later
            settings=wandb.Settings(console="off", symlink=False))
        self.last_step = first_step
        self.summarised = False

    def log(self, step: int, row: dict) -> None:
        numbers, hists = scalars({k: v for k, v in row.items() if k != "step"})
        data: dict = dict(numbers)
        for name, counts in hists.items():
            keys, n = _buckets(counts)
            data[name] = self.wandb.Histogram(np_histogram=(n, [keys[0] - 0.5] + [k + 0.5 for k in keys]))
        self.run.log(data, step=step)
        self.last_step = step

    def summary(self, values: dict) -> None:
        numbers, _ = scalars(values)
        text = {k: v for k, v in values.items() if isinstance(v, str)}
        # a nested value (the monitor's onsets: signal -> steps) as its JSON text, under its own key
        text.update({k: json.dumps(v) for k, v in values.items() if isinstance(v, (dict, list))})
        self.run.summary.update({**numbers, **text})
        self.summarised = True

    def files(self, paths: list[Path]) -> None:
        images = {}
        for p in paths:
            self.run.save(str(p.resolve()), base_path=str(p.resolve().parent), policy="now", glob=False)
            if p.suffix.lower() == ".png":
                images[f"plots/{p.stem}"] = self.wandb.Image(str(p))
        if images:
            self.run.log(images, step=self.last_step)

    def close(self) -> None:
        self.run.finish(exit_code=0 if self.summarised else 1)
        # finish() returns before wandb-core has written the whole run file; teardown waits for it
        # and ends wandb's service processes, so none outlive the run (the process's other W&B
        # runs, if any, end with it: train() is meant to be the whole program)
        self.wandb.teardown()


TRACKERS: dict[str, type] = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker}
