"""benchmarks/chain_baselines.py: its commands load as configs, its rewrite file passes the data
checks, and its report reads run folders as `jury train` writes them."""
import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import chain_baselines as cb  # noqa: E402

from jury.data.files import check_dataset, read_problems  # noqa: E402
from jury.protocol.config import DataConfig  # noqa: E402
from jury.protocol.config_load import load_config  # noqa: E402


def test_every_run_is_a_valid_config_and_the_rewrite_file_passes_the_checks(tmp_path):
    cb.write_rewrites(tmp_path / "chain_rewrites.jsonl", n=20)
    data = DataConfig(rewrite_key="rewrite", shuffle=False)
    assert check_dataset(str(tmp_path / "chain_rewrites.jsonl"), data).rows == 20
    first = next(read_problems(str(tmp_path / "chain_rewrites.jsonl"), data))
    assert first.rewrite == "Compute the sum " + first.problem.removeprefix("Compute ")
    for name, cmd in cb.commands(tmp_path, steps=3).items():
        i = cmd.index("--config")
        cfg = load_config(cmd[i + 1], cmd[i + 2:])
        assert cfg.steps == 3 and cfg.model == "tiny-chain" and cfg.verifier.reward == name.removesuffix(
            "_data").removesuffix("_llm")


def test_the_report_sums_each_runs_llm_calls_and_counters(tmp_path):
    run = tmp_path / "llm_judge"
    run.mkdir()
    (run / "summary.yaml").write_text("wall_s: 100.0\nstartup_s: 40.0\n")
    rows = [{"step": s, "reward/pass_rate": p, "reward/mean": 0.0, "reward/std": 0.0, "verifier/verify_s": 0.5,
             "judge/llm_calls": 10.0, "judge/no_verdict": 2.0} for s, p in enumerate([0.1, 0.3, 0.2, 0.4])]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = cb.summary(run)
    assert (s["pass_first"], s["pass_second"]) == pytest.approx((0.2, 0.3))
    assert (s["llm_calls"], s["judge/no_verdict"], s["verify_s"]) == (40.0, 8.0, 0.5)
    assert "| llm_judge | 4 | 0.200 | 0.300 |" in cb.report(tmp_path)
