"""DeRL wired into training, piece by piece without Ray: the config section, the message
fields, the verifier's reward, the learner's rows, and the driver's mix and plan store, with
scripted LLM clients that honour LLMClient."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import yaml

from jury.data.problems import PROMPT_SUFFIX, Problem
from jury.cluster.diversify import Diversifier, problem_id
from jury.cluster.feeder import Feeder
from jury.protocol.config import ConfigError, DerlConfig, RunConfig, VerifierConfig
from jury.protocol.config_load import load_config, to_dict
from jury.protocol.messages import (CorrectSample, DecodeError, LedgerRow, PromptTask, RolloutGroup, Sample,
                                    ScoredGroup, StepResult, Verdict, decode, encode)
from jury.protocol.transport import Receiver
from jury.verifiers.arith_gate import ArithOutcome
from jury.verifiers.derl.reward import RandomReward
from jury.verifiers.derl.scorer import DerlScorer
from jury.verifiers.llm import Completion
from jury.cluster.recipes import CheckerRecipe, SchemeRecipe
from jury.verifiers.worker import VerifierWorker

PLAN = "Combine the quantities by counting on from the larger one."  # no number words: they leak


class Scripted:
    """Plans for planner prompts, verdicts for judge prompts; records what it was asked."""

    def __init__(self, plan=f"$$${PLAN}$$$", similar=lambda solution: False, fail=False):
        self.plan, self.similar, self.fail = plan, similar, fail
        self.plan_prompts, self.judge_prompts = [], []
        self.lock = threading.Lock()

    def generate(self, prompts, *, n=1, temperature=0.0, max_tokens=512):
        if self.fail:
            raise RuntimeError("engine down")
        outs = []
        for p in prompts:
            with self.lock:
                if "Chain-of-thought solution:" in p:
                    self.plan_prompts.append(p)
                    outs.append([Completion(self.plan, 7) for _ in range(n)])
                else:
                    self.judge_prompts.append(p)
                    solution = p.split("Student solution: ", 1)[1].split("\n\nOutput", 1)[0]
                    verdict = {True: "*****True*****", False: "*****False*****", None: "no idea"}
                    outs.append([Completion(verdict[self.similar(solution)], 3) for _ in range(n)])
        return outs


def _task(kind="original", index=0, **kw):
    return PromptTask(task_id=f"t{index}", index=index, prompt="Compute 5+7.\n", label="12", source="test",
                      kind=kind, **kw)


# ---------------------------------------------------------------- config and messages
def test_derl_section_loads_from_yaml_and_round_trips(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("derl:\n  enabled: true\n  ratio: [2, 1]\n  forbidden_tactics: [simp, ring]\n")
    cfg = load_config(str(path), ["derl.reward=random_partial"])
    assert cfg.derl == DerlConfig(enabled=True, ratio=(2, 1), forbidden_tactics=("simp", "ring"),
                                  reward="random_partial")
    # what train() writes as the run's config.yaml must load back to the same config
    written = tmp_path / "config.yaml"
    written.write_text(yaml.safe_dump(to_dict(cfg)))
    assert load_config(str(written)) == cfg
    assert load_config(None) == RunConfig() and not RunConfig().derl.enabled


@pytest.mark.parametrize("override, field", [
    ("derl.ratio=[1]", "derl.ratio"), ("derl.ratio=[1, x]", "derl.ratio[1]"), ("derl.ratio=3", "derl.ratio"),
    ("derl.reward=coin", "derl.reward"), ("derl.original_prompt=chat", "derl.original_prompt"),
    ("derl.plans_per_step=0", "plans_per_step"), ("derl.ratio=[0, 0]", "ratio"), ("derl.enabeld=true", "enabeld"),
])
def test_bad_derl_values_are_refused_naming_the_field(override, field):
    with pytest.raises(ConfigError, match=field.replace("[", r"\[")):
        load_config(None, [override])


def test_prompt_task_carries_problem_and_plan_strictly():
    task = _task("diversify", problem="Compute 5+7.", plan=PLAN)
    assert decode(encode(task)) == task
    assert decode(encode(_task())).plan is None
    frames = encode(_task("diversify", problem="Compute 5+7.", plan=PLAN))
    import msgpack

    head = msgpack.unpackb(frames[0])
    head["f"]["plan"] = 5
    with pytest.raises(DecodeError, match="plan"):
        decode([msgpack.packb(head)])


# ---------------------------------------------------------------- the verifier's reward
def test_judge_reward_needs_correct_and_dissimilar():
    # the judge calls a solution similar when it mentions counting on (the plan's idea)
    client = Scripted(similar=lambda s: True if "counting" in s else (None if "???" in s else False))
    scorer = DerlScorer(DerlConfig(), client, seed=1)
    texts = ["I split 12 as 10+2. \\boxed{12}", "counting on: \\boxed{12}", "\\boxed{13}", "??? \\boxed{12}"]
    correct = [True, True, False, True]
    task = _task("diversify", problem="Compute 5+7.", plan=PLAN)
    rewards, stats = scorer.rewards(task, texts, correct, [0.5] * 4)
    assert rewards == [1.0, 0.0, 0.0, 0.0]  # dissimilar+correct; similar; wrong; unparsable verdict
    assert stats == {"derl/diversifying_samples": 4.0, "derl/correct_samples": 3.0, "derl/judged_samples": 4.0, "derl/dissimilar_samples": 2.0,
                     "derl/diverse_correct_samples": 1.0, "derl/judge_unparsable": 1.0, "derl/rewarded_samples": 1.0}
    assert len(client.judge_prompts) == 4
    assert all("Problem statement: Compute 5+7." in p and f"Proof plan: {PLAN}" in p for p in client.judge_prompts)
    # an original prompt keeps the run's scheme and asks nobody
    assert scorer.rewards(_task(), texts, correct, [0.5, 0, 1, 0]) == ([0.5, 0, 1, 0], {})
    assert len(client.judge_prompts) == 4


def test_judge_only_asked_about_correct_samples_without_judge_all():
    client = Scripted()
    scorer = DerlScorer(DerlConfig(judge_all=False), client, seed=1)
    task = _task("diversify", problem="Compute 5+7.", plan=PLAN)
    rewards, stats = scorer.rewards(task, ["a", "b", "c"], [False, True, False], [0.0] * 3)
    assert rewards == [0.0, 1.0, 0.0] and stats["derl/judged_samples"] == 1.0 and len(client.judge_prompts) == 1


def test_a_failing_judge_gives_zero_and_is_counted():
    scorer = DerlScorer(DerlConfig(), Scripted(fail=True), seed=1)
    task = _task("diversify", problem="Compute 5+7.", plan=PLAN)
    rewards, stats = scorer.rewards(task, ["\\boxed{12}"] * 2, [True, True], [1.0, 1.0])
    assert rewards == [0.0, 0.0] and stats["derl/judge_failed"] == 2.0


def test_random_controls_are_the_seeded_coin():
    div = _task("diversify", problem="Compute 5+7.", plan=PLAN)
    coin = RandomReward(7)
    expected = coin.rewards(8) + coin.rewards(8)
    partial = DerlScorer(DerlConfig(reward="random_partial"), None, seed=7)
    assert partial.rewards(_task(), ["x"] * 8, [True] * 8, [1.0] * 8)[0] == [1.0] * 8  # originals: the scheme
    got, stats = partial.rewards(div, ["x"] * 8, [True] * 8, [1.0] * 8)
    assert got == expected[:8] and stats["derl/rewarded_samples"] == sum(expected[:8]) and "derl/judged_samples" not in stats
    every = DerlScorer(DerlConfig(reward="random_all"), None, seed=7)
    assert every.rewards(_task(), ["x"] * 8, [True] * 8, [1.0] * 8)[0] == expected[:8]
    assert every.rewards(div, ["x"] * 8, [False] * 8, [0.0] * 8)[0] == expected[8:]
    assert 0 < sum(expected) < 16  # a coin, not a constant


def test_scorer_refuses_what_it_cannot_score():
    with pytest.raises(ValueError, match="judge"):
        DerlScorer(DerlConfig(), None, seed=0)
    scorer = DerlScorer(DerlConfig(), Scripted(), seed=0)
    with pytest.raises(ValueError, match="no plan"):
        scorer.rewards(_task("diversify"), ["x"], [True], [1.0])
    with pytest.raises(ValueError, match="unknown kind"):
        scorer.rewards(_task("lean"), ["x"], [True], [1.0])


def test_worker_scores_diversifying_groups_with_the_label_check():
    client = Scripted(similar=lambda s: "counting" in s)
    cfg = VerifierConfig(reward="majority_vote")
    w = VerifierWorker(cfg, "v0", checker=CheckerRecipe(cfg),
                       scheme=SchemeRecipe(cfg, derl=DerlScorer(DerlConfig(), client, seed=0)))
    try:
        texts = ["\\boxed{12}", "counting on \\boxed{12}", "\\boxed{13}", "\\boxed{13}", "\\boxed{13}"]
        samples = [Sample(np.arange(3, dtype=np.int32), np.full(3, -0.5, np.float32), t, "stop") for t in texts]
        task = _task("diversify", problem="Compute 5+7.", plan=PLAN)
        sg = w.score(RolloutGroup(task, np.arange(4, dtype=np.int32), samples, 0, 0, "g0", 0.1))
        # majority vote alone would reward the three wrong 13s; DeRL reads the label and the judge
        assert sg.rewards.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
        assert sg.counts["derl/diverse_correct_samples"] == 1.0 and sg.counts["derl/correct_samples"] == 2.0
        assert sg.pass_rate == 0.4
        orig = w.score(RolloutGroup(_task(index=1), np.arange(4, dtype=np.int32), samples, 0, 0, "g0", 0.1))
        assert orig.rewards.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]  # the run's scheme on originals
        assert not any(k.startswith("derl/") for k in orig.counts)
    finally:
        w.stop()


def test_diversifying_groups_skip_the_runs_scheme_and_its_gate():
    asked = []

    class Gate:
        def verify(self, problem, answer):
            asked.append(answer)
            return ArithOutcome(proved=True, refuted=False)

        def close(self):
            pass

    cfg = VerifierConfig(reward="jury")
    w = VerifierWorker(cfg, "v0", checker=CheckerRecipe(cfg),
                       scheme=SchemeRecipe(cfg, gate=Gate, derl=DerlScorer(DerlConfig(), Scripted(), seed=0)))
    try:
        texts = ["\\boxed{12}", "\\boxed{13}", "\\boxed{13}"]
        samples = [Sample(np.arange(3, dtype=np.int32), np.full(3, -0.5, np.float32), t, "stop") for t in texts]
        div = _task("diversify", problem="Compute 5+7.", plan=PLAN)
        sg = w.score(RolloutGroup(div, np.arange(4, dtype=np.int32), samples, 0, 0, "g0", 0.1))
        assert asked == [] and sg.gate is None and sg.scheme == "derl"
        assert sg.rewards.tolist() == [1.0, 0.0, 0.0] and sg.vote_share == pytest.approx(2 / 3)
        sg = w.score(RolloutGroup(_task(index=1), np.arange(4, dtype=np.int32), samples, 0, 0, "g0", 0.1))
        assert asked == ["13"] and sg.gate == "proved" and sg.scheme == "jury"  # originals: the run's scheme
    finally:
        w.stop()


# ---------------------------------------------------------------- the learner's rows
def test_learner_result_carries_first_correct_samples_and_summed_counts():
    from jury.learner.ledger import batch_result

    def scored(kind, index, texts, kinds, counts):
        samples = [Sample(np.zeros(1, np.int32), np.zeros(1, np.float32), t, "stop", answer=t[-3:-1])
                   for t in texts]
        group = RolloutGroup(_task(kind, index, problem="p", plan="q") if kind == "diversify" else _task(kind, index),
                             np.zeros(1, np.int32), samples, 0, 0, "g0", 0.1)
        return ScoredGroup(group, [Verdict(k, "math", 0.0) for k in kinds], np.zeros(len(texts), np.float32),
                           "ground_truth", None, 0.0, None, 0, 0.0, counts=counts)

    result = batch_result([
        scored("original", 0, ["wrong [13]", "first [12]", "second [12]"], ["incorrect", "correct", "correct"], {}),
        scored("original", 1, ["x [1]"], ["incorrect"], {}),
        scored("diversify", 2, ["y [12]"], ["correct"], {"derl/diversifying_samples": 1.0}),
        scored("diversify", 3, ["z [12]", "w [12]"], ["incorrect", "incorrect"], {"derl/diversifying_samples": 2.0}),
    ], step=0, t_train=1.0, arrived={})
    assert result.correct == [CorrectSample(0, "original", "first [12]", "12"),
                              CorrectSample(2, "diversify", "y [12]", "12")]
    assert result.metrics["derl/diversifying_samples"] == 3.0
    assert [row.kind for row in result.ledger] == ["original", "original", "diversify", "diversify"]


# ---------------------------------------------------------------- the driver's mix and plan store
P = Problem("Compute 5+7.", "12", "test")
Q = Problem("Compute 3+4.", "7", "test")


def _row(index, kind="original", cot=None, answer=None, **counts):
    """A trained group as the learner reports it: its ledger kind, first correct sample, counters."""
    return index, kind, cot, answer, counts


def _result(rows) -> StepResult:
    """The learner's StepResult for these trained groups (counters summed over the batch)."""
    metrics: dict[str, float] = {}
    for *_, counts in rows:
        for k, v in counts.items():
            metrics[k] = metrics.get(k, 0.0) + v
    ledger = [LedgerRow(task_id=f"t{i}", index=i, step=0, kind=kind, source="test", admitted_version=0,
                        version_start=0, version_end=0, staleness=0, generator="g0", verifier="v0", length=1.0,
                        reward=0.0, pass_rate=0.0, majority_answer=None, error=None, generate_s=0.0,
                        verify_wait_s=0.0, verify_s=0.0, learner_wait_s=0.0, verify_share=0.0, arrived=0.0,
                        trained=0.0, tokens_by_version={}) for i, kind, *_ in rows]
    correct = [CorrectSample(i, kind, cot, answer) for i, kind, cot, answer, _ in rows if cot is not None]
    return StepResult(0, metrics=metrics, ledger=ledger, correct=correct)


