"""Staleness-bias report from a ledger, and the record format `jury replay` reads."""
import math

import numpy as np
import pytest

from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup, Verdict
from jury.experiments.staleness import format_lengths, format_report, plot_report, staleness_report


def _row(step, version, length, pass_rate, reward, verify_s=0.1, wait=0.0, share=0.2):
    return {"step": step, "version_start": version, "staleness": step - version, "length": length,
            "pass_rate": pass_rate, "reward": reward, "verify_s": verify_s, "verify_wait_s": wait,
            "verify_share": share}


def test_report_splits_groups_by_staleness_and_compares_each_bucket_with_the_whole(tmp_path):
    rows = [_row(3, 3, 10, 0.5, 0.4), _row(3, 3, 12, 0.7, 0.6),       # fresh: short, easy
            _row(4, 2, 30, 0.1, 0.0, verify_s=0.5, share=0.6)]          # two versions stale: long, hard
    rep = staleness_report(rows)
    assert list(rep["buckets"]) == [0, 2]
    fresh, stale = rep["buckets"][0], rep["buckets"][2]
    assert (fresh["groups"], stale["groups"]) == (2, 1)
    assert fresh["share"] == pytest.approx(2 / 3)
    assert fresh["length"] == 11 and stale["length"] == 30
    assert rep["all"]["length"] == pytest.approx(52 / 3)
    assert stale["length_vs_all"] == pytest.approx(30 - 52 / 3)
    assert stale["pass_rate_vs_all"] < 0 < fresh["pass_rate_vs_all"]
    assert stale["verify_share"] == pytest.approx(0.6)
    text = format_report(rep)
    assert text.splitlines()[0].split()[:3] == ["stale", "groups", "share"] and len(text.splitlines()) == 4
    assert plot_report(rep, tmp_path / "s.png").stat().st_size > 5000


def test_report_skips_nan_and_reads_old_ledgers_without_the_staleness_field():
    rows = [{"step": 5, "version_start": 4, "length": 8.0, "pass_rate": math.nan, "reward": 1.0}]
    rep = staleness_report(rows)
    assert list(rep["buckets"]) == [1]
    assert math.isnan(rep["buckets"][1]["pass_rate"]) and rep["buckets"][1]["reward"] == 1.0


def test_report_leaves_out_groups_that_trained_nothing():
    """A refused or unscored group's ledger row (with its error) was not trained: it neither fills a
    bucket nor moves the run's means."""
    refused = {**_row(5, 1, 0, math.nan, math.nan), "error": "prompt too long"}
    unscored = {**_row(5, 2, 40, 0.0, math.nan), "error": "verifier timed out"}
    rep = staleness_report([_row(5, 5, 10, 0.5, 0.4), refused, unscored])
    assert list(rep["buckets"]) == [0] and rep["all"]["groups"] == 1 and rep["all"]["length"] == 10


@pytest.mark.parametrize("field, value", [("staleness", "abc"), ("staleness", -1), ("length", float("nan")),
                                          ("length", "3")])
def test_a_ledger_row_of_the_wrong_type_is_named(field, value):
    with pytest.raises(ValueError, match=f"ledger row 2 .*{field} must be"):
        staleness_report([_row(5, 5, 10, 0.5, 0.4), {**_row(5, 4, 10, 0.5, 0.4), field: value}])


