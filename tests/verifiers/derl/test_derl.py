"""DeRL's diversity reward: plans, the prompt mix, the judge, forbidden Lean tactics, the
random control, with scripted LLM clients that honour LLMClient."""
from __future__ import annotations

import pytest

from jury.protocol.config import FORBIDDEN_TACTICS, DerlConfig
from jury.data.derl import DerlTask, DiversifyingMixer, StoredCoT
from jury.verifiers.derl.plans import extract_plan, make_proof_plans, plan_leak, refresh_plans
from jury.verifiers.derl.reward import (
    DiversityItem,
    DiversityVerdict,
    RandomReward,
    diversity_rewards,
    forbidden_tactics_used,
    lean_diversity_reward,
    lean_identifiers,
    parse_similarity,
)
from jury.verifiers.llm import Completion, load_prompt


class Scripted:
    """Replies with reply(prompt, j); counts completions."""

    def __init__(self, reply):
        self.reply, self.calls, self.prompts = reply, 0, []

    def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
        self.prompts += prompts
        self.calls += n * len(prompts)
        return [[Completion(self.reply(p, j), num_tokens=5) for j in range(n)] for p in prompts]


# The paper's App. 8.1 and 8.3 examples.
DIVISORS = "Count how many whole numbers divide 50 without a remainder."
DIVISORS_PLAN = (
    "To find the number of divisors, identify all pairs of numbers that multiply to give 50. This involves "
    "writing down the factors in pairs, ensuring no number is counted twice. The final count is these pairs combined."
)
ALGEBRA = (
    "Calculate the value of $\\frac{(a+b)^2(a-b)^2(a^2+b^2)^2}{(a^2-b^2)^4}$ where a and b are non-zero real numbers."
)
ALGEBRA_PLAN = (
    "The solution involves algebraic manipulation of the expression. First, we expand some terms in the numerator. "
    "Then we recognize that $(a^2 - b^2)^2$ appears in both numerator and denominator, allowing for simplification."
)


# ---------------------------------------------------------------- plans
def test_paper_plans_pass_the_leak_check():
    assert plan_leak(DIVISORS_PLAN, DIVISORS, "6") is None  # "50" is quoted from the problem
    assert plan_leak(ALGEBRA_PLAN, ALGEBRA, "1") is None  # "^2" likewise


@pytest.mark.parametrize(
    "plan, answer, why",
    [
        ("Pair the divisors; there are 6 of them.", "6", "answer"),
        ("Pair the divisors; there are six of them.", "6", "answer"),
        ("Pair up the divisors: 1 and 50, 2 and 25.", "6", "numbers"),
        ("Write 50 as 2 times 25 and use the divisor formula.", "6", "numbers"),
        ("The angle is $\\frac{\\pi}{k}$ by symmetry.", "\\frac{\\pi}{k}", "answer"),
        ("The angle is $\\frac{\\pi}{k}$ by symmetry.", "\\boxed{\\frac{\\pi}{k}}", "answer"),
        ("   ", "6", "empty"),
    ],
)
def test_leaky_plans_are_refused(plan, answer, why):
    assert why in plan_leak(plan, DIVISORS, answer)


def test_leak_check_edge_rules():
    # The answer leaks even when the problem also holds that number.
    assert "answer" in plan_leak("Halve 50 repeatedly.", DIVISORS, "50")
    # "zero"/"one" are prose, not leaks; a lone-letter answer is not searched for.
    assert plan_leak("Set each factor to zero and count the ones that survive.", DIVISORS, "0") is None
    assert plan_leak("By symmetry, pick the option with both properties.", DIVISORS, "B") is None
    # Strict mode: no number at all, as §5.1's planner prompt asks.
    assert "numbers" in plan_leak(DIVISORS_PLAN, DIVISORS, "6", allow_problem_numbers=False)


def test_extract_plan_takes_the_last_summary():
    reply = "<think>as $$$summary$$$ ...</think>Here: $$$ Factor, then count. $$$"
    assert extract_plan(reply) == "Factor, then count."
    assert extract_plan("Factor, then count.") is None


