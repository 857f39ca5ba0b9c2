"""`jury plot`: PNG files from run folders written here (config.yaml + metrics.jsonl as a run
writes them), checked as images: valid PNG, real size, and the settings' colours in them."""
import argparse
import json
import struct
from dataclasses import asdict

import numpy as np
import pytest
import yaml

from jury.experiments import plots
from jury.protocol.config_load import load_config


def _write_run(path, overrides, steps=6, hist=None, tps=None):
    cfg = load_config(None, [f"run_dir={path}", *overrides])
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(asdict(cfg), sort_keys=False))
    rng = np.random.default_rng(cfg.seed + 10 * cfg.max_staleness)
    with open(path / "metrics.jsonl", "w") as f:
        for step in range(steps):
            f.write(json.dumps({
                "step": step, "time_s": 3.0 * (step + 1) / (cfg.max_staleness + 1),
                "reward/mean": float(0.2 + 0.05 * step + rng.normal(0, 0.02)),
                "reward/pass_rate": float(0.1 + 0.04 * step + rng.normal(0, 0.02)),
                "staleness/max": float(cfg.max_staleness),
                "staleness/hist": hist or {str(s): 1 for s in range(cfg.max_staleness + 1)},
                "perf/tokens_per_s": tps[step] if tps else 1000.0 * (1 + cfg.max_staleness) + cfg.seed,
            }) + "\n")
    return path


@pytest.fixture
def sweep_dir(tmp_path):
    """Three settings of max_staleness, two seeds each, as a sweep folder holds them."""
    root = tmp_path / "sweep"
    for s in (0, 1, 2):
        for seed in (0, 1):
            _write_run(root / f"max_staleness={s}__seed={seed}", [f"max_staleness={s}", f"seed={seed}"])
    return root


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _colours(path):
    import matplotlib.image

    rgb = (matplotlib.image.imread(path)[..., :3] * 255).round().astype(int)
    return {tuple(c) for c in rgb.reshape(-1, 3)}


def _tab10(i):
    import matplotlib

    return tuple(round(255 * x) for x in matplotlib.colormaps["tab10"](i)[:3])


def test_plots_are_real_images_with_one_colour_per_setting(sweep_dir, tmp_path):
    files = plots.plot_runs([sweep_dir], tmp_path / "out")
    assert [f.name for f in files] == ["curves.png", "throughput.png", "staleness.png"]
    assert _png_size(files[0]) == (1200, 800)
    assert _png_size(files[1]) == _png_size(files[2]) == (800, 550)
    for f in files:
        assert f.stat().st_size > 15_000, f"{f.name} is nearly empty ({f.stat().st_size} bytes)"
        assert len(_colours(f)) > 50  # text, lines, anti-aliasing: not a blank canvas
    # staleness bars are solid: each of the three settings has its colour, seeds do not add a fourth
    bars = _colours(files[2])
    assert {_tab10(0), _tab10(1), _tab10(2)} <= bars
    assert _tab10(3) not in bars


def test_labels_come_from_the_keys_that_differ_and_seeds_share_one(sweep_dir):
    runs = plots.load_runs([sweep_dir])
    assert len(runs) == 6
    assert sorted({r.label for r in runs}) == ["max_staleness=0", "max_staleness=1", "max_staleness=2"]
    single = plots.load_runs([sweep_dir / "max_staleness=1__seed=0"])
    assert single[0].label == "max_staleness=1__seed=0"  # one run: its folder's name


def test_staleness_shares_hand_worked(tmp_path):
    a = _write_run(tmp_path / "a", ["max_staleness=1", "seed=0"], steps=2, hist={"0": 2, "1": 2})
    b = _write_run(tmp_path / "b", ["max_staleness=1", "seed=1"], steps=1, hist={"0": 4})
    # over both seeds' steps: staleness 0 in 2 + 2 + 4 = 8 groups, 1 in 2 + 2 = 4, of 12
    assert plots.staleness_shares(plots.load_runs([a, b])) == {"all runs": {0: 8 / 12, 1: 4 / 12}}


def test_throughput_leaves_out_the_first_step():
    rows = [{"perf/tokens_per_s": v} for v in (10.0, 200.0, 300.0)] + [{"perf/tokens_per_s": float("nan")}]
    assert plots.mean_throughput(rows) == 250.0
    assert plots.mean_throughput([{"perf/tokens_per_s": 7.0}]) == 7.0
    assert np.isnan(plots.mean_throughput([{}]))


