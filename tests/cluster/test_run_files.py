"""A run folder's files under faults: torn records, a full disk, a corrupt checkpoint, a resume
that would change the run (no Ray: the driver's and the protocol's own functions)."""
import json
import logging
import subprocess

import pytest

from jury.cluster.driver import read_checkpoint_state, resume_hint, truncate_steps
from jury.cluster.errors import DiskFull, RunFailed
from jury.cluster.metrics import JsonlFile, read_jsonl, read_metrics
from jury.learner.checkpoint import write_checkpoint
from jury.protocol.config import ConfigError
from jury.protocol.config_load import load_config, resume_changes


def test_a_torn_last_record_is_skipped_with_its_file_and_line(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "x": 1}\n{"step": 1, "x": 2}\n{"step": 2, "x"')  # killed mid-write
    with caplog.at_level(logging.WARNING):
        assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1]
    assert f"{path}:3: the last record is cut short" in caplog.text
    truncate_steps(path, 5)  # a resume rewrites it whole
    assert path.read_text() == '{"step": 0, "x": 1}\n{"step": 1, "x": 2}\n'
    path.write_text('{"step": 0}\nnot json\n{"step": 2}\n')  # a bad line inside is not a torn last one
    with pytest.raises(ValueError, match=rf"{path}:2: not a JSON record"):
        read_jsonl(path)
    for line in ("null", "[1, 2]", '"text"'):  # valid JSON, no record: named, not a traceback further on
        path.write_text('{"step": 0}\n' + line + '\n{"step": 2}\n')
        with pytest.raises(ValueError, match=rf"{path}:2: not a record \(a JSON object\)"):
            read_jsonl(path)


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs: a disk that fills up. Needs root (CI has it); skipped otherwise."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root): run as root, as CI does, to test a full disk")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_stops_with_path_and_free_space_and_leaves_whole_records(small_disk):
    log = JsonlFile(small_disk / "ledger.jsonl")
    row = {"step": 0, "payload": "x" * 3000}
    with pytest.raises(DiskFull, match=rf"cannot write {small_disk}/ledger.jsonl \(No space left on device\); "
                                       r"[0-9.]+ MiB free there"):
        for step in range(1000):
            log.append([dict(row, step=step)])
    log.close()
    rows = read_jsonl(small_disk / "ledger.jsonl")  # no torn record: every line whole
    assert rows and [r["step"] for r in rows] == list(range(len(rows)))
    assert (small_disk / "ledger.jsonl").read_text().endswith("}\n")


def _run_folder(tmp_path, versions):
    run = tmp_path / "run"
    run.mkdir()
    target = run / "checkpoint"
    for v in versions:
        write_checkpoint(target, lambda p: (p / "model.bin").write_bytes(bytes(range(256)) * 16),
                         {"version": v, "next_index": 8 * v})
    (run / "latest_checkpoint").write_text(json.dumps({"path": str(target)}))
    return run, target


def test_a_corrupt_checkpoint_is_set_aside_and_the_previous_one_resumed(tmp_path, capsys):
    run, target = _run_folder(tmp_path, [2, 4])
    with open(target / "model.bin", "r+b") as f:  # overwritten in place, the size kept
        f.seek(100)
        f.write(b"\xff" * 8)
    assert "Resume from step 2" in resume_hint(run)  # a hint reads, never moves
    state = read_checkpoint_state(str(run))
    assert state["version"] == 2 and state["path"] == str(target)
    err = capsys.readouterr().err
    assert err.startswith("jury train: ") and "model.bin does not match its hash" in err
    assert "resuming from the previous checkpoint, step 2" in err
    assert (run / ".checkpoint.corrupt" / "model.bin").exists() and not (run / ".checkpoint.prev").exists()
    assert read_checkpoint_state(str(run))["version"] == 2  # and from now on it is the checkpoint


def test_no_whole_checkpoint_is_a_jury_train_line_not_a_traceback(tmp_path):
    run, target = _run_folder(tmp_path, [3])
    (target / "model.bin").write_bytes(b"\x00" * 4096)
    with pytest.raises(RunFailed, match=rf"cannot resume {run}: .*model.bin does not match its hash"):
        read_checkpoint_state(str(run))
    assert "No checkpoint to resume from" in resume_hint(run)


@pytest.mark.parametrize("change, field, old, new", [
    ("batch_groups=4", "batch_groups", 8, 4),           # the learner would wait for indices never sent
    ("model=tiny-chat", "model", "tiny", "tiny-chat"),  # weights of one model, prompts of another
    ("generator.group_size=4", "generator.group_size", 8, 4),
    ("learner.correction=tis_token", "learner.correction", "none", "tis_token"),
    ("data.template=boxed", "data.template", "bare", "boxed"),
    ("admission=continuous", "admission", "batch", "continuous"),  # the checkpoint holds a prefix, not pending tasks
])
def test_a_resume_that_would_change_the_run_is_refused_naming_the_setting(change, field, old, new):
    recorded = load_config(None)
    with pytest.raises(ConfigError, match=rf"--resume cannot change {field}: {old!r} -> {new!r}"):
        resume_changes(recorded, load_config(None, [change]))


def test_a_resume_may_change_how_long_how_fast_and_what_it_logs():
    recorded = load_config(None)
    changes = resume_changes(recorded, load_config(None, ["steps=600", "learner.lr=3e-5", "eval.every=5",
                                                         "checkpoint_every=10", "tracking=tensorboard"]))
    assert changes == {"steps": (300, 600), "learner.lr": (1e-4, 3e-5), "eval.every": (0, 5),
                       "checkpoint_every": (0, 10), "tracking": ([], ["tensorboard"])}
    assert resume_changes(recorded, load_config(None)) == {}