def _wait_for_plans(d: Diversifier, timeout_s: float) -> bool:
    """Until the plan request in flight (if any) is finished (a training run never waits)."""
    if d.request is not None:
        d.request.join(timeout_s)
    return d.request is None or not d.request.is_alive()


def _admit(d, problem, index):
    return d.mix(PromptTask(f"t{index}", index, problem.problem + PROMPT_SUFFIX, problem.answer, problem.source),
                 problem)


def test_plans_come_from_correct_cots_and_turn_tasks_diversifying():
    client = Scripted()
    d = Diversifier(DerlConfig(ratio=(0, 1)), client)  # every slot diversifies once a plan exists
    first = [_admit(d, P, 0), _admit(d, Q, 1)]
    assert [t.kind for t in first] == ["original", "original"]  # cold store: no plans yet
    assert first[0].prompt == P.problem + PROMPT_SUFFIX  # original_prompt=dataset keeps the run's prompt
    m = d.after_step(_result([_row(0, cot="5+7 is 12. \\boxed{12}", answer="12"), _row(1)]))  # Q had no correct sample
    assert m["derl/diversifying_prompt_share"] == 0.0 and m["derl/llm_calls"] == 2  # 1 CoT x plan_attempts 2
    assert _wait_for_plans(d, 10)
    assert len(client.plan_prompts) == 1 and "5+7 is 12. \\boxed{12}" in client.plan_prompts[0]
    t = _admit(d, P, 2)  # the plan is not in yet: taken in at the next step
    assert t.kind == "original"
    m = d.after_step(_result([_row(2)]))
    assert m["derl/plans_written"] == 1 and m["derl/plans_refused"] == 0 and m["derl/plan_tokens"] == 14  # 2 x 7
    div, orig = _admit(d, P, 3), _admit(d, Q, 4)
    assert (div.kind, div.plan, div.problem, div.label) == ("diversify", PLAN, P.problem, "12")
    assert div.prompt.startswith("Compute 5+7.\nProof plan starts: " + PLAN + " Proof plan ends.")
    assert orig.kind == "original" and orig.plan is None  # Q has no plan: it cannot diversify
    m = d.after_step(_result([_row(3, "diversify", **{
        "derl/diversifying_samples": 4.0, "derl/correct_samples": 3.0, "derl/judged_samples": 4.0,
        "derl/dissimilar_samples": 2.0, "derl/diverse_correct_samples": 1.0, "derl/judge_unparsable": 1.0,
        "derl/rewarded_samples": 1.0}), _row(4)]))
    assert m["derl/diversifying_prompt_share"] == 0.5
    assert m["derl/diverse_correct_share"] == 0.25 and m["derl/correct_share"] == 0.75
    assert m["derl/judge_unparsable"] == 1.0 and m["derl/llm_calls"] == 4.0  # the judge's 4, no plan request
    assert m["derl/diverse_correct_total"] == 1.0 and m["derl/diversifying_samples"] == 4.0
    assert d.problems == {}  # every admitted task was trained, nothing kept


