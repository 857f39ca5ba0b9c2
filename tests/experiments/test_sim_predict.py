"""benchmarks/sim_predict.py: its benches are `jury bench` command lines whose settings load, and its
verdict applies issue 28's bounds (15% on completions/s, 0.3 versions of mean staleness)."""
import argparse
import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import sim_predict  # noqa: E402

from jury.experiments import bench  # noqa: E402
from jury.protocol.config_load import load_config  # noqa: E402


@pytest.mark.parametrize("name", list(sim_predict.BENCHES))
def test_each_bench_is_a_jury_bench_command_whose_settings_load(name):
    parser = argparse.ArgumentParser()
    bench.add_command(parser.add_subparsers(dest="command"))
    args, extra = parser.parse_known_args(["bench", *sim_predict.BENCHES[name], "--out", "x"])
    # every bench runs each sync mode; the toy-modes benches at one bound (a bench runs the other modes
    # at its largest only), predicted from the toy bench's calibration
    staleness = name.removeprefix("toy-modes") if name.startswith("toy-modes") else "0,1,2,4"
    assert not extra and args.staleness == staleness and args.sync_modes == "drain,interrupt,inflight"
    cfg = load_config(args.config, args.overrides)
    assert cfg.learner.threads == (2 if "threads" in name else 1)
    assert cfg.learner.epochs == (2 if "epochs" in name else 1)


def test_a_row_is_within_bounds_only_when_throughput_and_staleness_both_are():
    rows = {"a": {"completions_per_s": (11.4, 10.0), "staleness_mean": (1.2, 1.0)},   # 14%, 0.2
            "b": {"completions_per_s": (11.6, 10.0), "staleness_mean": (1.0, 1.0)},   # 16%
            "c": {"completions_per_s": (9.0, 10.0), "staleness_mean": (1.0, 1.35)},   # -10%, 0.35
            "d": {"completions_per_s": (8.6, 10.0), "staleness_mean": (0.0, 0.0)}}    # -14%
    got = {v["run"]: (round(v["ratio"], 2), v["within"]) for v in sim_predict.verdicts(rows)}
    assert got == {"a": (1.14, True), "b": (1.16, False), "c": (0.9, False), "d": (0.86, True)}
    text = sim_predict.table("toy", (0.3, 1.9), sim_predict.verdicts(rows))
    assert "2 of 4 predicted runs within 15% and 0.3 versions" in text and "| b | 11.6 / 10 | 1.16 |" in text
    # runs the calibration fitted to are marked and not counted: a within bounds was fitted, so 1 of 3
    text = sim_predict.table("toy", (0.3, 1.9), sim_predict.verdicts(rows), fitted=("a", "e"))
    assert "| a | 11.4 / 10 | 1.14 | 1.20 / 1.00 | yes (fitted) |" in text and "| d | 8.6 / 10 | 0.86 |" in text
    assert "1 of 3 predicted runs within 15% and 0.3 versions; calibrated on a" in text
    # a run the model flags outside its calibration (another layout of threads) is said so under the table
    rows["d"]["outside_calibration"] = ["learner.threads=2, the sharing factors fitted at 1"]
    text = sim_predict.table("toy", (0.3, 1.9), sim_predict.verdicts(rows))
    assert "Outside the calibration (the model warns so): learner.threads=2, the sharing factors fitted at 1" in text


def test_the_speedup_is_the_fastest_asynchronous_run_over_the_synchronous_one():
    rows = [{"run": "max_staleness=0", "predicted": 10.0, "measured": 8.0},
            {"run": "max_staleness=1", "predicted": 15.0, "measured": 12.0},
            {"run": "max_staleness=4,inflight", "predicted": 22.0, "measured": 20.0}]
    assert sim_predict.speedup(rows, "predicted") == pytest.approx(2.2)
    assert sim_predict.speedup(rows, "measured") == pytest.approx(2.5)
    assert sim_predict.speedup_line(rows) == "\nasync over sync, completions/s: predicted 2.20x, measured 2.50x"
    # the fastest by prediction is not the fastest measured: the line says which, and what the model
    # predicted for the run measured fastest (outside audit: two maxima could agree from two arms)
    rows[1]["measured"] = 24.0
    assert sim_predict.speedup_line(rows) == ("\nasync over sync, completions/s: predicted 2.20x, measured 3.00x "
                                              "(fastest predicted max_staleness=4,inflight, measured max_staleness=1, "
                                              "which was predicted 1.50x)")


