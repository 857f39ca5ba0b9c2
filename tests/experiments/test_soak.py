"""benchmarks/soak.py's slopes: a leak per step reads the same per 1,000 steps whatever the pace of
the steps, and a soak that did not count its steps gets them from the run's metrics."""
import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import soak  # noqa: E402


def test_a_leak_per_step_is_the_same_per_1k_steps_when_the_steps_slow_down():
    # 1 MiB per step; 100 steps a minute for 10 minutes, then 25 a minute (another run loads the cores)
    samples, steps = [], 0
    for minute in range(21):
        samples.append({"t_min": float(minute), "steps": steps, "rss_mib": {**dict.fromkeys(soak.ROLES, 0.0),
                                                                           "engine_worker": 1000.0 + steps}})
        steps += 100 if minute < 10 else 25
    r = soak.slopes(samples)["engine_worker"]
    assert r["slope_mib_per_1k_steps"] == pytest.approx(1000.0)
    assert r["last_half_slope_mib_per_1k_steps"] == pytest.approx(1000.0)
    assert r["last_half_slope_mib_per_min"] == pytest.approx(25.0)  # per minute it seems to level off
    assert list(soak.slopes(samples)) == ["engine_worker"]  # roles that used no memory are left out
    assert "MiB/1k steps" in soak.table(soak.slopes(samples))


def test_steps_come_from_the_metrics_rows_time_for_an_older_soak(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with open(run / "metrics.jsonl", "w") as f:
        for step in range(10):  # a step every 30 s, the first at 5 s into the run
            f.write(json.dumps({"step": step, "time_s": 5.0 + 30 * step}) + "\n")
    samples = [{"t_min": t, "rss_mib": {}} for t in (0.0, 1.0, 4.5)]
    assert [s["steps"] for s in soak.steps_from_metrics(samples, run)] == [1, 3, 10]


def test_rays_state_holders_are_counted_apart_from_its_other_processes():
    assert soak.role_of("/site/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp/ray", "python") == "ray_gcs"
    assert soak.role_of("/site/ray/core/src/ray/raylet/raylet --raylet_socket_name=x", "python") == "raylet"
    assert soak.role_of("python -u /site/ray/dashboard/agent.py", "raylet") == "ray"
    assert soak.role_of("ray::Learner.step", "raylet") == "learner"
