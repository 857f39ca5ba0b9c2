"""`jury bench` end to end: every stage measured in one invocation, a table, JSON and plots."""
import json
from pathlib import Path
import subprocess
import sys

import pytest

def test_bad_bench_arguments_are_refused_before_anything_starts(tmp_path, capsys):
    from jury.experiments.cli import main

    for args in (["--steps", "3"], ["--staleness", "0,x"], ["learner.lr=fast"], ["--sync-modes", "drain,fast"],
                 ["--arm", "recompute"], ["--arm", "drain:learner.lr=1e-5"], ["--arm", "a b:learner.lr=1e-5"],
                 ["--arm", "lr:learner.lr=fast"], ["--arm", "a:learner.lr=1e-5", "--arm", "a:learner.lr=1e-6"],
                 ["--critic", "learner.advantage=gae", "generator.group_size=1"],
                 # (outside audit) a steps= override was silently replaced by --steps; bounds were unchecked
                 ["steps=50"], ["--arm", "x:steps=abc"], ["--staleness", ""], ["--staleness", "0,-1"]):
        assert main(["bench", "--out", str(tmp_path / "b"), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("jury bench: ")
        if "fast" in args[-1] and args[0] == "--sync-modes":  # the modes named from the config's own list
            assert "fast: each must be one of drain, interrupt, inflight" in err
    assert not (tmp_path / "b").exists()


@pytest.mark.slow
def test_bench_reports_every_stage_side_by_side(tiny_model_path, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "jury.experiments.cli", "bench", "--steps", "5", "--staleness", "0,2", "--sync-modes", "drain", "--peer",
         "--arm", "recompute:learner.recompute_old=true", "--out",
         str(tmp_path), f"model={tiny_model_path}", "batch_groups=4", "generator.group_size=4"],
        capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads((tmp_path / "bench.json").read_text())
    stages = ["generator_only", "end_to_end/max_staleness=0", "end_to_end/max_staleness=2", "learner_only"]
    # drain is the config's mode: it is the max_staleness=2 run, not run again (the plan of runs
    # under other modes is tested below without engines; inflight end to end in test_chain_end_to_end)
    assert not any(k.endswith(",drain") for k in report)
    for s in stages:
        assert report[s]["tokens_per_s"] > 0, s
    assert report["verifier_only"]["groups"] == 5 * 4 and report["verifier_only"]["groups_per_s"] > 0
    sync, async_ = report["end_to_end/max_staleness=0"], report["end_to_end/max_staleness=2"]
    for r in (sync, async_):
        assert 0 <= r["idle/learner"] <= 1 and -0.05 <= r["idle/generator"] <= 1 and 0 <= r["idle/verifier"] <= 1
        assert r["sync_total_s"] > 0 and r["sync_broadcast_s"] > 0 and r["generator_pause_s"] >= 0
        assert 0 < r["verify_share_of_life"] < 1
    assert sync["staleness_mean"] == 0  # synchronous: every group from the learner's own version
    ratio = report["ratios"]["async/sync (max_staleness 2 / 0, completions/s)"]
    assert ratio == pytest.approx(async_["completions_per_s"] / sync["completions_per_s"])
    runs = {k.removeprefix("end_to_end/"): v for k, v in report.items() if k.startswith("end_to_end/")}
    fastest = max((k for k in runs if not k.endswith(",recompute")), key=lambda k: runs[k]["completions_per_s"])
    assert report["ratios"][f"fastest/sync ({fastest}, completions/s)"] == pytest.approx(
        runs[fastest]["completions_per_s"] / sync["completions_per_s"])
    # occupancy: every engine ran sequences, the synchronous one never more than its one batch,
    # and each run folder holds its timeline
    assert 0 < sync["occupancy_of_batch"] <= 1.0 + 1e-6
    for name, r in runs.items():
        assert r["occupancy_mean"] > 0 and r["occupancy_of_batch"] > 0, name
        timeline = json.loads((Path(r["run_dir"]) / "occupancy.json").read_text())["generators"]["generator0"]
        assert len(timeline["t"]) == len(timeline["running"]) > 0 and max(timeline["running"]) > 0, name
    assert 0 <= sync["tail_share"] <= 1
    # the engines' own pace, from the steps the stat logger counted: the synchronous run's engine
    # generated, inside the timed loop, the tokens its timed steps trained (each batch is generated
    # within its step). An asynchronous run this
    # short may have generated everything before its timed loop: then it reports no pace
    assert 0 < sync["engine_step_s"] < 1 and sync["engine_tokens_per_step"] >= 1
    for name, r in runs.items():
        assert "engine_step_s" not in r or (0 < r["engine_step_s"] < 1 and r["engine_tokens_per_step"] >= 1), name
    from jury.cluster.metrics import read_metrics

    rows = read_metrics(sync["run_dir"])
    timeline = json.loads((Path(sync["run_dir"]) / "occupancy.json").read_text())["generators"]["generator0"]
    # the bin the loop starts in counts whole: the batch before it was trained before that (synchronous)
    made = sum(k for at, k in zip(timeline["t"], timeline["tokens"])
               if sync["loop_start_s"] - timeline["bin_s"] < at < rows[-1]["time_s"])
    trained = sum(r["rollout/tokens"] for r in rows[2:])
    assert made == pytest.approx(trained, rel=0.1)
    # the arm: the largest staleness again with its override, and its cost as ratios to that run
    arm = runs["max_staleness=2,recompute"]
    assert "recompute_old: true" in (Path(arm["run_dir"]) / "config.yaml").read_text()
    assert "recompute_old: false" in (Path(async_["run_dir"]) / "config.yaml").read_text()
    assert report["ratios"]["recompute/default (max_staleness 2, learner s per step)"] == pytest.approx(
        arm["learner_train_s"] / async_["learner_train_s"])
    assert report["ratios"]["recompute/default (max_staleness 2, completions/s)"] == pytest.approx(
        arm["completions_per_s"] / async_["completions_per_s"])
    # the learner replayed the synchronous run's record and reproduced its losses
    assert report["learner_only"]["loss_max_abs_diff"] < 1e-4
    for name in ("throughput.png", "time.png", "occupancy.png"):
        assert (tmp_path / name).stat().st_size > 5000
    # the peer ran the same shape: 5 steps of 4 prompts x 4 samples, the first not timed
    trl = report["peer/trl"]
    assert trl["completions_per_step"] == [16] * 5 and trl["completions_per_s"] > 0
    assert report["ratios"][f"ours/trl ({fastest}, completions/s)"] == pytest.approx(
        runs[fastest]["completions_per_s"] / trl["completions_per_s"])
    table = out.stdout
    assert "generator_only" in table and "async/sync" in table and "learner_only" in table


def test_sync_modes_add_runs_at_the_largest_staleness_and_never_repeat_the_configs():
    from jury.experiments.bench import planned_runs

    assert planned_runs([0, 1, 2, 4], ["drain", "interrupt", "inflight"], "drain") == [
        (0, None), (1, None), (2, None), (4, None), (4, "interrupt"), (4, "inflight")]
    assert planned_runs([0, 2], ["inflight", "inflight", "drain"], "inflight") == [(0, None), (2, None), (2, "drain")]
    assert planned_runs([0], [], "drain") == [(0, None)]


def test_engine_pace_is_read_from_the_steps_each_bin_counts():
    from jury.experiments.bench import engine_steps

    t = {"bin_s": 0.1, "t": [0.0, 0.1, 0.2, 0.3, 0.4], "running": [8.0, 8.0, 0.0, 4.0, 4.0],
         "steps": [10, 10, 0, 20, 5], "tokens": [80, 80, 0, 80, 20]}
    # over [0.1, 0.4): two bins with sequences running (0.2 s), 30 steps, 160 tokens
    assert engine_steps([t], 0.1, 0.4) == {"engine_step_s": pytest.approx(0.2 / 30),
                                           "engine_tokens_per_step": pytest.approx(160 / 30)}
    assert engine_steps([t, t], 0.0, 0.5)["engine_tokens_per_step"] == pytest.approx(260 / 45)
    assert engine_steps([{k: v for k, v in t.items() if k not in ("steps", "tokens")}], 0.0, 0.5) == {}
    assert engine_steps([t], 5.0, 6.0) == {}  # no step in the span
    # stats vLLM reports with nothing running (after an abort, a pause) are no decode step: a span
    # with only those measures no pace (an asynchronous bench run that decoded all before its loop)
    idle = {"bin_s": 0.1, "t": [0.0, 0.1], "running": [0.0, 0.0], "steps": [3, 1], "tokens": [0, 0]}
    assert engine_steps([idle], 0.0, 0.2) == {}
    assert engine_steps([t, idle], 0.1, 0.4) == engine_steps([t], 0.1, 0.4)
