"""The learner's side of the scored-group queue: which groups it takes, and when a batch is whole.

    inbox = ScoredInbox(receiver, batch_groups=B, window_batches=max_staleness + 1, slots=plan.slots)
    groups, missing = inbox.wait_batch(step, version, timeout_s)   # batch s = indices [s·B, (s+1)·B)

With dynamic sampling (plan.slots: S = B + R indices per batch, learner/dynamic.py) batch s is
[s·S, (s+1)·S) and its base groups are the first B of those; the window counts in batches as before.

Continuous admission (plan.admission.continuous):

    groups, dropped, missing = inbox.first_scored(step, version, timeout_s)

batch s is the first B groups to reach the learner (by arrival, then index), whatever their
indices. The feeder's budget is unchanged: at most (v + window)·B tasks admitted at version v, plus
one for every group dropped. Since any group may be overtaken, a group can be waiting here when
step s comes more than max_staleness versions after its policy (s - version_start, the ledger's
staleness): with drop_stale it is dropped before the batch is chosen (returned, so the driver takes
it off the feeder's ledger and admits a task in its place) and the bound holds for every trained
group; without, it is trained as it is. Trained or dropped indices are no longer a prefix: the
inbox keeps every index below `floor` and the set `done` above it.

With dynamic sampling too (plan.admission.refills, learner/dynamic.py's ScoredFill) the step takes
groups one at a time in the same order (`next_scored`) and judges them; each flat group that frees
its place in the budget raises the bound by one (`refilled_total`), as a drop does.

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
from jury.protocol.plan import Admission, Slots
from jury.protocol.transport import RateLimitedLog, Receiver

log = logging.getLogger(__name__)


class ScoredInbox:
    def __init__(self, receiver: Receiver, batch_groups: int, window_batches: int, slots: Slots | None = None,
                 admission: Admission | None = None):
        self.receiver, self.batch_groups, self.window_batches = receiver, batch_groups, window_batches
        self.slots = slots or Slots(batch_groups, 0)
        self.admission = admission or Admission(False, window_batches - 1, True)
        # continuous admission: the indices trained or dropped are every one below floor and those in done
        self.floor, self.done = 0, set()
        self.dropped_total = 0  # groups dropped as too stale: the feeder admitted as many more
        self.refilled_total = 0  # flat groups whose places were refilled (dynamic sampling): as many more
        self.buffer: dict[int, ScoredGroup] = {}
        # taken out for a batch not trained yet (dynamic sampling judges a batch round by round):
        # still here for wait_for, and a second copy is a duplicate
        self.taken: set[int] = set()
        self.arrived: dict[int, float] = {}  # admission index -> wall clock it reached the learner
        self.counts = {"duplicates": 0, "out_of_window": 0}
        if self.admission.continuous:
            self.counts["stale_dropped"] = 0
        self._refusals = RateLimitedLog(logger=log)

    def offer(self, g: ScoredGroup, version: int) -> bool:
        """Keep the group if its batch is still to come and inside the window; count it otherwise."""
        index = g.group.task.index
        if index in self.buffer or index in self.taken or self.finished(index, version):
            self.counts["duplicates"] += 1
            return False
        if index >= self.admission_bound(version):
            self.counts["out_of_window"] += 1
            self._refusals.warn("learner: refused group %d: past the admission window (version %d, %d batches "
                                "of %d)", index, version, self.window_batches, self.batch_groups)
            return False
        self.buffer[index] = g
        self.arrived[index] = time.time()
        return True

    def finished(self, index: int, version: int) -> bool:
        """Trained (or, under continuous admission, dropped): a copy arriving now is a duplicate."""
        if self.admission.continuous:
            return index < self.floor or index in self.done
        return index < version * self.slots.per_batch

    def admission_bound(self, version: int) -> int:
        """The first index the feeder cannot have admitted while the learner is at `version`."""
        if self.admission.continuous:
            return (version + self.window_batches) * self.batch_groups + self.dropped_total + self.refilled_total
        return (version + self.window_batches) * self.slots.per_batch

    def finish(self, indices):
        """Continuous admission: these indices are trained or dropped."""
        self.done.update(indices)
        while self.floor in self.done:
            self.done.remove(self.floor)
            self.floor += 1

    def first_scored(self, step: int, version: int, timeout_s: float) -> tuple[list[ScoredGroup], list[int], list[int]]:
        """Continuous admission: (the first B groups here, by arrival, for step `step`; the groups dropped
        as past max_staleness meanwhile; []), or after timeout_s ([], dropped, the oldest indices not here
        yet, as many as the batch lacks: any B groups make the batch, and the oldest in flight are the
        likeliest lost, so a re-send after resend_after_s repeats no more generation than the step waits
        on; the next timeout names the next oldest)."""
        deadline = time.monotonic() + timeout_s
        dropped: list[int] = []
        while True:
            dropped += self.drop_stale(step)
            if len(self.buffer) >= self.batch_groups:
                first = sorted(self.buffer, key=self._arrival)[: self.batch_groups]
                self.finish(first)
                return [self.buffer.pop(i) for i in first], dropped, []
            if time.monotonic() > deadline:
                return [], dropped, self.not_here(version)[: self.batch_groups - len(self.buffer)]
            self.poll(version, timeout=0.2)

    def drop_stale(self, step: int) -> list[int]:
        """Continuous admission with drop_stale: take out (and return) the groups here that step
        `step` would train more than max_staleness versions after their policy."""
        if not self.admission.drop_stale:
            return []
        stale = sorted(i for i, g in self.buffer.items() if step - g.group.version_start > self.admission.max_staleness)
        for i in stale:
            del self.buffer[i]
            self.arrived.pop(i, None)
        self.finish(stale)
        self.dropped_total += len(stale)
        self.counts["stale_dropped"] += len(stale)
        return stale

    def next_scored(self) -> ScoredGroup | None:
        """Continuous admission: take out the first group to have arrived (then the lowest index), or None."""
        if not self.buffer:
            return None
        first = min(self.buffer, key=self._arrival)
        self.finish([first])
        return self.buffer.pop(first)

    def _arrival(self, index: int) -> tuple[float, int]:
        return self.arrived[index], index

    def not_here(self, version: int) -> list[int]:
        """Continuous admission: the indices admitted (under the bound) and neither here nor done."""
        bound = self.admission_bound(version)
        return [i for i in range(self.floor, bound) if i not in self.done and i not in self.buffer]

    def restore(self, next_index: int, pending: list[int], dropped_total: int, refilled_total: int = 0):
        """Continuous admission, a resumed run: every index below next_index not in `pending` (the tasks
        admitted and not trained at the checkpoint, sent again) was trained, dropped or filtered."""
        self.floor = min(pending, default=next_index)
        self.done = set(range(self.floor, next_index)) - set(pending)
        self.dropped_total, self.refilled_total = dropped_total, refilled_total

    def poll(self, version: int, timeout: float):
        msg = self.receiver.get(timeout=timeout)
        if isinstance(msg, ScoredGroup):  # not None (nothing came), nor a Shutdown (stop() woke the queue)
            self.offer(msg, version)

    def wait_batch(self, step: int, version: int, timeout_s: float) -> tuple[list[ScoredGroup], list[int]]:
        """The B groups of batch `step`, or after timeout_s the indices still missing."""
        return self.wait_for(self.slots.base(step), version, timeout_s, take=True)

    def wait_for(self, indices, version: int, timeout_s: float, take: bool = False):
        """Until every index not trained yet is here (buffered, or taken out earlier for a batch not
        trained yet); (the buffered ones taken out if `take`, missing)."""
        self.taken = {i for i in self.taken if not self.finished(i, version)}
        deadline = time.monotonic() + timeout_s
        while missing := [i for i in indices
                          if not self.finished(i, version) and i not in self.buffer and i not in self.taken]:
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
