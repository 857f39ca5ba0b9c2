"""`jury eval`: the pass@k estimator and the summary by hand-worked numbers, grading as the
verifier grades, the checkpoint's tokenizer and settings from its run, and one real vLLM run."""
import argparse
import json
import math
import subprocess
import sys
import time
from fractions import Fraction

import pytest
import yaml

from jury.experiments import evaluate as ev
from jury.data.problems import Problem


def test_pass_at_k_hand_worked():
    # n=4, c=1: pass@1 = 1/4; pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6; pass@4 = 1 (every draw holds it)
    assert ev.pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert ev.pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert ev.pass_at_k(4, 1, 4) == 1.0
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert ev.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # n=10, c=3, k=5: 1 - C(7,5)/C(10,5) = 1 - 21/252 = 11/12
    assert ev.pass_at_k(10, 3, 5) == pytest.approx(11 / 12)
    assert ev.pass_at_k(8, 0, 8) == 0.0
    assert ev.pass_at_k(8, 8, 1) == 1.0


def test_pass_at_k_is_stable_where_binomials_are_huge():
    # C(2000, 500) has 487 digits, past a float's range; the product stays within 1e-12 of exact
    n, c, k = 2000, 3, 500
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert ev.pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)
    with pytest.raises(OverflowError):
        float(math.comb(n - c, k)) / float(math.comb(n, k))


