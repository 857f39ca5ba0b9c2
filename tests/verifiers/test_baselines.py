"""JURY-RL's label-free baselines (Table 1, §5.3) on constructed groups worked by hand:
LLM-as-a-Judge, LLM-KD and CoReward, their pure rewards and their schemes in a real verifier
worker (the math checker's process pool), with scripted LLMs that honour the client contract."""
import random
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jury.cluster.recipes import CheckerRecipe, SchemeRecipe
from jury.learner.grpo import collate
from jury.protocol.config import LearnerConfig, VerifierConfig
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, Verdict
from jury.verifiers.llm import Completion
from jury.verifiers.llm_rewards import judge_prompt, parse_verdict
from jury.verifiers.rewards import GroupView, coreward
from jury.verifiers.worker import VerifierWorker


def _group(texts, *, problem="Compute 18+19+20+21.", label="78", views=None, index=0):
    task = PromptTask(task_id=f"t{index}", index=index, prompt=problem + "\n", label=label, source="test",
                      problem=problem)
    samples = [Sample(np.arange(2, dtype=np.int32), np.full(2, -0.5, np.float32), t, "stop") for t in texts]
    for s, v in zip(samples, views or [0] * len(texts)):
        s.view = v
    return RolloutGroup(task, np.arange(4, dtype=np.int32), samples, 0, 0, "g0", 0.1,
                        rewrite_prompt_ids=np.arange(5, dtype=np.int32) if views else np.zeros(0, np.int32))


class Scripted:
    """An LLMClient whose reply to a prompt is `reply(prompt)`; it records what it was asked."""

    def __init__(self, reply):
        self.reply, self.prompts = reply, []

    def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
        self.prompts += list(prompts)
        return [[Completion(self.reply(p), 7)] * n for p in prompts]


def _worker(reward, llm=None, **kw):
    cfg = VerifierConfig(reward=reward, **kw)
    return VerifierWorker(cfg, "v0", checker=CheckerRecipe(cfg),
                          scheme=SchemeRecipe(cfg, llm=llm, template="Q: {problem}\n"))


# ── CoReward ─────────────────────────────────────────────────────────────────
def coreward_reference(original: list, rewrite: list) -> tuple[list, list]:
    """Co-rewarding-I's rewards, restated from tmlr-group/Co-rewarding@6c60ea458a1a3439230c6f2ef49e248a3e577c8a,
    Co-rewarding-I/verl/workers/reward_manager/co_reward.py (majority_vote, CoRewardManager.__call__):
    '' is an unparsable answer; each view's pseudo-label is the other view's most common non-empty
    answer (Counter.most_common(1), first seen on ties); 1.0 iff answer == pseudo != ''."""
    def majority_vote(answers):
        kept = [a for a in answers if a is not None and str(a).strip() != ""]
        return Counter(kept).most_common(1)[0][0] if kept else ""

    pseudo_ori, pseudo_aug = majority_vote(rewrite), majority_vote(original)
    return ([1.0 if a == pseudo_ori and pseudo_ori != "" else 0.0 for a in original],
            [1.0 if a == pseudo_aug and pseudo_aug != "" else 0.0 for a in rewrite])


def _coreward(original, rewrite):
    keys = [a or None for a in original + rewrite]  # '' (theirs) is None (ours)
    res = coreward(GroupView(keys, None, "p", views=[0] * len(original) + [1] * len(rewrite)))
    return res, res.rewards[: len(original)], res.rewards[len(original):]


