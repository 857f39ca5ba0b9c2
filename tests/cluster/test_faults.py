"""Surviving faults with real processes: kill -9 of a verifier or a generator mid-run, and resume."""
import json

import pytest

from jury.protocol.config_load import load_config
from jury.cluster.metrics import read_metrics

pytestmark = pytest.mark.slow

BASE = ["steps=5", "batch_groups=2", "generator.group_size=2", "max_staleness=1", "progress=false",
        "resend_after_s=10", "group_timeout_s=400"]


def _ledger(run_dir):
    with open(run_dir / "ledger.jsonl") as f:
        return [json.loads(line) for line in f]


def _assert_nothing_lost_nothing_twice(run_dir, summary, steps, batch, max_staleness=1):
    entries = _ledger(run_dir)
    indices = [e["index"] for e in entries]
    assert sorted(indices) == list(range(steps * batch)), "a group was lost or trained twice"
    assert len({e["task_id"] for e in entries}) == len(entries)
    assert summary["feeder/admitted"] == steps * batch
    for e in entries:  # each group trained in its own batch, within the staleness bound
        assert e["step"] == e["index"] // batch
        assert e["step"] - e["version_start"] <= max_staleness


@pytest.mark.parametrize("faults,extra", [
    # -9 from outside, of the generator while the first window is in flight and of a verifier; a
    # verifier's check process killed: the pool replaces it, nothing is unchecked; the vLLM engine
    # core under a live generator actor, which must notice and fail; and the worker's own loop raises:
    # the actor must fail at once (not live on doing nothing), saying why. One run for the six (each
    # run costs a Ray and engine start-up): a fault a step. generator0 dies three times, and Ray
    # restarts an actor max_restarts times: one to spare
    ("kill:generator0@1,kill_pool:verifier0@2,kill:verifier0@3,raise:generator0@4,kill_engine:generator0@5,"
     "raise:verifier0@6", ["steps=7", "max_restarts=4"]),
    # the engine core killed with a weight sync every 4 steps (the driver used to wait forever), the
    # generator slowed (3 s a task, one task after another, from before the first is sent) so that it
    # still holds tasks of later steps when it dies at step 1. Before, slow@0 came after the first
    # window's 8 tasks were handed out, slowed none of them, and in CI of 2026-11-26 the generator
    # had finished all 8 before step 1: the test tested nothing and failed on that; resend_after_s
    # so long that the run would wait it out once per lost batch: everything it held is re-sent when
    # the restarted generator is wired back in (before, one batch per resend_after_s)
    ("slow:generator0@0:3,kill_engine:generator0@1", ["sync_every=4", "max_staleness=3", "steps=6",
                                                       "resend_after_s=300"]),
])
def test_dead_workers_lose_no_group_and_count_none_twice(tiny_model_path, tmp_path, faults, extra):
    import time

    from jury.cluster.driver import train

    t0 = time.time()
    cfg = load_config(None, [*BASE, f"run_dir={tmp_path}", f"faults={faults}", *extra])
    summary = train(cfg)
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == list(range(cfg.steps))
    _assert_nothing_lost_nothing_twice(tmp_path, summary, cfg.steps, 2, cfg.max_staleness)
    # a sync a generator died in ends when the driver aborts it, not after sync_timeout_s (300 s):
    # what it took is the restart of the generator and one more sync
    slowest = max(r.get("sync/total_s", 0.0) for r in rows)
    assert slowest < 0.8 * cfg.sync_timeout_s, f"a sync took {slowest:.0f}s: it waited out sync_timeout_s"
    assert summary["error_samples"] == 0 and not any(e["error"] for e in _ledger(tmp_path))
    restarted = [f.split(":")[1].split("@")[0] for f in faults.split(",")
                 if f.split(":")[0] in ("kill", "kill_engine", "raise")]  # not kill_pool, not slow
    assert summary["pipeline/recoveries"] >= len(restarted), "a dead worker was never wired back in"
    if "resend_after_s=300" in extra:  # every re-send came at a recovery, none after waiting resend_after_s
        assert summary["pipeline/resent_at_recovery"] > 0, "the dead generator held nothing: nothing was tested"
        assert summary["feeder/resent"] == summary["pipeline/resent_at_recovery"], summary
    logs = [_text(f) for f in _ray_logs_since(t0)]
    for f in faults.split(","):
        action, target = f.split("@")[0].split(":")
        why = {"raise": f"fault injection: {target}'s loop raises", "kill_engine": "the vLLM engine core is dead"}
        if action in why:  # the dead actor's own log says why, with the original exception
            assert any(why[action] in log and "the actor exits so that Ray restarts it" in log for log in logs), \
                f"{target}'s log does not say why it died"


