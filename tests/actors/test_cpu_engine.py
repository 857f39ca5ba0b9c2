"""Where a CPU engine runs (actors/cpu_engine.py): the cores a VLLM_CPU_OMP_THREADS_BIND names,
and the layout set around the engine's start and given back after it. A real engine's processes
are checked in test_sync_modes.py, on the engine it starts anyway."""

import os

import pytest

from jury.actors.cpu_engine import (BIND, CPU_ENGINE_STOP_GRACE_S, MULTIPROCESSING, START, CpuLayout, ForkContext,
                                    bind_cores, cpu_engine_layout, in_process_cpu_engine, stop_grace_s)


def test_the_cores_a_bind_names():
    assert bind_cores(None, [0, 1]) == [0]             # vLLM's auto: all but the last, kept for the scheduler
    assert bind_cores("auto", [3, 1, 2]) == [1, 2]      # of the cores allowed, in order
    assert bind_cores(" ", [5]) == [5]                  # one core: that one
    assert bind_cores("nobind", [0, 1]) is None
    assert bind_cores("0,2-3", [0, 1, 2, 3]) == [0, 2, 3]
    assert bind_cores("1,1,0", [0, 1]) == [0, 1]


@pytest.mark.parametrize("bind, says", [
    ("0-x", "'0-x' is not a core or a range"),
    ("3", r"core\(s\) \[3\] are not among this process's cores \[0, 1\]"),
    ("1-0", "runs backwards"),
    ("0|1", "tensor-parallel CPU engine"),
])
def test_a_bind_that_names_no_usable_cores_is_refused_by_name(bind, says):
    with pytest.raises(ValueError, match=says):
        bind_cores(bind, [0, 1])


@pytest.fixture
def clean_env(monkeypatch):
    for k in (MULTIPROCESSING, BIND, "OMP_NUM_THREADS", START):
        monkeypatch.delenv(k, raising=False)
    own = os.sched_getaffinity(0)
    yield own
    os.sched_setaffinity(0, own)


def test_the_layout_holds_while_the_engine_starts_and_is_given_back(clean_env, monkeypatch):
    allowed = sorted(clean_env)
    monkeypatch.setenv(BIND, str(allowed[0]))
    with cpu_engine_layout() as layout:
        assert layout.inline and layout.cores == [allowed[0]]
        assert os.environ[MULTIPROCESSING] == "0" and os.environ["OMP_NUM_THREADS"] == "1"
        assert os.sched_getaffinity(0) == {allowed[0]}   # what the engine core inherits at its start
    assert os.sched_getaffinity(0) == clean_env
    assert MULTIPROCESSING not in os.environ and "OMP_NUM_THREADS" not in os.environ


def test_threads_the_engine_start_made_are_given_back_too(clean_env, monkeypatch):
    """A thread started while the pin holds (AsyncLLM's ZeroMQ I/O thread, in a real actor) inherits
    it; after the layout it has the actor's cores again. A thread pinned elsewhere is left alone."""
    import threading

    allowed = sorted(clean_env)
    if len(allowed) < 2:
        pytest.skip("needs two cores to tell a pinned thread from a free one")
    monkeypatch.setenv(BIND, str(allowed[0]))
    stop = threading.Event()
    own_pin = threading.Thread(target=stop.wait)
    own_pin.start()
    os.sched_setaffinity(own_pin.native_id, {allowed[-1]})  # a thread pinned by someone else
    with cpu_engine_layout():
        started = threading.Thread(target=stop.wait)
        started.start()
        assert os.sched_getaffinity(started.native_id) == {allowed[0]}
    try:
        assert os.sched_getaffinity(started.native_id) == clean_env
        assert os.sched_getaffinity(own_pin.native_id) == {allowed[-1]}
    finally:
        stop.set()
        started.join()
        own_pin.join()


