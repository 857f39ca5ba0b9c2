"""Generative judges against a scripted LLM client that honours the LLMClient contract.

Candidate solutions carry tags the scripted client reads from the prompt:
`quality=Q` (a pairwise comparison prefers the higher Q), `p=K/D` (of the judgements of
that solution, number j says Yes when j % D < K, so n = D judgements average exactly
K/D), and `[garble]` (every reply about it is unparsable).
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from jury.verifiers.judges import (
    JudgeConfig,
    fill,
    judge_rewards,
    judge_scores,
    judge_verify,
    knockout,
    load_prompt,
    parse_binary,
    parse_choice,
    parse_graded,
    select_best,
)
from jury.verifiers.llm import Completion

PAIR_SPLIT = re.compile(r"Solution 0:\n(.*)\n\nSolution 1:\n(.*)\n\nReason about", re.DOTALL)


class ScriptedJudge:
    """Replies by rule on the prompt text; counts completions (the paper's LLM calls)."""

    def __init__(self, yes: str = "Judgement: Yes", no: str = "Judgement: No"):
        self.calls = 0
        self.prompts: list[str] = []
        self.yes, self.no = yes, no

    def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
        self.prompts += prompts
        self.calls += n * len(prompts)
        return [[Completion(self._reply(p, j), num_tokens=10) for j in range(n)] for p in prompts]

    def _reply(self, prompt: str, j: int) -> str:
        pair = PAIR_SPLIT.search(prompt)
        if pair:
            if "[garble]" in prompt:
                return "Both have merit; I cannot decide."
            q0, q1 = (int(re.search(r"quality=(\d+)", s).group(1)) for s in pair.groups())
            return f"<think>Solution 0 looks fine... Best solution: 0</think>Comparing.\nBest solution: {int(q1 > q0)}"
        solution = prompt.split("Solution:\n", 1)[1]
        if "[garble]" in solution:
            return "Looks plausible."
        k, d = map(int, re.search(r"p=(\d+)/(\d+)", solution).groups())
        return "Step 2 holds.\n" + (self.yes if j % d < k else self.no)


def cands(*tags: str) -> list[str]:
    return [f"Candidate {i}: we argue by induction. {t}" for i, t in enumerate(tags)]


# ---------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    "reply, expected",
    [
        ("Best solution: 1", 1),
        ("**Best solution:** Solution 0", 0),
        ("So the best solution is 1.", 1),
        ("The best solution index is: **1**", 1),
        ("Best solution: 0\n...on reflection...\nBest solution: 1", 1),  # the last verdict stands
        ("<think>Best solution: 0</think>\nBest solution: 1", 1),  # thinking is not the verdict
        ("After all that, \\boxed{0}", 0),
        ("Solution 1 has a gap at step 3.\n\n**0**", 0),  # lone integer on the last line
        ("Best solution: 2", None),  # out of range (1-based answer): not guessed at
        ("<think>Best solution: 1 ... (cut off by max_tokens)", None),
        ("Both are equally good.", None),
    ],
)
def test_parse_choice(reply, expected):
    assert parse_choice(reply, 2) == expected


def test_parse_judgements():
    assert parse_binary("Step 1 is fine.\nJudgement: Yes") == 1.0
    assert parse_binary("Judgment: **No**") == 0.0  # American spelling, markdown
    assert parse_binary("Judgement: Yes\nWait, step 3 fails.\nJudgement: No") == 0.0
    assert parse_binary("I think it's correct.") is None
    assert parse_graded("Score: 5") == 5 / 7
    assert parse_graded("**Score:** 7/7") == 1.0
    assert parse_graded("Score: 0") == 0.0
    assert parse_graded("Score: 9") is None  # off the 0..7 scale
    assert parse_graded("Good work.") is None


def test_fill_leaves_latex_and_solution_text_alone():
    out = fill("Q: {problem}\nA: {solution} \\boxed{final answer}", problem="x", solution="uses {problem}")
    assert out == "Q: x\nA: uses {problem} \\boxed{final answer}"
    with pytest.raises(KeyError):
        fill("{problem}", problme="typo")