def test_coreward_worked_example_from_the_notes():
    """Original ["3","3","5",""], rewrite ["5","5","3","5"]: pseudo(original) = maj(rewrite) = "5",
    so r_original = [0,0,1,0]; pseudo(rewrite) = maj(original) = "3" ('' does not vote), so
    r_rewrite = [0,0,1,0]. Each view alone: mean 0.25; Co-rewarding-I's unbiased std is 0.5, giving
    [-0.5,-0.5,1.5,-0.5]; the learner's default GRPO (population std sqrt(0.1875)) gives
    [-0.577,-0.577,1.732,-0.577]; the eight normalised together would not (view 1 would be shifted)."""
    res, ori, rew = _coreward(["3", "3", "5", ""], ["5", "5", "3", "5"])
    assert (ori, rew) == ([0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0])
    assert (ori, rew) == coreward_reference(["3", "3", "5", ""], ["5", "5", "3", "5"])
    assert (res.majority_answer, res.vote_share, res.num_distinct) == ("3", 0.5, 2)  # the original view's
    assert res.counts == {"coreward/views_agree": 0.0, "coreward/views_unlabelled": 0.0}
    g = _group(["a"] * 8, views=[0, 0, 0, 0, 1, 1, 1, 1])
    from jury.protocol.messages import ScoredGroup

    scored = ScoredGroup(g, [], np.array(res.rewards, np.float32), "coreward", "3", 0.5, None, 2, 0.0)
    adv = collate([scored], LearnerConfig(advantage="grpo"), pad_id=0).advantages.tolist()
    s = 0.1875 ** 0.5
    assert adv == pytest.approx([-0.25 / s, -0.25 / s, 0.75 / s, -0.25 / s] * 2, abs=1e-5)
    unbiased = torch.tensor(ori).std().item()  # Co-rewarding-I's normalisation, for the record
    assert [(r - 0.25) / unbiased for r in ori] == pytest.approx([-0.5, -0.5, 1.5, -0.5])


def test_coreward_ties_unlabelled_views_and_a_missing_rewrite():
    # a tie in the original view: "3" is seen first, so it labels the rewrite view
    _, _, rew = _coreward(["3", "5", "5", "3"], ["3", "5", "", "3"])
    assert rew == [1.0, 0.0, 0.0, 1.0]
    # a rewrite view with no answer leaves the original view unlabelled: all 0, counted
    res, ori, rew = _coreward(["7", "7", "8", "7"], ["", "", "", ""])
    assert ori == [0.0] * 4 and rew == [0.0] * 4 and res.counts["coreward/views_unlabelled"] == 1.0
    # the views agree on 7: both get 1 for 7
    res, ori, rew = _coreward(["7", "7", "8", ""], ["7", "9", "7", "7"])
    assert (ori, rew, res.counts["coreward/views_agree"]) == ([1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 1.0], 1.0)
    # no rewrite (one view): no label anywhere, all 0 and counted
    alone = coreward(GroupView(["7", "7", "8"], None, "p", views=[0, 0, 0]))
    assert alone.rewards == [0.0] * 3 and alone.counts == {"coreward/no_rewrite_groups": 1.0}


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 8), st.randoms(use_true_random=False))
def test_coreward_equals_co_rewarding_i_on_random_groups(g, rnd):
    answers = ["1", "2", "3", ""]
    original = [rnd.choice(answers) for _ in range(g)]
    rewrite = [rnd.choice(answers) for _ in range(g)]
    _, ori, rew = _coreward(original, rewrite)
    assert (ori, rew) == coreward_reference(original, rewrite)


def test_coreward_in_the_worker_reads_each_samples_view():
    w = _worker("coreward")
    try:
        texts = ["\\boxed{78}", "\\boxed{78}", "\\boxed{77}", "none", "\\boxed{77}", "\\boxed{77}", "\\boxed{78}", "x"]
        sg = w.score(_group(texts, views=[0, 0, 0, 0, 1, 1, 1, 1]))
        # pseudo(original) = maj(rewrite) = 77; pseudo(rewrite) = maj(original) = 78
        assert sg.rewards.tolist() == [0, 0, 1, 0, 0, 0, 1, 0]
        assert sg.majority_answer == "78" and sg.vote_share == 0.5 and sg.scheme == "coreward"
        assert sg.pass_rate == 3 / 8  # the label check, over both views
    finally:
        w.stop()


