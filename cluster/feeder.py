"""The prompt feeder: admission control is the staleness budget.

Batch s of the learner is the tasks with admission index in [s·B, (s+1)·B). A task
of batch s is admitted only while the generators' policy version v satisfies
s < v + window, with the run plan's window = max_staleness + 1 (protocol/plan.py), so no
sample can be more than max_staleness versions older than the learner that consumes it.
With max_staleness 0 only the current batch is ever in flight: synchronous on-policy
training.

Forced staleness (`forced`, k -> probability) makes staleness an independent variable:
task i of batch b = i // B draws its own k_i and is *released* to the generators only
at version r_i = max(0, b - k_i), and the driver syncs past version v only once every
task released at v is back at the learner. So the group was generated at exactly
version b - k_i and is trained at step b: k_i versions stale (from step k_i on; earlier
batches can only come from version 0). Tasks are still admitted, numbered and drawn
from the data in order; release only holds them back.

Dynamic sampling (plan.slots, learner/dynamic.py): batch s owns the indices [s·S, (s+1)·S),
S = B + R. Its B base slots are admitted by the rule above (base task k gets index
slots.base_index(k)); its R refill slots only when the learner, waiting on batch s, asks for them
(`admit_refills`), which it does at version s, when s < v + window holds for the generators'
version v: a refill is inside the same budget. With R = 0 the indices are the ones above.

Continuous admission (plan.admission, learner/inbox.py): a batch is the first B groups scored,
so tasks are consumed in no fixed order (`consumed_indices`). A group the learner drops as past
max_staleness (`drop`) frees its place: the budget is (v + window)·B plus the drops, and the run's
total grows by as many. A checkpoint holds the pending tasks themselves (`restore`), since what
was consumed is not a prefix of the indices that the stream could be rewound to. With dynamic
sampling too, a flat group the learner filters and grants a refill frees its place the same way
(`refill_places`, learner/dynamic.py's ScoredFill): the budget is (v + window)·B + drops + refills.

The feeder is also the ledger: every admitted task stays in `pending` until the
learner has consumed its batch, so a group lost with a crashed worker can be sent
again with the same id (the learner drops whichever copy comes second).
"""
from __future__ import annotations

import logging
import random
from dataclasses import replace
from typing import Callable, Iterator, Protocol

from jury.data.problems import Problem
from jury.data.tasks import problem_stream
from jury.data.prompts import PromptFormat
from jury.protocol.config import DataConfig
from jury.protocol.messages import PromptTask
from jury.protocol.plan import Slots
from jury.protocol.transport import Sender

log = logging.getLogger(__name__)


class PromptMixer(Protocol):
    """Reshapes some tasks as they are admitted (DeRL's diversifying prompts: cluster/diversify.py;
    CoReward's rewrites: cluster/rewrite.py)."""

    def mix(self, task: PromptTask, problem: Problem) -> PromptTask: ...


def draw_staleness(forced: dict[int, float], seed: int, index: int) -> int:
    """The k forced on task `index`: a pure function of (distribution, seed, index), so a
    resumed run and a test draw the same k."""
    ks, ps = zip(*forced.items())
    return random.Random(f"{seed}/{index}").choices(ks, ps)[0]