def _text(path) -> str:
    return path.read_text(errors="replace")


def _ray_logs_since(t0: float):
    """The Ray worker logs (stdout and stderr of every actor process) written since t0, of the Ray
    sessions this process started (named with its pid): session_latest may be another run's, when
    one started on the machine since."""
    import os
    import pathlib

    sessions = pathlib.Path("/tmp/ray").glob(f"session_*_{os.getpid()}")
    return [f for s in sessions for f in (s / "logs").glob("worker-*") if f.stat().st_mtime >= t0]


def test_a_dead_learner_stops_the_run_with_a_clear_message(tiny_model_path, tmp_path):
    import os
    import time

    from conftest import descendants, live_pids

    from jury.cluster.driver import RunFailed, train

    before = set(descendants(os.getpid()))
    cfg = load_config(None, [*BASE, f"run_dir={tmp_path}", "faults=kill:learner0@1"])
    with pytest.raises(RunFailed, match="step 1: learner rank 0 died during step 1"):
        train(cfg)
    deadline = time.time() + 30
    while time.time() < deadline and live_pids(set(descendants(os.getpid())) - before):
        time.sleep(1)
    assert not live_pids(set(descendants(os.getpid())) - before), "processes left after the learner died"


def test_a_frozen_generator_fails_the_run_naming_it_and_leaves_no_process_behind(tiny_model_path, tmp_path):
    """SIGSTOP of generator0's actor: alive to Ray (never restarted), answering nothing. The run
    stops within group_timeout_s (or sync_timeout_s, if it was caught in a weight sync) naming
    generator0, and every process the run started ends: before, the frozen actor was killed and
    its vLLM engine core and worker lived on, orphaned (protocol/reaper.py)."""
    from conftest import RunProcesses

    from jury.cluster.driver import RunFailed, train

    cfg = load_config(None, [*BASE, f"run_dir={tmp_path}", "faults=freeze:generator0@1", "group_timeout_s=30",
                             "sync_timeout_s=30"])
    with RunProcesses() as run:
        # the freeze, at step 1, caught (not a time-out before it: start-up and the first sync wait 30 s too)
        with pytest.raises(RunFailed, match=r"step 1: generator0 has not answered for 30s|"
                                            r"weight sync to version 2: .*generator0.* did not answer in 30s"):
            train(cfg)
    assert any("EngineCore" in name for name in run.names.values()), \
        f"the engine core was never seen: nothing checked; seen: {sorted(n[:60] for n in run.names.values())}"
    left = run.left(bound_s=30)
    assert not left, f"left running after the run failed: {left}"


