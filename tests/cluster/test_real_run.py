"""A real run as a researcher sets one up, end to end, once for the whole module: a Parquet dataset
with its own field names and a bad row, a model with a chat template (tiny-chat) and a system
prompt, evaluation during training on a separate Parquet file, and both trackers on."""
import json

import pytest

from jury.data.tasks import synthetic_problems
from jury.cluster.metrics import read_metrics

from test_tracking import assert_scalars_match_metrics, read_wandb_run, same, scalars, tensorboard_events

pytestmark = pytest.mark.slow
STEPS = 4


@pytest.fixture(scope="module")
def run(tiny_model_path, tmp_path_factory):
    pytest.importorskip("tensorboard", reason="tracking=[tensorboard] needs the tensorboard package (extra: track)")
    pytest.importorskip("wandb", reason="tracking=[wandb] needs the wandb package (extra: track)")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jury.experiments.cli import main

    tmp = tmp_path_factory.mktemp("real-run")
    problems = [p for _, p in zip(range(40), synthetic_problems(7))]
    train = tmp / "train.parquet"
    pq.write_table(pa.table({"question": [p.problem for p in problems] + ["Compute 1+1."],
                             "final": [p.answer for p in problems] + [None],  # one bad row, skipped
                             "uid": [f"p{i}" for i in range(41)]}), train)
    held_out = [p for _, p in zip(range(6), synthetic_problems(99))]
    evaluation = tmp / "eval.parquet"
    pq.write_table(pa.table({"question": [p.problem for p in held_out], "final": [p.answer for p in held_out],
                             "uid": [f"e{i}" for i in range(6)]}), evaluation)
    run_dir = tmp / "run"
    with pytest.MonkeyPatch.context() as mp:  # a machine where nobody logged in to W&B
        for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "WANDB_DIR"):
            mp.delenv(var, raising=False)
        mp.setenv("NETRC", str(tmp / "no-netrc"))
        code = main(["train", f"dataset={train}", "data.problem_key=question", "data.answer_key=final",
                     "data.id_key=uid", "data.bad_rows=skip", "data.template=boxed", f"data.eval_path={evaluation}",
                     "data.system_prompt=Answer briefly.", "model=tiny-chat", f"run_dir={run_dir}", f"steps={STEPS}",
                     "batch_groups=2", "generator.group_size=2", "progress=false", "eval.every=2", "eval.samples=4",
                     "tracking=[tensorboard,wandb]"])
    assert code == 0
    return {"dir": run_dir, "train": train, "rows": read_metrics(run_dir)}


def test_the_dataset_is_read_with_its_field_names_and_the_bad_row_skipped(run):
    rows = run["rows"]
    assert [r["step"] for r in rows] == list(range(STEPS))
    assert all(r["data/bad_rows_skipped"] == 1 and r["data/rows"] == 40 for r in rows)
    ledger = [json.loads(line) for line in open(run["dir"] / "ledger.jsonl")]
    assert len(ledger) == 2 * STEPS and all(e["source"].startswith(f"{run['train']}#p") for e in ledger)


def test_prompts_go_through_the_chat_template_with_the_system_prompt(run):
    example = (run["dir"] / "prompt_example.txt").read_text()
    assert example.startswith("<|system|>\nAnswer briefly.\n<|user|>\n") and example.endswith("<|assistant|>\n")


def test_evaluation_runs_every_2_steps_on_the_held_out_file(run):
    evals = [r for r in run["rows"] if "eval/pass@1" in r]
    assert [r["step"] for r in evals] == [1, 3]
    for r in evals:
        assert r["eval/problems"] == 6 and 0 <= r["eval/pass@1"] <= r["eval/pass@4"] <= 1
        assert 0 <= r["eval/distinct_answers"] <= 4 and r["eval/tokens"] > 0
    assert [r["eval/version"] for r in evals] == [2, 3]  # after step 1's sync; the last step syncs no more
    assert (run["dir"] / "plots" / "eval.png").exists()


def test_both_trackers_hold_every_metric_the_config_summary_and_plots(run):
    import yaml

    rows, run_dir = run["rows"], run["dir"]
    acc = tensorboard_events(run_dir)
    assert_scalars_match_metrics(acc, rows)
    assert {"plots/curves", "plots/throughput", "plots/staleness", "plots/eval"} <= set(acc.Tags()["images"])
    assert "staleness/hist" in acc.Tags()["histograms"] and "eval/pass@1" in acc.Tags()["scalars"]
    wb = read_wandb_run(run_dir)
    assert sorted(wb["history"]) == list(range(STEPS))
    for row in rows:
        numbers, _ = scalars({k: v for k, v in row.items() if k != "step"})
        assert all(same(float(wb["history"][row["step"]][k]), v) for k, v in numbers.items())
    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    for k, v in summary.items():  # a nested value (the monitor's onsets) as its JSON text
        want = json.dumps(v) if isinstance(v, (dict, list)) else pytest.approx(v) if isinstance(v, float) else v
        assert wb["summary"][k] == want, k
    assert wb["config"]["tracking"] == ["tensorboard", "wandb"] and wb["exit_code"] == 0
    assert {"curves.png", "throughput.png", "staleness.png", "eval.png"} <= set(wb["files"])