def test_leaky_plans_are_refused_and_the_cot_forgotten():
    client = Scripted(plan="$$$Add them to get 12.$$$")
    d = Diversifier(DerlConfig(ratio=(0, 1)), client)
    _admit(d, P, 0)
    d.after_step(_result([_row(0, cot="\\boxed{12}", answer="12")]))
    _wait_for_plans(d, 10)
    m = d.after_step(_result([]))
    assert m["derl/plans_refused"] == 1 and m["derl/plans_written"] == 0 and m["derl/plans_pending"] == 0
    assert _admit(d, P, 1).kind == "original"


def test_a_failing_planner_is_counted_and_its_cots_retried():
    client = Scripted(fail=True)
    d = Diversifier(DerlConfig(), client)
    _admit(d, P, 0)
    d.after_step(_result([_row(0, cot="\\boxed{12}", answer="12")]))
    _wait_for_plans(d, 10)
    m = d.after_step(_result([]))
    assert m["derl/plans_failed"] == 1 and m["derl/llm_calls"] == 2  # the CoT went out again
    assert m["derl/plans_pending"] == 1


def test_plan_requests_are_bounded_and_one_at_a_time():
    gate = threading.Event()

    class Slow(Scripted):
        def generate(self, prompts, **kw):
            gate.wait(10)
            return super().generate(prompts, **kw)

    client = Slow()
    d = Diversifier(DerlConfig(plans_per_step=2), client)
    problems = [Problem(f"Compute {i}+1.", str(i + 1), "test") for i in range(5)]
    for i, p in enumerate(problems):
        _admit(d, p, i)
    m = d.after_step(_result([_row(i, cot=f"\\boxed{{{i + 1}}}", answer=str(i + 1)) for i in range(5)]))
    assert m["derl/llm_calls"] == 4  # 2 CoTs x 2 attempts; the step did not wait for them
    assert d.after_step(_result([]))["derl/llm_calls"] == 0  # still in flight: no second request
    gate.set()
    _wait_for_plans(d, 10)
    m = d.after_step(_result([]))
    assert m["derl/plans_written"] == 2 and m["derl/llm_calls"] == 4  # the next two went out
    _wait_for_plans(d, 10)
    m = d.after_step(_result([]))
    assert m["derl/plans_written"] == 2 and m["derl/llm_calls"] == 2  # and then the last one
    _wait_for_plans(d, 10)
    assert d.after_step(_result([]))["derl/plans_written"] == 1
    assert len(client.plan_prompts) == 5  # each CoT asked about once


