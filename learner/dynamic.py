"""DAPO's dynamic sampling (arXiv:2503.14476, section 3.2) on the asynchronous path
(`dynamic_sampling: true`, `max_refills`): the learner's side.

    step s, rank 0 (learner.py):
        fill = BatchFill(plan.slots, s, plan.overlong)
        missing, refill = advance(fill, inbox, version, timeout)   # wait for every admitted group, judge them
        refill non-empty: StepResult(refill=...) -> the driver admits them (Feeder.admit_refills), asks again
        done: train on fill.kept_groups(), log fill_metrics(fill)
    continuous admission: ScoredFill / advance_scored / scored_fill_metrics in their place (below)

DAPO keeps a group only if some but not all of its samples are correct (eq. 11: 0 < |correct| < G;
verl's DAPO recipe filters on `acc`). Here, for every reward scheme: a group is flat, and dropped,
when the scheme's rewards are all equal (within each view), before the overlong penalty. Such a
group, all right or all wrong, would otherwise teach only length when the penalty parts its
samples (until 2026-12-06 it was kept then). A group whose rewards differ but whose shaped rewards
(with the penalty: what the advantages see) are equal has zero advantage in every scheme (grpo,
drgrpo, rloo all subtract the group's mean) and is dropped too. Dynamic sampling admits more
prompts (refills) until the batch holds `batch_groups` groups with signal, at most `max_refills`
refills per step.

How a refill gets an admission index under the same budget
---------------------------------------------------------
Without refills batch s is the admission indices [s·B, (s+1)·B), the feeder admits batch s's tasks only
while s < v + window (v: the generators' version; window = max_staleness + 1, plan.window), and
the learner refuses an index past (version + window)·B (learner/inbox.py). Refills keep that rule
by giving every batch R = max_refills spare slots (plan.slots): batch s owns the S = B + R indices
[s·S, (s+1)·S), its B base slots first, then its R refill slots.

- Base slots are admitted exactly as now, batch by batch while s < v + window; with R = 0 the
  indices are today's (Slots.base_index(k) == k).
- Refill r of batch s is index s·S + B + r, admitted only when the learner, waiting on batch s,
  asks for it. The learner is then at version s and the generators at v >= s - (sync_every - 1)
  >= s - max_staleness (config: max_staleness >= sync_every - 1), so s < v + window holds: the
  refill is inside the same budget, and its group, generated at a version >= v, is trained at
  step s at most max_staleness versions stale. Tasks in flight stay <= window·S (the feeder's
  sender HWM is (window + 1)·S), and the inbox's window counts S indices per batch.
- Refills are asked one round at a time, exactly the deficit (B - kept - outstanding, capped by
  the refills left), so a batch never holds more than B groups with signal and which groups it
  keeps does not depend on the order they arrive in (`BatchFill`).
- When the cap is hit, the step trains on the groups with signal it has (fewer than B; none: the
  step is skipped as an unusable batch is today) and logs dynamic/short_groups. verl and SkyRL
  raise an error instead (max_num_gen_batches, max_sample_batches); a run that trains on fewer
  groups for a step keeps going.
- Unused refill slots are never admitted and draw no problem from the stream. A resumed run
  continues from the stream position of its next batch's first base slot; problems that refills
  of earlier batches drew after that position are drawn again (a resume is not bit-identical to
  the uninterrupted run under dynamic sampling; replay is).

How replay reproduces it: the learner records what it trains (record_groups), i.e. the kept groups
in index order, and `jury replay` trains on the record; the filtered groups never reach the loss,
so the record is all the step trained on. Which groups were kept is a pure function of each
group's rewards and lengths (and plan.overlong), not of their arrival order (`BatchFill`).

Refused together with forced staleness, whose schedule (task i released at version i // B - k_i)
counts indices in batches of B, and with rewards the learner scores itself (self_certainty,
entropy): their rewards are known only in the learner's forward, after the batch is chosen.

With continuous admission (plan.admission.refills = max_refills; `ScoredFill`, `advance_scored`)
----------------------------------------------------------------------------------------------
A batch is the first B groups scored that have signal (learner/inbox.py: "first scored", by arrival
then index). Indices stay consecutive, with no refill slots: the budget is counted in places. Step
s takes the groups in the order they reached the learner and judges each: a group with signal is
kept, a flat one is filtered (never trained; the driver takes it off the feeder's ledger). Each of
the first R = max_refills groups a step filters frees its place: the feeder's budget and the
inbox's bound go up by one (Feeder.refill_places, ScoredInbox.refilled_total), as for a group
dropped as too stale, and a new task is admitted in it: the refill. The step is done with B
groups kept, or once it has judged B + R (the cap: it trains on the groups with signal it has).
Either way it judged exactly B + refills groups, so with D the groups dropped as stale and F the
refills, by version v the feeder has admitted at most (v + window)·B + D + F tasks, trained
s·B - short groups, and at most window·B are in flight: the same budget as without filtering,
counted over the groups that will be trained. Refills are reported to the driver as soon as a
round judged them (StepResult.refill: here the flat groups whose places are freed), and a step
done in the same round trains at the next call, after they are admitted. Which groups a batch
holds depends on arrival order, as under continuous admission without filtering; replay trains
on the record, and a resume restores the pending tasks and both counts from the checkpoint.

Per step (`fill_metrics`): dynamic/filtered_frac (flat groups among those seen), dynamic/refills
(admitted), dynamic/extra_samples and dynamic/extra_tokens (generation beyond B groups: every
refill's samples and tokens; with continuous admission the samples and tokens of the filtered
groups whose places were refilled), dynamic/short_groups (B - kept when the cap was hit).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from jury.learner.grpo import overlong_penalty
from jury.learner.inbox import ScoredInbox
from jury.protocol.messages import ScoredGroup
from jury.protocol.plan import Overlong, Slots


def flat(g: ScoredGroup, overlong: Overlong | None = None) -> bool:
    """Whether dynamic sampling drops the group: within each view (CoReward's prompt and rewrite are
    normalised apart, grpo._view_advantages) the scheme's rewards are all equal (DAPO's rule), or
    the rewards plus the overlong penalty are (every advantage 0). A group without samples, or
    unscored, trains nothing and counts as flat."""
    if not g.group.samples or g.error is not None:
        return True
    shaped = g.rewards + overlong_penalty(np.array([len(s.token_ids) for s in g.group.samples]), overlong)
    views = np.array([s.view for s in g.group.samples])
    equal = lambda r: all(np.ptp(r[views == v]) == 0 for v in np.unique(views))  # noqa: E731
    return equal(np.asarray(g.rewards)) or equal(shaped)


@dataclass
class BatchFill:
    """One step's groups under dynamic sampling, fed as they arrive (any order): keeps those with
    signal, counts the flat ones, and says how many refills to admit next.

        fill = BatchFill(slots, step, overlong)
        for g in base groups as they come: fill.offer(g)
        while not fill.done:
            n = fill.want(); admit refills fill.take_refills(n); offer them as they come
        train on fill.kept_groups()
    """

    slots: Slots
    step: int
    overlong: Overlong | None = None
    kept: dict[int, ScoredGroup] = field(default_factory=dict)   # admission index -> group with signal
    flat: dict[int, ScoredGroup] = field(default_factory=dict)   # ... flat groups, filtered out
    refills: int = 0        # refill slots admitted so far
    answered: int = 0       # groups offered (base and refills)

    def offer(self, g: ScoredGroup):
        index = g.group.task.index
        if self.slots.batch_of(index) != self.step:
            raise ValueError(f"group {index} belongs to batch {self.slots.batch_of(index)}, not {self.step}")
        if index in self.kept or index in self.flat:
            raise ValueError(f"group {index} offered twice")
        if self.slots.is_refill(index) and index >= self.slots.refill_index(self.step, 0) + self.refills:
            raise ValueError(f"group {index} is a refill slot that was never admitted ({self.refills} so far)")
        (self.flat if flat(g, self.overlong) else self.kept)[index] = g
        self.answered += 1

    def admitted(self) -> list[int]:
        """The batch's admitted indices: its base slots and the refill slots taken so far."""
        return [*self.slots.base(self.step), *(self.slots.refill_index(self.step, r) for r in range(self.refills))]

    @property
    def outstanding(self) -> int:
        """Admitted groups of this batch not offered yet."""
        return self.slots.batch_groups + self.refills - self.answered

    def want(self) -> int:
        """Refills to admit now: the deficit not already covered by groups in flight, capped by
        the refill slots left. 0 while the base groups are still coming in."""
        if self.answered < self.slots.batch_groups:
            return 0
        deficit = self.slots.batch_groups - len(self.kept) - self.outstanding
        return max(0, min(deficit, self.slots.refills - self.refills))

    def take_refills(self, n: int) -> list[int]:
        """Admit the next n refill slots; their indices, in order."""
        if n > self.slots.refills - self.refills:
            raise ValueError(f"{n} refills asked, {self.slots.refills - self.refills} slots left")
        out = [self.slots.refill_index(self.step, self.refills + r) for r in range(n)]
        self.refills += n
        return out

    @property
    def done(self) -> bool:
        """B groups with signal, or nothing in flight and no refill slot left (the cap)."""
        if len(self.kept) >= self.slots.batch_groups:
            return True
        return self.outstanding == 0 and self.answered >= self.slots.batch_groups and \
            self.refills == self.slots.refills

    def kept_groups(self) -> list[ScoredGroup]:
        """The groups to train, in admission-index order (the same whatever order they came in)."""
        return [self.kept[i] for i in sorted(self.kept)]