def test_prompt_files_lose_their_citation_lines():
    for name in ("judge_binary", "judge_graded", "judge_reference", "genselect_pairwise"):
        text = load_prompt(name)
        assert not text.lstrip("\n").startswith("#"), name


# ---------------------------------------------------------------- LLM-as-a-judge
def test_judge_scores_average_n_judgements():
    client = ScriptedJudge()
    solutions = cands("p=3/4", "p=1/4", "p=4/4", "[garble]")
    scores = judge_scores(client, "Prove P.", solutions, JudgeConfig(n_judgements=8))
    assert [s.mean for s in scores] == [0.75, 0.25, 1.0, 0.0]
    assert scores[3].unparsable == 8 and scores[0].unparsable == 0  # unparsable counts as 0
    assert [s.llm_calls for s in scores] == [8, 8, 8, 8]
    assert client.calls == 32 and scores[0].tokens == 80


def test_judge_graded_scale():
    # Three judgements of 7 points and one of 2: (3 * 7 + 2) / (4 * 7) = 23/28.
    client = ScriptedJudge(yes="Score: 7", no="Score: 2")
    [score] = judge_scores(client, "Prove P.", cands("p=3/4"), JudgeConfig(n_judgements=4, scale="graded"))
    assert score.mean == pytest.approx((3 * 7 + 2) / (4 * 7))


def test_judge_rewards_and_verify():
    client = ScriptedJudge()
    assert judge_rewards(client, "P", cands("p=1/2", "p=2/2", "p=0/2"), JudgeConfig(n_judgements=2)) == [0.5, 1.0, 0.0]
    assert client.calls == 6
    assert judge_verify(client, "P", cands("p=1/4")[0], n=4) == 0.25
    assert client.calls == 10


def test_reference_goes_into_prompt_only_when_given():
    client = ScriptedJudge()
    judge_scores(client, "P", cands("p=1/1"), JudgeConfig(n_judgements=1))
    judge_scores(client, "P", cands("p=1/1"), JudgeConfig(n_judgements=1), reference="THE-PROOF")
    assert "Reference solution" not in client.prompts[0]
    assert "Reference solution" in client.prompts[1] and "THE-PROOF" in client.prompts[1]


def test_client_breaking_the_contract_is_refused():
    class Short(ScriptedJudge):
        def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
            return super().generate(prompts, n=n)[:-1]

    with pytest.raises(RuntimeError, match="completions for 2 prompts"):
        judge_scores(Short(), "P", cands("p=1/1", "p=1/1"))


# ---------------------------------------------------------------- GenSelect
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 9])
@pytest.mark.parametrize("pair_judgements", [1, 3])
def test_tournament_picks_known_best_with_n_minus_1_matches(n, pair_judgements):
    qualities = [(7 * i + 3) % 11 for i in range(n)]  # distinct for n <= 11
    for seed in (None, 0, 1, 2):
        client = ScriptedJudge()
        res = select_best(
            client, "P", cands(*(f"quality={q}" for q in qualities)), "tournament",
            JudgeConfig(pair_judgements=pair_judgements), seed=seed,
        )
        assert res.index == qualities.index(max(qualities))
        assert res.llm_calls == client.calls == (n - 1) * pair_judgements
        assert sum(res.scores) == n - 1  # one win per match
        assert res.unparsable == 0


def test_bye_holder_plays_next_round():
    # 5 entrants: round 1 plays (0,1) and (2,3), 4 has a bye; round 2 must include 4.
    t = knockout(ScriptedJudge(), "P", cands(*(f"quality={q}" for q in (1, 2, 3, 4, 5))))
    assert [(m.a, m.b) for m in t.matches] == [(0, 1), (2, 3), (4, 1), (3, 4)]
    assert t.survivors == (4,)


def test_knockout_to_survivors_plays_n_minus_keep_matches():
    t = knockout(ScriptedJudge(), "P", cands(*(f"quality={q}" for q in range(8))), keep=3)
    assert len(t.matches) == 5 and len(t.survivors) == 3
    assert 7 in t.survivors


