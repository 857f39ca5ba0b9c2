"""`jury sweep`: grid expansion, folder names, every config checked before any run,
resuming, with a stand-in `train` that honours the real one's contract; then one real
two-run sweep through every process."""
import argparse
import csv
import json
import struct
from dataclasses import asdict

import pytest
import yaml

from jury.experiments import sweep as sw


class StubTrain:
    """What `train(cfg)` promises: config.yaml first, one metrics row per step, summary.yaml
    only when the run finished, and the summary returned. `fail` names runs that raise."""

    def __init__(self, fail=()):
        self.calls, self.fail = [], set(fail)

    def __call__(self, cfg, resume=None):
        from pathlib import Path

        run_dir = Path(cfg.run_dir)
        self.calls.append(run_dir.name + (" (resumed)" if resume else ""))
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(asdict(cfg), sort_keys=False))
        with open(run_dir / "metrics.jsonl", "a") as f:  # append, as MetricsLog does
            for step in range(cfg.steps):
                f.write(json.dumps({"step": step, "time_s": step + 1.0, "reward/mean": 0.1 * step,
                                    "reward/pass_rate": 0.05 * step, "staleness/max": 0.0,
                                    "staleness/hist": {"0": cfg.batch_groups},
                                    "perf/tokens_per_s": 100.0 * (cfg.max_staleness + 1)}) + "\n")
        if run_dir.name in self.fail:
            raise RuntimeError(f"learner died in {run_dir.name}")
        summary = {"run_dir": str(run_dir), "wall_s": 1.5, "steps": cfg.steps, "reward_last_fifth": 0.3,
                   "pass_rate_last_fifth": 0.2, "max_staleness_seen": float(cfg.max_staleness)}
        (run_dir / "summary.yaml").write_text(yaml.safe_dump(summary))
        return summary


def test_grid_values_may_be_yaml_lists_and_maps(tmp_path):
    grid = sw.parse_grid(["derl.ratio=[4,1],[2,1]", "forced_staleness={0: 1, 4: 1},2"])
    assert grid == {"derl.ratio": ["[4,1]", "[2,1]"], "forced_staleness": ["{0: 1, 4: 1}", "2"]}
    runs = sw.plan(grid, ["steps=3"], tmp_path / "s")
    assert [r.cfg.derl.ratio for r in runs] == [(4, 1), (4, 1), (2, 1), (2, 1)]
    assert [r.cfg.forced_staleness for r in runs[:2]] == [{0: 1.0, 4: 1.0}, {2: 1.0}]
    assert len({r.name for r in runs}) == 4


def test_grid_expands_in_order_with_seeds_last():
    grid = sw.parse_grid(["max_staleness=0,1,2", "verifier.fallback=reszero,zero"], seeds="0,1")
    assert grid == {"max_staleness": ["0", "1", "2"], "verifier.fallback": ["reszero", "zero"], "seed": ["0", "1"]}
    settings = sw.expand(grid)
    assert len(settings) == 12
    assert settings[:3] == [{"max_staleness": "0", "verifier.fallback": "reszero", "seed": "0"},
                            {"max_staleness": "0", "verifier.fallback": "reszero", "seed": "1"},
                            {"max_staleness": "0", "verifier.fallback": "zero", "seed": "0"}]
    assert sw.expand({}) == [{}]


@pytest.mark.parametrize("items,seeds,match", [
    (["max_staleness"], None, "expected key=v1,v2"),
    (["max_staleness=0,,1"], None, "no empty value"),
    (["steps=1", "steps=2"], None, "steps given twice"),
    (["run_dir=a,b"], None, "names each run's folder"),
    (["seed=0,1"], "2", "both in --grid and --seeds"),
    (["steps=2,2"], None, "repeated"),
    ([], "0,x", "--seeds"),
])
def test_bad_grids_are_refused(items, seeds, match):
    with pytest.raises(sw.SweepError, match=match):
        sw.parse_grid(items, seeds)


def test_folder_names_read_as_settings():
    assert sw.run_name({"max_staleness": "1", "verifier.fallback": "zero", "seed": "0"}) == \
        "max_staleness=1__verifier.fallback=zero__seed=0"
    assert sw.run_name({"model": "/data/q wen"}) == "model=_data_q_wen"
    assert sw.run_name({"learner.lr": "1e-4"}) == "learner.lr=1e-4"
    assert sw.run_name({}) == "base"


