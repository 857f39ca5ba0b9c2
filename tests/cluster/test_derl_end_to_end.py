"""DeRL through every real process: feeder mix, vLLM generator (tiny model), verifier worker
with the DeRL reward, DeepSpeed learner, plans written from the learner's correct CoTs.

The planner and judge are a double of the LLMServer actor: the tiny model was trained only
on `Compute a+b.` and never writes a `$$$...$$$` plan or a verdict, so with it every plan
would be refused and no diversifying prompt would ever be made. The double speaks
LLMServer's exact Ray interface through the real RayLLMClient, writes a fixed clean plan,
judges by a rule on the solution text, and logs every request, so the test can recompute
what the run's metrics must say."""
import json
import re

import pytest

from jury.protocol.config_load import load_config
from jury.cluster.metrics import read_metrics
from jury.verifiers.math.verify import check, extract_answer

pytestmark = pytest.mark.slow

PLAN = "Combine the quantities by counting on from the larger one."
# Two of the sums the tiny model answers most often (on the model built here, 64 samples at
# temperature 1: 0+3 30/64 and 1+2 29/64, against 12/64 and 10/64 for 2+3 and 4+4, which this test
# used before and on which one CI run's model answered 2 of 64 in four steps): a plan needs a correct
# chain of thought first, and the check of what plans do needs one early
PROBLEMS = {"Compute 1+2.": "3", "Compute 0+3.": "3"}


def scripted_server(log_path: str):
    """An LLMServer double (defined in a function so that Ray ships the class by value)."""

    class ScriptedLLMServer:
        def __init__(self, model_path, *, max_model_len=4096, seed=0, **_):
            self.log_path = log_path

        def generate(self, prompts, n=1, temperature=0.0, max_tokens=512):
            outs = []
            with open(self.log_path, "a", encoding="utf-8") as log:
                for p in prompts:
                    if "Chain-of-thought solution:" in p:
                        role, reply = "plan", f"$$${PLAN}$$$"
                    else:  # the judge: "similar" for solutions of odd length, a rule the test can replay
                        solution = p.split("Student solution: ", 1)[1].rsplit("\n\nOutput *****True", 1)[0]
                        role, reply = "judge", "*****True*****" if len(solution) % 2 else "*****False*****"
                    log.write(json.dumps({"role": role, "prompt": p, "reply": reply, "n": n}) + "\n")
                    outs.append([(reply, 3)] * n)
            return outs

        def stop(self):
            pass

    return ScriptedLLMServer


def test_derl_run_mixes_plans_from_correct_cots_and_scores_with_the_judge(tiny_model_path, tmp_path, monkeypatch):
    import jury.actors.llm_server as llm_server
    from jury.cluster.diversify import Diversifier
    from jury.cluster.driver import train

    log = tmp_path / "llm.jsonl"
    monkeypatch.setattr(llm_server, "LLMServer", scripted_server(str(log)))
    # Plans are written on a background thread and taken in at the first step after they are
    # done; on a slow machine that step can come after the last admission. The test waits for
    # the request at each step, so what it checks does not depend on the thread's timing.
    # A plan needs a correct chain of thought first: in one CI run the tiny model wrote none of 48
    # until step 3 on other problems, and with 5 steps no batch was admitted after its plans. Now
    # each step samples 32 (16 a problem) of sums it answers more often, over 7 steps.
    take_plans = Diversifier._take_plans

    def take_plans_when_done(self):
        if self.request is not None:
            self.request.join(timeout=120)
        take_plans(self)

    monkeypatch.setattr(Diversifier, "_take_plans", take_plans_when_done)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"problem": p, "answer": a}) + "\n" for p, a in PROBLEMS.items()))
    run = tmp_path / "run"
    cfg = load_config(None, [
        f"run_dir={run}", f"dataset={data}", "steps=7", "batch_groups=2", "max_staleness=0",
        "generator.group_size=16", "max_model_len=448", "max_prompt_tokens=400", "progress=false",
        "verifier.reward=ground_truth", "derl.enabled=true", "derl.ratio=[1, 1]"])
    summary = train(cfg)
    rows = read_metrics(run)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    plans = [c for c in calls if c["role"] == "plan"]
    judged = [c for c in calls if c["role"] == "judge"]

    assert [r["step"] for r in rows] == list(range(7))
    for key in ("derl/diversifying_prompt_share", "derl/judge_unparsable", "derl/plans_written",
                "derl/plans_refused", "derl/llm_calls", "derl/diverse_correct_total"):
        assert all(key in r for r in rows), key
    # batches 0 and 1 were admitted before any plan was in; later ones diversify at 1:1
    assert [r["derl/diversifying_prompt_share"] for r in rows[:2]] == [0.0, 0.0]
    assert sum(r["derl/diversifying_prompt_share"] for r in rows[2:]) > 0
    # plans were written from correct chains of thought of original prompts, each problem once
    assert 1 <= len(plans) <= len(PROBLEMS) and sum(r["derl/plans_written"] for r in rows) == len(plans)
    for c in plans:
        problem = c["prompt"].split("Problem:\n", 1)[1].split("\nChain-of-thought solution:", 1)[0]
        cot = c["prompt"].split("Chain-of-thought solution:\n", 1)[1]
        assert check(extract_answer(cot), PROBLEMS[problem]) == "correct", (problem, cot)
    # every diversifying sample went to the judge (judge_all), with the plan its prompt showed
    samples = sum(r["derl/diversifying_samples"] for r in rows)
    assert samples == len(judged) > 0 and samples % cfg.generator.group_size == 0
    assert all(f"Proof plan: {PLAN}" in c["prompt"] for c in judged)
    assert sum(r["derl/llm_calls"] for r in rows) == sum(c["n"] for c in calls)
    # the reward: 1 exactly for samples that are correct and judged dissimilar
    expected = 0
    for c in judged:
        problem = re.search(r"Problem statement: (.*)\n", c["prompt"]).group(1)
        solution = c["prompt"].split("Student solution: ", 1)[1].rsplit("\n\nOutput *****True", 1)[0]
        expected += c["reply"] == "*****False*****" and check(extract_answer(solution), PROBLEMS[problem]) == "correct"
    assert rows[-1]["derl/diverse_correct_total"] == expected
    assert all(r["derl/judge_unparsable"] == 0 and r["derl/judge_failed"] == 0 for r in rows)
    assert "verifier0/verdict_error" not in summary
