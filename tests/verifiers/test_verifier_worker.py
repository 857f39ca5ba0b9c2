"""The verifier worker with its real check pool and queues (no Ray needed to drive it)."""
import numpy as np
import pytest

from jury.protocol.config import VerifierConfig
from conftest import push_frames

from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup, Verdict, encode
from jury.protocol.transport import Receiver
from jury.verifiers.arith_gate import ArithGate
from jury.cluster.recipes import CheckerRecipe, SchemeRecipe
from jury.verifiers.worker import VerifierWorker


def make_worker(cfg, name, gate=None, llm=None):
    """A worker as the wiring builds one: the math checker and the run's scheme."""
    return VerifierWorker(cfg, name, checker=CheckerRecipe(cfg), scheme=SchemeRecipe(cfg, gate, llm))


def _group(texts, label="12", prompt="Compute 5+7.\n", index=0, problem=None):
    task = PromptTask(task_id=f"t{index}", index=index, prompt=prompt, label=label, source="test", problem=problem)
    samples = [Sample(np.arange(3, dtype=np.int32), np.full(3, -0.5, np.float32), t, "stop") for t in texts]
    return RolloutGroup(task, np.arange(4, dtype=np.int32), samples, 0, 0, "g0", 0.1)


@pytest.fixture
def worker():
    w = make_worker(VerifierConfig(reward="ground_truth", check_timeout_s=2.0), "v0", gate=ArithGate)
    yield w
    w.stop()


def test_ground_truth_verdicts_rewards_and_cache(worker):
    texts = ["\\boxed{12}", "\\boxed{13}", "no box here", "\\boxed{\\frac{24}{2}}"]
    sg = worker.score(_group(texts))
    assert [v.kind for v in sg.verdicts] == ["correct", "incorrect", "no_answer", "correct"]
    assert sg.rewards.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert sg.pass_rate == 0.5
    again = worker.score(_group(texts))
    assert [v.cache_hit for v in again.verdicts] == [True, True, False, True]
    assert worker.stats()["verifier/cache_hit_rate"] > 0


@pytest.mark.parametrize("accept_rounded", [False, True])
def test_rounded_answers_follow_the_setting_and_are_counted_apart(accept_rounded):
    w = make_worker(VerifierConfig(reward="ground_truth", accept_rounded=accept_rounded), "v3")
    try:
        texts = ["\\boxed{0.333}", "\\boxed{\\frac{1}{3}}", "\\boxed{0.3}"]
        for _ in range(2):  # the second time from the cache, counted again
            sg = w.score(_group(texts, label="\\frac{1}{3}"))
            assert [v.kind for v in sg.verdicts] == ["correct" if accept_rounded else "incorrect", "correct", "incorrect"]
        assert w.stats()["verifier/rounded_accepts"] == (2 if accept_rounded else 0)
    finally:
        w.stop()


def test_an_answer_boxed_in_parts_meets_a_reference_in_parts(worker):
    """The check reads as many boxes as the label has parts; the sample's answer, which the
    vote keys on, is still the last group of boxes alone (a vote must not read the label)."""
    texts = ["The maximum is \\boxed{5} and the minimum is \\boxed{1}.", "The maximum is \\boxed{5} and the minimum is \\boxed{2}.",
             "\\boxed{5, 1}", "\\boxed{1}"]
    group = _group(texts, label="5, 1")
    sg = worker.score(group)
    assert [v.kind for v in sg.verdicts] == ["correct", "incorrect", "correct", "incorrect"]
    assert [s.answer for s in group.samples] == ["1", "2", "5, 1", "1"]


@pytest.mark.parametrize("unanchored", ["no_answer", "last_expression"])
def test_unanchored_answers_follow_the_setting(unanchored):
    w = make_worker(VerifierConfig(reward="ground_truth", unanchored=unanchored), "v4")
    try:
        group = _group(["So we get $x = 12$.", "So we get $x = 11$.", "\\boxed{12}"])
        sg = w.score(group)
        first = ["correct", "incorrect"] if unanchored == "last_expression" else ["no_answer", "no_answer"]
        assert [v.kind for v in sg.verdicts] == first + ["correct"]
        assert group.samples[0].answer == ("x = 12" if unanchored == "last_expression" else None)
    finally:
        w.stop()


