"""Every process a run starts ends with it, however its parent ends.

vLLM's engine core (and, where vLLM starts one, its worker: the CPU build's own layout,
actors/cpu_engine.py) are processes of their own under the actor that owns the engine (a
generator, an LLM server). When that actor is SIGKILLed (a frozen generator killed
at the end of a run, a driver killed with -9, Ray's own clean-up) nobody shuts the engine
down, and the engine processes live on, holding gigabytes. A reaper is a small process beside
the actor that outlives it:

    reaper = start_reaper()          # in the actor, before the engine starts its processes
    ... the actor runs; the reaper remembers its descendants every POLL_S ...
    the actor dies however it dies -> the reaper SIGTERMs what it remembered, SIGKILLs what is
                                      left after GRACE_S, and exits

It runs in a session of its own, so that a signal to the actor's process group does not end it
first, and it is not the actor's child: the process start_reaper starts forks the reaper and
exits at once. A worker's direct children may die with it: Ray kills them when the worker exits
(RAY_kill_child_processes_on_worker_exit, which its docs say does not act when the worker crashes
or is SIGKILLed), and a CPU engine core forked from its actor asks for SIGKILL when the actor
dies (actors/cpu_engine.py). Their own children never die with it: a reaper killed with the engine
core would leave the engine worker under it running, orphaned. It remembers processes, not
pids (psutil compares start times), so a pid reused after a process ended is never killed. A
process the parent started in the last POLL_S before it died is not yet remembered: the reaper
looks often, and the engines start long before anything dies.

Started as `python -m jury.protocol.reaper PARENT_PID`; it writes "watching PARENT_PID REAPER_PID"
on stdout after its first look, and start_reaper returns only after that line: whatever the parent
had started before the call is remembered, and a parent killed right after it is seen dying.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

POLL_S = 0.5   # how often the reaper looks at the parent and remembers its descendants
GRACE_S = 3.0  # SIGTERM first (vLLM shuts down cleanly on it), SIGKILL whatever is left after this
HANDSHAKE_S = 30.0


def start_reaper(parent_pid: int | None = None) -> int:
    """A reaper watching parent_pid (default: this process); returns its pid once it watches."""
    parent_pid = os.getpid() if parent_pid is None else parent_pid
    # the folder above the `jury` package, so that the child imports this same tree
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "jury.protocol.reaper", str(parent_pid)], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, start_new_session=True, text=True)
    line = _read_line(proc, HANDSHAKE_S)
    proc.stdout.close()  # nothing more comes on it
    said = line.split()
    if said[:2] != ["watching", str(parent_pid)] or len(said) != 3 or proc.wait(HANDSHAKE_S) != 0:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the process reaper did not start (it said {line!r}, exit code {proc.poll()}); "
                           "engine processes would outlive their actor")
    return int(said[2])


def _read_line(proc: subprocess.Popen, timeout_s: float) -> str:
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            return ""
    return proc.stdout.readline()


def watch(parent_pid: int, poll_s: float = POLL_S, grace_s: float = GRACE_S) -> list[int]:
    """Remember parent_pid's descendants while it lives; once it is gone, end them. Returns the
    pids it had to end."""
    import psutil

    try:
        parent = psutil.Process(parent_pid)
    except psutil.NoSuchProcess:
        _handshake(parent_pid)
        return []
    seen: dict[int, psutil.Process] = {}
    me, said = os.getpid(), False
    while _alive(parent):
        try:
            for p in parent.children(recursive=True):
                if p.pid != me:
                    seen.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            break
        seen = {pid: p for pid, p in seen.items() if _alive(p)}
        if not said:  # after the first look: what the parent had started by now is remembered
            _handshake(parent_pid)
            said = True
        time.sleep(poll_s)
    if not said:
        _handshake(parent_pid)
    return end(list(seen.values()), grace_s)


def _handshake(parent_pid: int):
    """"watching PARENT_PID REAPER_PID" on stdout, which then points nowhere: the reader is gone."""
    print(f"watching {parent_pid} {os.getpid()}", flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def end(procs: list, grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM each process still running, SIGKILL those left after grace_s; the pids it signalled."""
    import psutil

    live = [p for p in procs if _alive(p)]
    for p in live:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, left = psutil.wait_procs(live, timeout=grace_s)
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=grace_s)
    return [p.pid for p in live]


def _alive(p) -> bool:
    """Running and not a zombie (a dead child its parent has not waited for is gone for us);
    is_running also tells a reused pid from the process it remembered."""
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m jury.protocol.reaper PARENT_PID", file=sys.stderr)
        return 2
    parent = int(argv[0])
    if os.fork():  # the reaper is the child, no longer the parent's descendant
        os._exit(0)
    ended = watch(parent)
    if ended:  # on the parent's stderr (an actor's Ray log): what outlived it and was ended
        print(f"reaper: process {parent} is gone; ended {len(ended)} process(es) it left: {ended}",
              file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
