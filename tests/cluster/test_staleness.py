"""Staleness-bias report from a ledger, and the record format `jury replay` reads."""
import math

import numpy as np
import pytest

from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup, Verdict
from jury.experiments.staleness import format_report, plot_report, staleness_report


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

    (run / "ledger.jsonl").write_text('{"step": 1, "version_start": 0}\n{broken\n')
    assert main(["staleness", str(run)]) == 2
    assert "ledger.jsonl:2: not JSON" in capsys.readouterr().err
    (run / "ledger.jsonl").write_text('{"unrelated": 1}\n')
    assert main(["staleness", str(run)]) == 2
    assert "the ledger is empty" in capsys.readouterr().err