def test_jury_reward_with_the_arithmetic_gate():
    w = make_worker(VerifierConfig(reward="jury", fallback="reszero", reszero_c=0.1), "v1", gate=ArithGate)
    try:
        # majority 12 (4 of 6) is right: the gate proves it, rewards are 1[a = majority]
        sg = w.score(_group(["\\boxed{12}"] * 4 + ["\\boxed{11}", "\\boxed{3}"]))
        assert sg.gate == "proved" and sg.majority_answer is not None
        assert sg.rewards.tolist() == [1, 1, 1, 1, 0, 0]
        # majority 11 is wrong: the gate refutes, ResZero gives a zero-mean signal
        sg = w.score(_group(["\\boxed{11}"] * 4 + ["\\boxed{12}", "\\boxed{12}"]))
        assert sg.gate == "inconclusive"
        assert abs(float(sg.rewards.sum())) < 1e-6 and sg.rewards.std() > 0
        assert w.stats()["verifier/gate_calls"] == 2
    finally:
        w.stop()


def test_jury_without_a_gate_reports_no_gate_verdict():
    """verifier.gate=none: JURY-RL's fallback alone. Nothing was asked, so no group is "inconclusive"
    (reward/gate_proved is nan over them, not a gate that never proves) and no gate call is counted
    (outside audit)."""
    w = make_worker(VerifierConfig(reward="jury", gate="none", fallback="reszero", reszero_c=0.1), "v1")
    try:
        sg = w.score(_group(["\\boxed{12}"] * 4 + ["\\boxed{11}", "\\boxed{3}"]))
        assert sg.gate is None and abs(float(sg.rewards.sum())) < 1e-6 and sg.rewards.std() > 0
        assert w.stats()["verifier/gate_calls"] == 0
    finally:
        w.stop()


def test_pathological_answers_end_as_verdicts_not_hangs(worker):
    texts = ["\\boxed{10^{10^{10}}}", "\\boxed{" + "{" * 100_000 + "}" * 100_000 + "}",
             "\\boxed{" + "1" * 1_000_000 + "}", "\\boxed{print('X') or 1\\pi}", "\\boxed{12}"]
    sg = worker.score(_group(texts))
    kinds = [v.kind for v in sg.verdicts]
    assert kinds[-1] == "correct"
    # refused by a size limit (no_answer, error), cut by the pool (timeout) or wrong: never "correct"
    assert all(k in ("incorrect", "error", "timeout", "no_answer") for k in kinds[:-1]), kinds
    assert sg.rewards[:-1].tolist() == [0.0] * 4