def arms_bench(tmp_path):
    """bench(name, {run: (completions/s, mean staleness)}) -> a folder with that bench.json."""
    def bench(name, arms):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "bench.json").write_text(json.dumps(
            {f"end_to_end/{run}": {"completions_per_s": c, "staleness_mean": s} for run, (c, s) in arms.items()}))
        return folder
    return bench


def test_the_bound_widens_to_the_run_to_run_spread_of_repeats(tmp_path):
    """Repeats NAME.r2 ... of a bench NAME: an arm's spread is its largest completions/s over its
    smallest, less 1, and the staleness range; a prediction outside 15% but inside that spread is within."""
    bench = arms_bench(tmp_path)
    toy = bench("toy", {"max_staleness=1": (100.0, 1.0), "max_staleness=4": (120.0, 3.8)})
    r2 = bench("toy.r2", {"max_staleness=1": (130.0, 1.0), "max_staleness=4": (121.0, 3.2)})
    other = bench("chain", {"max_staleness=1": (10.0, 1.0)})
    assert sim_predict.repeats_of([toy, other, r2]) == {toy: [toy, r2], other: [other]}
    assert sim_predict.repeats_of([r2]) == {r2: [r2]}  # a repeat without its bench stands alone
    spread, each = sim_predict.spreads([toy, r2])
    assert spread["max_staleness=1"] == pytest.approx((0.3, 0.0))
    assert spread["max_staleness=4"] == pytest.approx((1 / 120, 0.6))
    assert each["max_staleness=1"] == [100.0, 130.0]
    rows = {"max_staleness=1": {"completions_per_s": (125.0, 100.0), "staleness_mean": (1.0, 1.0)},  # 25% < 30%
            "max_staleness=4": {"completions_per_s": (140.0, 120.0), "staleness_mean": (3.3, 3.8)}}  # 17% > 15%
    got = {v["run"]: v["within"] for v in sim_predict.verdicts(rows, spread)}
    assert got == {"max_staleness=1": True, "max_staleness=4": False}
    assert {v["run"]: v["within"] for v in sim_predict.verdicts(rows)} == {"max_staleness=1": False,
                                                                           "max_staleness=4": False}
    text = sim_predict.table("toy", (0.1, 0.0), sim_predict.verdicts(rows, spread), each)
    assert "| max_staleness=1 | 125 / 100 | 1.25 | 100, 130 | 30% |" in text
    assert "1 of 2 predicted runs within 15% and 0.3 versions (or the run-to-run spread, where wider)" in text