def test_plot_command(sweep_dir, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    plots.add_command(parser.add_subparsers(dest="command"))
    one, two = sweep_dir / "max_staleness=0__seed=0", sweep_dir / "max_staleness=2__seed=0"
    args = parser.parse_args(["plot", str(one), str(two), "--out", str(tmp_path / "p")])
    assert args.func(args) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "p" / n) for n in
                                               ("curves.png", "throughput.png", "staleness.png")]
    (tmp_path / "empty").mkdir()
    args = parser.parse_args(["plot", str(tmp_path / "empty"), "--out", str(tmp_path / "q")])
    assert args.func(args) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err


def test_running_mean_smooths_over_the_window():
    from jury.experiments.plots import running_mean

    assert running_mean([1.0, 3.0, 5.0, 7.0], window=2) == [1.0, 2.0, 4.0, 6.0]
    assert running_mean([2.0] * 30) == [2.0] * 30
    assert running_mean([]) == []


def test_throughput_is_placed_at_the_staleness_the_runs_trained_at():
    def run(forced, stale, tps, seed):
        rows = [{"staleness/mean": stale, "perf/tokens_per_s": tps} for _ in range(3)]
        return plots.Run(plots.Path("."), {"forced_staleness": forced, "seed": seed, "learner.lr": 1e-4}, rows)

    runs = [run({0: 1.0}, 0.0, 100.0, 0), run({4: 1.0}, 4.0, 180.0, 0), run({4: 1.0}, 4.0, 200.0, 1)]
    assert plots.throughput_points(runs) == {"all runs": {0.0: [100.0], 4.0: [180.0, 200.0]}}


def test_offpolicy_plot_only_for_runs_with_a_correction(tmp_path):
    root = tmp_path / "sweep"
    corrected = _write_run(root / "a", ["forced_staleness=2", "learner.correction=mask_token"])
    _write_run(root / "b", ["forced_staleness=2", "learner.correction=none"])
    rows = [json.loads(line) for line in (corrected / "metrics.jsonl").read_text().splitlines()]
    with open(corrected / "metrics.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({**r, "learner/is_ess": 0.9 - 0.05 * r["step"], "learner/clip_frac": 0.01,
                                "learner/tis_frac": 0.0, "learner/mask_frac": 0.02 * r["step"],
                                "learner/behav_kl": 0.001 * r["step"]}) + "\n")
    files = plots.plot_runs([root], tmp_path / "out")
    assert [f.name for f in files][-1] == "offpolicy.png"
    assert _png_size(files[-1]) == (2000, 400)
    # the corrected run's line is drawn in its colour; the uncorrected run has no off-policy metrics
    assert _tab10(0) in _colours(files[-1])
    assert "offpolicy.png" not in [f.name for f in plots.plot_runs([root / "b"], tmp_path / "out2")]


def test_monitor_plot_for_runs_with_the_monitor(tmp_path):
    run = _write_run(tmp_path / "run", [])
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    with open(run / "metrics.jsonl", "w") as f:
        for r in rows:
            extra = {"shadow/precision": 0.9 - 0.1 * r["step"], "shadow/recall": 0.8,
                     "shadow/precision/stale0": 0.9, "shadow/precision/stale1": 0.7 - 0.1 * r["step"],
                     "shadow/consensus": 0.2, "shadow/consensus_wrong": 0.05 * r["step"], "shadow/short_paid": 0.0,
                     "rollout/completion_len": 40.0, "learner/entropy": 0.5, "learner/initial_kl": 0.01 * r["step"]}
            if r["step"] == 4:
                extra["monitor/onset/precision_low"] = 1.0
            f.write(json.dumps({**r, **extra}) + "\n")
    files = plots.plot_runs([run], tmp_path / "out")
    assert [f.name for f in files][-1] == "monitor.png" and _png_size(files[-1]) == (2000, 800)
    bare = _write_run(tmp_path / "bare", [])  # a run from before the monitor: no panel of it
    assert "monitor.png" not in [f.name for f in plots.plot_runs([bare], tmp_path / "out2")]
