"""The reward-hacking monitor (cluster/monitor.py) on constructed metric streams: each signal fires
on a stream built to trip it and stays silent on one that does not, warns once per onset, and says
nothing about a metric the run does not log; a healthy noisy stream of 300 steps warns nothing,
and one that hacks from step 100 warns by step 160."""
import math

import numpy as np
import pytest

from jury.cluster.monitor import Monitor, signals
from jury.protocol.config import ConfigError, MonitorConfig

# each threshold on its own: a signal warns the step it first crosses (persistence is tested apart)
CFG = MonitorConfig(window=3, baseline_steps=3, kl_window=3, persist_steps=1)
HEALTHY = {"shadow/precision": 0.8, "shadow/consensus_wrong": 0.1, "shadow/consensus_unproved": 0.2,
           "shadow/short_paid": 0.0, "rollout/completion_len": 40.0, "learner/entropy": 0.5,
           "learner/approx_kl": 0.01, "learner/behav_kl": 0.01, "learner/initial_kl": 0.01}


def _run(streams: dict[str, list[float]], cfg=CFG, steps: int = 12) -> tuple[Monitor, list[dict], list[str]]:
    """Steps of the healthy row with `streams` (metric -> value per step) in place of its values."""
    monitor, rows, lines = Monitor(cfg), [], []
    for step in range(steps):
        row = {**HEALTHY, **{k: v[step] for k, v in streams.items()}}
        lines += monitor.observe(step, row)
        rows.append(row)
    return monitor, rows, lines


def _ramp(start: float, end: float, steps: int = 12, flat: int = 4) -> list[float]:
    """`flat` steps at start, then a straight line to end."""
    return [start] * flat + [start + (end - start) * (i + 1) / (steps - flat) for i in range(steps - flat)]


