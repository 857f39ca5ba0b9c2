"""benchmarks/dynamic_sampling.py: its commands load as configs, and its report reads run folders
as `jury train` writes them."""
import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import dynamic_sampling as ds  # noqa: E402

from jury.protocol.config_load import load_config  # noqa: E402


def test_both_runs_are_valid_configs():
    for name, cmd in ds.commands(pathlib.Path("/tmp/x"), steps=3).items():
        i = cmd.index("--config")
        cfg = load_config(cmd[i + 1], cmd[i + 2:])
        assert cfg.steps == 3 and cfg.dataset == "chain" and cfg.dynamic_sampling == (name == "dynamic")
        assert cfg.eval.every == 4


def test_the_report_adds_up_the_refills_and_their_generation(tmp_path):
    run = tmp_path / "dynamic"
    run.mkdir()
    (run / "summary.yaml").write_text("wall_s: 100.0\nstartup_s: 40.0\n")
    rows = [{"step": s, "time_s": 10.0 * s, "reward/pass_rate": p, "rollout/tokens": 500.0,
             "dynamic/filtered_frac": f, "dynamic/refills": r, "dynamic/extra_tokens": 60.0 * r,
             "dynamic/short_groups": 0.0} for s, (p, f, r) in enumerate([(0.1, 0.5, 4.0), (0.3, 0.25, 2.0)])]
    rows[1]["eval/pass@1"] = 0.25
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = ds.summary(run)
    assert (s["pass_first"], s["pass_second"], s["filtered"]) == pytest.approx((0.1, 0.3, 0.375))
    assert (s["refills"], s["trained_tokens"], s["extra_tokens"]) == (6.0, 1000.0, 360.0)
    assert "| dynamic | 2 | 0.100 | 0.300 | 0.38 | 6 | 0 | 1000 | 360 | 100 (40) |" in ds.report(tmp_path)
    assert "dynamic: step 1 10s 0.250" in ds.report(tmp_path)
