"""The process reaper on real processes: a parent with a child and a grandchild (as an actor with
vLLM's engine core and its worker), killed with -9 or ending on its own; what it left must end,
also when the parent's direct children are killed with it (as Ray kills an exiting worker's, and as a
forked CPU engine core dies with its actor)."""
import os
import signal
import subprocess
import sys
import time

from conftest import live_pids

from jury.protocol.reaper import start_reaper

BOUND_S = 30.0  # the reaper looks every 0.5 s and gives SIGTERM 3 s: far inside this on a loaded machine

# the parent: a child that starts a grandchild (both would live for 10 minutes), then the reaper;
# it prints the pids, then lives on (until killed) or ends at once (argv[1] == "exit")
PARENT = """
import subprocess, sys, time
from jury.protocol.reaper import start_reaper
child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                          "g = subprocess.Popen(['sleep', '600']); print(g.pid, flush=True); time.sleep(600)"],
                         stdout=subprocess.PIPE, text=True)
grandchild = int(child.stdout.readline())
reaper = start_reaper()
print(child.pid, grandchild, reaper, flush=True)
if sys.argv[1] != "exit":
    time.sleep(600)
"""


def _parent(how: str):
    proc = subprocess.Popen([sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    child, grandchild, reaper = map(int, proc.stdout.readline().split())
    return proc, [child, grandchild], reaper


def _gone_within(pids, bound_s: float = BOUND_S) -> list[int]:
    """The pids still alive after bound_s (waiting no longer than it takes them to end)."""
    deadline = time.monotonic() + bound_s
    while live_pids(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return live_pids(pids)


def test_a_parent_killed_with_9_leaves_no_child_or_grandchild():
    proc, family, reaper = _parent("stay")
    try:
        assert live_pids(family) == family  # the reaper itself ends nothing while the parent lives
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _gone_within(family) == [], f"left behind after the parent was killed: {live_pids(family)}"
        assert _gone_within([reaper]) == [], "the reaper did not exit after its parent died"
    finally:
        for pid in live_pids(family):
            os.kill(pid, signal.SIGKILL)


def test_a_parent_that_exits_normally_leaves_nothing_behind():
    proc, family, reaper = _parent("exit")
    try:
        assert proc.wait() == 0
        assert _gone_within(family) == [], f"left behind after the parent exited: {live_pids(family)}"
        assert _gone_within([reaper]) == []
    finally:
        for pid in live_pids(family):
            os.kill(pid, signal.SIGKILL)


def test_the_handshake_returns_a_watching_reaper_and_a_bad_call_is_refused():
    import psutil

    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        reaper = start_reaper(sleeper.pid)  # returned after "watching PID": it runs, in a session of its own,
        assert live_pids([reaper]) == [reaper] and os.getsid(reaper) != os.getsid(0)
        assert reaper not in [p.pid for p in psutil.Process().children(recursive=True)]  # and not below us
        sleeper.kill()
        sleeper.wait()
        assert _gone_within([reaper]) == []  # its parent gone, it exits (nothing to end)
    finally:
        sleeper.kill()
    bad = subprocess.run([sys.executable, "-m", "jury.protocol.reaper", "not-a-pid"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_the_grandchild_ends_when_the_parent_and_its_children_are_killed_together():
    """The engine core may die with the actor (Ray kills an exiting worker's direct children, a
    forked engine core has a parent-death signal), and the engine worker under it is left. The
    reaper is not a child, so it survives to end it."""
    import psutil

    proc, (child, grandchild), reaper = _parent("stay")
    try:
        direct = [p.pid for p in psutil.Process(proc.pid).children()]
        assert child in direct and reaper not in direct
        for pid in [proc.pid, *direct]:
            os.kill(pid, signal.SIGKILL)
        proc.wait()
        assert _gone_within([grandchild]) == [], "the grandchild outlived its parent and grandparent"
        assert _gone_within([reaper]) == []
    finally:
        for pid in live_pids([child, grandchild]):
            os.kill(pid, signal.SIGKILL)