def test_a_recorded_batch_reads_back_identical(tmp_path):
    from jury.protocol.record import read_record, write_record

    def group(i):
        task = PromptTask(f"t{i}", i, "Compute 1+1.", "2", "synthetic")
        samples = [Sample(np.arange(5, dtype=np.int32) + i, np.full(5, -0.5, np.float32), "x", "stop", "2")]
        return ScoredGroup(RolloutGroup(task, np.arange(3, dtype=np.int32), samples, 1, 2, "generator0", 0.5,
                                        t_generated=123.5),
                           [Verdict("correct", "math", 0.001)], np.ones(1, np.float32), "jury", "2", 1.0,
                           "proved", 1, 0.01, "verifier0", 1.0, {}, 124.0, 124.25)

    write_record(str(tmp_path / "step-000000.msgpack"), [group(0), group(1)])
    back = read_record(str(tmp_path / "step-000000.msgpack"))
    assert [g.group.task.index for g in back] == [0, 1]
    assert back[1].group.samples[0].token_ids.tolist() == [1, 2, 3, 4, 5]
    assert back[0].group.t_generated == 123.5 and back[0].t_verified == 124.25
    assert back[0].gate == "proved" and back[0].rewards.tolist() == [1.0]
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_input_to_replay_and_staleness_is_refused_naming_the_file(tmp_path, capsys):
    from jury.experiments.cli import main

    run = tmp_path / "run"
    (run / "record").mkdir(parents=True)
    (run / "config.yaml").write_text("steps: 2\n")
    assert main(["replay", str(run)]) == 2
    assert "record_groups=true" in capsys.readouterr().err  # an empty record/ is no record
    (run / "record" / "step-000000.msgpack").write_bytes(b"\x93not a batch")
    (run / "record" / "step-000002.msgpack").write_bytes(b"")
    assert main(["replay", str(run)]) == 2
    assert "have gaps" in capsys.readouterr().err
    (run / "record" / "step-000002.msgpack").unlink()
    assert main(["replay", str(run)]) == 2
    assert "step-000000.msgpack: not a recorded batch" in capsys.readouterr().err
    assert not (run / "replay").exists()  # nothing built, nothing written

    (run / "ledger.jsonl").write_text('{"step": 1, "version_start": 0}\n{broken\n{"step": 2, "version_start": 1}\n')
    assert main(["staleness", str(run)]) == 2
    assert "ledger.jsonl:2: not a JSON record" in capsys.readouterr().err
    # a last line cut short by a crash is skipped, as every reader of the run's files does
    import json
    (run / "ledger.jsonl").write_text(json.dumps(_row(1, 0, 10, 0.5, 0.5)) + '\n{"step": 2, "vers')
    assert main(["staleness", str(run)]) == 0
    capsys.readouterr()
    (run / "ledger.jsonl").write_text('{"unrelated": 1}\n')
    assert main(["staleness", str(run)]) == 2
    assert "the ledger is empty" in capsys.readouterr().err
    # (outside audit) a ledger of refused groups only, bad thresholds, a missing folder, a plot path
    # without .png, replay's negative --steps, and a tiny model built over a file
    (run / "ledger.jsonl").write_text(json.dumps({**_row(1, 0, 10, 0.5, 0.5), "error": "refused"}) + "\n")
    assert main(["staleness", str(run)]) == 2
    assert "every row has an error" in capsys.readouterr().err
    (run / "ledger.jsonl").write_text(json.dumps(_row(1, 0, 10, 0.5, 0.5)) + "\n")
    for bad, says in ((["--starve-ratio", "-1"], "a share in [0, 1]"), (["--starve-ratio", "nan"], "a share in [0, 1]"),
                      (["--plot", str(tmp_path / "nowhere" / "s.png")], "does not exist")):
        assert main(["staleness", str(run), *bad]) == 2
        assert says in capsys.readouterr().err
    assert main(["staleness", str(run), "--plot", str(tmp_path / "bias")]) == 0
    assert str(tmp_path / "bias.png") in capsys.readouterr().out and (tmp_path / "bias.png").exists()
    assert main(["replay", str(run), "--steps", "-1"]) == 2
    assert "--steps -1" in capsys.readouterr().err
    (tmp_path / "a_file").write_text("")
    assert main(["make-tiny-model", "--path", str(tmp_path / "a_file")]) == 2
    assert "a file, not a folder" in capsys.readouterr().err


# ── length buckets: generated against trained, and the starvation warning ──

def _ledger(versions, fresh, stale, k=2):
    """Per version v: `fresh` (length, pass rate) groups trained at step v, `stale` ones at step v + k."""
    rows = []
    for v in range(versions):
        rows += [_row(v, v, n, p, p) for n, p in fresh]
        rows += [_row(v + k, v, n, p, p) for n, p in stale]
    return rows