def test_resume_from_the_last_good_checkpoint_after_a_full_disk(tiny_model_path, tmp_path):
    """checkpoint_dir on a small disk: the checkpoint of step 2 fits, the final does not (the old one
    and its replacement are both on disk during a save). The run stops with a message naming the
    path and the free space; the checkpoint of step 2 is whole. A crash also left rows of steps
    after it. `--resume` continues from it: metrics and ledger without those rows, the version
    re-based, nothing lost or twice. Without root (no tmpfs) the disk is a plain folder, and only
    the resume is tested."""
    import subprocess

    from jury.cluster.driver import RunFailed, train

    disk = tmp_path / "disk"
    disk.mkdir()
    full = not subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)],
                              capture_output=True).returncode
    try:
        cfg = load_config(None, [*BASE, f"run_dir={tmp_path}", "steps=4", "checkpoint_every=2",
                                 f"checkpoint_dir={disk}"])
        if full:
            with pytest.raises(RunFailed, match=rf"final checkpoint could not be written: checkpoint at "
                                                rf"{disk}/final failed .* MiB free there; the last good checkpoint"):
                train(cfg)
            assert sorted(p.name for p in disk.iterdir()) == ["checkpoint"]  # no partial save left behind
        else:
            train(cfg)
        assert [r["checkpoint/failed"] for r in read_metrics(tmp_path) if "checkpoint/failed" in r] == [0.0]
        state = json.loads((disk / "checkpoint" / "state.json").read_text())  # where checkpoint_dir says
        assert state["version"] == 2 and state["next_index"] == 4 and state["learner_node"]
        with open(tmp_path / "metrics.jsonl", "a") as f:  # rows a crash left after the checkpoint
            f.write(json.dumps({"step": 4, "left_by_the_crash": True}) + "\n")
        with open(tmp_path / "ledger.jsonl", "a") as f:
            f.write(json.dumps({"step": 4, "index": 8, "left_by_the_crash": True}) + "\n")
        (tmp_path / "latest_checkpoint").write_text(json.dumps({"path": str(disk / "checkpoint")}))
        resumed = load_config(str(tmp_path / "config.yaml"), [f"checkpoint_dir={tmp_path / 'big'}"])
        summary = train(resumed, resume=str(tmp_path))
        rows = read_metrics(tmp_path)
        assert [r["step"] for r in rows] == [0, 1, 2, 3] and not any("left_by_the_crash" in r for r in rows)
        assert "left_by_the_crash" not in (tmp_path / "ledger.jsonl").read_text()
        assert rows[2]["learner/version"] == 3      # re-based on the restored version
        assert rows[2]["staleness/max"] <= 1        # generators started from the checkpoint's version
        assert summary["final_checkpoint"] == str(tmp_path / "big" / "final")
        _assert_nothing_lost_nothing_twice(tmp_path, summary, 4, 2)
    finally:
        if full:
            subprocess.run(["umount", "-l", str(disk)])


def _jury_train(tmp_path, *overrides, preexec_fn=None):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "jury.experiments.cli", "train", f"run_dir={tmp_path / 'run'}",
                             "progress=false", *overrides], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=preexec_fn)


def test_resources_the_cluster_cannot_have_are_refused_before_anything_is_placed(tiny_model_path, tmp_path):
    """learner.num_gpus=1 on a machine without a GPU: before, Ray waited forever for a node that
    cannot exist. Now the run stops at once, naming the role, what it asks for and what there is."""
    proc = _jury_train(tmp_path, "learner.num_gpus=1", "steps=2")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1
    assert "jury train: learner rank 0 asks for CPU: 1, GPU: 1 (learner.num_cpus/num_gpus/resources), and no node" in err


def test_ctrl_c_during_start_up_stops_everything_promptly(tiny_model_path, tmp_path):
    """SIGINT while the engines are still starting: every process of the run is gone soon after,
    without waiting for actors that are still being built (it took 32 s before, 63 s with an actor
    that was never placed)."""
    import os
    import signal
    import time

    import psutil

    from conftest import live_pids

    # SIGINT as a terminal delivers it: a test suite started in the background by a non-interactive
    # shell (`bash .ci/run &`) ignores SIGINT, the run would inherit that and train on, ignoring the
    # Ctrl-C (as it should: a background job ignores it)
    proc = _jury_train(tmp_path, "steps=100000", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline, seen = time.time() + 240, []
        while time.time() < deadline and proc.poll() is None:
            seen = [" ".join(_cmdline(p)) for p in psutil.Process(proc.pid).children(recursive=True)]
            if any("Generator" in c for c in seen):
                break  # the generator's actor is being built
            time.sleep(0.5)
        assert proc.poll() is None, f"the run ended (rc {proc.returncode}) before its generator was seen"
        assert any("Generator" in c for c in seen), f"no Generator process in 240 s; the run's processes: {seen}"
        family = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        t0 = time.time()
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        took = time.time() - t0
    finally:  # a run the test could not stop would train on, beside the rest of the suite
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted; every actor was stopped" in err
    deadline = time.time() + 20
    while time.time() < deadline and live_pids(family):
        time.sleep(0.5)
    assert not live_pids(family), f"left running: {[_cmdline(psutil.Process(p)) for p in live_pids(family)]}"
    assert took < 20, f"Ctrl-C took {took:.0f}s to act"


def _cmdline(p) -> list[str]:
    try:
        return p.cmdline()
    except Exception:
        return []
