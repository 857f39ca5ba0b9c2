"""The label is a shadow metric only: a reward scheme that does not read labels cannot see one, and
nothing the label check adds to a scored group moves the learner's advantages.

Proved three ways: every such scheme is built Blind (it is handed groups without a label, whatever
its code would read); through the real worker, the same samples earn the same rewards whether the
label is right, wrong or absent, while the shadow facts (verdicts, pass rate, the majority's verdict)
follow the label; and the learner's collate gives the same advantages whatever those facts say.
"""
import typing
from dataclasses import replace

import numpy as np
import pytest

from jury.cluster.recipes import SchemeRecipe
from jury.learner.grpo import collate
from jury.protocol.config import LearnerConfig, VerifierConfig
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, Verdict
from jury.verifiers.arith_gate import ArithGate
from jury.verifiers.rewards import GroupView, RewardResult
from jury.verifiers.schemes import READS_LABEL, Blind, make_scheme
from jury.verifiers.worker import VerifierWorker

from test_verifier_worker import ExactChecker  # a label checker without a process pool

REWARDS = typing.get_args(typing.get_type_hints(VerifierConfig)["reward"])
LABEL_FREE = sorted(set(REWARDS) - READS_LABEL)


class Peeker:
    """A scheme that pays whatever the label says, if it can see one."""

    def __init__(self):
        self.seen = []

    def score(self, group, view):
        self.seen.append((group.task.label, view.verdicts))
        paid = [float(v == "correct") for v in view.verdicts] if view.verdicts else [0.0] * len(view.answer_keys)
        return RewardResult(paid, None, 0.0, 0)


def _group(answers, label):
    task = PromptTask(task_id="t0", index=0, prompt="Compute 5+7.\n", label=label, source="test", problem="Compute 5+7.")
    samples = [Sample(np.arange(3, dtype=np.int32), np.full(3, -0.5, np.float32), a, "stop") for a in answers]
    return RolloutGroup(task, np.arange(4, dtype=np.int32), samples, 0, 0, "g0", 0.1)


def test_only_the_label_reading_schemes_see_labels():
    assert READS_LABEL == {"ground_truth", "tinyv"}  # README's "reads the label" column
    assert "jury" in LABEL_FREE and "majority_vote" in LABEL_FREE and "self_certainty" in LABEL_FREE


@pytest.mark.parametrize("reward", LABEL_FREE)
def test_every_label_free_scheme_is_built_blind(reward):
    llm = object()  # the LLM schemes' client: built, never asked here
    scheme = make_scheme(VerifierConfig(reward=reward), llm=llm, checker=ExactChecker())
    assert isinstance(scheme, Blind), reward


def test_a_blind_scheme_sees_no_label_whatever_its_code_reads():
    peeker = Peeker()
    group = _group(["12", "13"], label="12")
    view = GroupView(answer_keys=["12", "13"], verdicts=["correct", "incorrect"], problem="Compute 5+7.")
    assert Blind(peeker).score(group, view).rewards == [0.0, 0.0]
    assert peeker.seen == [(None, None)]
    assert group.task.label == "12"  # the worker's own group keeps its label, for the shadow metrics
    assert peeker.score(group, view).rewards == [1.0, 0.0]  # what it would have paid with the label


@pytest.mark.parametrize("reward", ["jury", "majority_vote", "self_certainty", "entropy"])
def test_the_same_samples_earn_the_same_rewards_whatever_the_label(reward):
    cfg = VerifierConfig(reward=reward)
    worker = VerifierWorker(cfg, "v0", checker=ExactChecker, scheme=SchemeRecipe(cfg, gate=ArithGate))
    try:
        answers = ["12", "12", "13", "13", "13", " "]
        right, wrong, none = (worker.score(_group(answers, label)) for label in ("12", "13", None))
    finally:
        worker.stop()
    assert right.rewards.tolist() == wrong.rewards.tolist() == none.rewards.tolist()
    # ... while the shadow facts follow the label: the majority (13, half the votes) is wrong, then right
    assert [v.kind for v in right.verdicts] == ["correct"] * 2 + ["incorrect"] * 3 + ["no_answer"]
    assert (right.pass_rate, wrong.pass_rate) == (2 / 6, 3 / 6) and np.isnan(none.pass_rate)
    assert (right.majority_verdict, wrong.majority_verdict, none.majority_verdict) == ("incorrect", "correct", None)


def test_the_learner_reads_no_shadow_fact():
    cfg = VerifierConfig(reward="majority_vote")
    worker = VerifierWorker(cfg, "v0", checker=ExactChecker, scheme=SchemeRecipe(cfg))
    try:
        scored = worker.score(_group(["12", "12", "13", " "], "12"))
    finally:
        worker.stop()
    flipped = replace(scored, verdicts=[Verdict("incorrect" if v.kind == "correct" else "correct", "x", 0.0)
                                        for v in scored.verdicts],
                      pass_rate=1 - scored.pass_rate, majority_verdict="incorrect")
    for advantage in ("grpo", "drgrpo", "rloo"):
        lc = LearnerConfig(advantage=advantage)
        a, b = collate([scored], lc, pad_id=0), collate([flipped], lc, pad_id=0)
        assert a.advantages.tolist() == b.advantages.tolist() and a.rewards.tolist() == b.rewards.tolist()
