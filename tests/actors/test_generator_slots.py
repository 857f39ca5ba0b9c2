"""The generator's bookkeeping of its slots around a weight sync, on its asyncio loop alone: a
generation cancelled before it ever ran, and a task waiting for a slot while a drain sync frees one.
No engine is started: neither case reaches one (the engine-side behaviour of the sync modes, the
interrupt case of the second among them, is tests/actors/test_sync_modes.py, on vLLM). And the
versions a finished group is stamped with."""
import asyncio

import numpy as np

from jury.actors.generator import Generator, group_versions
from jury.protocol.messages import PromptTask, Sample


def _bare_generator(slots: int) -> Generator:
    """A Generator's task-loop state, as __init__ sets it, without its vLLM engine."""
    gen = object.__new__(Generator)
    gen.actor_id = "generator0"
    gen._idle, gen._open = asyncio.Event(), asyncio.Event()
    gen._idle.set()
    gen._open.set()
    gen._in_flight, gen._slots = 0, asyncio.Semaphore(slots)
    gen._running, gen._spawned, gen._interrupting, gen._retry = {}, 0, False, []
    gen._stats = {"busy_s": 0.0}
    gen._busy_since = None
    gen._fault, gen._slow_s = None, 0.0
    return gen


def test_a_generation_cancelled_before_its_first_step_gives_back_its_slot_and_is_retried():
    """An interrupt sync that runs between a task's spawn and its first step cancels a coroutine
    that never started: its `finally` never runs. Before, the slot stayed taken, the generator never
    went idle (the sync waited out sync_timeout_s) and the task was lost."""
    async def main():
        gen = _bare_generator(slots=1)
        task = PromptTask("t0", 0, "Compute 2+2.", None, "s")
        await gen._slots.acquire()
        gen._begin()
        gen._spawn(task)
        gen._interrupting = True  # what update_weights does, then cancels every generation in flight
        for job in list(gen._running.values()):
            job.cancel()
        await asyncio.wait_for(gen._idle.wait(), timeout=2)
        assert gen._retry == [task] and gen._in_flight == 0 and not gen._running
        assert not gen._slots.locked()  # the one slot is free again for the retry

    asyncio.run(main())


def test_a_task_waiting_for_a_slot_sits_out_a_drain_sync_that_frees_one():
    """Every slot taken, the next task waits in _take. A drain sync closes the generator and waits
    for the group in flight; when it ends its slot is free, but the sync is still loading weights:
    the waiting task must not start then (it would generate on the old weights while the new ones
    load). It starts once the sync reopens the generator. The generation here is a stand-in that
    records the version it began on: what the test is about never reaches an engine."""
    async def main():
        gen = _bare_generator(slots=1)
        gen.version = 0
        began, finish = [], asyncio.Event()

        async def generation(task):  # holds its slot until told to finish
            began.append((task.task_id, gen.version))
            await finish.wait()
            raise RuntimeError("not sent: the test ends here")

        gen._generate = lambda task, key: _bookkept(gen, generation(task), key)
        first, second = (PromptTask(f"t{i}", i, "p", None, "s") for i in range(2))
        await gen._take(first)
        waiting = asyncio.create_task(gen._take(second))
        await asyncio.sleep(0.01)
        assert began == [("t0", 0)] and not waiting.done()  # no slot for it
        gen._open.clear()  # a drain sync begins: update_weights waits for _idle
        finish.set()  # the group in flight ends, and gives back its slot
        await asyncio.wait_for(gen._idle.wait(), timeout=2)
        await asyncio.sleep(0.01)
        assert began == [("t0", 0)] and gen._in_flight == 0  # the freed slot was not taken
        gen.version = 1  # the new weights are in
        gen._open.set()
        await asyncio.wait_for(waiting, timeout=2)
        await asyncio.sleep(0.01)
        assert began == [("t0", 0), ("t1", 1)]

    asyncio.run(main())


async def _bookkept(gen: Generator, generation, key: int):
    """_generate's bookkeeping around a stand-in generation: the key popped and the slot given back."""
    try:
        await generation
    except Exception:
        pass
    finally:
        gen._running.pop(key)
        gen._end()


def _stamped(versions: list[int]) -> Sample:
    n = len(versions)
    return Sample(np.zeros(n, np.int32), np.zeros(n, np.float32), "", "stop", token_versions=np.asarray(versions, np.int32))


def test_an_inflight_group_is_as_old_as_its_oldest_token():
    """Under sync_mode inflight a request can start at version 3 and wait in the engine's queue across
    the sync: every token is then sampled at 4, and the group's staleness counts from 4 (stamped 3, a
    trained-at-5 group read 2 versions stale and was dropped under max_staleness=1)."""
    assert group_versions([_stamped([4, 4]), _stamped([4])], 3, 4) == (4, 4)
    assert group_versions([_stamped([3, 4]), _stamped([4, 4])], 3, 5) == (3, 4)  # the sync landed mid-sample
    assert group_versions([_stamped([]), _stamped([4])], 3, 4) == (4, 4)  # an empty completion has no say
    unstamped = Sample(np.zeros(2, np.int32), np.zeros(2, np.float32), "", "stop")
    assert group_versions([unstamped], 3, 3) == (3, 3)  # drain and interrupt: one version, the request's


def test_a_generator_started_closed_takes_no_task_until_a_sync_opens_it():
    """Recovery starts a generator Ray restarted closed (cluster/pipeline.py, recover): it holds the
    run's starting weights until the sync that follows, and a task the feeder queued meanwhile must
    wait for that sync, not be sampled from the starting weights (outside audit). Here the task is
    handed to its _take directly; the sync's reopening is what update_weights does last."""
    import types

    async def main():
        gen = _bare_generator(slots=2)
        gen.engine = types.SimpleNamespace(errored=False)
        gen.version, began = 0, []
        gen._spawn = lambda task: began.append((task.task_id, gen.version))
        await gen.start("tcp://127.0.0.1:9", ["tcp://127.0.0.1:9"], None, closed=True)
        try:
            taking = asyncio.create_task(gen._take(PromptTask("t0", 0, "p", None, "s")))
            await asyncio.sleep(0.05)
            assert began == [] and not taking.done()
            gen.version = 3  # the learner's weights are in
            gen._open.set()
            await asyncio.wait_for(taking, timeout=2)
            assert began == [("t0", 3)]
        finally:
            for job in (gen._loop_task, gen._engine_watch):
                job.cancel()
            gen.tasks.close()
            gen.rollouts.close()

    asyncio.run(main())
