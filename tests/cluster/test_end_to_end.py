"""A short run through every real process: feeder, vLLM generator, verifier, DeepSpeed learner."""
import os

import pytest

from jury.protocol.config_load import load_config
from jury.cluster.metrics import read_metrics

from conftest import descendants, live_pids

pytestmark = pytest.mark.slow


def test_short_run_end_to_end_with_the_tinyv_cascade(tiny_model_path, tmp_path):
    """Every group crosses every real process once (generator -> verifier -> learner, the staleness
    bound kept, nothing left behind at the end); the reward is TinyV's cascade, whose LLM (a
    second vLLM engine, on an LLM server) is asked about exactly the rule negatives. One run for
    both: the pipeline's accounting does not depend on the reward scheme."""
    import json
    import time

    import psutil

    from jury.cluster.driver import train

    before = set(descendants(os.getpid()))
    cfg = load_config(None, [f"run_dir={tmp_path}", "steps=4", "batch_groups=4", "max_staleness=1", "curve=true",
                             "generator.group_size=4", "verifier.reward=tinyv", "progress=false"])
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
    ledger = [json.loads(line) for line in open(tmp_path / "ledger.jsonl")]
    assert sorted(e["index"] for e in ledger) == list(range(16))  # every admitted group trained once

    # TinyV: asked about the rule negatives and, as TinyV's pipeline asks, the responses with no answer
    # the rules could read (shown their final statement; an empty one is not asked), nothing else
    asked = summary["verifier0/tinyv_asked"]
    verdicts = {}
    for r in rows:
        for k, v in r["verifier/verdicts"].items():
            verdicts[k] = verdicts.get(k, 0) + v
    # the tiny model answers wrong often enough that the rules say "incorrect" somewhere
    assert verdicts.get("incorrect", 0) > 0
    unread = verdicts.get("no_answer", 0)
    assert verdicts["incorrect"] <= asked <= verdicts["incorrect"] + unread, (asked, verdicts)
    assert asked > verdicts["incorrect"] or not unread, (asked, verdicts)  # the tiny model's prose ends in words
    assert 0 < summary["verifier0/tinyv_share"] < 1
    assert summary["verifier0/tinyv_overturned"] <= asked
    assert summary["verifier0/tinyv_failed"] == 0

    # nothing left behind: every process the run started (the LLM server's engine too) is gone
    deadline = time.time() + 30
    while time.time() < deadline and live_pids(set(descendants(os.getpid())) - before):
        time.sleep(1)
    left = [psutil.Process(p).cmdline()[:3] for p in live_pids(set(descendants(os.getpid())) - before)]
    assert not left, f"processes left after shutdown: {left}"


def test_lean_gate_path_runs_end_to_end_against_the_repl_double(tiny_model_path, tmp_path):
    """JURY-RL with the Lean gate: three LLM roles on a vLLM engine (the tiny model here),
    checks through the REPL pool speaking the real protocol to the double. The tiny model
    writes no Lean, so the gate stays inconclusive and ResZero keeps every group's sum at 0."""
    import shlex
    import sys
    from pathlib import Path

    from jury.cluster.driver import train

    double = shlex.join([sys.executable, str(Path(__file__).parents[1] / "verifiers" / "lean" / "lean_repl_double.py")])
    cfg = load_config(None, [
        f"run_dir={tmp_path}", "steps=2", "batch_groups=2", "generator.group_size=4", "progress=false",
        "verifier.gate=lean", "lean.formalizer_model=tiny", "lean.checker_model=tiny", "lean.prover_model=tiny",
        "lean.num_statements=2", "lean.max_attempts=2", "lean.attempts_per_round=2",
        "lean.formalizer_max_tokens=32", "lean.checker_max_tokens=16", "lean.prover_max_tokens=32",
        f"lean.lean.command={double}", "lean.lean.user=", "lean.lean.pool_size=1"])
    summary = train(cfg)
    rows = read_metrics(tmp_path)
    assert len(rows) == 2
    assert summary["verifier0/gate_calls"] >= 1           # the gate was asked about majority answers
    assert summary["verifier0/gate_proved"] == 0
    assert "verifier0/verdict_error" not in summary           # no group failed to score
    assert any(k.startswith("verifier0/lean_") for k in summary)  # the gate's own cost record
    assert all(abs(r["reward/mean"]) < 1e-6 for r in rows)  # ResZero: zero-sum groups


def test_self_certainty_is_scored_by_the_learner_in_its_forward(tiny_model_path, tmp_path):
    """reward=self_certainty: the verifier leaves the rewards to the learner, which scores every
    sample over the full distribution (Intuitor's KL(U || p)) before the advantages."""
    import json

    from jury.cluster.driver import train

    cfg = load_config(None, [f"run_dir={tmp_path}", "steps=2", "batch_groups=2", "generator.group_size=4",
                             "verifier.reward=self_certainty", "verifier.self_reward_span=answer",
                             "learner.advantage=grpo", "progress=false"])
    train(cfg)
    rows = read_metrics(tmp_path)
    assert all(r["learner/self_reward_s"] > 0 for r in rows)
    # a KL to the uniform distribution: positive, and different between samples
    assert all(r["learner/self_reward_mean"] > 0 for r in rows)
    ledger = [json.loads(line) for line in open(tmp_path / "ledger.jsonl")]
    # a group with no extracted answer at all is flat at 0 (no answer never pays), the others positive
    assert len(ledger) == 4 and all(e["reward"] >= 0 for e in ledger) and any(e["reward"] > 0 for e in ledger)
    # the monitor's shadow metrics (taken after the learner scored the groups) and its KL to the first
    # policy, every step of a run whose rewards the learner scores
    assert all("shadow/precision" in r and "shadow/short_paid" in r for r in rows)
    assert all(r["learner/initial_kl"] >= 0 for r in rows)
