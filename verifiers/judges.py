"""Generative judges (Scaling Generative Verifiers, Mahdavi et al.): LLM-as-a-judge,
GenSelect knockout tournaments, and the hybrid of the two (the paper's Fig. 3).

    cfg = JudgeConfig(n_judgements=8, scale="binary")
    rewards = judge_rewards(client, problem, solutions, cfg)    # reward scheme: G solutions -> G rewards
    score = judge_verify(client, problem, solution, n=8)         # one stage of a verifier cascade
    res = select_best(client, problem, candidates, "hybrid", cfg)
    res.index, res.scores, res.llm_calls                         # best-of-n, with its cost

Cost is counted as the paper counts it (Fig. 3: "Compute is reported as the total number
of LLM calls per problem"): one call is one sampled completion. n judgements of one
solution are n calls; a knockout over n candidates plays n-1 matches, each
`pair_judgements` calls; the hybrid costs (n - n_s) * pair_judgements + n_s * n_j.

The reading of the paper gives no prompt text, so the prompts in prompts/judge_*.txt and
prompts/genselect_*.txt are ours, written to the setups it describes (binary and 7-point
grading, pairwise knockout). All LLM traffic goes through `jury.verifiers.llm.LLMClient`.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from jury.verifiers.llm import LLMClient, fill, generate_checked, load_prompt, strip_reasoning

# ---------------------------------------------------------------- config
SCALES = ("binary", "graded")
TOP_GRADE = 7  # the graded prompt marks out of 7 points, olympiad style


@dataclass(frozen=True)
class JudgeConfig:
    """Settings of the generative judges; the root config embeds one."""

    n_judgements: int = 8  # n_j per solution; the paper sees gains plateau near 20-32 (Fig. 4, 5)
    scale: str = "binary"  # "binary": Yes/No -> 1/0; "graded": 0..7 points -> points/7
    pair_judgements: int = 1  # judgements per GenSelect match; the majority wins
    n_survivors: int = 2  # n_s: candidates the hybrid's tournament keeps for judging
    temperature: float = 0.7  # sampled, so repeated judgements of one solution differ
    max_tokens: int = 2048

    def __post_init__(self) -> None:
        for name in ("n_judgements", "pair_judgements", "n_survivors", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"JudgeConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.scale not in SCALES:
            raise ValueError(f"JudgeConfig.scale must be one of {SCALES}, got {self.scale!r}")
        if self.temperature < 0:
            raise ValueError(f"JudgeConfig.temperature must be >= 0, got {self.temperature}")


# ---------------------------------------------------------------- LLM-as-a-judge
_YES_NO = re.compile(r"judge?ment\W{0,6}(yes|no)\b", re.IGNORECASE)
_SCORE = re.compile(r"score\W{0,6}(\d+)(?:\s*/\s*7)?", re.IGNORECASE)


def parse_binary(text: str) -> float | None:
    """1.0 for a final `Judgement: Yes`, 0.0 for `No`, None when there is no verdict."""
    found = _YES_NO.findall(strip_reasoning(text))
    return None if not found else float(found[-1].lower() == "yes")


def parse_graded(text: str) -> float | None:
    """points/7 for a final `Score: k` with 0 <= k <= 7, None otherwise."""
    found = _SCORE.findall(strip_reasoning(text))
    if not found or int(found[-1]) > TOP_GRADE:
        return None
    return int(found[-1]) / TOP_GRADE


_PARSERS: dict[str, Callable[[str], float | None]] = {"binary": parse_binary, "graded": parse_graded}


@dataclass(frozen=True)
class JudgeScore:
    """n judgements of one solution."""

    mean: float  # in [0, 1]; an unparsable judgement counts as 0 (the judge did not vouch for it)
    grades: tuple[float | None, ...]  # each judgement in [0, 1]; None = unparsable
    tokens: int

    @property
    def llm_calls(self) -> int:
        return len(self.grades)

    @property
    def unparsable(self) -> int:
        return sum(g is None for g in self.grades)


def judge_scores(
    client: LLMClient,
    problem: str,
    solutions: Sequence[str],
    cfg: JudgeConfig = JudgeConfig(),
    reference: str | None = None,
) -> list[JudgeScore]:
    """cfg.n_judgements judgements of each solution, all in one batched generate call.

    `reference` (a ground-truth proof) goes into the prompt when given (the paper's Fig. 1
    finds it helps); label-free reward schemes leave it out.
    """
    ref = "" if reference is None else fill(load_prompt("judge_reference"), reference=reference)
    template = load_prompt(f"judge_{cfg.scale}")
    prompts = [fill(template, problem=problem, solution=s, reference=ref) for s in solutions]
    outs = generate_checked(
        client, prompts, n=cfg.n_judgements, temperature=cfg.temperature, max_tokens=cfg.max_tokens
    )
    parse = _PARSERS[cfg.scale]
    scores = []
    for comps in outs:
        grades = tuple(parse(c.text) for c in comps)
        mean = sum(g or 0.0 for g in grades) / len(grades)
        scores.append(JudgeScore(mean, grades, sum(c.num_tokens for c in comps)))
    return scores


def judge_rewards(
    client: LLMClient,
    problem: str,
    solutions: Sequence[str],
    cfg: JudgeConfig = JudgeConfig(),
    reference: str | None = None,
) -> list[float]:
    """Reward scheme: a group of G solutions to one problem -> G rewards, each the mean judgement."""
    return [s.mean for s in judge_scores(client, problem, solutions, cfg, reference)]


def judge_verify(
    client: LLMClient,
    problem: str,
    solution: str,
    n: int,
    cfg: JudgeConfig = JudgeConfig(),
    reference: str | None = None,
) -> float:
    """Verifier-cascade stage: the mean of n judgements of one solution, in [0, 1]."""
    return judge_scores(client, problem, [solution], replace(cfg, n_judgements=n), reference)[0].mean


# ---------------------------------------------------------------- GenSelect
_CHOICE = re.compile(
    r"best\s+solution(?:[\s:*#=(\[\-]|is\b|index\b|solution\b|number\b)*(\d+)", re.IGNORECASE
)
_BOXED_INT = re.compile(r"\\boxed\{\s*(\d+)\s*\}")
_BARE_INT = re.compile(r"^[\s*#(\[]*(\d+)[\s*.)\]]*$")


def parse_choice(text: str, k: int = 2) -> int | None:
    """The index a comparison reply chose among k candidates, or None.

    Tried in order, the last match of each winning: `Best solution: 1` (tolerating
    markdown and wording such as `The best solution is Solution 1`), then `\\boxed{1}`,
    then a last line holding a lone integer. An index outside 0..k-1 (a 1-based answer,
    say) is not guessed at: it is None.
    """
    body = strip_reasoning(text)
    lines = [ln for ln in body.splitlines() if ln.strip()]
    bare = _BARE_INT.findall(lines[-1]) if lines else []
    found = _CHOICE.findall(body) or _BOXED_INT.findall(body) or bare
    if not found:
        return None
    index = int(found[-1])
    return index if 0 <= index < k else None


@dataclass(frozen=True)
class Match:
    a: int  # candidate indices into the caller's list; `a` was shown as Solution 0
    b: int
    winner: int
    votes: tuple[int | None, ...]  # per judgement: the candidate it chose, None = unparsable
    tokens: int


@dataclass(frozen=True)
class Tournament:
    survivors: tuple[int, ...]  # candidate indices still in, in bracket order
    matches: tuple[Match, ...]

    @property
    def llm_calls(self) -> int:
        return sum(len(m.votes) for m in self.matches)


def _decide(a: int, b: int, votes: Sequence[int | None]) -> int:
    """Majority of the parsed votes. An unparsable vote counts for neither side; a tie
    (all votes unparsable included) goes to the lower index in the caller's list, a fixed
    rule that does not depend on the bracket's shuffle or on which side was shown first."""
    va, vb = votes.count(a), votes.count(b)
    if va != vb:
        return a if va > vb else b
    return min(a, b)


