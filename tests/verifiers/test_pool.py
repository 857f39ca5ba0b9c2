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
        assert pool.map("os:_exit", [(3,)])[0].status == "error"       # the process died mid-item
        res = pool.map("math:sqrt", [(-1,), (9,)])
        assert res[0].status == "error" and "math domain" in res[0].detail
        assert res[1].status == "ok" and res[1].value == 3.0
        assert pool.restarts == 2
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
