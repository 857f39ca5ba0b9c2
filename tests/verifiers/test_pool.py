"""The check pool: a hung check is a timeout, a crashed one an error, and the pool lives on."""
import os
import time

from jury.verifiers.pool import CheckPool


def test_timeout_crash_and_errors_are_results_and_the_pool_recovers():
    pool = CheckPool(workers=2, timeout_s=1.0)
    try:
        t0 = time.monotonic()
        res = pool.map("time:sleep", [(0.05,), (30,), (0.05,)])
        assert [r.status for r in res] == ["ok", "timeout", "ok"]
        assert time.monotonic() - t0 < 5, "a hung check held the pool past its timeout"
        assert pool.map("os:_exit", [(3,)])[0].status == "error"       # the process died mid-item, twice
        res = pool.map("math:sqrt", [(-1,), (9,)])
        assert res[0].status == "error" and "math domain" in res[0].detail
        assert res[1].status == "ok" and res[1].value == 3.0
        assert pool.restarts == 3  # one timeout, and the item that killed its process was tried twice
        pids = [w.proc.pid for w in pool._workers]
    finally:
        pool.close()
    for pid in pids:  # closed means gone
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


def test_memory_bomb_is_an_error_not_a_dead_caller():
    pool = CheckPool(workers=1, timeout_s=10.0, memory_limit=512 << 20)
    try:
        res = pool.map("builtins:bytearray", [(4 << 30,), (3,)])
        assert res[0].status == "error"
        assert res[1].status == "ok" and res[1].value == bytearray(3)
    finally:
        pool.close()


def test_a_process_killed_from_outside_is_replaced_and_loses_no_check():
    """kill -9 of an idle check process, then of one in the middle of an item: every check still
    answers "ok" (the pool replaces the dead process and runs the item again)."""
    import signal
    import threading

    pool = CheckPool(workers=2, timeout_s=10.0)
    try:
        os.kill(pool._workers[0].proc.pid, signal.SIGKILL)
        pool._workers[0].proc.join(5)
        res = pool.map("math:sqrt", [(4,), (9,), (16,)])
        assert [(r.status, r.value) for r in res] == [("ok", 2.0), ("ok", 3.0), ("ok", 4.0)]
        assert pool.restarts == 1

        victims = [w.proc.pid for w in pool._workers]
        killer = threading.Timer(0.5, lambda: [os.kill(pid, signal.SIGKILL) for pid in victims])
        killer.start()
        res = pool.map("time:sleep", [(2,), (2,)])  # both processes die under their items
        killer.join()
        assert [r.status for r in res] == ["ok", "ok"], [r.detail for r in res]
        assert pool.restarts == 3
    finally:
        pool.close()


def test_a_process_loads_its_modules_before_its_first_item(tmp_path, monkeypatch):
    """A module that takes 2 s to import, a timeout of 1 s: the import is not the item's. Before,
    the first item of every fresh process paid it, timed out, and so did the replacement's."""
    (tmp_path / "slow_to_import.py").write_text("import time\ntime.sleep(2)\n\ndef answer():\n    return 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # a spawned process starts with this sys.path
    pool = CheckPool(workers=1, timeout_s=1.0, preload=("slow_to_import",))
    try:
        assert [(r.status, r.value) for r in pool.map("slow_to_import:answer", [()])] == [("ok", 42)]
        assert pool.map("time:sleep", [(30,)])[0].status == "timeout"  # the process is replaced...
        assert [(r.status, r.value) for r in pool.map("slow_to_import:answer", [()])] == [("ok", 42)]  # ...loaded
        assert pool.restarts == 1
    finally:
        pool.close()


def test_cost_of_measures_a_call_past_the_pool_timeout():
    pool = CheckPool(workers=1, timeout_s=0.05)
    try:
        assert pool.cost_of("time:sleep", (0.3,)) >= 0.3  # measured, not cut off at 0.05 s
        assert pool.map("time:sleep", [(0.3,)])[0].status == "timeout"  # the pool's own limit is unchanged
    finally:
        pool.close()
