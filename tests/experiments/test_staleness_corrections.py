"""benchmarks/staleness_corrections.py's report, on run folders written here as `jury train` writes them."""
import json
import math
import pathlib
import sys
from dataclasses import asdict

import pytest
import yaml

from jury.protocol.config_load import load_config

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import staleness_corrections as sc  # noqa: E402

# chain_problems(0)'s first 12 term counts: 15, 2, 4, 32, 5, 4, 2, 6, 37, 35, 6, 3
# (indices 1, 6 and 11 are the 2-3 term problems)


def _run(path, k, correction, seed=0, pass_rates=(0.0, 0.5, 0.25), off=None):
    """Three steps of four groups each; group i of the run is task index i."""
    cfg = load_config(None, [f"run_dir={path}", "dataset=chain", f"forced_staleness={k}",
                             f"learner.correction={correction}", f"seed={seed}"])
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(asdict(cfg), sort_keys=False))
    (path / "summary.yaml").write_text("steps: 3\n")
    with open(path / "metrics.jsonl", "w") as f:
        for step in range(3):
            f.write(json.dumps({"step": step, "time_s": 10.0 * (step + 1), "reward/pass_rate": pass_rates[step],
                                **(off(step) if off else {})}) + "\n")
    with open(path / "ledger.jsonl", "w") as f:
        for i in range(12):
            f.write(json.dumps({"index": i, "step": i // 4, "pass_rate": 0.1 * (i % 4), "error": None}) + "\n")
    return path


def test_a_run_summary_by_hand(tmp_path):
    off = lambda s: {"learner/is_ess": [0.2, 0.9, 0.7][s], "learner/mask_frac": [0.5, 0.1, 0.3][s],  # noqa: E731
                     "learner/version_span_max": 1.0, "learner/behav_kl": float("nan")}
    r = sc.run_summary(_run(tmp_path / "a", 1, "mask_token", off=off))
    assert (r["k"], r["correction"], r["seed"], r["steps"], r["wall_s"]) == (1, "mask_token", 0, 3, 30.0)
    # thirds of three steps are single steps
    assert (r["pass_first"], r["pass_last"]) == (0.0, 0.25)
    assert r["pass_v0"] == 0.25  # steps 0 and 1 (k = 1) were sampled by the initial policy
    # the 2-3 term problems: index 1 at step 0 (pass 0.1), 6 at step 1 (0.2), 11 at step 2 (0.3)
    assert r["curve"]["short_pass_rate"] == pytest.approx([0.1, 0.2, 0.3])
    assert (r["short_first"], r["short_last"]) == pytest.approx((0.1, 0.3))
    # off-policy means leave out the steps before k (their batches are version 0's, not k-stale)
    assert r["is_ess"] == pytest.approx(0.8) and r["mask_frac"] == pytest.approx(0.2)
    assert r["version_span_max"] == 1.0 and math.isnan(r["behav_kl"]) and math.isnan(r["clip_frac"])


def test_the_table_groups_seeds_and_orders_settings(tmp_path):
    runs = [sc.run_summary(_run(tmp_path / n, k, c, seed)) for n, k, c, seed in
            [("c", 2, "decoupled", 0), ("b", 2, "none", 1), ("a", 2, "none", 0), ("d", 0, "none", 0)]]
    lines = sc.table(runs).splitlines()
    assert lines[0].startswith("| k | correction | seeds | pass_v0 | pass_first")
    assert [line.split(" | ")[:3] for line in lines[2:]] == [["| 0", "none", "0"], ["| 2", "none", "0,1"],
                                                             ["| 2", "decoupled", "0"]]
    files = sc.plot(runs, tmp_path)
    assert [f.name for f in files] == ["corrections.png", "offpolicy.png"]
    assert all(f.read_bytes()[:4] == b"\x89PNG" and f.stat().st_size > 10_000 for f in files)


def _settings(cmds):
    """(k, correction, seed) of every run the sweep commands train, in their order."""
    settings = []
    for cmd in cmds:
        ks = cmd[cmd.index("--grid") + 1].removeprefix("forced_staleness=").split(",")
        cs = cmd[len(cmd) - cmd[::-1].index("--grid")].removeprefix("learner.correction=").split(",")
        settings += [(int(k), c, cmd[cmd.index("--seeds") + 1]) for k in ks for c in cs]
        assert "learner.lr=0.0001" in cmd and "steps=30" in cmd
    return [(k, c, seed) for k, c, seeds in settings for seed in seeds.split(",")]


def test_the_sweep_commands_cover_the_grid():
    settings = _settings(sc.sweep_commands("out", 30, 1e-4))
    # the grid: k = 0, 1, 2, 4, 8 x the four corrections x two seeds
    assert set(settings) == {(k, c, seed) for k in (0, 1, 2, 4, 8) for c in sc.CORRECTIONS for seed in "01"}
    assert len(settings) == len(set(settings))  # no setting trained twice


def test_one_arm_alone_keeps_the_grid_order():
    settings = _settings(sc.sweep_commands("out", 30, 1e-4, ["decoupled"]))
    assert settings == [(8, "decoupled", "0"), (2, "decoupled", "0"), (8, "decoupled", "1"), (4, "decoupled", "0"),
                        (1, "decoupled", "0"), (2, "decoupled", "1"), (4, "decoupled", "1"), (1, "decoupled", "1"),
                        (0, "decoupled", "0"), (0, "decoupled", "1")]
