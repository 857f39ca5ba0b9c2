"""Checkpoints are whole or absent: a save that fails (a full disk) keeps the last good one, and a
checkpoint whose files do not match its manifest is refused."""
import json
import os
import subprocess

import pytest

from jury.learner.checkpoint import CheckpointError, read_checkpoint, write_checkpoint


def _writer(sizes: dict[str, int]):
    def write(path):
        for name, size in sizes.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(os.urandom(size))
    return write


def test_a_checkpoint_is_swapped_in_whole_and_read_back(tmp_path):
    target = tmp_path / "checkpoint"
    write_checkpoint(target, _writer({"model.bin": 1000, "engine/v1/optim.pt": 500}), {"version": 1, "next_index": 8})
    assert read_checkpoint(target)["next_index"] == 8
    write_checkpoint(target, _writer({"model.bin": 1200}), {"version": 2, "next_index": 16})
    state = read_checkpoint(target)
    assert state["version"] == 2 and not (target / "engine").exists()  # the old one is not mixed in
    # no staging left; the previous checkpoint kept beside it (the fallback)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".checkpoint.prev", "checkpoint"]
    assert read_checkpoint(tmp_path / ".checkpoint.prev")["version"] == 1
    write_checkpoint(target, _writer({"model.bin": 1300}), {"version": 3})
    assert read_checkpoint(tmp_path / ".checkpoint.prev")["version"] == 2  # one fallback, not a history


def test_a_failed_save_keeps_the_last_good_checkpoint(tmp_path):
    target = tmp_path / "checkpoint"
    write_checkpoint(target, _writer({"model.bin": 100}), {"version": 1})

    def half_then_crash(path):
        (path / "model.bin").write_bytes(b"x" * 50)
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    with pytest.raises(CheckpointError, match=rf"checkpoint at {target} failed .*free there; the last good"):
        write_checkpoint(target, half_then_crash, {"version": 2})
    assert read_checkpoint(target)["version"] == 1 and (target / "model.bin").stat().st_size == 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    # with no checkpoint before it, a failed save says so rather than promise one
    with pytest.raises(CheckpointError, match="there is no earlier checkpoint"):
        write_checkpoint(tmp_path / "other", half_then_crash, {"version": 1})


def test_a_checkpoint_that_does_not_match_its_manifest_is_refused(tmp_path):
    target = tmp_path / "checkpoint"
    write_checkpoint(target, _writer({"model.bin": 100, "engine/state.pt": 10}), {"version": 3})
    original = (target / "engine" / "state.pt").read_bytes()
    (target / "engine" / "state.pt").write_bytes(b"short")  # weights of one step, optimizer of another
    with pytest.raises(CheckpointError, match="engine/state.pt is 5 bytes, not 10"):
        read_checkpoint(target)
    (target / "engine" / "state.pt").write_bytes(original)
    (target / "model.bin").unlink()
    with pytest.raises(CheckpointError, match="model.bin is missing"):
        read_checkpoint(target)
    (target / "state.json").write_text(json.dumps({"version": 4}))
    (target / "manifest.json").write_text(json.dumps({"version": 3, "files": {}}))
    with pytest.raises(CheckpointError, match="state.json says version 4, the manifest 3"):
        read_checkpoint(target)


def test_a_crash_between_the_renames_leaves_the_old_one_readable(tmp_path):
    target = tmp_path / "checkpoint"
    write_checkpoint(target, _writer({"model.bin": 100}), {"version": 1})
    os.replace(target, tmp_path / ".checkpoint.prev")  # the first rename happened, the second did not
    assert read_checkpoint(target)["version"] == 1


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs: a disk that fills up. Needs root (CI has it); skipped otherwise."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root): run as root, as CI does, to test a full disk")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_fails_the_save_with_path_and_free_space_and_keeps_the_last(small_disk):
    target = small_disk / "checkpoint"
    write_checkpoint(target, _writer({"model.bin": 800_000}), {"version": 1})
    with pytest.raises(CheckpointError, match=r"failed \(No space left on device\); .* MiB free there"):
        write_checkpoint(target, _writer({"model.bin": 1_500_000}), {"version": 2})
    assert read_checkpoint(target)["version"] == 1
    assert sorted(p.name for p in small_disk.iterdir()) == ["checkpoint"]


def test_bytes_overwritten_in_place_are_caught_and_the_previous_checkpoint_used(tmp_path, caplog):
    """The probe that passed before: bytes overwritten mid-file, the size kept, resumed as if whole."""
    target = tmp_path / "checkpoint"
    write_checkpoint(target, _writer({"model.bin": 4096, "engine/optim.pt": 100}), {"version": 2})
    write_checkpoint(target, _writer({"model.bin": 4096, "engine/optim.pt": 100}), {"version": 4})
    with open(target / "model.bin", "r+b") as f:
        f.seek(2000)
        f.write(b"\x7f" * 64)
    state = read_checkpoint(target)
    assert state["version"] == 2 and state["path"] == str(tmp_path / ".checkpoint.prev")
    assert "model.bin does not match its hash" in state["fallback"]
    assert "resuming from the previous checkpoint, step 2" in caplog.text
    # both corrupt: refused, naming both
    with open(tmp_path / ".checkpoint.prev" / "engine" / "optim.pt", "r+b") as f:
        f.write(b"\x00" * 10)
    with pytest.raises(CheckpointError, match=r"model.bin does not match .* the previous checkpoint is not whole "
                                              r"either: .*optim.pt does not match"):
        read_checkpoint(target)


def test_a_manifest_from_before_hashes_is_read_by_sizes(tmp_path):
    target = tmp_path / "checkpoint"
    write_checkpoint(target, _writer({"model.bin": 100}), {"version": 1})
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["files"] = {k: v["size"] for k, v in manifest["files"].items()}
    (target / "manifest.json").write_text(json.dumps(manifest))
    assert read_checkpoint(target)["version"] == 1