def fill_metrics(fill: BatchFill) -> dict[str, float]:
    """The step's dynamic sampling: what was filtered, what refilling admitted and generated."""
    seen = len(fill.kept) + len(fill.flat)
    refill_groups = [g for i, g in {**fill.kept, **fill.flat}.items() if fill.slots.is_refill(i)]
    return {"dynamic/filtered_frac": len(fill.flat) / seen if seen else 0.0,
            "dynamic/refills": float(fill.refills),
            "dynamic/extra_samples": float(sum(len(g.group.samples) for g in refill_groups)),
            "dynamic/extra_tokens": float(sum(len(s.token_ids) for g in refill_groups for s in g.group.samples)),
            "dynamic/short_groups": float(max(0, fill.slots.batch_groups - len(fill.kept)))}


def advance(fill: BatchFill, inbox: ScoredInbox, version: int, timeout_s: float) -> tuple[list[int], list[int]]:
    """One round of a step's dynamic sampling: wait for every admitted group of the batch not judged
    yet, judge them, and return (missing, refills to admit now). Both empty: the fill is done.
    Waiting for all of them before asking keeps the refills asked a function of the rewards alone."""
    waiting = [i for i in fill.admitted() if i not in fill.kept and i not in fill.flat]
    groups, missing = inbox.wait_for(waiting, version, timeout_s, take=True)
    if missing:
        return missing, []
    for g in groups:
        fill.offer(g)
    n = fill.want()
    return [], fill.take_refills(n) if n else []


