"""DeRL's prompt mix (Diverse-Exploration RL, §3.1 and §5.1): which tasks become
diversifying, and the prompt each one is shown.

The learner is sometimes shown a *diversifying* prompt: its own earlier correct chain of
thought, summarised by an LLM into a proof plan (verifiers/derl/plans.py writes the plans),
with the order to solve the problem very differently. The mixer keeps the store of correct
CoTs and their plans; cluster/diversify.py runs it on the driver:

    mixer = DiversifyingMixer(cfg)
    mixer.record_correct(problem_id, problem, cot, answer)    # after verifying the last batch
    refresh_plans(client, mixer, cfg)                         # verifiers/derl/plans.py: LLM plans
    mixed = mixer.next_tasks(tasks)                           # which diversify, and their prompts

The prompt formats are the paper's (data/templates/derl_*.txt, each citing its section).
"""
from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

from jury.data.prompts import load_template
from jury.protocol.config import DerlConfig
from jury.protocol.prompt_files import fill


@dataclass(frozen=True)
class StoredCoT:
    """A correct CoT waiting for its plan (what verifiers/derl/plans.py's planner is asked about)."""

    problem: str
    cot: str  # the learner's own correct chain of thought
    answer: str  # the final answer it reached, which the plan must not give away


@dataclass(frozen=True)
class DerlTask:
    problem_id: str  # stable across epochs: the CoT store is keyed by it
    problem: str  # natural-language statement, or the Lean statement when `lean`
    lean: bool = False


@dataclass(frozen=True)
class MixedTask:
    task: DerlTask
    prompt: str  # what the actor sends, in the paper's format for its kind
    diversifying: bool
    plan: str | None  # the proof plan shown (natural-language diversifying prompts only)


def render_prompt(task: DerlTask, plan: str | None, diversifying: bool, forbidden: Sequence[str]) -> str:
    if task.lean:
        if diversifying:
            # str(list(...)) renders the paper's list exactly: ['linarith', 'simp_all', ...]
            template = load_template("derl_lean_diversifying")
            return fill(template, statement=task.problem, forbidden_list=str(list(forbidden)))
        return fill(load_template("derl_lean_original"), statement=task.problem)
    if diversifying:
        if plan is None:
            raise ValueError(f"natural-language task {task.problem_id!r} cannot diversify without a plan")
        return fill(load_template("derl_diversifying"), problem=task.problem, proof_plan=plan)
    return fill(load_template("derl_original"), problem=task.problem)


@dataclass
class _Stored:
    problem: str
    cot: str
    answer: str
    plan: str | None = None


class DiversifyingMixer:
    """Which tasks become diversifying, at cfg.ratio, reproducibly.

    Slots come in blocks of a + b (ratio a:b); a seeded RNG picks which b slots of each
    block diversify, so every complete block holds exactly b diversifying tasks. A natural-
    language task can diversify only once its problem has a plan; a diversifying slot that
    falls on one without is owed to the next eligible task. The debt is capped at one
    block's b, so a cold store (early training) does not later turn into a burst of
    diversifying prompts, which §5.1 finds harmful ("too much diversifying prompt hurts").
    Lean tasks need no plan (§5.1: "We skip the proof plan preparation stage").
    """

    def __init__(self, cfg: DerlConfig = DerlConfig()):
        self.cfg = cfg
        self._store: OrderedDict[str, _Stored] = OrderedDict()  # problem id -> first correct CoT
        self._rng = random.Random(cfg.seed)
        self._slots: list[bool] = []  # rest of the current block, popped from the end
        self._debt = 0

    def record_correct(self, problem_id: str, problem: str, cot: str, answer: str) -> None:
        """A correct CoT from an *original* prompt. §5.1 keeps the first per problem; past
        store_size the oldest problem is forgotten."""
        if problem_id in self._store:
            return
        self._store[problem_id] = _Stored(problem, cot, answer)
        if len(self._store) > self.cfg.store_size:
            self._store.popitem(last=False)

    def pending_plans(self) -> list[tuple[str, StoredCoT]]:
        """Stored CoTs still waiting for a plan, oldest first."""
        return [(pid, StoredCoT(e.problem, e.cot, e.answer)) for pid, e in self._store.items() if e.plan is None]

    def set_plan(self, problem_id: str, plan: str | None) -> None:
        """Attach a plan; None (refused) forgets the CoT so a later correct one can replace it."""
        if problem_id not in self._store:
            return  # evicted while its plan was being written
        if plan is None:
            del self._store[problem_id]
        else:
            self._store[problem_id].plan = plan

    def plan_for(self, problem_id: str) -> str | None:
        entry = self._store.get(problem_id)
        return None if entry is None else entry.plan

    def _next_slot(self) -> bool:
        if not self._slots:
            a, b = self.cfg.ratio
            self._slots = [False] * a + [True] * b
            self._rng.shuffle(self._slots)
        return self._slots.pop()

    def next_tasks(self, tasks: Sequence[DerlTask]) -> list[MixedTask]:
        """Each task in order, marked original or diversifying and rendered as its prompt."""
        mixed = []
        for task in tasks:
            plan = None if task.lean else self.plan_for(task.problem_id)
            eligible = task.lean or plan is not None
            slot = self._next_slot()
            if slot and not eligible:
                self._debt = min(self._debt + 1, self.cfg.ratio[1])
            diversifying = eligible and (slot or self._debt > 0)
            if diversifying and not slot:
                self._debt -= 1
            prompt = render_prompt(task, plan, diversifying, self.cfg.forbidden_tactics)
            mixed.append(MixedTask(task, prompt, diversifying, plan if diversifying else None))
        return mixed
