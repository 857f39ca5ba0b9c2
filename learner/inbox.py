"""The learner's side of the scored-group queue: which groups it takes, and when a batch is whole.

    inbox = ScoredInbox(receiver, batch_groups=B, window_batches=max_staleness + 1, slots=plan.slots)
    groups, missing = inbox.wait_batch(step, version, timeout_s)   # batch s = indices [s·B, (s+1)·B)

With dynamic sampling (plan.slots: S = B + R indices per batch, learner/dynamic.py) batch s is
[s·S, (s+1)·S) and its base groups are the first B of those; the window counts in batches as before.

Groups arrive in any order (several generators and verifiers); they are kept by admission
index until their batch is trained. What is refused, and counted: an index whose batch was
trained or that is already here (a duplicate: a group re-sent after a crash whose first copy
came after all), and an index past the admission window. The feeder admits at most
`window_batches` batches past the learner's version, so such a group was never admitted,
whoever sent it; refusing it bounds the buffer, and with it the learner's memory.
"""
from __future__ import annotations

import logging
import time

from jury.protocol.messages import ScoredGroup
from jury.protocol.plan import Slots
from jury.protocol.transport import RateLimitedLog, Receiver

log = logging.getLogger(__name__)


class ScoredInbox:
    def __init__(self, receiver: Receiver, batch_groups: int, window_batches: int, slots: Slots | None = None):
        self.receiver, self.batch_groups, self.window_batches = receiver, batch_groups, window_batches
        self.slots = slots or Slots(batch_groups, 0)
        self.buffer: dict[int, ScoredGroup] = {}
        # taken out for a batch not trained yet (dynamic sampling judges a batch round by round):
        # still here for wait_for, and a second copy is a duplicate
        self.taken: set[int] = set()
        self.arrived: dict[int, float] = {}  # admission index -> wall clock it reached the learner
        self.counts = {"duplicates": 0, "out_of_window": 0}
        self._refusals = RateLimitedLog(logger=log)

    def offer(self, g: ScoredGroup, version: int) -> bool:
        """Keep the group if its batch is still to come and inside the window; count it otherwise."""
        index = g.group.task.index
        if index in self.buffer or index in self.taken or index < version * self.slots.per_batch:
            self.counts["duplicates"] += 1
            return False
        if index >= (version + self.window_batches) * self.slots.per_batch:
            self.counts["out_of_window"] += 1
            self._refusals.warn("learner: refused group %d: past the admission window (version %d, %d batches "
                                "of %d)", index, version, self.window_batches, self.batch_groups)
            return False
        self.buffer[index] = g
        self.arrived[index] = time.time()
        return True

    def poll(self, version: int, timeout: float):
        msg = self.receiver.get(timeout=timeout)
        if isinstance(msg, ScoredGroup):  # not None (nothing came), nor a Shutdown (stop() woke the queue)
            self.offer(msg, version)

    def wait_batch(self, step: int, version: int, timeout_s: float) -> tuple[list[ScoredGroup], list[int]]:
        """The B groups of batch `step`, or after timeout_s the indices still missing."""
        return self.wait_for(self.slots.base(step), version, timeout_s, take=True)

    def wait_for(self, indices, version: int, timeout_s: float, take: bool = False):
        """Until every index >= the trained floor is here (buffered, or taken out earlier for a batch
        not trained yet); (the buffered ones taken out if `take`, missing)."""
        floor = version * self.slots.per_batch
        self.taken = {i for i in self.taken if i >= floor}
        deadline = time.monotonic() + timeout_s
        while missing := [i for i in indices if i >= floor and i not in self.buffer and i not in self.taken]:
            if time.monotonic() > deadline:
                return [], missing
            self.poll(version, timeout=0.2)
        if not take:
            return [], []
        out = [self.buffer.pop(i) for i in indices if i in self.buffer]
        self.taken.update(g.group.task.index for g in out)
        return out, []

    def depth(self) -> int:
        return self.receiver.depth() + len(self.buffer)
