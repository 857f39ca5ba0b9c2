"""DeRL's diversity reward (Diverse-Exploration RL, §3 and §5.1).

The learner is sometimes shown a *diversifying* prompt: its own earlier correct chain of
thought, summarised by an LLM into a proof plan without numbers or the answer, with the
order to solve the problem very differently. Such samples earn 1 only when correct and
judged dissimilar to the plan; Lean samples earn 1 only when the proof checks and uses
none of the automation tactics on the paper's list. Original prompts keep the plain
correctness reward. One training step, as the wiring runs it:

    mixer, metrics = DiversifyingMixer(cfg), DiversityMetrics()
    for s in correct_samples_of_original_prompts:      # after verifying the last batch
        mixer.record_correct(s.problem_id, s.problem, s.cot, s.answer)
    refresh_plans(client, mixer, cfg)                   # LLM: plans for new CoTs
    mixed = mixer.next_tasks(tasks)                     # which tasks diversify, and their prompts
    metrics.add_tasks(mixed)
    ...generate from m.prompt, check answers / proofs...
    verdicts = diversity_rewards(client, items, cfg)    # NL diversifying samples
    verdicts = [lean_diversity_reward(p, ok, cfg) ...]  # Lean diversifying samples
    metrics.add(verdicts); metrics.summary()            # derl/diverse_correct_share, ...

All LLM traffic goes through `jury.verifiers.llm.LLMClient`; prompts are the paper's
(prompts/derl_*.txt, each citing its section).
"""
from __future__ import annotations

import random
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from jury.protocol.config import FORBIDDEN_TACTICS, DerlConfig  # noqa: F401  (re-exported)
from jury.verifiers.lean.screen import is_id_first, is_id_rest  # Lean 4's isIdFirst / isIdRest
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


# ---------------------------------------------------------------- rewards (§3.2.2, §3.3)
@dataclass(frozen=True)
class DiversityVerdict:
    reward: float  # 1.0 only if correct and diverse
    correct: bool  # the answer matched / the Lean proof checked
    diverse: bool | None  # judged dissimilar / free of forbidden tactics; None = no verdict
    unparsable: bool = False  # the judge replied, but without a verdict
    forbidden: tuple[str, ...] = ()  # Lean: the forbidden tactics found


_VERDICT_STARRED = re.compile(r"\*{2,}\s*(True|False)\s*\*{2,}")
_VERDICT_OUTPUT = re.compile(r"Output\W{0,6}(True|False)\b")
_VERDICT_BARE = re.compile(r"\b(True|False)\b")


def parse_similarity(reply: str) -> bool | None:
    """The judge's verdict: True = similar (cheated), False = dissimilar, None = unparsable.

    The prompt asks for *****True***** / *****False*****; the paper's judge outputs also
    show `Output: **False**` and `Output: False` (App. 8), with the verdict first and an
    explanation after. So: the first starred verdict, else the first `Output: ...`, else a
    lone True/False word when only one of the two appears at all.
    """
    body = strip_reasoning(reply)
    for pattern in (_VERDICT_STARRED, _VERDICT_OUTPUT):
        m = pattern.search(body)
        if m:
            return m.group(1) == "True"
    bare = set(_VERDICT_BARE.findall(body))
    return bare.pop() == "True" if len(bare) == 1 else None


@dataclass(frozen=True)
class DiversityItem:
    problem: str
    plan: str  # the plan shown in the diversifying prompt
    solution: str
    correct: bool  # the boxed answer matched (decided by the correctness verifier)


