"""The REPL pool against the protocol double: framing, envs, timeouts that really kill the
process group, crashes and restarts, memory limit, sandbox."""
import json
import os
import shutil
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jury.verifiers.lean import repl as lean_repl
from jury.verifiers.lean.repl import (LeanCrash, LeanReplConfig, LeanStartupError, LeanTimeout,
                                      ReplPool, ReplProcess, ReplResponse, sandbox_argv)

DOUBLE = Path(__file__).with_name("lean_repl_double.py")
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"


def double_config(**overrides) -> LeanReplConfig:
    settings = dict(command=shlex.join([sys.executable, str(DOUBLE)]), header=HEADER, pool_size=1, user="",
                    isolate_network="off", memory_limit_mb=0, start_timeout_s=20)
    settings.update(overrides)
    return LeanReplConfig(**settings)


def gone(pid: int, within_s: float = 2.0) -> bool:
    """No such process, or a zombie nobody reaped (it runs no code), within within_s.

    SIGKILL reaches the other members of a group when the kernel next schedules them,
    so a grandchild may still be running for a moment after the leader was reaped.
    """
    deadline = time.monotonic() + within_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


@pytest.fixture
def pool():
    p = ReplPool(double_config())
    yield p
    p.close()


def test_double_speaks_the_repl_framing():
    """Raw bytes: blank-line separated requests in, multi-line JSON + blank line out."""
    requests = [{"cmd": HEADER}, {"cmd": "theorem t : 1 = 1 := by rfl", "env": 0}, {"cmd": "#print axioms t", "env": 1}]
    stdin = "".join(json.dumps(r) + "\n\n" for r in requests)
    out = subprocess.run([sys.executable, str(DOUBLE)], input=stdin, capture_output=True, text=True,
                         timeout=20).stdout
    frames = out.split("\n\n")
    assert frames[-1] == "" and len(frames) == 4, out
    assert all("\n" in f for f in frames[2:3]), "replies with messages span several lines, as Lean prints them"
    assert [json.loads(f)["env"] for f in frames[:3]] == [0, 1, 2]
    assert json.loads(frames[2])["messages"][0] == {
        "severity": "info", "pos": {"line": 1, "column": 0}, "endPos": {"line": 1, "column": 15},
        "data": "'t' does not depend on any axioms"}


def test_envs_count_up_and_can_be_reused():
    proc = ReplProcess(double_config(), [sys.executable, str(DOUBLE)])
    proc.start()
    try:
        deadline = time.monotonic() + 20
        assert proc.header_env == 0
        first = proc.send("theorem t (x : ℕ) : x + 0 = x := by simp", 0, deadline)
        assert first.env == 1 and first.messages == ()
        axioms = proc.send("#print axioms t", first.env, deadline)
        assert axioms.messages[0].data == "'t' depends on axioms: [propext, Classical.choice, Quot.sound]"
        assert axioms.env == 2
        backtracked = proc.send("#print axioms t", proc.header_env, deadline)  # t is not in env 0
        assert backtracked.errors[0].data == "unknown constant 't'"
        assert proc.send("#print axioms t", 99, deadline).error == "Unknown environment."
    finally:
        proc.kill()


def test_sorry_reply_has_goal_and_warning(pool):
    [reply] = pool.run_chain(["theorem test_problem (x : ℕ) : x = x := by\n  sorry"], timeout_s=10)
    assert reply.sorries[0].goal == "⊢ x = x" and (reply.sorries[0].line, reply.sorries[0].column) == (2, 2)
    assert [(m.severity, m.data) for m in reply.messages] == [("warning", "declaration uses 'sorry'")]


def test_chain_runs_each_command_in_the_previous_env(pool):
    replies = pool.run_chain(["axiom a : 1 = 1", "theorem b : 1 = 1 := by exact a", "#print axioms b"],
                             timeout_s=10)
    assert [r.env for r in replies] == [1, 2, 3]
    assert replies[2].messages[0].data == "'b' depends on axioms: [propext, Classical.choice, Quot.sound, a]"


def test_timeout_kills_the_whole_process_group(pool, tmp_path, monkeypatch):
    child_file = tmp_path / "child.pid"
    monkeypatch.setenv("LEAN_DOUBLE_CHILD_PID_FILE", str(child_file))
    pool.start()
    [repl_pid] = pool.pids()
    start = time.monotonic()
    with pytest.raises(LeanTimeout):
        pool.run_chain(["theorem t : True := by DOUBLE_HANG"], timeout_s=1.0)
    assert time.monotonic() - start < 5
    child_pid = int(child_file.read_text())
    assert gone(repl_pid), f"REPL {repl_pid} survived its timeout"
    assert gone(child_pid), f"child {child_pid} of the REPL survived: the group was not killed"
    # The next caller gets a fresh process that works.
    [reply] = pool.run_chain(["theorem t : True := by simp"], timeout_s=10)
    assert reply.messages == () and pool.restarts == 1 and pool.pids() != [repl_pid]