class Feeder:
    def __init__(self, dataset: str, seed: int, batch_groups: int, window: int, host: str,
                 *, tokenizer=None, max_prompt_tokens: int = 0, curve=None, forced: dict[int, float] | None = None,
                 mixer: PromptMixer | None = None, data: DataConfig | None = None,
                 ahead: Callable[[Iterator[Problem]], Iterator[Problem]] | None = None, slots: Slots | None = None):
        """`ahead`: wraps the problem stream to see problems before they are admitted (CoReward's
        rewriter asks for their rewrites in the background); it must yield the same problems."""
        data = data or DataConfig()
        self.problems = problem_stream(dataset, seed, data)
        if ahead is not None:
            self.problems = ahead(self.problems)
        self.prompts = PromptFormat.from_config(data, tokenizer)  # template, then the chat template
        self.forced = dict(forced or {})  # k -> probability; the plan's window reaches the largest k
        self.seed, self.batch_groups, self.window = seed, batch_groups, window
        self.slots = slots or Slots(batch_groups, 0)
        self.tokenizer, self.max_prompt_tokens = tokenizer, max_prompt_tokens
        self.admitted = 0                       # base tasks admitted (refill slots are counted apart; under
                                                # continuous admission a refill is a base task)
        self.refills = 0                        # refill slots admitted (dynamic sampling)
        self.dropped = 0                        # groups the learner dropped as too stale (continuous admission)
        self.refilled = 0                       # flat groups whose places went to new tasks (continuous + dynamic)
        self.refused_too_long = 0
        self.rewrite_too_long = 0               # CoReward rewrites over max_prompt_tokens, dropped
        self.resent = 0
        self.drawn = 0                          # problems taken from the stream, refused ones included
        self.pending: dict[int, PromptTask] = {}  # the ledger: admitted, not yet consumed
        self.positions: dict[int, int] = {}      # task index -> stream position it was drawn at
        self.held: dict[int, PromptTask] = {}    # admitted, not yet released
        # the bound admits at most window · S tasks ahead (refills included), so this HWM never blocks
        cap = (window + 1) * self.slots.per_batch
        self.sender = Sender(bind_host=host, hwm=cap, maxsize=cap, name="feeder", curve=curve)
        self.endpoint = self.sender.endpoint
        self.mixer = mixer

    def limit(self, version: int) -> int:
        """Tasks that may have been admitted in total while the generators hold `version`."""
        return (version + self.window) * self.batch_groups + self.dropped + self.refilled

    def admit(self, version: int, stop_at: int) -> int:
        """Admit every task the budget allows (never past `stop_at` tasks in total, and as many more
        as were dropped or refilled); returns how many."""
        n = 0
        while self.admitted < min(self.limit(version), stop_at + self.dropped + self.refilled):
            index = self.slots.base_index(self.admitted)
            self.positions[index] = self.drawn
            task = self._task(self._next_problem(), version, index)
            self.pending[task.index] = task
            if self.forced:
                self.held[task.index] = task
            else:
                self.sender.send(task)
            self.admitted += 1
            n += 1
        self._release(version)
        return n

    def admit_refills(self, indices: list[int], version: int) -> int:
        """Admit the refill slots the learner asked for (dynamic sampling), drawn from the same stream."""
        for index in indices:
            if not self.slots.is_refill(index) or index in self.pending:
                raise ValueError(f"refill {index}: not a refill slot, or admitted already")
            self.positions[index] = self.drawn
            task = self._task(self._next_problem(), version, index)
            self.pending[index] = task
            self.sender.send(task)
        self.refills += len(indices)
        return len(indices)

    def staleness_of(self, index: int) -> int:
        return draw_staleness(self.forced, self.seed, index)

    def release_version(self, index: int) -> int:
        return max(0, index // self.batch_groups - self.staleness_of(index))

    def released_at(self, version: int) -> list[int]:
        """Pending tasks sent at `version`: all must be generated before the version moves on."""
        return sorted(i for i in self.pending if self.forced and self.release_version(i) == version)

    def _release(self, version: int):
        for i in sorted(i for i in self.held if self.release_version(i) <= version):
            self.sender.send(self.held.pop(i))

    def consumed(self, upto: int):
        """The learner has every task with index < upto: drop them from the ledger."""
        for i in [i for i in self.pending if i < upto]:
            del self.pending[i]
            self.positions.pop(i, None)

    def consumed_indices(self, indices: list[int]):
        """Continuous admission: the learner trained these tasks' groups."""
        for i in indices:
            self.pending.pop(i, None)
            self.positions.pop(i, None)

    def drop(self, indices: list[int]):
        """Continuous admission: the learner dropped these groups as too stale; new tasks take their places."""
        self.consumed_indices(indices)
        self.dropped += len(indices)

    def refill_places(self, indices: list[int]):
        """Continuous admission with dynamic sampling: the learner filtered these flat groups and
        grants each a refill; new tasks take their places (at the next `admit`)."""
        self.consumed_indices(indices)
        self.refilled += len(indices)

    def restore(self, next_index: int, stream_position: int, pending: list[PromptTask], dropped: int,
                refilled: int = 0):
        """Continue a resumed run under continuous admission: skip what was drawn, number new tasks from
        next_index, and send again the tasks admitted and not trained at the checkpoint."""
        while self.drawn < stream_position:
            next(self.problems)
            self.drawn += 1
        self.admitted, self.dropped, self.refilled = next_index, dropped, refilled
        for task in pending:
            self.pending[task.index] = task
            self.sender.send(task)

    def resend(self, indices: list[int]) -> int:
        """Send pending tasks again, same ids (after a worker crash lost them)."""
        tasks = [self.pending[i] for i in indices if i in self.pending and i not in self.held]
        for t in tasks:
            self.sender.send(t)
        self.resent += len(tasks)
        return len(tasks)

    def position_of(self, index: int) -> int:
        """Stream position from which task `index` is (or will be) drawn: for checkpoints."""
        return self.positions.get(index, self.drawn)

    def fast_forward(self, next_index: int, stream_position: int):
        """Continue a resumed run: skip what earlier batches used, number tasks from next_index (the
        first index of a batch). Under dynamic sampling, problems that refills of earlier batches drew
        after stream_position are drawn again."""
        while self.drawn < stream_position:
            next(self.problems)
            self.drawn += 1
        self.admitted = self.slots.batch_of(next_index) * self.batch_groups

    def _next_problem(self) -> Problem:
        for p in self.problems:
            self.drawn += 1
            if self.tokenizer is None or self.max_prompt_tokens <= 0:
                return p
            n = len(self.tokenizer(self.prompts.render(p.problem))["input_ids"])
            if n <= self.max_prompt_tokens:
                return p
            self.refused_too_long += 1
            log.warning("feeder: prompt of %d tokens is over max_prompt_tokens=%d, skipped: %.60r",
                        n, self.max_prompt_tokens, p.problem)
        raise RuntimeError("the dataset ran out of problems")

    def _task(self, p: Problem, version: int, index: int) -> PromptTask:
        task = PromptTask(task_id=f"s{self.seed}-{index}", index=index,
                          prompt=self.prompts.text(p.problem), label=p.answer, source=p.source,
                          admitted_version=version, problem=p.problem, rewrite=p.rewrite)
        task = self.mixer.mix(task, p) if self.mixer else task
        if task.rewrite is not None:  # a bare statement until here (the dataset's or the rewriter's)
            task = replace(task, rewrite=self._rewrite_prompt(task.rewrite))
        # after the mix, so DeRL's diversifying prompts go through the chat template too
        return replace(task, prompt=self.prompts.wrap(task.prompt)) if self.prompts.chat else task

    def _rewrite_prompt(self, rewrite: str) -> str | None:
        """The rewrite as the generator's second prompt, like the first; None (counted) when it is
        longer than max_prompt_tokens, where the engine would refuse the whole task."""
        prompt = self.prompts.render(rewrite)
        if self.tokenizer is not None and self.max_prompt_tokens > 0:
            n = len(self.tokenizer(prompt)["input_ids"])
            if n > self.max_prompt_tokens:
                self.rewrite_too_long += 1
                return None
        return prompt

    def close(self):
        self.sender.close()