def test_the_groups_each_interrupt_run_started_over_are_shown_from_its_metrics_in_every_repeat(tmp_path):
    """The interrupt mode's staleness follows how many groups start over at the syncs: under the
    table, predicted against the generators' counters in each repeat's last metrics row. A run is
    found by its config's sync_mode, not its name (a bench whose own mode is interrupt names its runs
    max_staleness=k); a repeat whose metrics hold no counter shows '?', not 0."""
    import json

    def bench(name, interrupted):
        folder = tmp_path / name
        runs = {"max_staleness=4,interrupt": ("staleness-4-interrupt", "interrupt"),
                "max_staleness=2": ("staleness-2", "interrupt"), "max_staleness=4": ("staleness-4", "drain")}
        report = {}
        for run_name, (dirname, mode) in runs.items():
            run = folder / dirname
            run.mkdir(parents=True)
            (run / "config.yaml").write_text(f"generator:\n  sync_mode: {mode}\n")
            rows = [{"step": 0, "generator0/interrupted": 1}, {"step": 1, **interrupted}]
            (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            report[f"end_to_end/{run_name}"] = {"completions_per_s": 10.0, "run_dir": f"/moved/{dirname}"}
        (folder / "bench.json").write_text(json.dumps(report))
        return folder

    toy, r2 = bench("toy", {"generator0/interrupted": 5, "generator1/interrupted": 2}), bench("toy.r2", {})
    assert sim_predict.restarts([toy, r2]) == {"max_staleness=4,interrupt": [7, None], "max_staleness=2": [7, None]}
    rows = {"max_staleness=4,interrupt": {"completions_per_s": (10.0, 10.0), "staleness_mean": (3.0, 3.0),
                                          "interrupted": (12, 7)},
            "max_staleness=4": {"completions_per_s": (12.0, 12.0), "staleness_mean": (3.8, 3.8)}}
    text = sim_predict.table("toy", (0.1, 0.0), sim_predict.verdicts(rows), restarted_each=sim_predict.restarts([toy, r2]))
    assert "Groups started over at a sync, predicted / measured: max_staleness=4,interrupt 12 / 7, ?" in text
    assert "started over" not in sim_predict.table("toy", (0.1, 0.0), sim_predict.verdicts(
        {"max_staleness=4": rows["max_staleness=4"]}))


def test_a_forced_staleness_run_is_checked_group_by_group_against_its_ledger(tmp_path, capsys):
    """Each group's staleness in the model of a forced run's own config against its ledger row:
    a ledger as the schedule makes it agrees everywhere; one row off is named by its task index."""
    import json

    from jury.cluster.feeder import draw_staleness
    from jury.protocol.plan import parse_staleness

    run = tmp_path / "toy-forced"
    run.mkdir()
    (run / "config.yaml").write_text("steps: 5\nbatch_groups: 4\nseed: 3\nforced_staleness: {0: 1, 2: 1}\n")
    forced = parse_staleness({0: 1, 2: 1})
    rows = [{"index": i, "step": i // 4, "staleness": min(i // 4, draw_staleness(forced, 3, i))} for i in range(20)]
    assert {r["staleness"] for r in rows} == {0, 1, 2}  # batch 1 drawn k = 2 is one version stale
    (run / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert sim_predict.main(["--forced", str(run)]) == 0
    out = capsys.readouterr().out
    assert "20 of 20 groups trained at the staleness the model gives them: exact." in out
    rows[13]["staleness"] += 1
    (run / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "19 of 20 groups trained at the staleness the model gives them: 1 differ (task indices [13])" in \
        sim_predict.forced(run)
    assert sim_predict.main(["--forced", str(run)]) == 1  # a difference is a defect: the exit says so
    (run / "config.yaml").write_text("steps: 5\nbatch_groups: 4\n")
    with pytest.raises(ValueError, match="not a forced-staleness run"):
        sim_predict.forced(run)
    for bad, why in ((run, "not a forced-staleness run"), (tmp_path / "nope", "No such file")):
        with pytest.raises(SystemExit):  # refused by name, not a traceback
            sim_predict.main(["--forced", str(bad)])
        assert why in capsys.readouterr().err


def test_a_repeat_count_below_one_is_refused_before_any_bench_runs(tmp_path, capsys):
    with pytest.raises(SystemExit):
        sim_predict.main(["--run", "--repeat", "0", "--out", str(tmp_path)])
    assert "--repeat >= 1" in capsys.readouterr().err and not any(tmp_path.iterdir())


@pytest.mark.parametrize("flag", ["--cross", "--predict"])
def test_a_cross_or_predict_that_is_not_two_folders_is_refused_by_name(flag, capsys):
    for value in ("onlyone", "a,", "a,b,c"):
        with pytest.raises(SystemExit):
            sim_predict.main([flag, value])
        assert f"{flag} {value}: two bench folders, BASE,OTHER" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--cross", "--predict", ""])
def test_a_folder_with_no_bench_is_refused_by_name(flag, tmp_path, capsys):
    bench = tmp_path / "toy"
    bench.mkdir()
    (bench / "bench.json").write_text("{}")
    missing = tmp_path / "toy-learner2threads"  # a bench name given where a folder is asked for
    with pytest.raises(SystemExit) as e:
        sim_predict.main([flag, f"{bench},{missing}"] if flag else [str(missing)])
    assert e.value.code == 2
    assert f"{flag or 'DIR'} {missing}: no bench.json there" in capsys.readouterr().err


def test_the_runs_calibrated_on_are_the_first_staleness_and_the_sharing_run(tmp_path):
    (tmp_path / "bench.json").write_text(json.dumps({"config": {"staleness": [0, 1, 2]}}))
    assert sim_predict.fitted_runs(tmp_path, "max_staleness=1") == ("max_staleness=0", "max_staleness=1")
    assert sim_predict.fitted_runs(tmp_path, "") == ("max_staleness=0",)


def test_predict_takes_nothing_of_the_other_bench_but_its_configs(tmp_path):
    """--predict BASE,OTHER: OTHER's runs from BASE's calibration alone. OTHER's learner_only arm
    (were it read, as --cross does, the learner would be 100 times slower) changes nothing."""
    import shutil

    from test_simulate import bench_folder

    (tmp_path / "toy").mkdir()
    base = bench_folder(tmp_path / "toy")
    other = tmp_path / "toy-epochs2"
    shutil.copytree(base, other)
    report = json.loads((other / "bench.json").read_text())
    report["learner_only"] = {"tokens_per_s": 1.0}
    (other / "bench.json").write_text(json.dumps(report))
    text = sim_predict.predict(base, other, "")
    assert "toy-epochs2 predicted from toy's calibration alone" in text and "async over sync" in text
    assert text.replace("toy-epochs2 predicted", "toy predicted") == sim_predict.predict(base, base, "")


def test_each_repeat_can_be_the_calibration_in_turn(tmp_path):
    """--each: a bench with a repeat is calibrated on each folder in turn, each compared with its own
    runs under the spread of both; the last line counts the predicted runs within bounds under each.
    The repeat measured its max_staleness=2 arm as the model predicts it (97 completions/s at
    staleness 2; the bench itself 50 at 0.5): within bounds against the repeat, not against the bench."""
    import shutil

    from test_simulate import bench_folder

    (tmp_path / "toy").mkdir()
    base = bench_folder(tmp_path / "toy")
    r2 = tmp_path / "toy.r2"
    shutil.copytree(base, r2)
    report = json.loads((r2 / "bench.json").read_text())
    report["end_to_end/max_staleness=2"].update(completions_per_s=95.0, staleness_mean=2.0)
    (r2 / "bench.json").write_text(json.dumps(report))
    one = sim_predict.report([base, r2], "")
    both = sim_predict.report([base, r2], "", each_repeat=True)
    assert one.count("\n### ") == 1 and both.count("\n### ") == 2
    assert "### toy, 2 repeats" in both and "### toy.r2, 2 repeats" in both
    assert "| max_staleness=2 | 96.7 / 95 | 1.02 | 50, 95 | 90% | 2.00 / 2.00 | yes |" in both
    assert "| max_staleness=2 | 96.7 / 50 | 1.93 | 50, 95 | 90% | 2.00 / 0.50 | no |" in both
    assert "toy calibrated on each of its 2 repeats in turn, predicted runs within bounds: " \
           "toy: 0 of 2; toy.r2: 1 of 2 (1 of 4)" in both
    # the same runs over the calibration run's completions/s (the repeat's 95 / 50 against 96.7 / 45.8)
    assert "max_staleness=2 2.11 / 1.90 (spread 90%) yes" in both
    assert both.rstrip().endswith("over its max_staleness=0 run: toy: 0 of 2; toy.r2: 1 of 2 (1 of 4)")
    assert "in turn" not in sim_predict.report([base], "", each_repeat=True)  # no repeat: one table, no count


def test_a_calibration_run_that_ran_fast_is_judged_by_how_much_the_ratio_over_it_moves(tmp_path):
    """The repeat's synchronous run ran 25% faster and its max_staleness=4 run as fast as the bench's:
    each arm's ratio over the synchronous run moved by 25% between the repeats though the arm itself
    did not. A model calibrated on the repeat that predicts 2x over it misses the arm by 25% against
    its own 0% spread, and is within the 25% the ratio moves."""
    bench = arms_bench(tmp_path)
    toy = bench("toy", {"max_staleness=0": (100.0, 0.0), "max_staleness=4": (200.0, 3.8)})
    r2 = bench("toy.r2", {"max_staleness=0": (125.0, 0.0), "max_staleness=4": (200.0, 3.8)})
    single = bench("chain", {"max_staleness=0": (10.0, 0.0), "max_staleness=4": (20.0, 3.8)})
    rel = sim_predict.relative_spreads([toy, r2], "max_staleness=0")
    assert rel == {"max_staleness=4": (pytest.approx(0.25), [2.0, 1.6])}  # the calibration run itself left out
    assert sim_predict.relative_spreads([single], "max_staleness=0") == {}  # once: no spread
    spread, _ = sim_predict.spreads([toy, r2])
    rows = sim_predict.verdicts({"max_staleness=0": {"completions_per_s": (125.0, 125.0), "staleness_mean": (0.0, 0.0)},
                                 "max_staleness=4": {"completions_per_s": (250.0, 200.0), "staleness_mean": (3.8, 3.8)}},
                                spread)
    assert [r["within"] for r in rows] == [True, False]
    line, inside, of = sim_predict.relative(rows, "max_staleness=0", rel, ("max_staleness=0",))
    assert (inside, of) == (1, 1) and "max_staleness=4 2.00 / 1.60 (spread 25%) yes" in line
    # the staleness bound still holds: the same ratio a version staler is out
    rows[1]["staleness"] = (3.8, 3.2)
    assert sim_predict.relative(rows, "max_staleness=0", rel, ("max_staleness=0",))[1:] == (0, 1)
    # no calibration run among the rows: nothing to judge
    assert sim_predict.relative(rows[1:], "max_staleness=0", rel, ()) == ("", 0, 0)


def test_leave_one_out_predicts_each_asynchronous_run_from_the_others_factors(tmp_path, capsys):
    """--leave-one-out: the calibration is the whole bench but the run predicted. Each asynchronous
    run is simulated with the median of the factors fitted to the others, never its own; the
    synchronous run (the alone costs are fitted to it) and an arm of other settings with those of all."""
    from test_simulate import bench_folder, three_async_runs

    from jury.experiments.simulate import against_bench, calibrated

    folder = three_async_runs(tmp_path)
    (tmp_path / "lone").mkdir()
    lone = bench_folder(tmp_path / "lone")
    with pytest.raises(ValueError, match=r"leave one out needs two asynchronous runs or more \(it has max_staleness=2\)"):
        sim_predict.left_out(lone)  # its one asynchronous run would be predicted from nothing
    with pytest.raises(SystemExit):
        sim_predict.main([str(lone), "--leave-one-out"])
    assert "leave one out needs two asynchronous runs" in capsys.readouterr().err
    rows, costs = sim_predict.left_out(folder)
    assert set(rows) == {"max_staleness=0", "max_staleness=2", "max_staleness=1", "max_staleness=4",
                         "max_staleness=2,slow"}
    others = calibrated(str(folder), sharing_from="max_staleness=2;max_staleness=4")
    assert rows["max_staleness=1"] == against_bench(str(folder), others, only=("max_staleness=1",))["max_staleness=1"]
    own = calibrated(str(folder), sharing_from="max_staleness=1")
    assert rows["max_staleness=1"] != against_bench(str(folder), own, only=("max_staleness=1",))["max_staleness=1"]
    every = calibrated(str(folder), sharing_from="async")
    assert costs.sharing == every.sharing
    for name in ("max_staleness=0", "max_staleness=2,slow"):  # fitted to, or of other settings: all factors
        assert rows[name] == against_bench(str(folder), every)[name]
    text = sim_predict.report([folder], leave_one_out=True)
    assert "leave one out: each asynchronous run predicted from the median of the others' factors" in text
    assert " of 4 predicted runs within 15% and 0.3 versions; calibrated on max_staleness=0" in text
    assert sim_predict.main([str(folder), "--leave-one-out"]) == 0 and capsys.readouterr().out.strip() == text.strip()
