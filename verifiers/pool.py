"""A process pool for checks with a hard per-item timeout.

`concurrent.futures` cannot stop one hung task, and symbolic math on model output
can hang (`10^{10^{10}}`). Here each worker is a process with a pipe; an item past
its deadline gets its process killed and replaced, and comes back as a "timeout"
result. A process that dies mid-item (a crash, the memory limit, a kill from outside) is
replaced and the item tried once more; dying twice makes it "error". A process found dead
while idle is replaced before use. Nothing is ever lost: `map` returns one result per item.

Functions are named as "module:function" and imported in the worker, so no code
travels through the pipe. The modules named in `preload` are imported when a process
starts, and the pool hands it no item until it has: an import (half a second for the math
checks) never counts against an item's timeout, so a timeout shorter than a cold start
does not make every replacement time out in turn.
"""
from __future__ import annotations

import importlib
import logging
import multiprocessing as mp
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

_MEMORY_LIMIT = 2 << 30  # bytes of address space per check process
LOAD_TIMEOUT_S = 120.0   # a process's start and preload; a check timed by cost_of

log = logging.getLogger(__name__)


@dataclass
class PoolResult:
    status: str       # ok | timeout | error
    value: Any
    latency_s: float
    detail: str = ""


def _serve(conn, memory_limit: int, preload: tuple[str, ...] = ()):
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    except (ImportError, ValueError, OSError):
        pass  # not every platform lets a process lower its limits; the timeout still holds
    for module in preload:
        importlib.import_module(module)
    conn.send(("ready", None))
    funcs = {}
    while True:
        try:
            name, args = conn.recv()
        except EOFError:
            return
        try:
            if name not in funcs:
                module, _, attr = name.partition(":")
                funcs[name] = getattr(importlib.import_module(module), attr)
            conn.send(("ok", funcs[name](*args)))
        except MemoryError:
            conn.send(("error", "MemoryError"))
        except Exception as e:  # a bug in a check is a verdict, not a dead pool
            conn.send(("error", f"{type(e).__name__}: {e}"[:500]))


class _Worker:
    def __init__(self, ctx, memory_limit: int, preload: tuple[str, ...]):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, memory_limit, preload), daemon=True)
        self.proc.start()
        child.close()

    def wait_ready(self):
        """Until the process has started and imported its preload (LOAD_TIMEOUT_S at most)."""
        try:
            if self.conn.poll(LOAD_TIMEOUT_S) and self.conn.recv()[0] == "ready":
                return
        except (EOFError, OSError):
            pass
        exitcode = self.proc.exitcode
        self.kill()
        raise RuntimeError(f"a check process did not start in {LOAD_TIMEOUT_S:.0f}s (exit code {exitcode}): "
                           f"see its traceback above")

    def kill(self):
        self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


class CheckPool:
    def __init__(self, workers: int = 1, timeout_s: float = 5.0, memory_limit: int = _MEMORY_LIMIT,
                 preload: tuple[str, ...] = ()):
        self._ctx = mp.get_context("spawn")  # no fork: callers hold threads and sockets
        self.timeout_s, self.memory_limit, self.preload = timeout_s, memory_limit, tuple(preload)
        self._workers = [_Worker(self._ctx, memory_limit, self.preload) for _ in range(workers)]
        for w in self._workers:  # started side by side, then waited for
            w.wait_ready()
        self.restarts = 0

    def cost_of(self, func: str, args: tuple) -> float:
        """Seconds one call of func(*args) takes in a check process, as `map` times an item, bounded
        by LOAD_TIMEOUT_S instead of the pool's timeout (so a cost above that timeout is measured,
        not cut off). RuntimeError when the call does not answer "ok"."""
        (r,) = self.map(func, [args], timeout_s=max(self.timeout_s, LOAD_TIMEOUT_S))
        if r.status != "ok":
            raise RuntimeError(f"timing {func}{args!r} in a check process: {r.status} {r.detail}")
        return r.latency_s

    def map(self, func: str, items: list[tuple], timeout_s: float | None = None) -> list[PoolResult]:
        """Run func(*item) for every item, in parallel over the workers; one result per item;
        timeout_s: each item's limit (default: the pool's).

        A process found dead (killed while idle, say) is replaced before it is used. An item
        whose process dies under it is run once more on a fresh process: a process killed from
        outside must not turn a sound answer into an "error"; an item that kills its process
        twice (a memory bomb) ends as "error"."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        results: list[PoolResult | None] = [None] * len(items)
        pending = deque(range(len(items)))
        deaths = [0] * len(items)
        idle = list(self._workers)
        running: dict[int, tuple[_Worker, int, float]] = {}  # conn fileno -> (worker, item, start)
        while pending or running:
            while pending and idle:
                w, i = idle.pop(), pending.popleft()
                try:
                    if not w.proc.is_alive():
                        raise BrokenPipeError(f"check process {w.proc.pid} is dead (exit {w.proc.exitcode})")
                    w.conn.send((func, items[i]))
                except (BrokenPipeError, ConnectionResetError, OSError) as e:
                    log.warning("check pool: %s; replacing it", e)
                    idle.append(self._replace(w))
                    pending.appendleft(i)
                    continue
                running[w.conn.fileno()] = (w, i, time.perf_counter())
            if not running:
                continue
            first_deadline = min(t0 for _, _, t0 in running.values()) + timeout_s
            ready = wait([w.conn for w, _, _ in running.values()], timeout=max(0.0, first_deadline - time.perf_counter()))
            now = time.perf_counter()
            for conn in ready:
                w, i, t0 = running.pop(conn.fileno())
                try:
                    status, value = conn.recv()
                    results[i] = PoolResult(status, value if status == "ok" else None, now - t0,
                                            "" if status == "ok" else value)
                    idle.append(w)
                except (EOFError, OSError):  # the process died mid-item
                    exitcode = w.proc.exitcode
                    idle.append(self._replace(w))
                    deaths[i] += 1
                    if deaths[i] < 2:
                        pending.append(i)  # once more, on a fresh process
                    else:
                        results[i] = PoolResult("error", None, now - t0, f"check process died twice (exit {exitcode})")
            for key, (w, i, t0) in list(running.items()):
                if now - t0 >= timeout_s:
                    del running[key]
                    results[i] = PoolResult("timeout", None, now - t0, f"over {timeout_s}s")
                    idle.append(self._replace(w))
        return results

    def _replace(self, w: _Worker) -> _Worker:
        w.kill()
        self.restarts += 1
        new = _Worker(self._ctx, self.memory_limit, self.preload)
        self._workers[self._workers.index(w)] = new
        new.wait_ready()
        return new

    def close(self):
        for w in self._workers:
            w.kill()
