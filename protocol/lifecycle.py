"""What the wiring (cluster/pipeline.py) calls on the actors of a run, whatever their role.

    Lifecycle: every actor (generators, verifier workers, learner ranks, LLM servers)
        actor.pid()            its process, for kill -9 from outside (fault injection, clean-up)
        actor.stop()           finish the current item, close its queues and the processes it owns

    RestartableWorker: generators and verifier workers, which Ray restarts after a crash
        endpoint = actor.start(...)   bind and connect its queues (the arguments are the role's own)
        actor.is_started()            False after Ray restarted it: the wiring wires it in again
        actor.stats()                 its counters, named as metrics (generator0/..., verifier0/...)
        actor.fault(action, seconds)  fault injection from inside: "slow" each item, or "raise" in its loop

The methods may be coroutines (an asyncio actor); Ray calls either the same way.
"""
from __future__ import annotations

from typing import Protocol


class Lifecycle(Protocol):
    def pid(self) -> int: ...

    def stop(self) -> None: ...


class RestartableWorker(Lifecycle, Protocol):
    def is_started(self) -> bool: ...

    def stats(self) -> dict: ...

    def fault(self, action: str, seconds: float = 0.0) -> None: ...
