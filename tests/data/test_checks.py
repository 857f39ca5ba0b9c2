"""A run's data is checked before anything starts: `jury train` with a bad dataset exits 2 with
every bad row counted and the first ones named, before a run folder, Ray or any actor exists
(it used to start the whole cluster, then die on the first bad line with a traceback)."""
import json

import pytest

from jury.protocol.config_load import load_config


class ClusterStarted(Exception):
    pass


@pytest.fixture
def no_cluster(monkeypatch):
    """The cluster as a stub that records its config and stops the run where Ray would start."""
    import jury.cluster.driver as driver

    started = []

    class Pipeline:
        def __init__(self, cfg, *args, **kwargs):
            started.append(cfg)
            raise ClusterStarted

    monkeypatch.setattr(driver, "Pipeline", Pipeline)
    return started


def _bad_jsonl(path):
    path.write_bytes(b"\n".join([
        json.dumps({"problem": "Compute 1+1.", "answer": "2"}).encode(),
        b'{"problem": "Compute 1+\xff.", "answer": "2"}',                  # 2: not UTF-8
        json.dumps({"problem": "Compute 2+2.", "answer": None}).encode(),   # 3: would be trained as "None"
        json.dumps({"problem": "", "answer": "0"}).encode(),                # 4: an empty problem
        json.dumps({"problem": "Compute 3+3.", "answer": "6"}).encode(),
    ]) + b"\n")
    return path


def test_a_bad_dataset_is_refused_before_anything_starts(tmp_path, no_cluster, capsys, tiny_model_path):
    from jury.experiments.cli import main

    bad, run = _bad_jsonl(tmp_path / "bad.jsonl"), tmp_path / "run"
    assert main(["train", f"dataset={bad}", f"run_dir={run}", "progress=false"]) == 2
    err = capsys.readouterr().err
    assert not no_cluster and not run.exists()
    assert err.startswith(f"jury train: {bad}: 3 bad rows of 5 (data.bad_rows=refuse):\n")
    assert f"  {bad}:2: not UTF-8 (byte 0xff at column 24)\n" in err
    assert f"  {bad}:3: answer: null\n" in err
    assert f"  {bad}:4: problem: empty\n" in err
    assert "set data.bad_rows=skip" in err and "Traceback" not in err


def test_skipped_rows_are_counted_and_the_prompt_is_written_to_the_run_folder(tmp_path, no_cluster):
    from jury.cluster.driver import train
    from jury.data.checks import check_data

    bad, run, template = _bad_jsonl(tmp_path / "bad.jsonl"), tmp_path / "run", tmp_path / "t.txt"
    template.write_text("Solve: {problem}\n", encoding="utf-8")
    cfg = load_config(None, [f"dataset={bad}", "data.bad_rows=skip", "model=tiny-chat", f"data.template={template}",
                             "data.system_prompt=Be brief.", f"run_dir={run}", "progress=false"])
    with pytest.raises(ClusterStarted):
        train(cfg)
    assert no_cluster[0].steps == cfg.steps  # data.epochs 0: no cap
    assert (run / "prompt_template.txt").read_text() == "Solve: {problem}\n"
    assert (run / "prompt_example.txt").read_text() == \
        "<|system|>\nBe brief.\n<|user|>\nSolve: Compute 1+1.\n\n<|assistant|>\n"
    checked = check_data(cfg)
    assert (checked.train.rows, checked.train.bad) == (2, 3)


def test_metrics_count_skipped_rows(tmp_path, tiny_model_path):
    from jury.data.checks import check_data, check_prompts

    bad = _bad_jsonl(tmp_path / "bad.jsonl")
    cfg = load_config(None, [f"dataset={bad}", "data.bad_rows=skip"])
    run = check_prompts(cfg, tiny_model_path, check_data(cfg))
    assert run.metrics() == {"data/rows": 2, "data/bad_rows_skipped": 3, "data/prompts_too_long": 0}
    synthetic = load_config(None, [])
    run = check_prompts(synthetic, tiny_model_path, check_data(synthetic))
    assert run.metrics() == {} and run.example.startswith("Compute ") and run.example.endswith(".\n")