def test_long_groups_trained_only_stale_are_starved_at_staleness_0():
    """Six versions each generate 8 short groups (10 tokens, trained fresh) and 2 long ones
    (200 tokens, trained 2 versions later). At staleness 0 the same versions generated
    2/10 long groups, 20%, but none was trained there: 0% < 0.5 x 20%, with 48 x 0.2 = 9.6
    expected. The long groups went to staleness 2, so they are starved, not missing."""
    rep = staleness_report(_ledger(6, [(10, 0.6)] * 8, [(200, 0.1)] * 2))
    fresh = rep["buckets"][0]
    long = fresh["lengths"]["[128, 256)"]
    assert (long["trained_groups"], long["trained_share"]) == (0, 0.0)
    assert long["generated_share"] == pytest.approx(0.2) and long["expected_groups"] == pytest.approx(9.6)
    assert long["generated_pass_rate"] == pytest.approx(0.1)
    # what staleness 0 trained against what its versions generated: length 10 vs (8·10 + 2·200)/10 = 48
    assert fresh["length"] == 10 and fresh["generated"]["length"] == pytest.approx(48)
    assert fresh["pass_rate"] == pytest.approx(0.6) and fresh["generated"]["pass_rate"] == pytest.approx(0.5)
    assert rep["starved"] == [{"staleness": 0, "length": "[128, 256)", "trained_share": 0.0,
                               "generated_share": pytest.approx(0.2), "trained_groups": 0,
                               "expected_groups": pytest.approx(9.6)}]
    # short groups are missing from staleness 2 because they were all trained fresh: no starvation
    assert rep["buckets"][2]["lengths"]["[8, 16)"]["trained_share"] == 0 and not \
        rep["buckets"][2]["lengths"]["[8, 16)"]["starved"]
    assert rep["lengths"]["[8, 16)"] == {"groups": 48, "share": 0.8, "length": 10, "pass_rate": pytest.approx(0.6)}
    text = format_lengths(rep)
    assert "STARVED" in text and "WARNING: length [128, 256) tokens is starved at staleness 0" in text


def test_no_warning_when_each_staleness_trains_what_was_generated():
    # every version's groups, short and long alike, split evenly between staleness 0 and 2
    mix = [(10, 0.6)] * 4 + [(200, 0.1)]
    rep = staleness_report(_ledger(6, mix, mix))
    assert rep["starved"] == [] and "WARNING" not in format_lengths(rep)
    for k in (0, 2):
        long = rep["buckets"][k]["lengths"]["[128, 256)"]
        assert long["trained_share"] == pytest.approx(long["generated_share"]) == pytest.approx(0.2)


def test_the_starvation_thresholds_are_settings():
    rows = _ledger(6, [(10, 0.6)] * 8 + [(200, 0.1)] * 2, [(200, 0.1)] * 2)  # fresh: 2 long in 10, 4 in 12 generated
    long = staleness_report(rows)["buckets"][0]["lengths"]["[128, 256)"]
    assert long["trained_share"] == pytest.approx(2 / 10) and long["generated_share"] == pytest.approx(4 / 12)
    assert staleness_report(rows)["starved"] == []                      # 0.2 is not below 0.5 x 0.33 = 0.17
    assert len(staleness_report(rows, starve_ratio=0.7)["starved"]) == 1  # ... but below 0.7 x 0.33 = 0.23
    few = _ledger(2, [(10, 0.6)] * 8, [(200, 0.1)] * 2)                  # 16 x 0.2 = 3.2 long groups expected
    assert staleness_report(few)["starved"] == []
    assert len(staleness_report(few, starve_min_groups=3)["starved"]) == 1


def test_jury_staleness_prints_the_warning_and_writes_it_to_the_json(tmp_path, capsys):
    import json

    from jury.experiments.cli import main

    run = tmp_path / "run"
    run.mkdir()
    rows = _ledger(6, [(10, 0.6)] * 8, [(200, 0.1)] * 2)
    (run / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["staleness", str(run), "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "generated by the same policy versions" in out and "WARNING: length [128, 256) tokens" in out
    report = json.loads((tmp_path / "s.json").read_text())
    assert [(x["staleness"], x["length"]) for x in report["starved"]] == [(0, "[128, 256)")]
    assert report["settings"]["starve_ratio"] == 0.5
    assert (run / "staleness_bias.png").stat().st_size > 5000
    assert main(["staleness", str(run), "--starve-ratio", "0"]) == 0
    assert "WARNING" not in capsys.readouterr().out