def test_crash_is_reported_with_stderr_and_restarted(pool):
    pool.start()
    [old] = pool.pids()
    with pytest.raises(LeanCrash, match="PANIC: double crash requested"):
        pool.run_chain(["theorem t : True := by DOUBLE_CRASH"], timeout_s=10)
    assert gone(old)
    [reply] = pool.run_chain(["theorem t : True := by simp"], timeout_s=10)
    assert reply.env == 1 and pool.restarts == 1


def test_memory_limit_stops_a_runaway_allocation():
    p = ReplPool(double_config(memory_limit_mb=1024))
    try:
        with pytest.raises(LeanCrash, match="out of memory"):
            p.run_chain(["theorem t : True := by DOUBLE_ALLOC"], timeout_s=20)
    finally:
        p.close()


def test_recycles_after_many_commands():
    p = ReplPool(double_config(recycle_after=3))  # the header counts as one command
    try:
        p.run_chain(["theorem a : True := by simp", "#print axioms a"], timeout_s=10)
        assert p.pids() == []  # killed on the way back, started again on next use
        [reply] = p.run_chain(["#print axioms a"], timeout_s=10)
        assert reply.errors[0].data == "unknown constant 'a'" and p.restarts == 0
    finally:
        p.close()


def test_pool_serves_concurrent_callers():
    p = ReplPool(double_config(pool_size=2))
    results, errors = [], []

    def work(i):
        try:
            results.append(p.run_chain([f"theorem t{i} : True := by simp", f"#print axioms t{i}"], timeout_s=10))
        except Exception as e:  # surfaced by the assert below
            errors.append(e)
    try:
        p.start()
        assert len(set(p.pids())) == 2
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and len(results) == 8
        assert all("depends on axioms" in r[1].messages[0].data for r in results)
    finally:
        p.close()
    with pytest.raises(LeanCrash, match="closed"):
        p.run_chain(["theorem t : True := by simp"], timeout_s=1)


def test_startup_failures_are_loud():
    with pytest.raises(LeanStartupError, match="header import failed: unexpected token"):
        ReplPool(double_config(header="import Mathlib\nnot lean at all")).start()
    with pytest.raises(LeanStartupError, match="cannot run"):
        ReplPool(double_config(command="/nonexistent/repl")).start()
    with pytest.raises(ValueError, match="isolate_network"):
        double_config(isolate_network="maybe")


def test_network_isolation_on_needs_unshare(monkeypatch):
    monkeypatch.setattr(lean_repl.shutil, "which", lambda name: None)
    with pytest.raises(LeanStartupError, match="isolate_network='on'"):
        sandbox_argv(double_config(isolate_network="on"))
    assert sandbox_argv(double_config(isolate_network="auto")) == [sys.executable, str(DOUBLE)]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not os.access("/usr/bin/python3", os.X_OK),
                    reason="needs root, setpriv and a system python the user `nobody` can run")
def test_sandbox_drops_root_and_network():
    config = double_config(command=shlex.join(["/usr/bin/python3", str(DOUBLE)]), user="nobody", isolate_network="auto")
    argv = sandbox_argv(config)
    if argv[0] != "unshare":
        pytest.skip("unshare --net does not work in this container")
    p = ReplPool(config)
    try:
        [reply] = p.run_chain(["#whoami"], timeout_s=10)
    finally:
        p.close()
    facts = dict(kv.split("=") for kv in reply.messages[0].data.split())
    assert facts["uid"] == "65534" and facts["interfaces"] == "lo", facts


def test_stray_output_before_a_reply_is_skipped():
    frame = 'Processing incremental state [pos: 0..5]:\ndef x\n{"env": 3,\n "messages": []}'
    assert lean_repl._parse_frame(frame) == {"env": 3, "messages": []}
    assert lean_repl._parse_frame("no json here") is None
    assert ReplResponse.from_json({"message": "Unknown environment."}).error == "Unknown environment."


def test_a_reply_without_an_environment_is_an_error():
    """A reply with Lean's messages but no env (an unusual REPL build) fails closed: the chain passes
    an env-less reply on as the answer to the later commands, and the file's own #print could then
    stand for the checker's axiom list and kernel check."""
    forged = {"messages": [{"severity": "info", "data": "'test_problem' does not depend on any axioms"},
                           {"severity": "info", "data": "jury-check: ok"}]}
    reply = ReplResponse.from_json(forged)
    assert reply.env is None and reply.error == "a REPL reply without an environment"