def test_epochs_cap_the_steps_by_the_prompts_that_fit(tmp_path, tiny_model_path):
    from jury.data.problems import DataError
    from jury.data.checks import check_data, check_prompts

    path = tmp_path / "d.jsonl"
    rows = [{"problem": f"Compute {i}+1.", "answer": str(i + 1)} for i in range(9)] + \
           [{"problem": "Compute " + "1+" * 200 + "1.", "answer": "201"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = load_config(None, [f"dataset={path}", "data.epochs=2", "batch_groups=4"])
    run = check_prompts(cfg, tiny_model_path, check_data(cfg))
    # 9 of 10 prompts fit 128 tokens: 2 epochs are 18 problems, 4 whole steps of 4
    assert (run.too_long, run.cfg.steps, cfg.steps) == (1, 4, 300)
    few = load_config(None, [f"dataset={path}", "data.epochs=1", "batch_groups=16"])
    with pytest.raises(DataError, match="data.epochs=1 of 9 usable problems is less than one batch of batch_groups=16"):
        check_prompts(few, tiny_model_path, check_data(few))
    tight = load_config(None, [f"dataset={path}", "max_prompt_tokens=2"])
    with pytest.raises(DataError, match="no prompt fits max_prompt_tokens=2"):
        check_prompts(tight, tiny_model_path, check_data(tight))


def test_the_eval_file_and_impossible_settings_are_refused_at_start(tmp_path, no_cluster, capsys, tiny_model_path):
    from jury.experiments.cli import main

    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"problem": "Compute 1+1.", "answer": "2"}) + "\n")
    bad = _bad_jsonl(tmp_path / "eval.jsonl")
    cases = [([f"dataset={good}", f"data.eval_path={bad}"], f"jury train: {bad}: 3 bad rows of 5"),
             (["data.epochs=2"], "jury train: data.epochs needs a dataset file"),
             (["data.chat_template=on"], "jury train: data.chat_template is on, but the tokenizer of tiny has no "
                                         "chat template"),
             ([f"dataset={tmp_path / 'none.parquet'}"], f"jury train: {tmp_path / 'none.parquet'}: no such file")]
    for overrides, message in cases:
        assert main(["train", *overrides, f"run_dir={tmp_path / 'run'}", "progress=false"]) == 2
        assert capsys.readouterr().err.startswith(message)
    assert not no_cluster and not (tmp_path / "run").exists()


def test_the_qwen3_config_sets_the_papers_prompt_and_epochs():
    from pathlib import Path

    cfg = load_config(str(Path(__file__).resolve().parents[2] / "configs" / "qwen3-1.7b-jury.yaml"))
    d = cfg.data
    assert (d.template, d.chat_template, d.epochs, d.bad_rows) == ("jury-rl", True, 6, "refuse")
    assert cfg.steps == 6 * 7500 // cfg.batch_groups


def test_evaluation_during_training_scores_as_hand_counted():
    """Two problems, 4 samples each: 12 with samples right, wrong, unparsable, right (c = 2);
    7 with one right of four (c = 1). pass@1 = mean(c/n) = (2/4 + 1/4)/2 = 0.375;
    pass@4 = 1 for both (a right sample among the four); distinct answers: {12, 13} and {7, 8, 9}."""
    from jury.data.problems import Problem
    from jury.cluster.evaluation import Evaluator
    from jury.protocol.config import EvalConfig

    ev = Evaluator(EvalConfig(every=2, samples=4), [Problem("Compute 5+7.", "12", "t"), Problem("Compute 3+4.", "7", "t")],
                   ["p1", "p2"], skipped=1)
    got = ev.score([["\\boxed{12}", "\\boxed{13}", "no answer", "\\boxed{12}"],
                    ["\\boxed{8}", "\\boxed{7}", "\\boxed{9}", "\\boxed{8}"]])
    assert got == {"eval/pass@1": 0.375, "eval/pass@4": 1.0, "eval/distinct_answers": 2.5,
                   "eval/distinct_answers_max": 3.0, "eval/problems": 2.0, "eval/skipped_too_long": 1.0}
    assert [ev.due(s) for s in range(5)] == [False, True, False, True, False]