# ── LLM-as-a-Judge ───────────────────────────────────────────────────────────
def test_the_verdict_is_the_last_true_or_false_after_any_reasoning():
    assert parse_verdict("The sum is 78, which matches.\n**Final judgment: True**") is True
    assert parse_verdict("I must answer True or False. 18+19+20+21 = 78, not 77. False.") is False
    assert parse_verdict("<think>Looks true at first.</think>\nJudgment: FALSE") is False
    assert parse_verdict("untrue, falsely stated") is None and parse_verdict("") is None
    prompt = judge_prompt("Compute 1+1.", "2")
    assert prompt.startswith("You are a professional math QA pair evaluator. Your sole task is to determine")
    assert "end your response with your final judgment: True or False." in prompt
    assert prompt.endswith("Question: Compute 1+1.\nAnswer: 2\n")


def test_llm_judge_asks_once_per_distinct_answer_and_counts_missing_verdicts():
    """Answers 78 (twice, as "78" and "078": one vote key), 77, 79 and one unparsable. The judge says
    True about 78, False about 77 and nothing usable about 79: rewards 1, 1, 0, 0, 0; three calls, one
    no verdict. The same problem again asks nothing (cache), a new answer asks once."""
    def reply(prompt):
        answer = prompt.rsplit("Answer: ", 1)[1].strip()
        return {"78": "18+19+20+21 = 78. True", "77": "It is 78. False", "79": "hmm"}[answer]

    llm = Scripted(reply)
    w = _worker("llm_judge", llm)
    try:
        sg = w.score(_group(["\\boxed{78}", "\\boxed{078}", "\\boxed{77}", "\\boxed{79}", "no answer"]))
        assert sg.rewards.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
        assert len(llm.prompts) == 3 and "Question: Compute 18+19+20+21.\nAnswer: 78\n" in llm.prompts[0]
        assert sg.counts == {"judge/llm_calls": 3.0, "judge/cache_hits": 0.0, "judge/no_verdict": 1.0}
        again = w.score(_group(["\\boxed{77}", "\\boxed{78}", "\\boxed{79}"]))
        assert again.rewards.tolist() == [0.0, 1.0, 0.0] and len(llm.prompts) == 3
        assert again.counts == {"judge/llm_calls": 0.0, "judge/cache_hits": 3.0, "judge/no_verdict": 0.0}
        assert w.stats()["verifier/judge_llm_calls"] == 3.0
    finally:
        w.stop()


def test_a_failing_judge_sends_the_group_as_an_error_not_as_zeros():
    def reply(prompt):
        raise TimeoutError("judge unreachable")

    w = _worker("llm_judge", Scripted(reply))
    try:
        sg = w.score(_group(["\\boxed{78}", "\\boxed{77}"]))
        assert sg.error and "judge unreachable" in sg.error  # the learner trains on none of it
    finally:
        w.stop()


# ── LLM-KD ───────────────────────────────────────────────────────────────────
def test_llm_kd_checks_every_sample_against_the_teachers_answer_asked_once_per_problem():
    """The teacher (shown the problem in the run's template, "Q: {problem}\\n") answers 0078 for the
    sum and writes no box for the product. Sum: 78 and 0078 are the teacher's answer to the math
    checker, 77 is not, no answer is 0 -> 1, 1, 0, 0 (the true label is 78: same here). Product:
    no teacher answer, so every reward is 0 and the group is counted; it is not asked again."""
    def reply(prompt):
        return "0021+20=0041 ... \\boxed{0078}" if "18+19" in prompt else "I think it is 42."

    llm = Scripted(reply)
    w = _worker("llm_kd", llm)
    try:
        sg = w.score(_group(["\\boxed{78}", "\\boxed{0078}", "\\boxed{77}", "none"]))
        assert sg.rewards.tolist() == [1.0, 1.0, 0.0, 0.0] and llm.prompts == ["Q: Compute 18+19+20+21.\n"]
        assert sg.counts == {"kd/llm_calls": 1.0, "kd/no_teacher_answer": 0.0, "kd/unlabelled_groups": 0.0,
                             "kd/teacher_unread": 0.0}
        assert w.score(_group(["\\boxed{77}"])).rewards.tolist() == [0.0] and len(llm.prompts) == 1  # cached
        product = _group(["\\boxed{42}", "\\boxed{41}"], problem="Compute 6*7.", label="42", index=1)
        for asked in (1.0, 0.0):
            sg = w.score(product)
            assert sg.rewards.tolist() == [0.0, 0.0]
            assert sg.counts == {"kd/llm_calls": asked, "kd/no_teacher_answer": asked, "kd/unlabelled_groups": 1.0,
                                 "kd/teacher_unread": 0.0}
        assert len(llm.prompts) == 2 and w.stats()["verifier/kd_unlabelled_groups"] == 2.0
    finally:
        w.stop()


