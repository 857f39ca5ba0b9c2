"""The generator's bookkeeping of its slots around a weight sync, on its asyncio loop alone: a
generation cancelled before it ever ran. No engine is started: the cancelled coroutine never reaches
it (the engine-side behaviour of the sync modes is tests/actors/test_sync_modes.py, on vLLM)."""
import asyncio

from jury.actors.generator import Generator
from jury.protocol.messages import PromptTask


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
