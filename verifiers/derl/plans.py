"""DeRL's prompt side (Diverse-Exploration RL, §3.1 and §5.1): proof plans and the mix.

The learner is sometimes shown a *diversifying* prompt: its own earlier correct chain of
thought, summarised by an LLM into a proof plan without numbers or the answer, with the
order to solve the problem very differently. This module writes the plans and decides
which tasks diversify; derl/reward.py scores the samples, derl/scorer.py does it inside
a verifier worker, and cluster/diversify.py runs the mix on the driver:

    mixer = DiversifyingMixer(cfg)
    for s in correct_samples_of_original_prompts:      # after verifying the last batch
        mixer.record_correct(s.problem_id, s.problem, s.cot, s.answer)
    refresh_plans(client, mixer, cfg)                   # LLM: plans for new CoTs
    mixed = mixer.next_tasks(tasks)                     # which tasks diversify, and their prompts

All LLM traffic goes through `jury.verifiers.llm.LLMClient`; prompts are the paper's
(prompts/derl_*.txt, each citing its section).
"""
from __future__ import annotations

import random
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

from jury.protocol.config import FORBIDDEN_TACTICS, DerlConfig  # noqa: F401  (re-exported)
from jury.verifiers.llm import LLMClient, fill, generate_checked, load_prompt, strip_reasoning

# ---------------------------------------------------------------- proof plans (§5.1)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_PLAN = re.compile(r"\$\$\$(.*?)\$\$\$", re.DOTALL)
# Spelled-out answers leak too ("there are six divisors"). Not "zero" and "one": they are
# ordinary prose ("one of the factors", "set it to zero") and would refuse honest plans.
_NUMBER_WORDS = {
    str(k): w
    for k, w in enumerate(
        "two three four five six seven eight nine ten eleven twelve thirteen fourteen"
        " fifteen sixteen seventeen eighteen nineteen twenty".split(),
        start=2,
    )
}


def _compact(text: str) -> str:
    return re.sub(r"[\s$]", "", text)


def plan_leak(plan: str, problem: str, answer: str, *, allow_problem_numbers: bool = True) -> str | None:
    """Why a proof plan must not be shown to the learner, or None when it may.

    §5.1's plan prompt says "no number should be shown in the summary. Don't give out the
    final solution." A plan is refused (not edited: cutting numbers out of a sentence leaves
    a garbled plan) when it names the final answer, even if the problem also holds that
    number, or any number the problem does not hold.
    """
    if not plan.strip():
        return "empty plan"
    numbers = set(_NUMBER.findall(plan))
    ans = _compact(answer)
    if ans.startswith("\\boxed{") and ans.endswith("}"):
        ans = ans[len("\\boxed{") : -1]
    ans = ans.rstrip(".")
    number = ans.lstrip("-")
    if _NUMBER.fullmatch(number):
        word = _NUMBER_WORDS.get(number)
        if number in numbers or (word and re.search(rf"\b{word}\b", plan, re.IGNORECASE)):
            return f"plan gives the answer {answer!r}"
    elif len(ans) > 1 and ans in _compact(plan):  # a lone letter (a multiple-choice "B") is everywhere
        return f"plan gives the answer {answer!r}"
    allowed = set(_NUMBER.findall(problem)) if allow_problem_numbers else set()
    if numbers - allowed:
        return f"plan shows numbers {sorted(numbers - allowed)}"
    return None


@dataclass(frozen=True)
class PlanRequest:
    problem: str
    cot: str  # the learner's own correct chain of thought
    answer: str  # the final answer it reached, which the plan must not give away


@dataclass(frozen=True)
class PlanResult:
    plan: str | None  # None: every attempt was refused
    reason: str | None  # why the last attempt was refused
    tokens: int


def extract_plan(reply: str) -> str | None:
    """The last non-empty `$$$...$$$` summary in a planner reply."""
    found = [p.strip() for p in _PLAN.findall(strip_reasoning(reply)) if p.strip()]
    return found[-1] if found else None


def make_proof_plans(
    client: LLMClient, requests: Sequence[PlanRequest], cfg: DerlConfig = DerlConfig()
) -> list[PlanResult]:
    """§5.1: one plan per correct CoT, cfg.plan_attempts samples each in one batched call."""
    template = load_prompt("derl_plan")
    prompts = [fill(template, prompt=r.problem, cot_path=r.cot) for r in requests]
    outs = generate_checked(
        client, prompts, n=cfg.plan_attempts, temperature=cfg.plan_temperature, max_tokens=cfg.plan_max_tokens
    )
    results = []
    for req, comps in zip(requests, outs):
        plan, reason = None, None
        for c in comps:
            candidate = extract_plan(c.text)
            reason = "no $$$-delimited summary" if candidate is None else plan_leak(
                candidate, req.problem, req.answer, allow_problem_numbers=cfg.allow_problem_numbers
            )
            if reason is None:
                plan = candidate
                break
        results.append(PlanResult(plan, reason, sum(c.num_tokens for c in comps)))
    return results


# ---------------------------------------------------------------- prompts and the mix (§3.1, §5.1)
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
            template = load_prompt("derl_lean_diversifying")
            return fill(template, statement=task.problem, forbidden_list=str(list(forbidden)))
        return fill(load_prompt("derl_lean_original"), statement=task.problem)
    if diversifying:
        if plan is None:
            raise ValueError(f"natural-language task {task.problem_id!r} cannot diversify without a plan")
        return fill(load_prompt("derl_diversifying"), problem=task.problem, proof_plan=plan)
    return fill(load_prompt("derl_original"), problem=task.problem)


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

    def pending_plans(self) -> list[tuple[str, PlanRequest]]:
        """Stored CoTs still waiting for a plan, oldest first."""
        return [(pid, PlanRequest(e.problem, e.cot, e.answer)) for pid, e in self._store.items() if e.plan is None]

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


def refresh_plans(client: LLMClient, mixer: DiversifyingMixer, cfg: DerlConfig = DerlConfig()) -> list[PlanResult]:
    """Write plans for every stored CoT that lacks one (one batched call)."""
    pending = mixer.pending_plans()
    results = make_proof_plans(client, [req for _, req in pending], cfg)
    for (pid, _), res in zip(pending, results):
        mixer.set_plan(pid, res.plan)
    return results
