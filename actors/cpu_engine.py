"""Where a vLLM engine runs when it has no GPU: its model inside the engine core, pinned.

vLLM's CPU build starts an engine as two processes below the actor that owns it: the engine core
(the scheduler) and a worker (the model), which it pins to the cores VLLM_CPU_OMP_THREADS_BIND
names ("auto": every core but the last) with one OpenMP thread a core. The worker waits for each
step's message by spinning (about a second after every message), so it holds a core while the
learner beside it trains; and each process imports vLLM and torch again (10-13 s here).

On the CPU the engine here runs its model inside the engine core instead (vLLM's in-process
executor, VLLM_ENABLE_V1_MULTIPROCESSING=0: the layout vLLM itself uses on a GPU at tensor
parallel 1). The scheduler and the model took turns anyway (vLLM turns async scheduling off on
the CPU), so nothing runs less in parallel. vLLM's own binding does not reach that executor, so
the engine core is pinned here to the cores the bind names, with as many OpenMP threads.
Measured side by side (benchmarks/engine_layout.py; docs/results.md, "Where a CPU engine runs"):
the embedded default starts 3-13 s sooner and trains 1.18-1.38x the tokens a second, its learner's
forward-backward 0.65-0.76x as long, no longer sharing a core with a spin.

That engine core is forked from the actor, not spawned. vLLM spawns it in a Ray actor, and a
spawned process imports vLLM, torch and transformers again before its first line: about half of an
engine's start here (12-13 s of 25 s on the quiet machine, more beside a running suite). A forked
one has them already: an engine is up about 12 s sooner here, and generates and trains as fast
(docs/results.md, "The engine core forked, not spawned"). Ray calls forking in an actor an
anti-pattern because the child shares the actor's connections to Ray, and a child that calls Ray
corrupts them. The engine core does not call Ray: its model runs in it (no Ray executor on the CPU),
and vLLM's own process helpers in it take the start method vLLM's CPU platform set in the actor,
spawn, which never asks Ray. What a spawned one gets at its start, the child is given here: its name
(vLLM's own setproctitle cannot rename a forked Ray worker) and its OpenMP threads (the actor's torch
read OMP_NUM_THREADS before the layout set it). A process that ran torch on several threads must not
fork (GNU OpenMP's pool does not survive a fork: the child hangs at its first parallel region), so an
actor whose torch has more than one thread spawns its engine core (Ray gives an actor num_cpus
threads: one by default). JURY_CPU_ENGINE_START=spawn always starts it as vLLM does.

A VLLM_ENABLE_V1_MULTIPROCESSING set by the user is left alone (vLLM's two processes and its own
binding, as shipped); so is an engine on GPUs, or over more than one CPU worker (tensor parallel),
which needs the two processes.
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing.context
import os
import sys
from dataclasses import dataclass

log = logging.getLogger(__name__)
MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"
# how long a CPU engine core stopping at the end of a run may tear itself down before vLLM kills it:
# its teardown (a full garbage collection in a process holding vLLM and torch) ran past vLLM's default
# 5 s at every stop on a 2-core machine, so each run waited 5 s for a kill it then got anyway
# (docs/results.md, "What a run's start and end cost"). What the killed engine leaves, its file-based
# process-group address under /tmp, it left before too. On GPUs vLLM's default stays: their teardown
# is not measured here, and a restarted engine checks the card's free memory.
CPU_ENGINE_STOP_GRACE_S = 1.0
BIND = "VLLM_CPU_OMP_THREADS_BIND"
START = "JURY_CPU_ENGINE_START"  # how the engine core starts: "fork" (the default here) or "spawn" (vLLM's)


def stop_grace_s() -> float | None:
    """The grace to pass to an engine's shutdown: CPU_ENGINE_STOP_GRACE_S on the CPU, None (vLLM's
    default) elsewhere."""
    from vllm.platforms import current_platform

    return CPU_ENGINE_STOP_GRACE_S if current_platform.is_cpu() else None


def bind_cores(bind: str | None, allowed: list[int]) -> list[int] | None:
    """The cores a VLLM_CPU_OMP_THREADS_BIND value names, of those this process may use. "auto" (or
    unset): vLLM's choice for one engine, every allowed core but the last (kept for its scheduler;
    the one core when there is one). "nobind": None, nothing pinned. Otherwise a list of cores and
    ranges ("0,2-3"); a core this process may not use is refused by name."""
    allowed = sorted(allowed)
    if bind is None or bind.strip() in ("", "auto"):
        return allowed[:-1] or allowed
    if bind.strip() == "nobind":
        return None
    if "|" in bind:
        raise ValueError(f"{BIND}={bind!r}: one engine worker's cores here ('|' separates the workers of a "
                         f"tensor-parallel CPU engine, which keeps vLLM's own processes)")
    cores: list[int] = []
    for part in bind.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"{BIND}={bind!r}: {part.strip()!r} is not a core or a range of cores (0,2-3)") from None
        if last < first:
            raise ValueError(f"{BIND}={bind!r}: the range {part.strip()!r} runs backwards")
        cores.extend(range(first, last + 1))
    outside = sorted(set(cores) - set(allowed))
    if outside:
        raise ValueError(f"{BIND}={bind!r}: core(s) {outside} are not among this process's cores {allowed}")
    return sorted(set(cores))


@dataclass
class CpuLayout:
    inline: bool                   # the model runs inside the engine core (one vLLM process)
    cores: list[int] | None = None  # the cores the engine core starts pinned to (None: not pinned)
    forked: bool = False           # an engine core was forked from this process while the layout held


def start_method() -> str:
    """How an inline engine core starts, from JURY_CPU_ENGINE_START (unset: "fork"). The driver
    asks too, so that a bad value is refused before anything starts."""
    method = os.environ.get(START, "").strip() or "fork"
    if method not in ("fork", "spawn"):
        raise ValueError(f"{START}={method!r}: 'fork' (the default) or 'spawn' (vLLM's own start)")
    return method


PR_SET_PDEATHSIG = 1  # prctl(2)


class EngineCoreFork(multiprocessing.context.ForkProcess):
    """An engine core forked from the actor that owns it. Before vLLM's code runs it takes what a
    spawned one would have: the process title vLLM gives it (VLLM::EngineCore, which `ps`, the fault
    injector and the soak benchmark look for; in a Ray worker only Ray's own setproctitle can change
    it) and OMP_NUM_THREADS OpenMP threads (torch read the variable when the actor imported it, before
    the layout set it).

    It also dies with the actor (SIGKILL): it holds copies of the actor's descriptors, its sockets to
    Ray among them, and Ray sees a SIGKILLed actor dead only once every copy is closed (a forked child
    that lived on kept it "alive" to Ray for as long as the child ran; Ray's own clean-up of a worker's
    children runs only when the worker exits cleanly). The kernel sends the signal when the thread
    that forked it ends: in a Ray actor with async methods, the event-loop thread that ran its
    __init__, which lives as long as the actor. Never start one from a thread that ends sooner."""

    started = 0  # how many this process has forked (CpuLayout.forked)

    def start(self):
        super().start()
        EngineCoreFork.started += 1

    def run(self):
        import ctypes
        import signal

        import torch

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) for the forked engine core")
        if os.getppid() != self._parent_pid:  # the actor died before the signal was armed
            os._exit(1)

        threads = os.environ.get("OMP_NUM_THREADS", "").strip()
        if threads.isdigit() and int(threads) > 0:
            torch.set_num_threads(int(threads))
        from vllm import envs

        title = f"{envs.VLLM_PROCESS_NAME_PREFIX}::{self.name}"
        if "ray" in sys.modules:
            import ray._raylet

            ray._raylet.setproctitle(title)
        else:
            with contextlib.suppress(ImportError):
                import setproctitle

                setproctitle.setproctitle(title)
        super().run()


class ForkContext(multiprocessing.context.ForkContext):
    Process = EngineCoreFork


@contextlib.contextmanager
def _forked_engine_core():
    """While it holds, vLLM's engine launcher starts engine cores with EngineCoreFork (its module's
    `get_mp_context` is ForkContext: the launcher's, and a tensor queue's on GPUs, which never holds
    here): vLLM's CPU platform sets its start method to spawn, and in a Ray actor it forces spawn,
    so the choice is made where the process starts."""
    from vllm.v1.engine import utils as launcher

    vllms = launcher.get_mp_context
    launcher.get_mp_context = ForkContext
    try:
        yield
    finally:
        launcher.get_mp_context = vllms


def _give_back(pinned: set[int], own: list[int]):
    """Every thread of this process on exactly the pinned cores goes back to `own`: the creating
    thread, and the threads the engine's start made while the pin held (AsyncLLM's ZeroMQ I/O thread
    among them), which inherited it and would otherwise wake on the engine core's core for every step's
    outputs. A thread that ended meanwhile is skipped."""
    for tid in [0] + [int(t) for t in os.listdir("/proc/self/task")]:
        try:
            if tid == 0 or os.sched_getaffinity(tid) == pinned:
                os.sched_setaffinity(tid, own)
        except (ProcessLookupError, FileNotFoundError):
            pass


@contextlib.contextmanager
def cpu_engine_layout(tensor_parallel_size: int = 1):
    """Around AsyncLLM.from_engine_args in the actor that owns the engine. On the CPU (vLLM's
    platform), at tensor parallel 1, unless the user set VLLM_ENABLE_V1_MULTIPROCESSING: the model
    runs inside the engine core, which starts pinned to the bind's cores with one OpenMP thread
    each (the child process inherits this process's affinity and environment at its start; both
    are given back to this actor afterwards, the affinity to every thread started meanwhile too),
    forked unless JURY_CPU_ENGINE_START=spawn or this process's torch runs several threads (see the
    module's docstring). Otherwise nothing changes. Yields the CpuLayout; its `forked` says, after
    the block, whether an engine core was forked in it."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu() or tensor_parallel_size > 1 or MULTIPROCESSING in os.environ:
        yield CpuLayout(inline=os.environ.get(MULTIPROCESSING) == "0" and current_platform.is_cpu())
        return
    own = sorted(os.sched_getaffinity(0))
    cores = bind_cores(os.environ.get(BIND), own)
    import torch

    asked = start_method() == "fork"
    fork = asked and torch.get_num_threads() == 1
    if asked and not fork:
        log.warning("the engine core is spawned, not forked: this process's torch runs %d threads, and "
                    "a fork after a parallel region hangs in GNU OpenMP", torch.get_num_threads())
    forks_before = EngineCoreFork.started
    saved = {k: os.environ.get(k) for k in (MULTIPROCESSING, "OMP_NUM_THREADS")}
    os.environ[MULTIPROCESSING] = "0"
    if cores is not None:
        os.environ["OMP_NUM_THREADS"] = str(len(cores))
        os.sched_setaffinity(0, cores)
    layout = CpuLayout(inline=True, cores=cores)
    try:
        with _forked_engine_core() if fork else contextlib.nullcontext():
            yield layout
    finally:
        layout.forked = EngineCoreFork.started > forks_before
        if cores is not None:
            _give_back(set(cores), own)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def in_process_cpu_engine(tensor_parallel_size: int = 1):
    """Around vllm.LLM(...) in a process that does nothing else while it runs (`jury eval`,
    `jury select`): on the CPU at tensor parallel 1, unless the user set
    VLLM_ENABLE_V1_MULTIPROCESSING, the whole engine runs in this process (vLLM's in-process client
    and executor), with no engine core and worker to start and no worker spinning beside it. The
    tiny model here: the engine up in 3 s against 22 s, 64 completions in 0.09-0.18 s against 0.26 s
    (docs/results.md, "Where a CPU engine runs"). Nothing is pinned: the process has the machine to
    itself, and torch's threads use its cores. vLLM then seeds this process's global random state
    with the engine's seed (it warns so). Yields whether the engine runs in this process."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu() or tensor_parallel_size > 1 or MULTIPROCESSING in os.environ:
        yield os.environ.get(MULTIPROCESSING) == "0" and current_platform.is_cpu()
        return
    os.environ[MULTIPROCESSING] = "0"
    try:
        yield True
    finally:
        os.environ.pop(MULTIPROCESSING, None)