@dataclass
class ScoredFill:
    """One step's groups under dynamic sampling with continuous admission, judged in the order they
    reached the learner: keeps those with signal, filters the flat ones, and grants each of the
    first `max_refills` flat ones a refill (a new task in its place).

        fill = ScoredFill(B, R, step, overlong)
        while not fill.done: fill.offer(next group scored); the driver admits fill.take_granted()
        train on fill.kept
    """

    batch_groups: int
    max_refills: int
    step: int
    overlong: Overlong | None = None
    kept: list[ScoredGroup] = field(default_factory=list)  # with signal, in the order judged
    flat: list[ScoredGroup] = field(default_factory=list)  # filtered, in the order judged
    refills: int = 0                                        # flat groups granted a refill
    granted: list[int] = field(default_factory=list)        # ... whose refills the driver has yet to admit

    def offer(self, g: ScoredGroup):
        if self.done:
            raise ValueError(f"group {g.group.task.index} offered to step {self.step}, which is done")
        if not flat(g, self.overlong):
            self.kept.append(g)
            return
        self.flat.append(g)
        if self.refills < self.max_refills:
            self.refills += 1
            self.granted.append(g.group.task.index)

    @property
    def done(self) -> bool:
        """B groups with signal, or B + R judged (the cap): the step judged exactly B + refills."""
        return len(self.kept) >= self.batch_groups or \
            len(self.kept) + len(self.flat) >= self.batch_groups + self.max_refills

    def take_granted(self) -> list[int]:
        """The flat groups granted a refill since the last call: their places go to new tasks."""
        out, self.granted = self.granted, []
        return out

    def filtered(self) -> list[int]:
        return [g.group.task.index for g in self.flat]


def scored_fill_metrics(fill: ScoredFill) -> dict[str, float]:
    """fill_metrics' keys for a ScoredFill; the extra generation is the filtered groups that were refilled."""
    seen = len(fill.kept) + len(fill.flat)
    extra = fill.flat[:fill.refills]
    return {"dynamic/filtered_frac": len(fill.flat) / seen if seen else 0.0,
            "dynamic/refills": float(fill.refills),
            "dynamic/extra_samples": float(sum(len(g.group.samples) for g in extra)),
            "dynamic/extra_tokens": float(sum(len(s.token_ids) for g in extra for s in g.group.samples)),
            "dynamic/short_groups": float(max(0, fill.batch_groups - len(fill.kept)))}


def advance_scored(fill: ScoredFill, inbox: ScoredInbox, version: int,
                   timeout_s: float) -> tuple[list[int], list[int], list[int]]:
    """Judge the groups here, first arrived first, until the fill is done or none is left; return
    (missing, refills, dropped as too stale). Refills non-empty: the driver admits them, and asks
    again (a done fill then trains). All empty and fill.done: train. After timeout_s with nothing
    to report: the indices not here yet as missing."""
    deadline = time.monotonic() + timeout_s
    dropped: list[int] = []
    while True:
        dropped += inbox.drop_stale(fill.step)
        while not fill.done and (g := inbox.next_scored()) is not None:
            fill.offer(g)
        refill = fill.take_granted()
        inbox.refilled_total += len(refill)  # the feeder admits as many more: the bound moves with it
        for g in fill.flat:  # never trained: no ledger row to take their arrival time
            inbox.arrived.pop(g.group.task.index, None)
        if refill or fill.done:
            return [], refill, dropped
        if time.monotonic() > deadline:
            return inbox.not_here(version), [], dropped
        inbox.poll(version, timeout=0.2)
