"""A short real run on a Parquet dataset whose prompts go through a chat template: the data
section wired from the config to the generator, the skipped rows in the metrics."""
import json

import pytest

from jury.cluster.data import synthetic_problems
from jury.cluster.metrics import read_metrics
from jury.protocol.config import load_config

pytestmark = pytest.mark.slow


def test_a_short_run_on_parquet_through_a_chat_template(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jury.cluster.driver import train

    problems = [p for _, p in zip(range(40), synthetic_problems(7))]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"question": [p.problem for p in problems] + ["Compute 1+1."],
                             "final": [p.answer for p in problems] + [None],  # one bad row, skipped
                             "uid": [f"p{i}" for i in range(41)]}), path)
    run = tmp_path / "run"
    cfg = load_config(None, [f"dataset={path}", "data.problem_key=question", "data.answer_key=final",
                             "data.id_key=uid", "data.bad_rows=skip", "data.template=boxed",
                             "data.system_prompt=Answer briefly.", "model=tiny-chat", f"run_dir={run}",
                             "steps=3", "batch_groups=2", "generator.group_size=2", "progress=false"])
    summary = train(cfg)

    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(r["data/bad_rows_skipped"] == 1 and r["data/rows"] == 40 for r in rows)
    assert summary["feeder/admitted"] == 6 and summary["data/bad_rows_skipped"] == 1
    example = (run / "prompt_example.txt").read_text()
    assert example.startswith("<|system|>\nAnswer briefly.\n<|user|>\n") and example.endswith("<|assistant|>\n")
    ledger = [json.loads(line) for line in open(run / "ledger.jsonl")]
    assert len(ledger) == 6 and all(e["source"].startswith(f"{path}#p") for e in ledger)