def test_unparsable_match_goes_to_lower_index_whatever_the_order_shown():
    for seed in range(6):  # shuffled brackets show either candidate first
        client = ScriptedJudge()
        res = select_best(client, "P", cands("quality=1 [garble]", "quality=9 [garble]"), seed=seed)
        assert res.index == 0 and res.unparsable == 1 and res.llm_calls == 1


def test_match_majority_ignores_unparsable_votes():
    class Votes(ScriptedJudge):  # votes for 1, then two unparsable replies
        def _reply(self, prompt, j):
            return ["Best solution: 1", "hmm", "no idea"][j]

    res = select_best(Votes(), "P", cands("a", "b"), cfg=JudgeConfig(pair_judgements=3))
    assert res.index == 1 and res.unparsable == 2 and res.llm_calls == 3

    class Split(ScriptedJudge):  # one vote each way, one unparsable: a tie
        def _reply(self, prompt, j):
            return ["Best solution: 1", "Best solution: 0", "??"][j]

    assert select_best(Split(), "P", cands("a", "b"), cfg=JudgeConfig(pair_judgements=3)).index == 0


# ---------------------------------------------------------------- selection by judge and hybrid
# quality drives the tournament, p the judge; they disagree on purpose.
HYBRID_CANDS = cands(
    "quality=1 p=1/4", "quality=5 p=2/4", "quality=3 p=3/4", "quality=2 p=4/4", "quality=4 p=3/4"
)


def test_judge_selection_picks_highest_mean_lowest_index_on_ties():
    client = ScriptedJudge()
    res = select_best(client, "P", HYBRID_CANDS, "judge", JudgeConfig(n_judgements=4))
    assert res.index == 3 and res.scores == (0.25, 0.5, 0.75, 1.0, 0.75)
    assert res.llm_calls == client.calls == 5 * 4
    tie = select_best(ScriptedJudge(), "P", cands("p=1/2", "p=2/2", "p=2/2"), "judge", JudgeConfig(n_judgements=2))
    assert tie.index == 1


def test_hybrid_judges_tournament_survivors_and_picks_highest_mean():
    # Knockout to n_s=2 over 5: (0,1)->1, (2,3)->2, bye 4; then (4,1)->1. Survivors 2 and 1,
    # judged 0.75 and 0.5: the hybrid picks 2, where the tournament alone picks 1 and the
    # judge alone picks 3.
    client = ScriptedJudge()
    cfg = JudgeConfig(n_judgements=4, n_survivors=2)
    res = select_best(client, "P", HYBRID_CANDS, "hybrid", cfg)
    assert res.index == 2
    assert res.scores == (None, 0.5, 0.75, None, None)
    assert res.llm_calls == client.calls == (5 - 2) * 1 + 2 * 4
    assert select_best(ScriptedJudge(), "P", HYBRID_CANDS, "tournament", cfg).index == 1


def test_hybrid_with_more_survivors_than_candidates_judges_all():
    res = select_best(ScriptedJudge(), "P", cands("quality=1 p=2/2", "quality=2 p=1/2"), "hybrid",
                      JudgeConfig(n_judgements=2, n_survivors=4))
    assert res.index == 0 and res.llm_calls == 4


def test_bad_inputs_are_refused_with_names():
    with pytest.raises(ValueError, match="method"):
        select_best(ScriptedJudge(), "P", cands("a"), "vote")
    with pytest.raises(ValueError, match="candidate"):
        select_best(ScriptedJudge(), "P", [])
    with pytest.raises(ValueError, match="n_judgements"):
        JudgeConfig(n_judgements=0)
    with pytest.raises(ValueError, match="scale"):
        JudgeConfig(scale="likert")


def test_importing_judges_loads_no_engine():
    code = (
        "import sys, jury.verifiers.judges, jury.verifiers.derl.plans\n"
        "heavy = {'vllm', 'ray', 'torch', 'deepspeed'} & set(sys.modules)\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