def test_a_teacher_reply_the_checker_could_not_read_is_asked_again_not_cached():
    """The check process timed out reading the teacher's reply (verifiers/checker.py: unread): that is
    no "teacher gave no answer", cached for the problem for good (outside audit). The group is
    unlabelled this once, counted as kd/teacher_unread, and the next group asks the teacher again."""
    from jury.verifiers.llm_rewards import LLMKD
    from jury.verifiers.rewards import GroupView

    class Checker:  # the label-checker protocol: exact text, and a reply holding HANG timed out
        name = "exact"

        def extract(self, text):
            return None if "HANG" in text else text.strip()

        def unread(self, text):
            return "timeout" if "HANG" in text else None

        def check(self, answers, label, texts):
            return [Verdict("correct" if a == label else "incorrect", self.name, 0.0) for a in answers]

    replies = iter(["HANG 4", "4"])
    llm = Scripted(lambda prompt: next(replies))
    kd = LLMKD(llm, Checker(), "Q: {problem}\n")
    group = _group(["4", "5"])
    for sample in group.samples:  # the worker's extraction, done
        sample.answer = sample.text
    view = GroupView(["4", "5"], None, group.task.statement)
    first = kd.score(group, view)
    assert list(first.rewards) == [0.0, 0.0]
    assert first.counts["kd/teacher_unread"] == 1.0 and first.counts["kd/no_teacher_answer"] == 0.0
    second = kd.score(group, view)
    assert list(second.rewards) == [1.0, 0.0] and len(llm.prompts) == 2 and second.counts["kd/llm_calls"] == 1.0


def test_a_teacher_that_disagrees_with_the_label_is_followed_not_the_label():
    llm = Scripted(lambda prompt: "\\boxed{77}")  # a wrong teacher: its answer is the pseudo-label
    w = _worker("llm_kd", llm)
    try:
        sg = w.score(_group(["\\boxed{78}", "\\boxed{77}", "\\boxed{77}"]))
        assert sg.rewards.tolist() == [0.0, 1.0, 1.0] and sg.pass_rate == pytest.approx(1 / 3)
    finally:
        w.stop()


def test_every_baseline_gives_an_unparsable_sample_the_lowest_reward_of_its_group():
    """Issue 25, item 4, for the new schemes: 0 is the least each of them gives, and an unparsable
    sample always gets it (never shown to the judge, never equal to a teacher's answer or a
    pseudo-label)."""
    rng = random.Random(0)
    llm = Scripted(lambda prompt: rng.choice(["True", "False", "\\boxed{3}", "nothing"]))
    workers = [_worker("llm_judge", llm), _worker("llm_kd", llm), _worker("coreward")]
    try:
        for i in range(12):
            texts = [rng.choice(["\\boxed{3}", "\\boxed{4}", "no answer"]) for _ in range(8)]
            for w in workers:
                sg = w.score(_group(texts, problem=f"Compute {i}+3.", views=[0] * 4 + [1] * 4, index=i))
                unparsable = [r for t, r in zip(texts, sg.rewards) if t == "no answer"]
                assert all(r == 0.0 == sg.rewards.min() for r in unparsable), (w.cfg.reward, texts, sg.rewards)
    finally:
        for w in workers:
            w.stop()