def test_too_long_prompts_stay_original_and_paper_format_renders():
    tok = lambda text: {"input_ids": list(text)}  # noqa: E731  one token per character
    d = Diversifier(DerlConfig(ratio=(0, 1), original_prompt="paper"), Scripted(), tokenizer=tok,
                    max_prompt_tokens=150)
    t = _admit(d, P, 0)
    assert t.prompt.startswith("Compute 5+7.\nsolve the problem step by step")  # §3.1's original format
    d.after_step(_result([_row(0, cot="\\boxed{12}", answer="12")]))
    _wait_for_plans(d, 10)
    d.after_step(_result([]))
    t = _admit(d, P, 1)  # the diversifying prompt is over 300 characters: over budget
    assert t.kind == "original" and t.prompt == P.problem + PROMPT_SUFFIX
    assert d.after_step(_result([_row(1)]))["derl/prompt_too_long"] == 1


def test_a_prompt_is_measured_as_the_engine_gets_it():
    """The chat template and system prompt the feeder adds after the mix count toward
    max_prompt_tokens: measured bare, a diversifying prompt over budget once wrapped reached the
    engine (outside audit). The pipeline hands the feeder's PromptFormat.wrap in."""
    tok = lambda text: {"input_ids": list(text)}  # noqa: E731  one token per character
    paper = _admit(Diversifier(DerlConfig(ratio=(0, 1), original_prompt="paper"), Scripted()), P, 0).prompt
    bare = Diversifier(DerlConfig(ratio=(0, 1), original_prompt="paper"), Scripted(), tokenizer=tok,
                       max_prompt_tokens=len(paper) + 10)
    assert _admit(bare, P, 0).prompt == paper  # it fits bare
    d = Diversifier(DerlConfig(ratio=(0, 1), original_prompt="paper"), Scripted(), tokenizer=tok,
                    max_prompt_tokens=len(paper) + 10, wrap=lambda text: "<|system|>" * 5 + text)
    t = _admit(d, P, 0)
    assert t.prompt == P.problem + PROMPT_SUFFIX  # not wrapped: it stays as the feeder wrote it
    assert d.after_step(_result([_row(0)]))["derl/prompt_too_long"] == 1


def test_feeder_mixes_through_the_diversifier_and_sends_what_it_keeps():
    d = Diversifier(DerlConfig(ratio=(1, 1)), Scripted())
    d.mixer.record_correct(problem_id(P), P.problem, "\\boxed{12}", "12")
    d.mixer.set_plan(problem_id(P), PLAN)
    data_problem = P
    feeder = Feeder("synthetic", 0, batch_groups=4, window=1, host="127.0.0.1", mixer=d)
    feeder.problems = iter([data_problem] * 8)
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    try:
        assert feeder.admit(0, stop_at=8) == 4 and feeder.admit(1, stop_at=8) == 4
        got = [recv.get(timeout=5) for _ in range(8)]
        assert [t.kind for t in got] == [feeder.pending[t.index].kind for t in got]
        assert sum(t.kind == "diversify" for t in got) == 4  # ratio 1:1, every block complete
        assert all(t.plan == PLAN for t in got if t.kind == "diversify")
        assert sorted(d.problems) == list(range(8))
    finally:
        recv.close()
        feeder.close()