def test_plan_builds_each_config_from_base_then_setting(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("steps: 7\ngenerator:\n  group_size: 8\n")
    runs = sw.plan(sw.parse_grid(["max_staleness=0,2"], "3"), ["generator.group_size=2"], tmp_path / "s",
                   config_path=str(base))
    assert [r.name for r in runs] == ["max_staleness=0__seed=3", "max_staleness=2__seed=3"]
    assert [(r.cfg.steps, r.cfg.generator.group_size, r.cfg.max_staleness, r.cfg.seed) for r in runs] == \
        [(7, 2, 0, 3), (7, 2, 2, 3)]
    assert runs[1].run_dir == tmp_path / "s" / "max_staleness=2__seed=3"


@pytest.mark.parametrize("grid,overrides,match", [
    # the third run is bad: it must be refused before the first one starts, naming the run and field
    (["max_staleness=0,1,-1"], [], r"run max_staleness=-1: max_staleness must be >= 0"),
    (["sync_every=1,3"], ["max_staleness=1"], r"run sync_every=3: max_staleness \(1\) must be >= sync_every - 1"),
    (["verifier.fallback=reszero,zeroo"], [], r"verifier.fallback must be one of"),
    (["verifier.fallbak=zero"], [], r"unknown config key verifier.fallbak"),
    (["steps=2,3"], ["steps=4"], r"steps is set by the sweep and also as an override"),
    (["model=a/b,a_b"], [], r"share the folder name model=a_b"),
    # one value spelled twice is one run, trained twice under two names
    (["learner.lr=1e-4,0.0001"], [], r"runs learner.lr=1e-4 and learner.lr=0.0001 have the same config"),
])
def test_every_config_is_checked_before_any_run_starts(tmp_path, grid, overrides, match, capsys):
    stub = StubTrain()
    args = _parse(["--grid", *grid[:1], "--out", str(tmp_path / "s"), *overrides])
    assert sw._run(args, train=stub) == 2
    assert stub.calls == [] and not (tmp_path / "s").exists()
    err = capsys.readouterr().err
    assert err.startswith("jury sweep: ")
    with pytest.raises(sw.SweepError, match=match):
        sw.plan(sw.parse_grid(grid), overrides, tmp_path / "s")


def _parse(argv):
    parser = argparse.ArgumentParser()
    sw.add_command(parser.add_subparsers(dest="command"))
    return parser.parse_args(["sweep", *argv])


def _args(out, *extra):
    return _parse(["--grid", "max_staleness=0,1", "--seeds", "0,1", "--out", str(out), "steps=3", *extra])


def test_sweep_resumes_skipping_finished_runs_and_redoing_unfinished_ones(tmp_path, capsys):
    out = tmp_path / "s"
    first = StubTrain()
    assert sw._run(_args(out), train=first) == 0
    names = ["max_staleness=0__seed=0", "max_staleness=0__seed=1", "max_staleness=1__seed=0",
             "max_staleness=1__seed=1"]
    assert first.calls == names

    # an interrupted run: its folder exists, with metrics, but no summary.yaml
    unfinished = out / names[2]
    (unfinished / "summary.yaml").unlink()
    (unfinished / "final").mkdir()
    second = StubTrain()
    assert sw._run(_args(out), train=second) == 0
    assert second.calls == [names[2]]
    # rerun from scratch: three rows, not the old three plus three new ones
    assert len((unfinished / "metrics.jsonl").read_text().splitlines()) == 3
    assert not (unfinished / "final").exists()
    rows = json.loads((out / "sweep_summary.json").read_text())
    assert [r["status"] for r in rows] == ["skipped", "skipped", "done", "skipped"]

    third = StubTrain()
    assert sw._run(_args(out), train=third) == 0
    assert third.calls == []
    assert "finished earlier, skipped" in capsys.readouterr().out

    # an interrupted run that left a checkpoint continues from it, its folder kept
    (unfinished / "summary.yaml").unlink()
    (unfinished / "latest_checkpoint").write_text(str(unfinished / "checkpoint"))
    (unfinished / "checkpoint").mkdir()
    fourth = StubTrain()
    assert sw._run(_args(out), train=fourth) == 0
    assert fourth.calls == [names[2] + " (resumed)"]
    assert (unfinished / "checkpoint").is_dir()  # not cleared
    assert "resuming from its checkpoint" in capsys.readouterr().out


def test_a_finished_run_with_other_settings_is_not_reused(tmp_path):
    out = tmp_path / "s"
    assert sw._run(_args(out, "learner.lr=2e-4"), train=StubTrain()) == 0
    stub = StubTrain()
    assert sw._run(_args(out, "learner.lr=1e-3"), train=stub) == 2
    assert stub.calls == []
    with pytest.raises(sw.SweepError, match=r"learner.lr=0.0002, this sweep asks for 0.001.*another --out"):
        sw.plan(sw.parse_grid(["max_staleness=0,1"], "0,1"), ["steps=3", "learner.lr=1e-3"], out)
    # what does not change a run's result does not count, nor keys a newer or older config lacks
    first = out / "max_staleness=0__seed=0" / "config.yaml"
    recorded = yaml.safe_load(first.read_text())
    del recorded["learner"]["kl_coef"]
    recorded["a_key_from_an_older_version"] = 1
    first.write_text(yaml.safe_dump(recorded))
    assert sw._run(_args(out, "learner.lr=2e-4", "progress=false"), train=stub) == 0 and stub.calls == []


def test_a_folder_that_is_not_a_run_is_not_deleted(tmp_path):
    runs = sw.plan(sw.parse_grid(["max_staleness=0"]), [], tmp_path)
    runs[0].run_dir.mkdir()
    (runs[0].run_dir / "notes.txt").write_text("mine")
    stub = StubTrain()
    with pytest.raises(sw.SweepError, match="no run's config.yaml"):
        sw.run_sweep(runs, stub, say=lambda _: None)
    assert (runs[0].run_dir / "notes.txt").exists() and stub.calls == []


def test_a_failed_run_is_reported_and_the_sweep_goes_on(tmp_path, capsys):
    out = tmp_path / "s"
    stub = StubTrain(fail={"max_staleness=0__seed=1"})
    assert sw._run(_args(out), train=stub) == 1
    assert len(stub.calls) == 4
    with open(out / "sweep_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["status"] for r in rows] == ["done", "failed", "done", "done"]
    assert rows[1]["error"] == "RuntimeError: learner died in max_staleness=0__seed=1"
    assert "FAILED" in capsys.readouterr().out
    retry = StubTrain()
    assert sw._run(_args(out), train=retry) == 0
    assert retry.calls == ["max_staleness=0__seed=1"]


def test_summary_table_csv_json_and_plots(tmp_path, capsys):
    out = tmp_path / "s"
    assert sw._run(_args(out), train=StubTrain()) == 0
    printed = capsys.readouterr().out
    with open(out / "sweep_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["max_staleness"], r["seed"]) for r in rows] == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    # the stub's tokens/s is 100 (max_staleness + 1) on every step
    assert [float(r["tokens_per_s"]) for r in rows] == [100.0, 100.0, 200.0, 200.0]
    assert rows[0]["reward_last_fifth"] == "0.3" and rows[0]["wall_s"] == "1.5"
    assert json.loads((out / "sweep_summary.json").read_text())[3]["run"] == "max_staleness=1__seed=1"
    lines = printed.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("run "))
    assert "tokens_per_s" in lines[header] and lines[header + 4].startswith("max_staleness=1__seed=1  done")
    for name in ("curves", "throughput", "staleness"):
        data = (out / "plots" / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24])[0] > 500


def test_dry_run_checks_and_lists_without_training(tmp_path, capsys):
    stub = StubTrain()
    assert sw._run(_args(tmp_path / "s", "--dry-run"), train=stub) == 0
    assert stub.calls == [] and not (tmp_path / "s").exists()
    assert "max_staleness=1__seed=1" in capsys.readouterr().out


@pytest.mark.slow
def test_real_two_run_sweep(tiny_model_path, tmp_path, capsys):
    """Two real runs through Ray, vLLM, the verifier and DeepSpeed, then the resume."""
    out = tmp_path / "sweep"
    argv = ["--grid", "max_staleness=0,1", "--out", str(out), "steps=2", "batch_groups=2",
            "generator.group_size=2", "progress=false"]
    assert sw._run(_parse(argv)) == 0
    rows = json.loads((out / "sweep_summary.json").read_text())
    assert [(r["run"], r["status"]) for r in rows] == [("max_staleness=0", "done"), ("max_staleness=1", "done")]
    for r in rows:
        run_dir = out / r["run"]
        assert (run_dir / "summary.yaml").exists() and (run_dir / "final").is_dir()
        assert yaml.safe_load((run_dir / "config.yaml").read_text())["max_staleness"] == int(r["max_staleness"])
        assert r["steps"] == 2 and r["max_staleness_seen"] <= int(r["max_staleness"])
        assert r["tokens_per_s"] > 0
    assert {p.name for p in (out / "plots").iterdir()} == {"curves.png", "throughput.png", "staleness.png", "monitor.png"}

    def must_not_train(cfg):
        raise AssertionError(f"{cfg.run_dir} was finished and must be skipped")

    assert sw._run(_parse(argv), train=must_not_train) == 0
    assert [r["status"] for r in json.loads((out / "sweep_summary.json").read_text())] == ["skipped", "skipped"]