def diversity_rewards(
    client: LLMClient, items: Sequence[DiversityItem], cfg: DerlConfig = DerlConfig()
) -> list[DiversityVerdict]:
    """§3.2.2, natural language: 1 iff the answer is correct and the judge outputs False.

    An unparsable verdict earns 0: a reward of 1 must rest on the judge saying "dissimilar".
    It stays visible as unparsable=True (metric derl/judge_unparsable). Samples the judge
    is not asked about (incorrect ones, when not cfg.judge_all) have diverse=None.
    """
    asked = [i for i, it in enumerate(items) if it.correct or cfg.judge_all]
    template = load_prompt("derl_judge")
    prompts = [
        fill(template, prompt=items[i].problem, proof_plan=items[i].plan, solution_str=items[i].solution) for i in asked
    ]
    outs = generate_checked(client, prompts, n=1, temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens)
    similar = {i: parse_similarity(out[0].text) for i, out in zip(asked, outs)}
    verdicts = []
    for i, it in enumerate(items):
        s = similar.get(i)
        diverse = None if s is None else not s
        reward = float(it.correct and diverse is True)
        verdicts.append(DiversityVerdict(reward, it.correct, diverse, unparsable=i in similar and s is None))
    return verdicts


# ---------------------------------------------------------------- forbidden Lean tactics (§3.2.2)
# Decisions, from the paper's rule "If any tactic from the forbidden list appears in the
# generated proof, the diversity metric assigns a reward of 0", matched by tactic *name*:
# - A name counts only as a whole identifier: `simp_arith`, `ring_nf`, `nlinarith`, `simpa`,
#   `field_simp` are other tactics and are allowed. The introduction lists `nlinarith`
#   among automation tactics, but the list the model is shown (§3.1, §3.2.2) omits it, and
#   rewarding against a rule the prompt never states would punish obedience. A stricter
#   run passes its own DerlConfig.forbidden_tactics (the prompt then shows that list).
# - Lean spells variants with a trailing `!` or `?` in the same identifier (`simp?`,
#   `linarith!`, `aesop?`); they run the listed tactic, so they count as it. `simp only
#   [...]` and `simp at h` are `simp`.
# - Dotted names are one identifier: `Nat.simp` or `h.trivial` is not the tactic.
# Without Lean, a token scanner finds the names outside comments, strings, char and name
# literals and `@[...]` attributes. (lean_screen's lexer, built to refuse, rejects strings
# and splits names at `.`; this one must read them, so only the character classes are shared.) It cannot tell the term `trivial` (`exact trivial`)
# from the tactic and counts it, erring toward 0 since a reward of 1 must be unambiguous;
# a syntax-tree callable (below) resolves that.
_CHAR_LITERAL = re.compile(r"'(?:\\.[^']*|[^'\\])'")  # 'x', '\n', '\'', '\u{3b1}'


def _read_ident(src: str, i: int) -> int:
    """End of the dotted identifier starting at i (components plain or «escaped»)."""
    while True:
        if src[i] == "«":
            close = src.find("»", i + 1)
            i = len(src) if close < 0 else close + 1
        else:
            i += 1
            while i < len(src) and is_id_rest(src[i]):
                i += 1
        if i + 1 < len(src) and src[i] == "." and (is_id_first(src[i + 1]) or src[i + 1] == "«"):
            i += 1
            continue
        return i


def _skip_nested(src: str, i: int, open_: str, close: str) -> int:
    """Index after the `close` matching the `open_` at i; Lean block comments nest."""
    depth, i = 1, i + len(open_)
    while i < len(src) and depth:
        if src.startswith(open_, i):
            depth, i = depth + 1, i + len(open_)
        elif src.startswith(close, i):
            depth, i = depth - 1, i + len(close)
        else:
            i += 1
    return i


def lean_identifiers(src: str) -> list[str]:
    """Identifiers of Lean 4 source outside comments, strings, char/name literals and attributes."""
    names, i = [], 0
    while i < len(src):
        c = src[i]
        if src.startswith("--", i):
            newline = src.find("\n", i)
            i = len(src) if newline < 0 else newline
        elif src.startswith("/-", i):
            i = _skip_nested(src, i, "/-", "-/")
        elif src.startswith("@[", i):
            i = _skip_nested(src, i + 1, "[", "]")
        elif c == '"':
            i += 1
            while i < len(src) and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
        elif c == "'" and (char := _CHAR_LITERAL.match(src, i)):
            i = char.end()
        elif c == "`":  # `name / ``name literal: a name, not a tactic call
            i += 1 + (src.startswith("`", i + 1))
            if i < len(src) and (is_id_first(src[i]) or src[i] == "«"):
                i = _read_ident(src, i)
        elif is_id_first(c) or c == "«":
            end = _read_ident(src, i)
            names.append(src[i:end])
            i = end
        else:
            i += 1
    return names