def test_a_scoring_crash_still_sends_the_group(worker, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("scheme bug")

    monkeypatch.setattr(worker.scheme, "score", boom)
    sg = worker.score(_group(["\\boxed{12}", "\\boxed{1}"]))
    assert [v.kind for v in sg.verdicts] == ["error", "error"]
    assert sg.error == "RuntimeError: scheme bug"  # marked, so the learner trains on none of it
    assert worker.stats()["verifier/failed_groups"] == 1
    assert worker.stats()["verifier/score_retries"] == 2


def test_a_failure_that_passes_is_scored_again_not_sent_as_zero(worker, monkeypatch):
    real, calls = worker.scheme.score, []

    def flaky(group, view):
        calls.append(group.task.task_id)
        if len(calls) == 1:
            raise BrokenPipeError("a check process died")
        return real(group, view)

    monkeypatch.setattr(worker.scheme, "score", flaky)
    sg = worker.score(_group(["\\boxed{12}", "\\boxed{1}"]))
    assert sg.error is None and sg.rewards.tolist() == [1.0, 0.0] and len(calls) == 2


def test_a_dead_check_process_costs_no_verdict(worker):
    """kill -9 of the worker's check process: the next group's checks still run (no reward 0)."""
    import os
    import signal

    os.kill(worker.checker.pool._workers[0].proc.pid, signal.SIGKILL)
    worker.checker.pool._workers[0].proc.join(5)
    sg = worker.score(_group(["\\boxed{\\frac{24}{2}}", "\\boxed{6+6}", "\\boxed{13}"], index=3))
    assert [v.kind for v in sg.verdicts] == ["correct", "correct", "incorrect"] and sg.error is None
    assert worker.stats()["verifier/pool_restarts"] == 1


def test_queues_in_and_out_survive_a_malformed_frame(worker):
    out = Receiver(name="learner")
    try:
        endpoint = worker.start("127.0.0.1", out.endpoint)
        push_frames(endpoint, [[b"\xc1 not a message"], encode(_group(["\\boxed{12}"] * 2, index=7))])
        got = out.get(timeout=30)
        assert isinstance(got, ScoredGroup) and got.group.task.index == 7
        assert worker.stats()["verifier/rollouts/rejected"] == 1
    finally:
        out.close()


class _ScriptedTinyV:
    """An LLMClient that says True to every question, or fails when told to."""

    def __init__(self, fail=False, reply="True"):
        self.fail, self.prompts, self.reply = fail, [], reply

    def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
        if self.fail:
            raise TimeoutError("engine unreachable")
        from jury.verifiers.llm import Completion

        self.prompts += list(prompts)
        return [[Completion(self.reply, 1)] * n for _ in prompts]


def test_tinyv_asks_only_about_rule_negatives_and_falls_back_on_failure():
    llm = _ScriptedTinyV()
    w = make_worker(VerifierConfig(reward="tinyv"), "v2", llm=llm)
    try:
        sg = w.score(_group(["\\boxed{12}", "\\boxed{13}", "So it is twelve.", "\\boxed{11}"]))
        # the answer-less response is asked about too, shown its final statement (TinyV's pipeline)
        assert len(llm.prompts) == 3 and "<model_answer>13</model_answer>" in llm.prompts[0]
        assert "<model_answer>So it is twelve.</model_answer>" in llm.prompts[1] and "11" in llm.prompts[2]
        assert sg.rewards.tolist() == [1.0, 1.0, 1.0, 1.0]  # this judge overturns every rule negative
        assert w.stats()["verifier/tinyv_share"] == 0.75 and w.stats()["verifier/tinyv_asked"] == 3
        w.scheme.llm = _ScriptedTinyV(fail=True)
        sg = w.score(_group(["\\boxed{12}", "\\boxed{13}"]))
        assert sg.rewards.tolist() == [1.0, 0.0]  # the rules' verdicts stand
        assert w.stats()["verifier/tinyv_failed"] == 1
        # a reply with no verdict (junk, or thinking cut off): the rules' "incorrect" stands, counted
        # apart from an answer of False (outside audit: the two were one)
        w.scheme.llm = _ScriptedTinyV(reply="<think>is it True? the forms")
        sg = w.score(_group(["\\boxed{12}", "\\boxed{13}"]))
        assert sg.rewards.tolist() == [1.0, 0.0] and w.stats()["verifier/tinyv_no_verdict"] == 1
    finally:
        w.stop()
    # verifier.tinyv_unanswered=zero: a response with no answer stays wrong, never shown to the model
    llm = _ScriptedTinyV()
    w = make_worker(VerifierConfig(reward="tinyv", tinyv_unanswered="zero"), "v2", llm=llm)
    try:
        sg = w.score(_group(["\\boxed{13}", "So it is twelve."]))
        assert len(llm.prompts) == 1 and "13" in llm.prompts[0] and sg.rewards.tolist() == [1.0, 0.0]
    finally:
        w.stop()


def test_tinyv_is_shown_every_part_the_label_check_read():
    """A label of several parts is checked against each response read with that many parts; TinyV
    is shown that reading, not the vote's one part (it was shown the last box alone)."""
    llm = _ScriptedTinyV(reply="False")
    w = make_worker(VerifierConfig(reward="tinyv"), "v2", llm=llm)
    try:
        text = "The first is \\boxed{3}. Then the second one is \\boxed{6}."
        sg = w.score(_group([text], label="3, 5"))
        assert sg.verdicts[0].kind == "incorrect" and sg.group.samples[0].answer == "6"
        assert len(llm.prompts) == 1 and "<model_answer>3, 6</model_answer>" in llm.prompts[0]
    finally:
        w.stop()


def test_the_vote_counts_equivalent_forms_of_one_answer_together():
    """Two samples write 2√2 and two √8: one answer with four votes, which beats 3's three. Keyed by
    their text they split the vote, 3 won, and the equivalent form of the majority earned 0."""
    w = make_worker(VerifierConfig(reward="majority_vote"), "v3")
    try:
        texts = ["\\boxed{2\\sqrt{2}}"] * 2 + ["\\boxed{\\sqrt{8}}"] * 2 + ["\\boxed{3}"] * 3 + ["\\boxed{5}"]
        sg = w.score(_group(texts, label=None))
        assert sg.rewards.tolist() == [1] * 4 + [0] * 4
        assert sg.vote_share == 0.5 and sg.num_distinct == 3
        assert w.stats()["verifier/key_merges"] == 1
    finally:
        w.stop()


# a prompt as the feeder sends it under the JURY-RL template and a chat template; the bare
# statement is `problem`
BARE = "Compute 37+45*(2-9)."
CHAT = (f"<|im_start|>user\n{BARE} Let's think step by step and output the final answer within \\boxed{{}}."
        "<|im_end|>\n<|im_start|>assistant\n")


def test_the_gate_and_tinyv_are_shown_the_bare_problem_not_the_template_around_it():
    """The proof gate formalises the problem (JURY-RL Algorithm 1: verify(x, a)) and TinyV's
    QUESTION is the problem: both read task.problem. Shown the prompt, the arithmetic gate read
    the chat markup and the instruction and proved nothing, so every group fell back to ResZero."""
    w = make_worker(VerifierConfig(reward="jury", fallback="reszero", reszero_c=0.1), "v1", gate=ArithGate)
    try:
        sg = w.score(_group(["\\boxed{-278}"] * 5 + ["\\boxed{2}"] * 3, label=None, prompt=CHAT, problem=BARE))
        assert sg.gate == "proved" and sg.rewards.tolist() == [1] * 5 + [0] * 3
        # a task without a recorded statement (a caller that set only the prompt) is read as its prompt
        sg = w.score(_group(["\\boxed{-278}"] * 5 + ["\\boxed{2}"] * 3, label=None, prompt=BARE + "\n"))
        assert sg.gate == "proved"
    finally:
        w.stop()
    llm = _ScriptedTinyV()
    w = make_worker(VerifierConfig(reward="tinyv"), "v2", llm=llm)
    try:
        w.score(_group(["\\boxed{-278}", "\\boxed{-279}"], label="-278", prompt=CHAT, problem=BARE))
        assert len(llm.prompts) == 1 and BARE in llm.prompts[0]
        assert "<|im_start|>" not in llm.prompts[0] and "step by step" not in llm.prompts[0]
    finally:
        w.stop()


class ExactChecker:
    """Another domain behind the label-checker protocol (verifiers/checker.py): exact text."""

    name = "exact"

    def preflight(self):
        return 0.0

    def extract(self, text):
        return text.strip() or None

    def unread(self, text):
        return None

    def keys(self, answers):
        return list(answers)

    def check(self, answers, label, texts):
        return [Verdict("no_answer" if a is None else "correct" if a == label else "incorrect", self.name, 0.0)
                for a in answers]

    def stats(self):
        return {"verifier/exact_checks": 1.0}

    def close(self):
        pass


def test_a_new_checker_plugs_in_without_touching_the_worker():
    cfg = VerifierConfig(reward="majority_vote")
    w = VerifierWorker(cfg, "vx", checker=ExactChecker, scheme=SchemeRecipe(cfg))
    try:
        sg = w.score(_group(["print(1)", "print(1)", "print(2)", " "], label="print(2)"))
        assert [v.kind for v in sg.verdicts] == ["incorrect", "incorrect", "correct", "no_answer"]
        assert {v.verifier for v in sg.verdicts} == {"exact"}
        assert sg.rewards.tolist() == [1.0, 1.0, 0.0, 0.0] and sg.majority_answer == "print(1)"
        assert w.stats()["verifier/exact_checks"] == 1.0
    finally:
        w.stop()
