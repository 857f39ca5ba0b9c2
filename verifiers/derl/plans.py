"""DeRL's prompt side (Diverse-Exploration RL, §3.1 and §5.1): proof plans and the mix.

The learner is sometimes shown a *diversifying* prompt: its own earlier correct chain of
thought, summarised by an LLM into a proof plan without numbers or the answer, with the
order to solve the problem very differently. This module writes the plans;
data/derl.py decides which tasks diversify and renders their prompts, derl/reward.py scores
the samples, derl/scorer.py does it inside a verifier worker, and cluster/diversify.py runs
the mix on the driver:

    mixer = DiversifyingMixer(cfg)
    for s in correct_samples_of_original_prompts:      # after verifying the last batch
        mixer.record_correct(s.problem_id, s.problem, s.cot, s.answer)
    refresh_plans(client, mixer, cfg)                   # LLM: plans for new CoTs
    mixed = mixer.next_tasks(tasks)                     # which tasks diversify, and their prompts

All LLM traffic goes through `jury.verifiers.llm.LLMClient`; prompts are the paper's
(prompts/derl_*.txt, each citing its section).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, Sequence

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


class PlanRequest(Protocol):
    """What the planner needs of a stored CoT (data/derl.py's StoredCoT is one)."""

    problem: str
    cot: str  # the learner's own correct chain of thought
    answer: str  # the final answer it reached, which the plan must not give away


class PlanStore(Protocol):
    """Where CoTs wait for their plans (data/derl.py's DiversifyingMixer)."""

    def pending_plans(self) -> list[tuple[str, PlanRequest]]: ...

    def set_plan(self, problem_id: str, plan: str | None) -> None: ...


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


def refresh_plans(client: LLMClient, mixer: PlanStore, cfg: DerlConfig = DerlConfig()) -> list[PlanResult]:
    """Write plans for every stored CoT that lacks one (one batched call)."""
    pending = mixer.pending_plans()
    results = make_proof_plans(client, [req for _, req in pending], cfg)
    for (pid, _), res in zip(pending, results):
        mixer.set_plan(pid, res.plan)
    return results