def test_a_layout_the_user_chose_is_left_alone(clean_env, monkeypatch):
    monkeypatch.setenv(MULTIPROCESSING, "1")   # vLLM's two processes and its own binding
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    with cpu_engine_layout() as layout:
        assert not layout.inline and layout.cores is None and os.environ[MULTIPROCESSING] == "1" and os.environ["OMP_NUM_THREADS"] == "7"
        assert os.sched_getaffinity(0) == clean_env
    monkeypatch.delenv(MULTIPROCESSING)
    with cpu_engine_layout(tensor_parallel_size=2) as layout:  # several CPU workers need their processes
        assert not layout.inline and MULTIPROCESSING not in os.environ
    monkeypatch.setenv(BIND, "nobind")
    with cpu_engine_layout() as layout:                       # in one process, pinned nowhere
        assert layout == CpuLayout(inline=True) and os.environ[MULTIPROCESSING] == "0" and os.environ["OMP_NUM_THREADS"] == "7"
        assert os.sched_getaffinity(0) == clean_env


@pytest.fixture
def one_torch_thread():
    """This process's torch on one thread, as Ray gives an actor of one CPU (and back after)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _exit():
    os._exit(0)


def test_the_engine_core_is_forked_unless_spawn_is_asked_for(clean_env, monkeypatch, one_torch_thread):
    """vLLM's launcher starts its engine core with the context its get_mp_context gives: ours while
    the layout holds (vLLM's CPU platform and a Ray actor would make it spawn), vLLM's after, and
    vLLM's throughout under JURY_CPU_ENGINE_START=spawn. The layout says afterwards whether a process
    was forked in it. A value of neither is refused by name."""
    from vllm.v1.engine import utils as launcher

    vllms = launcher.get_mp_context
    with cpu_engine_layout() as layout:
        assert launcher.get_mp_context is ForkContext and not layout.forked
        child = launcher.get_mp_context().Process(target=_exit, name="EngineCore")
        child.start()
        child.join(60)
    assert layout.forked and child.exitcode == 0 and launcher.get_mp_context is vllms
    with cpu_engine_layout() as layout:
        pass
    assert layout.inline and not layout.forked  # nothing started in it
    monkeypatch.setenv(START, "spawn")
    with cpu_engine_layout() as layout:
        assert layout.inline and launcher.get_mp_context is vllms
    monkeypatch.setenv(START, "forkserver")
    with pytest.raises(ValueError, match="JURY_CPU_ENGINE_START='forkserver': 'fork'"):
        with cpu_engine_layout():
            pass
    assert launcher.get_mp_context is vllms and MULTIPROCESSING not in os.environ


def test_a_process_whose_torch_runs_threads_spawns_its_engine_core(clean_env, caplog):
    """GNU OpenMP's pool does not survive a fork (the child hangs at its first parallel region), so
    a process whose torch may have run on several threads keeps vLLM's spawn, and says why."""
    import torch
    from vllm.v1.engine import utils as launcher

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with caplog.at_level("WARNING", logger="jury.actors.cpu_engine"), cpu_engine_layout() as layout:
            assert layout.inline and launcher.get_mp_context is not ForkContext
    finally:
        torch.set_num_threads(threads)
    assert "spawned, not forked: this process's torch runs 2 threads" in caplog.text


def _report(conn):
    import torch

    with open("/proc/self/cmdline", "rb") as f:
        conn.send((f.read().split(b"\0")[0].decode(), torch.get_num_threads()))


def test_a_forked_engine_core_takes_its_name_and_threads_as_a_spawned_one_would(monkeypatch):
    """The child names itself after its process (VLLM::EngineCore, what vLLM calls a spawned one,
    which ps, the fault injector and the soak benchmark look for) and runs OMP_NUM_THREADS torch
    threads, although this process's torch read the variable long before it was set."""
    import multiprocessing

    import torch

    threads = 2 if torch.get_num_threads() != 2 else 3
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    ours, theirs = multiprocessing.Pipe()
    p = ForkContext().Process(target=_report, args=(theirs,), name="EngineCore")
    p.start()
    try:
        assert ours.poll(60), "the forked child said nothing"
        assert ours.recv() == ("VLLM::EngineCore", threads)
    finally:
        p.join(30)
    assert p.exitcode == 0 and torch.get_num_threads() != threads  # this process is left as it was


def _fork_an_engine_core_and_wait(conn, from_a_thread=False):
    """Fork a sleeping engine core and send its pid; sleep on. From a thread: that thread ends once
    the child is named, and the process sleeps on without it."""
    import threading
    import time

    def fork():
        child = ForkContext().Process(target=time.sleep, args=(120,), name="EngineCore")
        child.start()
        conn.send(child.pid)
        if from_a_thread:
            while open(f"/proc/{child.pid}/cmdline", "rb").read().split(b"\0")[0] != b"VLLM::EngineCore":
                time.sleep(0.05)

    if from_a_thread:
        t = threading.Thread(target=fork)
        t.start()
        t.join()
    else:
        fork()
    time.sleep(120)


def _gone_within(child, seconds: float) -> bool:
    import time

    import psutil

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    child.kill()
    return False


def test_a_forked_engine_core_dies_with_the_process_that_forked_it():
    """A SIGKILLed actor's forked engine core would hold the actor's sockets to Ray open for as long
    as it ran (Ray saw such an actor dead only when its child ended); it is killed with its parent."""
    import multiprocessing
    import signal
    import time

    import psutil

    ours, theirs = multiprocessing.Pipe()
    parent = multiprocessing.get_context("fork").Process(target=_fork_an_engine_core_and_wait, args=(theirs,))
    parent.start()
    assert ours.poll(60), "the parent said nothing"
    child = psutil.Process(ours.recv())
    deadline = time.monotonic() + 60  # past its set-up (named last): a child whose parent is gone by then exits
    while child.cmdline()[:1] != ["VLLM::EngineCore"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.cmdline()[:1] == ["VLLM::EngineCore"] and child.status() != psutil.STATUS_ZOMBIE
    os.kill(parent.pid, signal.SIGKILL)
    parent.join(10)
    # the child sleeps 120 s: gone well before means it was killed
    assert _gone_within(child, 30), "the forked engine core outlived the process that forked it by 30 s"


def test_a_forked_engine_core_dies_with_the_thread_that_forked_it():
    """The kernel's parent-death signal is the forking thread's: an engine core forked from a thread
    that ends dies with it, though its process lives on (why the layout runs on the actor's event-loop
    thread, which lives as long as the actor, and must not move to a passing thread)."""
    import multiprocessing

    import psutil

    ours, theirs = multiprocessing.Pipe()
    parent = multiprocessing.get_context("fork").Process(target=_fork_an_engine_core_and_wait, args=(theirs, True))
    parent.start()
    try:
        assert ours.poll(60), "the parent said nothing"
        child = psutil.Process(ours.recv())
        assert _gone_within(child, 60), "an engine core forked from a thread that ended lived on"
        assert parent.is_alive()
    finally:
        parent.kill()
        parent.join(10)


def test_an_engine_in_a_process_of_its_own_runs_in_it_unpinned(clean_env, monkeypatch):
    """`jury eval` and `jury select`: the whole engine in the calling process while vllm.LLM
    starts, nothing pinned, and the environment given back; a user's choice, or several CPU
    workers, leave vLLM's processes as shipped. The real engine: tests/experiments/test_evaluate.py."""
    with in_process_cpu_engine() as inline:
        assert inline and os.environ[MULTIPROCESSING] == "0" and os.sched_getaffinity(0) == clean_env
    assert MULTIPROCESSING not in os.environ
    with in_process_cpu_engine(tensor_parallel_size=2) as inline:
        assert not inline and MULTIPROCESSING not in os.environ
    monkeypatch.setenv(MULTIPROCESSING, "1")
    with in_process_cpu_engine() as inline:
        assert not inline and os.environ[MULTIPROCESSING] == "1"
    assert os.environ[MULTIPROCESSING] == "1"


def test_a_cpu_engine_stops_after_a_short_grace_and_a_gpu_engine_after_vllms(monkeypatch):
    # a CPU engine core's teardown ran past vLLM's 5 s at every stop here (then killed anyway); a GPU
    # engine keeps vLLM's default (None), its teardown unmeasured
    from vllm.platforms import current_platform

    assert current_platform.is_cpu()
    assert stop_grace_s() == CPU_ENGINE_STOP_GRACE_S == 1.0
    monkeypatch.setattr(current_platform, "is_cpu", lambda: False)
    assert stop_grace_s() is None