def test_make_proof_plans_uses_first_clean_attempt():
    replies = {0: "$$$Pair the divisors: there are 6.$$$", 1: "$$$Use the prime factorisation and count exponents.$$$"}
    client = Scripted(lambda p, j: replies[j] if "divide 50" in p else "$$$It is 7.$$$")
    reqs = [StoredCoT(DIVISORS, "1*50, 2*25, 5*10: 6 divisors.", "6"), StoredCoT("What is 3+4?", "7", "7")]
    clean, refused = make_proof_plans(client, reqs, DerlConfig(plan_attempts=2))
    assert clean.plan == "Use the prime factorisation and count exponents." and clean.reason is None
    assert refused.plan is None and "answer" in refused.reason
    assert client.calls == 4
    assert client.prompts[0].startswith("I will give you a math problem and a chain-of-thought solution")
    assert "Chain-of-thought solution:\n1*50, 2*25" in client.prompts[0]


# ---------------------------------------------------------------- the mix
def _planned_mixer(cfg: DerlConfig, n_problems: int) -> DiversifyingMixer:
    mixer = DiversifyingMixer(cfg)
    for i in range(n_problems):
        mixer.record_correct(f"p{i}", f"Problem {i}?", "cot", "x")
        mixer.set_plan(f"p{i}", "A plan.")
    return mixer


@pytest.mark.parametrize("ratio", [(4, 1), (2, 1), (3, 2)])
def test_mix_ratio_is_exact_per_block_over_a_long_run(ratio):
    a, b = ratio
    mixer = _planned_mixer(DerlConfig(ratio=ratio, seed=7), 10)
    tasks = [DerlTask(f"p{i % 10}", f"Problem {i % 10}?") for i in range(2000 * (a + b))]
    flags = []
    for start in range(0, len(tasks), 64):  # in actor-sized batches that cut across blocks
        flags += [m.diversifying for m in mixer.next_tasks(tasks[start : start + 64])]
    assert sum(flags) == 2000 * b
    blocks = [sum(flags[i : i + a + b]) for i in range(0, len(flags), a + b)]
    assert set(blocks) == {b}
    # Seeded: the same seed replays the same choice, another seed makes another.
    replay = _planned_mixer(DerlConfig(ratio=ratio, seed=7), 10).next_tasks(tasks[:500])
    other = _planned_mixer(DerlConfig(ratio=ratio, seed=8), 10).next_tasks(tasks[:500])
    assert [m.diversifying for m in replay] == flags[:500]
    assert [m.diversifying for m in other] != flags[:500]


def test_slots_owed_by_planless_tasks_are_repaid_up_to_one_block():
    mixer = DiversifyingMixer(DerlConfig(ratio=(4, 1)))
    cold = mixer.next_tasks([DerlTask("p0", "Problem?")] * 50)  # no plan yet: 10 slots owed
    assert not any(m.diversifying for m in cold)
    mixer.record_correct("p0", "Problem?", "cot", "x")
    mixer.set_plan("p0", "A plan.")
    warm = mixer.next_tasks([DerlTask("p0", "Problem?")] * 50)
    assert sum(m.diversifying for m in warm) == 10 + 1  # ten blocks' worth plus the capped debt


def test_prompts_follow_the_paper_formats():
    mixer = _planned_mixer(DerlConfig(ratio=(0, 1)), 1)
    [div] = mixer.next_tasks([DerlTask("p0", "Problem 0?")])
    assert div.diversifying and div.plan == "A plan."
    assert div.prompt.startswith("Problem 0?\nProof plan starts: A plan. Proof plan ends.\nI want you to solve")
    assert div.prompt.rstrip().endswith("put the final answer in the box as \\boxed{final answer}.")
    [orig] = DiversifyingMixer(DerlConfig(ratio=(1, 0))).next_tasks([DerlTask("p0", "Problem 0?")])
    assert not orig.diversifying and orig.plan is None
    assert orig.prompt == (
        "Problem 0?\nsolve the problem step by step and put the final answer in the box as \\boxed{final answer}.\n"
    )
    lean_task = DerlTask("l0", "theorem t : 1 = 1 := by", lean=True)
    [lean] = DiversifyingMixer(DerlConfig(ratio=(0, 1))).next_tasks([lean_task])
    assert lean.diversifying  # Lean needs no plan
    assert lean.prompt == (
        "Complete the lean code\ntheorem t : 1 = 1 := by\nNote you absolutely cannot use any tactic from the list "
        "['linarith', 'simp_all', 'simp', 'omega', 'ring', 'aesop', 'positivity', 'trivial'], otherwise it is "
        "cheating and the proof you found is invalid.\ntheorem t : 1 = 1 := by\n"
    )