@pytest.mark.parametrize("n,c,k", [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match=f"n={n}"):
        ev.pass_at_k(n, c, k)


def _result(correct, distinct, n=4):
    verdicts = ["correct"] * correct + ["incorrect"] * (n - correct)
    return ev.ProblemResult("p", "1", [None] * n, verdicts, correct, distinct)


def test_summarise_hand_worked():
    # c = 0, 1, 4 of n = 4:  pass@1 = (0 + 1/4 + 1) / 3,  pass@2 = (0 + 1/2 + 1) / 3,  pass@4 = (0 + 1 + 1) / 3
    s = ev.summarise([_result(0, 1), _result(1, 2), _result(4, 3)], [1, 2, 4])
    assert s["problems"] == 3 and s["samples_per_problem"] == 4
    assert s["pass@1"] == pytest.approx(1.25 / 3)
    assert s["pass@2"] == pytest.approx(1.5 / 3)
    assert s["pass@4"] == pytest.approx(2 / 3)
    assert s["distinct_answers"] == pytest.approx(2.0) and s["distinct_answers_max"] == 3
    assert s["verdicts"] == {"incorrect": 7, "correct": 5}


def test_summarise_refuses_uneven_or_empty_results():
    with pytest.raises(ValueError, match=r"\[2, 4\]"):
        ev.summarise([_result(1, 1, n=4), _result(1, 1, n=2)], [1])
    with pytest.raises(ValueError, match="no problems"):
        ev.summarise([], [1])


def test_grade_judges_like_the_verifier_worker():
    problems = [Problem("Compute 2+3.", "5", "t"), Problem("Compute 1/2.", "\\frac{1}{2}", "t")]
    completions = [
        # 5 plainly, 5 as a decimal, 5 only a parser sees (goes through the check pool), wrong, no answer
        ["\\boxed{5}", "\\boxed{5.0}", "\\boxed{2+3}", "\\boxed{4}", "no final answer here"],
        ["\\boxed{0.5}", "\\boxed{2/4}", "\\boxed{\\sqrt{4}}", "\\boxed{2}", "\\boxed{3}"],
    ]
    first, second = ev.grade(problems, completions)
    assert first.answers == ["5", "5.0", "2+3", "4", None]
    assert first.verdicts == ["correct", "correct", "correct", "incorrect", "no_answer"]
    assert first.correct == 3
    assert first.distinct == 2  # 5 = 5.0 = 2+3, and 4; no answer is not an answer
    assert second.verdicts == ["correct", "correct", "incorrect", "incorrect", "incorrect"]
    assert second.distinct == 3  # 1/2 (0.5 = 2/4), 2 (sqrt 4 = 2), 3


def test_load_problems_synthetic_is_seeded_and_jsonl_keeps_file_order(tmp_path):
    a, b = ev.load_problems("synthetic", 3, 5), ev.load_problems("synthetic", 3, 5)
    assert a == b and len(a) == 5 and a != ev.load_problems("synthetic", 4, 5)
    path = tmp_path / "math.jsonl"
    path.write_text("".join(json.dumps({"problem": f"q{i}", "answer": i}) + "\n" for i in range(4)))
    assert [p.problem for p in ev.load_problems(str(path), 0, 0)] == ["q0", "q1", "q2", "q3"]
    assert [p.answer for p in ev.load_problems(str(path), 0, 2)] == ["0", "1"]
    with pytest.raises(ValueError, match="--count"):
        ev.load_problems("synthetic", 0, 0)


def test_a_runs_eval_file_field_names_and_prompt_format_are_used(tmp_path, tiny_model_path, monkeypatch, capsys):
    """`jury eval RUN/final`: the run's data.eval_path, read with its field names, asked with its
    template through the chat template, as the feeder asked in training."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jury.models.tiny import make_tiny_chat_model
    from jury.protocol.config import DataConfig

    evalf = tmp_path / "eval.parquet"
    pq.write_table(pa.table({"question": ["Compute 1+1.", "Compute 2+2."], "final": ["2", "4"]}), evalf)
    data = {"eval_path": str(evalf), "problem_key": "question", "answer_key": "final", "template": "boxed"}
    assert [p.answer for p in ev.load_problems(str(evalf), 0, 0, DataConfig(**data))] == ["2", "4"]
    final = _model_folder(tmp_path / "run" / "final", tokenizer=False)
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(
        {"model": str(make_tiny_chat_model(progress=False)), "generator": {"max_new_tokens": 8}, "data": data}))
    seen = {}

    def generate(model_path, tokenizer, prompts, sampling):
        seen["prompts"] = prompts
        return [["\\boxed{2}"] * 2, ["\\boxed{5}"] * 2], {}

    monkeypatch.setattr(ev, "generate_vllm", generate)
    args = _parse([str(final), "-n", "2", "--json", str(tmp_path / "r.json")])
    assert args.func(args) == 0
    assert seen["prompts"] == [f"<|user|>\n{q}\nPut your final answer in \\boxed{{}}.\n\n<|assistant|>\n"
                               for q in ("Compute 1+1.", "Compute 2+2.")]
    summary = json.loads((tmp_path / "r.json").read_text())["summary"]
    assert summary["dataset"]["name"] == str(evalf) and summary["pass@1"] == pytest.approx(0.5)
    # graded as the run graded (its verifier.unanchored; in-training eval/* does): "The result is 4."
    # states no answer under the default, its last expression under last_expression (outside audit)
    def unboxed(model_path, tokenizer, prompts, sampling):
        return [["So the answer is 2."] * 2, ["The result is 4."] * 2], {}

    monkeypatch.setattr(ev, "generate_vllm", unboxed)
    for unanchored in ("no_answer", "last_expression"):
        (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(
            {"model": str(make_tiny_chat_model(progress=False)), "generator": {"max_new_tokens": 8}, "data": data,
             "verifier": {"unanchored": unanchored}}))
        assert args.func(args) == 0
        summary = json.loads((tmp_path / "r.json").read_text())["summary"]
        assert summary["pass@1"] == pytest.approx({"no_answer": 0.5, "last_expression": 1.0}[unanchored]), unanchored
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump({"model": "tiny", "generator": {},
                                                                  "data": {"bad_rows": "sometimes"}}))
    assert args.func(args) == 2
    assert "jury eval: the run's config.yaml: data: bad_rows must be one of" in capsys.readouterr().err


def _model_folder(path, tokenizer=True):
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    if tokenizer:
        (path / "tokenizer.json").write_text("{}")
    return path


def test_a_run_checkpoint_takes_the_runs_tokenizer_and_sampling(tmp_path):
    base = _model_folder(tmp_path / "base")
    final = _model_folder(tmp_path / "run" / "final", tokenizer=False)  # the learner saves weights only
    run_cfg = {"model": str(base), "max_model_len": 256,
               "generator": {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 16, "dtype": "float32"}}
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(run_cfg))
    assert ev.resolve_model(str(final), None, ev.run_config_of(final)) == (str(final), str(base))
    assert ev.resolve_model(str(base), None, {}) == (str(base), str(base))
    with pytest.raises(FileNotFoundError, match="--tokenizer"):
        ev.resolve_model(str(final), None, {})
    with pytest.raises(FileNotFoundError, match="no config.json"):
        ev.resolve_model(str(tmp_path), None, {})
    # a config.yaml that is not a run's, or one beside a name that is not a folder, gives nothing
    (tmp_path / "config.yaml").write_text("generator: 3\n")
    assert ev.run_config_of(base) == {}
    assert ev.run_config_of(tmp_path / "run" / "tiny") == {}

    args = _parse([str(final), "-n", "4", "--top-p", "0.5"])
    s = ev.sampling_from(args, ev.run_config_of(final))
    assert s == ev.Sampling(n=4, temperature=0.7, top_p=0.5, max_new_tokens=16, max_model_len=256,
                            dtype="float32", seed=0)
    assert ev.sampling_from(args, {}) == ev.Sampling(n=4, top_p=0.5)


def _parse(argv):
    parser = argparse.ArgumentParser()
    ev.add_command(parser.add_subparsers(dest="command"))
    return parser.parse_args(["eval", *argv])


def test_evaluate_with_a_stand_in_engine(tmp_path):
    """The whole path but the engine: prompts as the feeder builds them, too-long ones left out."""
    model = _model_folder(tmp_path / "m")
    problems = [Problem("Compute 1+1.", "2", "t"), Problem("Compute 9*9.", "81", "t"),
                Problem("Compute 2+2.", "4", "t")]
    seen = {}

    def generate(model_path, tokenizer, prompts, sampling):
        seen.update(model=model_path, tokenizer=tokenizer, prompts=prompts, n=sampling.n)
        return [["\\boxed{2}", "\\boxed{3}"], None, ["\\boxed{5}", "\\boxed{5}"]], {"generate_s": 0.5}

    with pytest.raises(ValueError, match="all 3 prompts are too long"):
        ev.evaluate(str(model), problems, ev.Sampling(n=2), [1], generate=lambda *a: ([None] * 3, {}))
    out = ev.evaluate(str(model), problems, ev.Sampling(n=2), [1, 2], generate=generate)
    assert seen == {"model": str(model), "tokenizer": str(model), "n": 2,
                    "prompts": ["Compute 1+1.\n", "Compute 9*9.\n", "Compute 2+2.\n"]}
    s = out["summary"]
    assert s["problems"] == 2 and s["skipped_too_long"] == 1
    assert s["pass@1"] == pytest.approx((0.5 + 0) / 2) and s["pass@2"] == pytest.approx((1 + 0) / 2)
    assert s["distinct_answers"] == pytest.approx((2 + 1) / 2)
    assert [p["correct"] for p in out["problems"]] == [1, 0]
    assert "pass@2" in ev.table(s) and "1 too long" in ev.table(s)
    json.dumps(out)  # what --json writes


def test_cli_refuses_k_above_n_before_starting_an_engine(tmp_path, capsys):
    args = _parse([str(_model_folder(tmp_path / "m")), "-n", "4", "-k", "1,8"])
    assert args.func(args) == 2
    assert "k=[8]" in capsys.readouterr().err


@pytest.mark.parametrize("flags,says", [
    (["-n", "0"], "-n (samples per problem) must be at least 1, got 0"),
    (["-k", "abc"], "-k takes whole numbers separated by commas (e.g. 1,4,8), got 'abc'"),
    (["-k", ","], "-k takes whole numbers separated by commas"),
])
def test_cli_refuses_bad_n_and_k_by_flag(tmp_path, capsys, flags, says):
    args = _parse([str(_model_folder(tmp_path / "m")), *flags])
    assert args.func(args) == 2
    assert says in capsys.readouterr().err


def test_a_dataset_with_bad_rows_is_refused_with_evals_own_way_round_it(tmp_path, capsys):
    # jury eval takes no data.* overrides: its refusal names --skip-bad-rows, which reads the good rows
    f = tmp_path / "e.jsonl"
    f.write_text('{"problem": "q0", "answer": "0"}\nnot json\n{"problem": "q1", "answer": "1"}\n')
    args = _parse([str(_model_folder(tmp_path / "m")), "--dataset", str(f)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "1 bad row of 3" in err and "pass --skip-bad-rows to evaluate without them" in err
    assert "data.bad_rows=skip" not in err
    from jury.protocol.config import DataConfig
    assert [p.problem for p in ev.load_problems(str(f), 0, 0, DataConfig(bad_rows="skip"))] == ["q0", "q1"]
    assert _parse(["tiny", "--skip-bad-rows"]).skip_bad_rows is True


@pytest.mark.slow
def test_real_engine_on_the_tiny_model(tiny_model_path, tmp_path):
    """`python -m jury.experiments.evaluate`: a real entry point, as under the `jury` command (on a
    GPU vLLM spawns its engine core, which re-imports a guarded __main__; on the CPU the engine runs
    in this process). `--json` alone prints the result on stdout, which must parse although vLLM
    logs to stdout."""
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "jury.experiments.evaluate", tiny_model_path, "--count", "16", "-n", "4",
         "--max-new-tokens", "16", "--max-model-len", "256", "--json"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, check=False)
    wall = time.time() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    s, per = result["summary"], result["problems"]
    assert s["problems"] == 16 and s["samples_per_problem"] == 4 and len(per) == 16
    assert sum(s["verdicts"].values()) == 64
    assert 0.0 <= s["pass@1"] <= s["pass@4"] <= 1.0
    # the estimator's two ends in closed form: pass@1 is the mean success rate, pass@n the share solved
    assert s["pass@1"] == pytest.approx(sum(p["correct"] for p in per) / 64)
    assert s["pass@4"] == pytest.approx(sum(p["correct"] > 0 for p in per) / 16)
    for p in per:
        answered = sum(a is not None for a in p["answers"])
        # distinct answers count parsable answers only: at most the answered samples, at least one if any
        assert min(answered, 1) <= p["distinct"] <= answered <= 4, p
        assert p["correct"] == p["verdicts"].count("correct") <= answered, p
    assert 0.0 <= s["distinct_answers"] <= 4.0
    # the tiny model is warmed up to a sampled pass rate of about 0.2: neither hopeless nor perfect
    assert 0.0 < s["pass@1"] < 1.0
    # on the CPU the engine ran inside this process (actors/cpu_engine.py, in_process_cpu_engine)
    from vllm.platforms import current_platform

    assert s["engine_inline"] is current_platform.is_cpu()
    print(f"eval wall {wall:.1f}s, engine start {s['engine_start_s']:.1f}s, generate {s['generate_s']:.1f}s")