def forbidden_tactics_used(
    proof: str,
    forbidden: Sequence[str] = FORBIDDEN_TACTICS,
    syntax_tactics: Callable[[str], Iterable[str]] | None = None,
) -> tuple[str, ...]:
    """The forbidden tactics a Lean proof uses, sorted; empty when it uses none.

    `proof` is the Lean code the model wrote (what the Lean server checks), not its prose.
    `syntax_tactics`, when Lean is present, returns the name of every tactic in the proof's
    syntax tree as written (`simp`, `simp?`, `linarith!`); without it the token scanner
    above stands in. Both are normalised the same way.
    """
    names = syntax_tactics(proof) if syntax_tactics is not None else lean_identifiers(proof)
    return tuple(sorted({n.rstrip("!?") for n in names} & set(forbidden)))


def lean_diversity_reward(
    proof: str,
    proof_checks: bool,
    cfg: DerlConfig = DerlConfig(),
    syntax_tactics: Callable[[str], Iterable[str]] | None = None,
) -> DiversityVerdict:
    """§3.2.2, Lean: 1 iff the proof checks and uses no forbidden tactic. "We do not reward
    proofs that fail to be verified, even if they avoid all tactics in the automation list.\""""
    used = forbidden_tactics_used(proof, cfg.forbidden_tactics, syntax_tactics)
    return DiversityVerdict(float(proof_checks and not used), proof_checks, not used, forbidden=used)


class RandomReward:
    """§3.3's control: "a reward of either 0 or 1 is assigned uniformly at random", i.e. an
    independent fair coin per sample, blind to the output, seeded so a run replays.

    Table 1 applies it two ways, and the wiring picks one: to every prompt ("Random Reward
    (on all prompts)") or to diversifying prompts only, correctness staying on the
    originals ("Partial Random Reward").
    """

    def __init__(self, seed: int):
        self._rng = random.Random(seed)

    def rewards(self, count: int) -> list[float]:
        return [float(self._rng.getrandbits(1)) for _ in range(count)]


# ---------------------------------------------------------------- metrics (§5.1, Fig. 3)
class DiversityMetrics:
    """Diversity over training, one window per summary() (Fig. 3 plots one point per 512
    diversifying prompts). Shares over an empty window are left out, not reported as 0."""

    def __init__(self) -> None:
        self._verdicts: list[DiversityVerdict] = []
        self._tasks = self._diversifying = 0
        self._total_diverse_correct = 0

    def add_tasks(self, mixed: Iterable[MixedTask]) -> None:
        for m in mixed:
            self._tasks += 1
            self._diversifying += m.diversifying

    def add(self, verdicts: Iterable[DiversityVerdict]) -> None:
        self._verdicts.extend(verdicts)

    def summary(self) -> dict[str, float]:
        """The window's metrics; starts the next window."""
        v, out = self._verdicts, {}
        self._total_diverse_correct += sum(x.reward == 1.0 for x in v)
        if self._tasks:
            out["derl/diversifying_prompt_share"] = self._diversifying / self._tasks
        if v:
            out["derl/diverse_correct_share"] = sum(x.reward == 1.0 for x in v) / len(v)
            out["derl/diverse_share"] = sum(x.diverse is True for x in v) / len(v)
            out["derl/correct_share"] = sum(x.correct for x in v) / len(v)
        out["derl/diversifying_samples"] = float(len(v))
        out["derl/judge_unparsable"] = float(sum(x.unparsable for x in v))
        out["derl/diverse_correct_total"] = float(self._total_diverse_correct)
        self._verdicts, self._tasks, self._diversifying = [], 0, 0
        return out