def _play_round(
    client: LLMClient, problem: str, candidates: Sequence[str], pairs: list[tuple[int, int]], cfg: JudgeConfig
) -> list[Match]:
    """All matches of one round in one batched generate call."""
    template = load_prompt("genselect_pairwise")
    prompts = [fill(template, problem=problem, solution_0=candidates[a], solution_1=candidates[b]) for a, b in pairs]
    outs = generate_checked(
        client, prompts, n=cfg.pair_judgements, temperature=cfg.temperature, max_tokens=cfg.max_tokens
    )
    matches = []
    for (a, b), comps in zip(pairs, outs):
        picks = [parse_choice(c.text, 2) for c in comps]
        votes = tuple(None if p is None else (a, b)[p] for p in picks)
        matches.append(Match(a, b, _decide(a, b, votes), votes, sum(c.num_tokens for c in comps)))
    return matches


def knockout(
    client: LLMClient,
    problem: str,
    candidates: Sequence[str],
    keep: int = 1,
    cfg: JudgeConfig = JudgeConfig(),
    seed: int | None = None,
) -> Tournament:
    """Pairwise GenSelect rounds until `keep` candidates remain.

    Each round pairs the first 2m entrants of the bracket, m = min(k // 2, k - keep), so
    exactly len(candidates) - keep matches are played in all: n - 1 for a full knockout.
    Entrants past the pairs get a bye and open the next round's bracket, so in a full
    knockout a bye holder plays next rather than taking two byes in a row. Stopping early
    at `keep` > 1 lets some entrants through unplayed. `seed` shuffles the starting bracket
    (the paper averages over random seeds); None keeps the caller's order.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    bracket = list(range(len(candidates)))
    if seed is not None:
        random.Random(seed).shuffle(bracket)
    matches: list[Match] = []
    while len(bracket) > keep:
        m = min(len(bracket) // 2, len(bracket) - keep)
        played = _play_round(client, problem, candidates, [(bracket[2 * i], bracket[2 * i + 1]) for i in range(m)], cfg)
        matches += played
        bracket = bracket[2 * m :] + [match.winner for match in played]
    return Tournament(tuple(bracket), tuple(matches))


# ---------------------------------------------------------------- best-of-n selection
@dataclass(frozen=True)
class SelectionResult:
    index: int  # the chosen candidate, an index into the caller's list
    # Per candidate. judge: mean judgement; tournament: matches won; hybrid: mean judgement
    # of the tournament's survivors, None for those knocked out.
    scores: tuple[float | None, ...]
    llm_calls: int  # completions sampled for this problem, the paper's compute measure
    tokens: int
    unparsable: int  # replies that followed the documented fallback rule


def _argmax(scores: Sequence[float | None]) -> int:
    """Highest score; ties go to the lowest index (min keeps the first of equals)."""
    return min((i for i, s in enumerate(scores) if s is not None), key=lambda i: -scores[i])


def _by_judge(
    client: LLMClient, problem: str, candidates: Sequence[str], cfg: JudgeConfig,
    seed: int | None, reference: str | None,
) -> SelectionResult:
    js = judge_scores(client, problem, candidates, cfg, reference)
    scores = tuple(s.mean for s in js)
    return SelectionResult(
        _argmax(scores), scores, sum(s.llm_calls for s in js), sum(s.tokens for s in js), sum(s.unparsable for s in js)
    )


def _by_tournament(
    client: LLMClient, problem: str, candidates: Sequence[str], cfg: JudgeConfig,
    seed: int | None, reference: str | None,
) -> SelectionResult:
    t = knockout(client, problem, candidates, 1, cfg, seed)
    wins = [0.0] * len(candidates)
    for m in t.matches:
        wins[m.winner] += 1
    unparsable = sum(v is None for m in t.matches for v in m.votes)
    return SelectionResult(t.survivors[0], tuple(wins), t.llm_calls, sum(m.tokens for m in t.matches), unparsable)


def _by_hybrid(
    client: LLMClient, problem: str, candidates: Sequence[str], cfg: JudgeConfig,
    seed: int | None, reference: str | None,
) -> SelectionResult:
    """Fig. 3: knockout down to n_s survivors, n_j judgements each, highest mean wins."""
    t = knockout(client, problem, candidates, min(cfg.n_survivors, len(candidates)), cfg, seed)
    js = judge_scores(client, problem, [candidates[i] for i in t.survivors], cfg, reference)
    scores: list[float | None] = [None] * len(candidates)
    for i, s in zip(t.survivors, js):
        scores[i] = s.mean
    unparsable = sum(v is None for m in t.matches for v in m.votes) + sum(s.unparsable for s in js)
    return SelectionResult(
        _argmax(scores),
        tuple(scores),
        t.llm_calls + sum(s.llm_calls for s in js),
        sum(m.tokens for m in t.matches) + sum(s.tokens for s in js),
        unparsable,
    )


SELECTION_METHODS = {"tournament": _by_tournament, "judge": _by_judge, "hybrid": _by_hybrid}


def select_best(
    client: LLMClient,
    problem: str,
    candidates: Sequence[str],
    method: str = "tournament",
    cfg: JudgeConfig = JudgeConfig(),
    *,
    seed: int | None = None,
    reference: str | None = None,
) -> SelectionResult:
    """Best-of-n selection by GenSelect knockout, LLM-as-a-judge, or their hybrid."""
    if method not in SELECTION_METHODS:
        raise ValueError(f"method must be one of {sorted(SELECTION_METHODS)}, got {method!r}")
    if not candidates:
        raise ValueError("select_best needs at least one candidate")
    return SELECTION_METHODS[method](client, problem, candidates, cfg, seed, reference)