def test_store_keeps_first_cot_is_bounded_and_forgets_refused_plans():
    mixer = DiversifyingMixer(DerlConfig(store_size=2))
    mixer.record_correct("a", "A?", "first", "1")
    mixer.record_correct("a", "A?", "second", "1")
    mixer.record_correct("b", "B?", "cot", "2")
    assert [(pid, r.cot) for pid, r in mixer.pending_plans()] == [("a", "first"), ("b", "cot")]
    mixer.record_correct("c", "C?", "cot", "3")  # evicts "a", the oldest
    assert [pid for pid, _ in mixer.pending_plans()] == ["b", "c"]
    mixer.set_plan("b", None)  # refused: b's next correct CoT may take its place
    mixer.record_correct("b", "B?", "new", "2")
    assert [(pid, r.cot) for pid, r in mixer.pending_plans()] == [("c", "cot"), ("b", "new")]
    mixer.set_plan("a", "late plan for an evicted problem")  # ignored
    assert mixer.plan_for("a") is None


def test_refresh_plans_attaches_clean_plans_only():
    mixer = DiversifyingMixer()
    mixer.record_correct("d", DIVISORS, "1*50, 2*25, 5*10: 6.", "6")
    mixer.record_correct("s", "What is 3+4?", "3+4=7", "7")
    plan = "Factorise, then multiply exponents plus one."
    client = Scripted(lambda p, j: f"$$${plan}$$$" if "50" in p else "$$$Seven.$$$")
    results = refresh_plans(client, mixer, DerlConfig(plan_attempts=1))
    assert [r.plan is not None for r in results] == [True, False]
    assert mixer.plan_for("d") == plan
    assert mixer.pending_plans() == []  # "s" was refused and forgotten


# ---------------------------------------------------------------- the NL judge
@pytest.mark.parametrize(
    "reply, similar",
    [
        ("After analyzing the student's solution and the proof plan:\n\nOutput: **False**\n\nThe student's "
         "solution is fundamentally different from the proof plan.", False),  # App. 8.1
        ("After carefully comparing ...:\n\n*****False*****\n\nThe student's solution uses a significantly "
         "different approach. It is True that both reach 0.", False),  # App. 8.2, plus a stray True
        ("After analyzing the student's solution and the proof plan: Output: False", False),  # App. 8.3
        ("*****True*****\nThe student just listed the pairs.", True),
        ("<think>Output: False?</think>The solution mirrors the plan. True.", True),
        ("The student mostly followed the plan.", None),
        ("Is it True or False? Hard to say.", None),
    ],
)
def test_parse_similarity(reply, similar):
    assert parse_similarity(reply) is similar


def _judge_reply(prompt, j):
    solution = prompt.split("Student solution: ", 1)[1]
    if "[garble]" in solution:
        return "Hmm."
    return "*****True*****" if "pairs" in solution else "Output: **False**"


def test_diversity_reward_needs_correct_and_dissimilar():
    items = [
        DiversityItem(DIVISORS, DIVISORS_PLAN, "Prime factorisation 2*5^2 gives (1+1)(2+1) = 6.", True),
        DiversityItem(DIVISORS, DIVISORS_PLAN, "List the pairs 1*50, 2*25, 5*10: 6.", True),
        DiversityItem(DIVISORS, DIVISORS_PLAN, "Prime factorisation gives 8.", False),
        DiversityItem(DIVISORS, DIVISORS_PLAN, "[garble] 6.", True),
    ]
    client = Scripted(_judge_reply)
    verdicts = diversity_rewards(client, items)
    assert [v.reward for v in verdicts] == [1.0, 0.0, 0.0, 0.0]
    assert [v.diverse for v in verdicts] == [True, False, True, None]
    assert [v.unparsable for v in verdicts] == [False, False, False, True]
    assert client.calls == 4
    assert client.prompts[0].startswith("You are a careful math teacher.")
    assert f"Proof plan: {DIVISORS_PLAN}\n\nStudent solution: Prime" in client.prompts[0]

    lean = Scripted(_judge_reply)
    verdicts = diversity_rewards(lean, items, DerlConfig(judge_all=False))
    assert lean.calls == 3 and verdicts[2] == DiversityVerdict(0.0, False, None)


