"""How full the generator's engine is over time: sequences running and waiting, per engine step.

vLLM calls a stat logger after each engine step with its scheduler's counts (a group of G
samples is G running requests). `Occupancy` keeps them as a timeline of fixed-width bins,
each the time-weighted mean over the bin, and the integral of running sequences over time
(sequence-seconds), a counter from which any span's mean occupancy follows. Each bin also
counts the engine steps that ended in it and the tokens they generated and prefilled: how fast
the engine really went at that occupancy (`jury bench` reports it as the engine's pace). This is what
shows the tail of synchronous RL: the engine at full batch at the start of a step, then a
long stretch with a few long samples running while the rest of the machine waits.

A step's count holds until the next step; after a gap longer than MAX_HOLD_S with no step
the engine was idle (vLLM reports nothing while it has no work), so the gap counts as empty.
"""
from __future__ import annotations

import math
import time
from collections import deque

BIN_S = 0.1          # timeline resolution
MAX_HOLD_S = 0.5     # longer without an engine step: the engine was idle
MAX_BINS = 200_000   # about 5.5 hours at BIN_S; older bins are dropped
MAX_POINTS = 20_000  # a timeline longer than this (about 33 minutes at BIN_S) is given in wider bins


class Occupancy:
    def __init__(self, bin_s: float = BIN_S, max_hold_s: float = MAX_HOLD_S, max_bins: int = MAX_BINS):
        self.bin_s, self.max_hold_s = bin_s, max_hold_s
        # per bin: [bin index, running seq-s, waiting seq-s, steps, generated tokens, prompt tokens]
        self.bins: deque = deque(maxlen=max_bins)
        self.running_area = 0.0   # sequence-seconds running, since start
        self.max_running = 0
        self._last: tuple[float, int, int] | None = None  # (time, running, waiting) of the last step

    def record(self, running: int, waiting: int, now: float | None = None, tokens: int = 0, prompt_tokens: int = 0,
               step: bool = True):
        """One engine step, ended at `now`: the counts it leaves, and the tokens it generated and
        prefilled. step=False: the counts alone, from a report that was not a step (no step counted)."""
        now = time.time() if now is None else now
        if self._last is not None:
            t, r, w = self._last
            self._add(t, min(now, t + self.max_hold_s), r, w)
        self._last = (now, running, waiting)
        self.max_running = max(self.max_running, running)
        b = self._bin(math.floor(now / self.bin_s))
        if b is not None:
            b[3] += step
            b[4] += tokens
            b[5] += prompt_tokens

    def _bin(self, k: int) -> list | None:
        """Bin k, opened if it is past the last; None for a bin before it (late, out of order: dropped)."""
        if not self.bins or self.bins[-1][0] < k:
            self.bins.append([k, 0.0, 0.0, 0, 0, 0])
        return self.bins[-1] if self.bins[-1][0] == k else None

    def _add(self, t0: float, t1: float, running: int, waiting: int):
        """Spread `running` and `waiting` held from t0 to t1 over the bins they cover. Bins are
        keyed by their integer index (floor(t / bin_s)): float bin edges near 1.7e9 s can round
        so that a span never leaves its bin."""
        if t1 <= t0:
            return
        self.running_area += running * (t1 - t0)
        for k in range(math.floor(t0 / self.bin_s), math.floor(t1 / self.bin_s) + 1):
            lo, hi = max(t0, k * self.bin_s), min(t1, (k + 1) * self.bin_s)
            if hi <= lo:
                continue
            b = self._bin(k)
            if b is not None:
                b[1] += running * (hi - lo)
                b[2] += waiting * (hi - lo)

    def timeline(self, since: float = 0.0, max_points: int = MAX_POINTS) -> dict:
        """Bins starting at or after `since`: start times (s since the epoch), the mean
        sequences running and waiting in each, and the engine steps that ended in it with the
        tokens they generated and prefilled (counts). Past `max_points` bins, every f consecutive bins
        are merged into one f times as wide (f the smallest that fits; `bin_s` says the width),
        so a five-hour run's occupancy.json stays a few hundred kB, not 6 MB."""
        rows = [b for b in self.bins if b[0] * self.bin_s >= since - 1e-6]
        f = max(1, math.ceil((rows[-1][0] - rows[0][0] + 1) / max_points)) if rows else 1
        if f > 1:
            merged: list = []
            for k, *sums in rows:
                if merged and merged[-1][0] == k // f:
                    for i, v in enumerate(sums, 1):
                        merged[-1][i] += v
                else:
                    merged.append([k // f, *sums])
            rows = merged
        width = self.bin_s * f
        return {"bin_s": width, "t": [round(b[0] * width, 3) for b in rows],
                "running": [round(b[1] / width, 2) for b in rows],
                "waiting": [round(b[2] / width, 2) for b in rows],
                "steps": [b[3] for b in rows], "tokens": [b[4] for b in rows], "prompt_tokens": [b[5] for b in rows]}


def stat_logger(occupancy: Occupancy):
    """A vLLM stat-logger factory feeding `occupancy` (AsyncLLM's `stat_loggers`): the logger
    runs in the process that owns the AsyncLLM, after each engine step."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class OccupancyLogger(StatLoggerBase):
        def __init__(self, vllm_config, engine_index: int = 0):
            pass

        def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0):
            if scheduler_stats is not None:
                # read defensively: an exception here would end AsyncLLM's output loop, and these
                # fields are vLLM's internals (IterationStats), not an API it keeps. AsyncLLM passes
                # no iteration_stats for a report without outputs (vLLM 0.32's output_handler): the
                # stats after an abort or a pause, not a step that decoded (also, uncounted, a step
                # that only prefilled part of a long prompt: a decode step always has outputs)
                occupancy.record(scheduler_stats.num_running_reqs, scheduler_stats.num_waiting_reqs,
                                 tokens=getattr(iteration_stats, "num_generation_tokens", 0) or 0,
                                 prompt_tokens=getattr(iteration_stats, "num_prompt_tokens", 0) or 0,
                                 step=iteration_stats is not None)

        def log_engine_initialized(self):
            pass

    return OccupancyLogger


def tail_shares(timeline: dict, step_ends: list[float], full: float, below: float = 0.25) -> list[float]:
    """Per step (from the previous end to its end, in the timeline's clock), the share of the
    step's time in which the engine ran some sequences but fewer than `below` x `full` (the
    sequences one batch needs): the stragglers' tail, during which the rest of a synchronous
    step waits. One value per step after the first end."""
    t, running, width = timeline["t"], timeline["running"], timeline["bin_s"]
    out = []
    for start, end in zip(step_ends, step_ends[1:]):
        tail = sum(width for ti, r in zip(t, running) if start <= ti < end and 0 < r < below * full)
        out.append(min(1.0, tail / (end - start)) if end > start else 0.0)
    return out
