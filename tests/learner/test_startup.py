"""What the learner compiles at start-up: one rank has no one to reduce with, so DeepSpeed's
shared-memory allreduce op (a JIT C++ build, about 40-70 s on a fresh machine) is not built."""
import os
import subprocess
import sys

CODE = """
from jury.learner.learner import _init_distributed
_init_distributed("gloo", 0, 1, None)
import deepspeed.comm as dist
import torch
t = torch.ones(3)
dist.all_reduce(t)
print("world", dist.get_world_size(), "sum", float(t.sum()))
"""


def test_one_rank_builds_no_shared_memory_op(tmp_path):
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "DS_ACCELERATOR": "cpu"}
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "world 1 sum 3.0" in out.stdout  # DeepSpeed's collectives still work on the one rank
    assert "shm_comm" not in out.stdout + out.stderr
    built = list((tmp_path / "ext").rglob("*.so")) if (tmp_path / "ext").exists() else []
    assert built == [], built


def test_a_stale_build_lock_is_named_before_deepspeed_waits_on_it(tmp_path, monkeypatch, caplog):
    """A JIT build of the shared-memory op that was stopped leaves its lock file, and every later
    two-rank start waits on it for ever (seen: a run killed during its first compile). The learner
    names the file before it starts DeepSpeed; a fresh lock (a build in progress) is left alone."""
    from jury.learner.learner import _warn_stale_build_lock

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert _warn_stale_build_lock("deepspeed_shm_comm") == ""  # no build yet
    lock = tmp_path / "deepspeed_shm_comm" / "lock"
    lock.touch()
    assert _warn_stale_build_lock("deepspeed_shm_comm") == ""  # a build in progress
    old = lock.stat().st_mtime - 3600
    os.utime(lock, (old, old))
    with caplog.at_level("WARNING"):
        message = _warn_stale_build_lock("deepspeed_shm_comm")
    assert str(lock) in message and "60 min old" in message and "remove that file" in message
    assert message in caplog.text
