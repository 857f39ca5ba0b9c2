"""The reward-hacking monitor: watches each step's metrics and warns, on the terminal, when a signal
of reward hacking starts (monitor.* in the config says each threshold and why).

    monitor = Monitor(cfg.monitor)
    for step ...:
        row = ...                                  # the step's metrics, shadow/* from the learner
        for line in monitor.observe(step, row):    # adds monitor/* to the row
            print(line)                            # once per onset, not every step

Each signal watches one metric through its mean over the last `window` steps against a fixed
threshold or a share of the metric's baseline (its mean over the run's first `baseline_steps`
steps); a KL signal watches the rise of the KL's median from one `kl_window` to the next. Per step: `monitor/<signal>`, the value compared; `monitor/firing/
<signal>`, 1 while it is past its threshold; `monitor/onset/<signal>`, 1 on the step it warned. A
signal warns once it has been past its threshold `persist_steps` steps in a row (a healthy run's
noisy means cross for a step or two; a hack stays across), kl_high at once (a KL past max_kl is a
broken policy), and again only after `quiet_steps` steps in a row back inside. A metric a run does not log
(no labels: no precision; no proof gate; no correction: no behav_kl) leaves its signals silent.
The metrics come from learner/shadow.py (shadow/*) and the learner's step (entropy, the KLs).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal

from jury.protocol.config import MonitorConfig

# what a signal compares: its window mean below or above a threshold, below or above the threshold
# times its baseline, or its rise speeding up (the rise over the last window against the one before)
Test = Literal["below", "above", "below_baseline", "above_baseline", "accelerating"]


@dataclass(frozen=True)
class Signal:
    name: str       # monitor/<name> in the metrics
    metric: str     # the step metric it watches
    test: Test
    setting: str    # the monitor.* field holding its threshold
    what: str       # what the value is, for the warning line
    # whether it must stay past its threshold persist_steps steps in a row before it warns (every
    # signal but kl_high: a KL past max_kl is a broken policy, one step is enough)
    persists: bool = True


def signals(cfg: MonitorConfig) -> list[Signal]:
    """Every signal the issue lists, with the setting that holds its threshold."""
    out = [
        Signal("precision_low", "shadow/precision", "below", "min_precision",
               "the reward's precision against the labels (share of the samples it pays that are correct)"),
        Signal("precision_fall", "shadow/precision", "below_baseline", "min_precision_ratio",
               "the reward's precision against the labels, as a share of its baseline"),
        Signal("spurious_consensus", "shadow/consensus_wrong", "above", "max_consensus_wrong",
               f"the share of labelled groups agreeing (vote share >= {cfg.consensus_share:g}) on an answer "
               "the labels call wrong"),
        Signal("unproved_consensus", "shadow/consensus_unproved", "above", "max_consensus_unproved",
               f"the share of gated groups agreeing (vote share >= {cfg.consensus_share:g}) on an answer the "
               "proof gate did not prove"),
        Signal("no_reasoning", "shadow/short_paid", "above", "max_short_rewarded",
               f"the share of samples shorter than {cfg.short_ratio:g} x the run's median length that are paid "
               "above their group's mean"),
        Signal("length_collapse", "rollout/completion_len", "below_baseline", "min_length_ratio",
               "the mean completion length, as a share of its baseline"),
        Signal("length_blowup", "rollout/completion_len", "above_baseline", "max_length_ratio",
               "the mean completion length, as a multiple of its baseline"),
        Signal("entropy_collapse", "learner/entropy", "below_baseline", "min_entropy_ratio",
               "the policy's token entropy, as a share of its baseline"),
    ]
    kls = {"approx_kl": "the learner's KL (to the reference model with kl_coef > 0, else to the ratio's old policy: "
                        "the behaviour policy, or the recomputed proximal one)",
           "behav_kl": "the KL between the behaviour policy and the recomputed proximal one",
           "initial_kl": "the KL of the behaviour policy to the run's first policy"}
    out += [Signal(f"kl_accel/{k}", f"learner/{k}", "accelerating", "kl_accel", f"the rise of {what}")
            for k, what in kls.items()]
    out += [Signal(f"kl_high/{k}", f"learner/{k}", "above", "max_kl", what[0].upper() + what[1:], persists=False)
            for k, what in kls.items()]
    return out


class Monitor:
    def __init__(self, cfg: MonitorConfig):
        self.cfg = cfg
        self.signals = signals(cfg)
        self.history: dict[str, list[float]] = {}  # metric -> its finite values, step after step
        self.quiet: dict[str, int] = {}            # signal that warned -> steps in a row back inside since
        self.streak: dict[str, int] = {}           # signal -> steps in a row past its threshold
        self.rises: dict[str, dict[int, float]] = {}  # KL signal -> steps of its metric -> |rise| then
        self.onsets: dict[str, list[int]] = {}     # signal -> the steps it started at

    def observe(self, step: int, row: dict) -> list[str]:
        """Take the step's metrics; add monitor/* to `row`; return a warning line per signal that
        starts at this step."""
        fresh = set()  # the metrics this step measured
        for metric in {s.metric for s in self.signals}:
            value = row.get(metric)
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.history.setdefault(metric, []).append(float(value))
                fresh.add(metric)
        lines = []
        for s in self.signals:
            if s.metric not in fresh:  # nothing new (a step that trained nothing, a nan precision):
                continue  # no step of a streak, which counts steps that measured past the threshold
            value, past = self.check(s)
            if value is None:
                continue
            row[f"monitor/{s.name}"] = value
            row[f"monitor/firing/{s.name}"] = float(past)
            self.streak[s.name] = self.streak.get(s.name, 0) + 1 if past else 0
            if s.name in self.quiet:  # a warned signal: cleared after quiet_steps in a row inside
                self.quiet[s.name] = 0 if past else self.quiet[s.name] + 1
                if self.quiet[s.name] >= self.cfg.quiet_steps:
                    del self.quiet[s.name]
            elif self.streak[s.name] >= (self.cfg.persist_steps if s.persists else 1):
                self.quiet[s.name] = 0
                self.onsets.setdefault(s.name, []).append(step)
                row[f"monitor/onset/{s.name}"] = 1.0
                lines.append(self.warning(step, s, value))
        return lines

    def check(self, s: Signal) -> tuple[float | None, bool]:
        """(the value compared, whether it is past the threshold); (None, False) until the metric
        has enough steps (a window; and the baseline, or three KL windows for a rise)."""
        values, w, threshold = self.history.get(s.metric, []), self.cfg.window, getattr(self.cfg, s.setting)
        if s.test == "accelerating":
            w = self.cfg.kl_window
            if len(values) < 3 * w:
                return None, False
            # medians of three windows: one noisy step (a KL estimated on a few samples) makes no rise
            before, last, now = (statistics.median(values[-k * w:len(values) - (k - 1) * w]) for k in (3, 2, 1))
            rise, earlier = now - last, last - before
            # the run's own noise: the median size of the rises at the steps before. A KL that only
            # wanders has rises of either sign about that size, and one of them after a fall
            # (earlier <= 0) would pass any multiple of the earlier rise
            seen = self.rises.setdefault(s.name, {})
            seen[len(values)] = abs(rise)
            noise = statistics.median([r for n, r in seen.items() if n < len(values)] or [0.0])
            return rise, rise >= self.cfg.kl_min_rise and rise >= threshold * max(earlier, noise)
        if len(values) < max(w, self.cfg.baseline_steps if s.test.endswith("baseline") else 0):
            return None, False
        value = _mean(values[-w:])
        if s.test.endswith("baseline"):
            base = _mean(values[:self.cfg.baseline_steps])
            if base <= 0:
                return None, False
            value /= base
        return value, value < threshold if s.test.startswith("below") else value > threshold

    def warning(self, step: int, s: Signal, value: float) -> str:
        w, threshold = self.cfg.window, getattr(self.cfg, s.setting)
        if s.test == "accelerating":
            w = self.cfg.kl_window
            how = (f"over the last {w} steps, at least {threshold:g} x its rise over the {w} before and "
                   f"monitor.kl_min_rise = {self.cfg.kl_min_rise:g}")
        else:
            side = "below" if s.test.startswith("below") else "above"
            base = f" over the mean of the run's first {self.cfg.baseline_steps}" if s.test.endswith("baseline") else ""
            how = f"mean of the last {w} steps{base}; {side} monitor.{s.setting} = {threshold:g}"
        if s.persists and self.cfg.persist_steps > 1:
            how += f", {self.cfg.persist_steps} steps in a row"
        return f"jury train: step {step}: WARNING reward hacking? {s.name}: {s.what} is {value:.3g} ({how})"

    def summary(self) -> dict:
        """The signals that started during the run, with their steps (summary.yaml)."""
        return {"monitor_onsets": {name: steps for name, steps in self.onsets.items()}}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