# ---------------------------------------------------------------- forbidden Lean tactics
TRICKY = """theorem t (a b : ℕ) (h' : a ≤ b) : a < b + 1 := by
  -- simp would close this, but we may not use it
  /- block comment: linarith /- nested: omega -/ still comment: ring -/
  /-- doc comment: aesop -/
  have key : a ≤ b := h'   -- trivial
  have s : String := "simp \\" linarith"
  have c : Char := 'x'
  have n := `positivity
  nlinarith [sq_nonneg (a - b), Nat.simp_lemma, my_simp_lemma, h'.trivial]
  ring_nf
  simp_arith
  field_simp
  simpa using key
  exact «simp»
"""


def test_scanner_skips_comments_strings_literals_and_partial_names():
    assert forbidden_tactics_used(TRICKY) == ()
    names = lean_identifiers(TRICKY)
    assert "h'" in names and "Nat.simp_lemma" in names and "h'.trivial" in names
    assert "simp" not in names and "linarith" not in names


@pytest.mark.parametrize(
    "line, found",
    [
        ("simp", ("simp",)),
        ("simp only [add_comm] at h ⊢", ("simp",)),
        ("simp?", ("simp",)),
        ("linarith!", ("linarith",)),
        ("nlinarith [h]; linarith", ("linarith",)),
        ("constructor <;> simp_all", ("simp_all",)),
        ("aesop?", ("aesop",)),
        ("ring", ("ring",)),
        ("ring_nf", ()),
        ("omega\n  positivity", ("omega", "positivity")),
        ("exact trivial", ("trivial",)),  # the term trivial: the token scanner errs toward 0
        ("@[simp] lemma foo : 0 = 0 := rfl", ()),  # an attribute, not a tactic call
        ("exact αsimp.trivial₁", ()),  # Greek letters and subscripts continue an identifier
    ],
)
def test_forbidden_tactics_by_token(line, found):
    assert forbidden_tactics_used(f"theorem t : P := by\n  {line}\n") == found


def test_syntax_tree_callable_replaces_the_scanner():
    seen = []

    def syntax_tactics(proof):  # stands in for Lean: `trivial` here is a term, not a tactic
        seen.append(proof)
        return ["exact"]

    proof = "theorem t : True := by\n  exact trivial\n"
    verdict = lean_diversity_reward(proof, True, syntax_tactics=syntax_tactics)
    assert seen == [proof] and verdict.reward == 1.0 and verdict.forbidden == ()
    def variants(proof):  # names as written: the `?`/`!` variants count as the listed tactic
        return ["simp?", "nlinarith", "linarith!"]

    assert forbidden_tactics_used("", syntax_tactics=variants) == ("linarith", "simp")


def test_lean_reward_needs_check_and_no_forbidden_tactic():
    clean, dirty = "by\n  exact Nat.lt_succ_of_le h\n", "by\n  omega\n"
    assert lean_diversity_reward(clean, True) == DiversityVerdict(1.0, True, True)
    assert lean_diversity_reward(clean, False).reward == 0.0  # "we do not reward proofs that fail"
    assert lean_diversity_reward(dirty, True) == DiversityVerdict(0.0, True, False, forbidden=("omega",))
    stricter = DerlConfig(forbidden_tactics=FORBIDDEN_TACTICS + ("nlinarith",))
    assert lean_diversity_reward("by\n  nlinarith [h]\n", True, stricter).reward == 0.0


# ---------------------------------------------------------------- random control and metrics
def test_random_reward_is_a_seeded_fair_coin():
    draws = RandomReward(seed=3).rewards(10_000)
    assert set(draws) == {0.0, 1.0}
    assert 4_850 <= sum(draws) <= 5_150  # 3 sigma of Binomial(10000, 1/2) is 150
    assert RandomReward(seed=3).rewards(100) == draws[:100]
    assert RandomReward(seed=4).rewards(100) != draws[:100]


def test_judge_prompt_is_the_papers():
    text = load_prompt("derl_judge")
    assert text.startswith("You are a careful math teacher. I will give you the problem statement")
    assert "Output *****True***** if the solution is similar to the proof plan (so the student cheated)." in text


def test_bad_config_is_refused_with_field_name():
    with pytest.raises(ValueError, match="ratio"):
        DerlConfig(ratio=(0, 0))
    with pytest.raises(ValueError, match="store_size"):
        DerlConfig(store_size=0)