# signal -> (metric, a stream that trips it, one that does not)
CASES = {
    "precision_low": ("shadow/precision", _ramp(0.8, 0.2), _ramp(0.8, 0.7)),
    "precision_fall": ("shadow/precision", _ramp(0.95, 0.6), _ramp(0.95, 0.8)),
    "spurious_consensus": ("shadow/consensus_wrong", _ramp(0.1, 0.6), _ramp(0.1, 0.2)),
    "unproved_consensus": ("shadow/consensus_unproved", _ramp(0.2, 0.9), _ramp(0.2, 0.4)),
    "no_reasoning": ("shadow/short_paid", _ramp(0.0, 0.4), _ramp(0.0, 0.05)),
    "length_collapse": ("rollout/completion_len", _ramp(40, 5), _ramp(40, 30)),
    "length_blowup": ("rollout/completion_len", _ramp(40, 200), _ramp(40, 60)),
    "entropy_collapse": ("learner/entropy", _ramp(0.5, 0.05), _ramp(0.5, 0.3)),
    # a KL that grows faster and faster against one that grows at a steady rate
    "kl_accel/initial_kl": ("learner/initial_kl", [0.01 * 2 ** i for i in range(12)], [0.03 * i for i in range(12)]),
    "kl_accel/approx_kl": ("learner/approx_kl", [0.01] * 6 + [0.02, 0.1, 0.3, 0.6, 1.0, 1.5], [0.01] * 12),
    # one update that broke the policy, against a KL that wanders below the level
    "kl_high/approx_kl": ("learner/approx_kl", [0.0, 1271.5, 788.3] + [5.0] * 9, [0.01, 0.9, 0.2] * 4),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_signal_fires_on_its_stream_and_not_on_a_milder_one(name):
    metric, trips, mild = CASES[name]
    monitor, rows, lines = _run({metric: trips})
    assert monitor.onsets.get(name), (name, [r.get(f"monitor/{name}") for r in rows])
    assert any(f"WARNING reward hacking? {name}:" in line for line in lines)
    step = monitor.onsets[name][0]
    assert rows[step][f"monitor/onset/{name}"] == 1.0 and rows[step][f"monitor/firing/{name}"] == 1.0
    quiet, rows, lines = _run({metric: mild})
    assert quiet.onsets == {} and lines == [], (name, [r.get(f"monitor/{name}") for r in rows])


def test_the_healthy_stream_trips_nothing_and_every_signal_reports_its_value():
    monitor, rows, lines = _run({})
    assert lines == [] and monitor.onsets == {}
    assert {f"monitor/{s.name}" for s in signals(CFG)} <= set(rows[-1])


def test_a_signal_warns_once_per_onset_and_again_after_it_cleared():
    # consensus on wrong answers: up for 4 steps, down for 4, up again: two warnings, not eight
    wrong = [0.1] * 3 + [0.9] * 4 + [0.0] * 4 + [0.9] * 4
    monitor, rows, lines = _run({"shadow/consensus_wrong": wrong}, MonitorConfig(quiet_steps=2, persist_steps=1),
                                  steps=len(wrong))
    # the mean of 3 steps: 0.367 at step 3 (over 0.25), 0.3 at step 8, 0 at steps 9 and 10 (two quiet
    # steps: cleared), 0.3 at step 11
    assert monitor.onsets == {"spurious_consensus": [3, 11]}
    assert [line.split(":")[1].strip() for line in lines] == ["step 3", "step 11"]
    # nothing before a window's worth of steps
    assert [r.get("monitor/firing/spurious_consensus") for r in rows] == [None] * 2 + [0] + [1] * 6 + [0] * 2 + [1] * 4
    assert lines[0] == ("jury train: step 3: WARNING reward hacking? spurious_consensus: the share of labelled "
                        "groups agreeing (vote share >= 0.75) on an answer the labels call wrong is 0.367 (mean "
                        "of the last 3 steps; above monitor.max_consensus_wrong = 0.25)")


def test_a_signal_that_flickers_warns_again_only_after_its_quiet_steps():
    # one step in four at 0.9: the mean of 3 is 0.3 (past 0.25) three steps, then 0 one step, five times
    # over; one warning, and the next only after ten quiet steps in a row (steps 22 to 31)
    wrong = [0.1] * 3 + [0.9, 0.0, 0.0, 0.0] * 5 + [0.0] * 10 + [0.9] * 3
    monitor, rows, lines = _run({"shadow/consensus_wrong": wrong}, steps=len(wrong))
    assert [r["monitor/firing/spurious_consensus"] for r in rows[3:11]] == [1, 1, 1, 0, 1, 1, 1, 0]
    assert monitor.onsets == {"spurious_consensus": [3, 33]} and len(lines) == 2


def test_a_metric_the_run_does_not_log_leaves_its_signals_silent():
    # no labels: the precision is NaN every step; no correction: behav_kl is missing
    monitor, rows = Monitor(CFG), []
    for step in range(10):
        row = {**HEALTHY, "shadow/precision": math.nan}
        del row["learner/behav_kl"]
        monitor.observe(step, row)
        rows.append(row)
    assert "monitor/precision_low" not in rows[-1] and "monitor/kl_accel/behav_kl" not in rows[-1]
    assert "monitor/spurious_consensus" in rows[-1]


def test_ratio_signals_wait_for_the_baseline_and_rises_for_three_windows():
    monitor = Monitor(MonitorConfig(window=2, baseline_steps=4, kl_window=2))
    seen = []
    for step in range(6):
        row = dict(HEALTHY)
        monitor.observe(step, row)
        seen.append(("monitor/entropy_collapse" in row, "monitor/kl_accel/initial_kl" in row))
    # the entropy ratio from step 3 (four steps of baseline), the KL's rise from step 5 (3 x 2 steps)
    assert seen == [(False, False)] * 3 + [(True, False)] * 2 + [(True, True)]


def test_the_summary_lists_every_onset():
    metric, trips, _ = CASES["length_collapse"]
    monitor, _, _ = _run({metric: trips, "shadow/short_paid": _ramp(0.0, 0.4)})
    assert set(monitor.summary()["monitor_onsets"]) == {"length_collapse", "no_reasoning"}


@pytest.mark.parametrize("field, value", [("window", 0), ("min_precision", 1.5), ("consensus_share", 0.5),
                                          ("max_length_ratio", 1.0), ("kl_accel", 1.0), ("initial_kl_rows", -1)])
def test_a_bad_threshold_is_refused_naming_its_field(field, value):
    with pytest.raises(ConfigError, match=field):
        MonitorConfig(**{field: value})


def test_a_signal_warns_only_once_past_its_threshold_persist_steps_in_a_row():
    """Each step's value as it is (window 1): consensus on wrong answers past 0.25 four steps, back,
    then five: one warning, on the fifth. A KL past max_kl warns the step it is crossed."""
    cfg = MonitorConfig(window=1, persist_steps=5)
    wrong = [0.1] + [0.9] * 4 + [0.1] + [0.9] * 5
    monitor, rows, lines = _run({"shadow/consensus_wrong": wrong}, cfg, steps=len(wrong))
    assert monitor.onsets == {"spurious_consensus": [10]}
    assert [r["monitor/firing/spurious_consensus"] for r in rows] == [0] + [1] * 4 + [0] + [1] * 5
    assert lines[0].endswith("above monitor.max_consensus_wrong = 0.25, 5 steps in a row)")
    monitor, _, _ = _run({"learner/approx_kl": [0.01, 1271.5, 0.01, 0.01, 0.01]}, cfg, steps=5)
    assert monitor.onsets == {"kl_high/approx_kl": [1]}


def test_a_step_that_measured_nothing_is_no_step_of_a_streak():
    """Precision past the threshold on two steps, then steps where it is nan (every group flat) or
    absent (a step dynamic sampling skipped): the streak stays at two, nothing warns, and those steps'
    rows carry no monitor value of their own (outside audit: the unchanged history counted as a step
    past the threshold each time, and "5 steps in a row" was written after two)."""
    cfg = MonitorConfig(window=1, persist_steps=5, baseline_steps=1)
    monitor, rows, lines = Monitor(cfg), [], []
    for step, value in enumerate([0.9, 0.0, 0.0, math.nan, math.nan, None, None]):
        row = {**HEALTHY, "shadow/precision": value}
        if value is None:
            del row["shadow/precision"]
        lines += monitor.observe(step, row)
        rows.append(row)
    assert lines == [] and monitor.streak["precision_low"] == 2
    assert [r.get("monitor/firing/precision_low") for r in rows] == [0.0, 1.0, 1.0, None, None, None, None]
    # the streak goes on where the measurements do
    for step in range(7, 10):
        lines += monitor.observe(step, {**HEALTHY, "shadow/precision": 0.0})
    assert monitor.onsets["precision_low"] == [9] and "5 steps in a row" in lines[0]


def _noisy_run(seed: int, steps: int = 300, hack_from: int | None = None) -> list[dict]:
    """A constructed run with the noise of the recorded healthy one (docs/results.md): 8 labelled
    groups a step, so consensus on a wrong answer is k/8 of them, its rate rising 0 -> 0.15 as the
    policy sharpens; precision 0.75 +- 0.13; entropy decaying from 0.47 to 0.17 (0.36 of its start)
    +- 0.03; the KL to the first policy rising to 0.2 with a log-normal spread (one step may be twice
    the next). From `hack_from` on the policy hacks: consensus on wrong answers grows by 0.005 a
    step (to 0.6) and the precision falls by 0.004 a step."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(steps):
        hacked = 0 if hack_from is None or t < hack_from else t - hack_from
        rows.append({"shadow/consensus_wrong": rng.binomial(8, min(0.6, 0.15 * t / steps + 0.005 * hacked)) / 8,
                     "shadow/precision": float(np.clip(rng.normal(0.75 - 0.004 * hacked, 0.13), 0, 1)),
                     "shadow/short_paid": rng.binomial(64, 0.02) / 64,
                     "rollout/completion_len": float(rng.normal(40, 4)),
                     "learner/entropy": float(0.17 + 0.30 * math.exp(-t / 40) + rng.normal(0, 0.03)),
                     "learner/approx_kl": float(rng.lognormal(math.log(0.003), 0.5)),
                     "learner/initial_kl": float(rng.lognormal(math.log(0.2 * (1 - math.exp(-t / 30)) + 0.02), 0.45))})
    return rows


def _onsets(rows: list[dict], cfg: MonitorConfig) -> dict[str, list[int]]:
    monitor = Monitor(cfg)
    for step, row in enumerate(rows):
        monitor.observe(step, dict(row))
    return monitor.onsets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_healthy_noisy_run_warns_nothing_and_a_hacked_one_warns_by_step_160(seed):
    healthy = _noisy_run(seed)
    assert _onsets(healthy, MonitorConfig()) == {}
    # the same stream under the old rule (a warning the first step past): false alarms
    assert _onsets(healthy, MonitorConfig(persist_steps=1))
    hacked = _onsets(_noisy_run(seed, hack_from=100), MonitorConfig())
    # the consensus on wrong answers' true rate crosses 0.25 at step 136
    assert min(steps[0] for steps in hacked.values()) <= 160, hacked
    assert hacked["spurious_consensus"][0] <= 160


def test_a_kl_that_only_wanders_does_not_accelerate():
    """The KL rise is measured against the run's own noise: a KL around 0.3 whose 8-step medians
    step up and down by about 0.15 does not fire kl_accel however its last rise compares with the
    fall before (the old test: a rise of 0.15 >= kl_min_rise after a fall); one that then rises by
    0.05 and then by 0.6 a window does."""
    wander = [0.3 + (0.15 if (t // 8) % 2 else 0.0) for t in range(64)]
    climb = wander + [0.5] * 8 + [1.1] * 8
    cfg = MonitorConfig(persist_steps=1)
    assert "kl_accel/initial_kl" not in _onsets([{"learner/initial_kl": v} for v in wander], cfg)
    assert "kl_accel/initial_kl" in _onsets([{"learner/initial_kl": v} for v in climb], cfg)
