"""A short run through every real process: feeder, vLLM generator, verifier, DeepSpeed learner."""
import os

import pytest

from jury.cluster.config import load_config
from jury.cluster.metrics import read_metrics

from conftest import descendants, live_pids

pytestmark = pytest.mark.slow


def test_short_run_end_to_end(tiny_model_path, tmp_path):
    import psutil

    from jury.cluster.driver import train

    before = set(descendants(os.getpid()))
    cfg = load_config(None, [f"run_dir={tmp_path}", "steps=4", "batch_groups=4", "max_staleness=1",
                             "generator.group_size=4", "progress=false"])
    summary = train(cfg)

    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert summary["feeder/admitted"] == 16
    # groups crossed both queues: generator -> verifier -> learner
    assert summary["generator0/rollouts/sent"] == 16
    assert summary["verifier0/rollouts/received"] == 16
    assert rows[-1]["learner/scored/received"] == 16
    assert rows[-1]["learner/version"] == 4
    assert summary["generator0/version"] == 3  # synced after steps 1, 2, 3 (no sync after the last)
    assert max(r["staleness/max"] for r in rows) <= cfg.max_staleness
    assert all(r["learner/tokens"] > 0 for r in rows)
    assert (tmp_path / "final" / "model.safetensors").exists()
    assert (tmp_path / "config.yaml").exists()
    # nothing left behind: every process the run started is gone
    import time

    deadline = time.time() + 30
    while time.time() < deadline and live_pids(set(descendants(os.getpid())) - before):
        time.sleep(1)
    left = [psutil.Process(p).cmdline()[:3] for p in live_pids(set(descendants(os.getpid())) - before)]
    assert not left, f"processes left after shutdown: {left}"


def test_tinyv_cascade_asks_its_llm_only_about_rule_negatives(tiny_model_path, tmp_path):
    from jury.cluster.driver import train

    cfg = load_config(None, [f"run_dir={tmp_path}", "steps=2", "batch_groups=4", "generator.group_size=4",
                             "verifier.reward=tinyv", "progress=false"])
    summary = train(cfg)
    rows = read_metrics(tmp_path)
    asked = summary["verifier0/tinyv_asked"]
    verdicts = {}
    for r in rows:
        for k, v in r["verifier/verdicts"].items():
            verdicts[k] = verdicts.get(k, 0) + v
    # the tiny model answers wrong often enough that the rules say "incorrect" somewhere
    assert verdicts.get("incorrect", 0) > 0
    assert asked == verdicts["incorrect"], (asked, verdicts)  # exactly the rule negatives, nothing else
    assert 0 < summary["verifier0/tinyv_share"] < 1
    assert summary["verifier0/tinyv_overturned"] <= asked
