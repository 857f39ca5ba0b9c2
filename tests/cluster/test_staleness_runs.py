"""Forced staleness, the record, its synchronous replay and the staleness report, on a real run."""
import json
import math

import pytest

from jury.protocol.config_load import load_config
from jury.protocol.plan import parse_staleness
from jury.cluster.feeder import draw_staleness
from jury.cluster.metrics import read_metrics

pytestmark = pytest.mark.slow


def test_forced_staleness_record_and_replay(tiny_model_path, tmp_path):
    from jury.cluster.driver import train

    run = tmp_path / "run"
    cfg = load_config(None, [f"run_dir={run}", f"model={tiny_model_path}", "steps=6", "batch_groups=4",
                             "generator.group_size=4", "forced_staleness={0: 1, 2: 1}", "record_groups=true",
                             "progress=false"])
    train(cfg)

    ledger = [json.loads(line) for line in open(run / "ledger.jsonl")]
    assert sorted(r["index"] for r in ledger) == list(range(24))
    forced = parse_staleness(cfg.forced_staleness)
    ks = [draw_staleness(forced, cfg.seed, r["index"]) for r in ledger]
    assert set(ks) == {0, 2}
    for r, k in zip(ledger, ks):
        # exactly k versions stale once k versions exist; batch b < k can only come from version 0
        assert r["staleness"] == min(r["step"], k), r
        assert r["version_start"] == r["version_end"]  # drain: one version per group
        assert r["verify_s"] > 0 and 0 < r["verify_share"] < 1 and r["arrived"] <= r["trained"]
    # `jury simulate` of the run's own config.yaml trains every group exactly as stale as the run
    # did (issue 28: under forced staleness the distribution must be exact), whatever the costs
    from jury.experiments.sim_costs import Costs
    from jury.experiments.simulate import Simulation
    from jury.protocol.config_load import load_run_config

    sim = Simulation(load_run_config(str(run)), Costs())
    sim.run()
    assert {g.index: g.step - g.version_start for g in sim.trained} == {r["index"]: r["staleness"] for r in ledger}
    rows = read_metrics(run)
    assert all("staleness/verify_share" in r for r in rows)
    assert [r["staleness/hist"] for r in rows][2:] == \
        [{str(k): ks[i * 4:(i + 1) * 4].count(k) for k in sorted(set(ks[i * 4:(i + 1) * 4]))} for i in range(2, 6)]

    # replay: a fresh learner on the recorded batches gives the same losses (the command in this
    # process: a new one would import transformers again, about 9 s)
    from jury.experiments.cli import main

    assert main(["replay", str(run), "--out", str(tmp_path / "r")]) == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["steps"] == 6 and summary["learner_tokens_per_s"] > 0
    replayed = [json.loads(line) for line in open(tmp_path / "r" / "metrics.jsonl")]
    for a, b in zip(rows, replayed):
        assert b["learner/loss"] == pytest.approx(a["learner/loss"], rel=1e-4, abs=1e-6)
        assert b["learner/tokens"] == a["learner/tokens"]

    # the staleness report reads the same ledger
    assert main(["staleness", str(run), "--json", str(tmp_path / "s.json")]) == 0
    report = json.loads((tmp_path / "s.json").read_text())
    assert {int(k) for k in report["buckets"]} == {0, 1, 2}  # 1: the step-1 batch drawn k = 2
    assert sum(b["groups"] for b in report["buckets"].values()) == 24
    assert (run / "staleness_bias.png").stat().st_size > 5000


def test_continuous_admission_keeps_the_bound_loses_nothing_and_resumes(tiny_model_path, tmp_path):
    """admission=continuous on real processes: verifier0 takes 3 s a group, so the groups it scores
    are overtaken by verifier1's and reach the learner late. Every batch is the first B groups to
    arrive; none is trained past max_staleness (the late ones are dropped and new tasks take their
    places); nothing is trained twice. Then the run is resumed from its last periodic checkpoint
    (version 4), whose pending tasks (admitted, not trained) are sent again: the resumed run trains
    each index once."""
    from jury.cluster.driver import train

    run = tmp_path / "run"
    base = [f"model={tiny_model_path}", "batch_groups=2", "generator.group_size=2", "max_staleness=1",
            "admission=continuous", "num_verifiers=2", "faults=slow:verifier0@0:3", "progress=false"]
    summary = train(load_config(None, [*base, f"run_dir={run}", "steps=5", "checkpoint_every=2"]))

    def check(summary, steps):
        ledger = [json.loads(line) for line in open(run / "ledger.jsonl")]
        indices = [r["index"] for r in ledger]
        assert len(indices) == len(set(indices)) == steps * 2, "a group was lost or trained twice"
        assert all(r["staleness"] <= 1 for r in ledger), [r["staleness"] for r in ledger]
        dropped = summary["feeder/dropped_stale"]
        assert summary["feeder/admitted"] == steps * 2 + dropped
        assert max(indices) < steps * 2 + dropped
        return ledger, dropped

    ledger, dropped = check(summary, 5)
    # verifier0's queue grows by 3 s a group while a step takes a second or two: some group of it
    # arrives two versions late and is dropped (the driver's drop -> admit path ran)
    assert dropped >= 1
    rows = read_metrics(run)
    assert rows[-1]["learner/stale_dropped"] == dropped
    # the slow verifier's groups came late: some batch is not a range of consecutive indices
    assert any(sorted(r["index"] for r in ledger if r["step"] == s) != [2 * s, 2 * s + 1] for s in range(5))
    state = json.loads((run / "checkpoint" / "state.json").read_text())
    pending = {t["index"] for t in state["pending"]}
    assert state["version"] == 4 and pending.isdisjoint(r["index"] for r in ledger if r["step"] < 4)

    # a crash after that checkpoint: resume from it; step 4 is trained again
    (run / "latest_checkpoint").write_text(json.dumps({"path": str(run / "checkpoint")}))
    summary = train(load_config(str(run / "config.yaml")), resume=str(run))
    ledger, _ = check(summary, 5)
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == list(range(5))
    # the resumed process's clock goes on from the checkpoint's last step: time_s never steps back
    times = [r["time_s"] for r in rows]
    assert times == sorted(times) and summary["wall_s"] > times[3], (times, summary["wall_s"])
    assert all(r["index"] in pending or r["index"] >= state["next_index"] for r in ledger if r["step"] == 4)


def test_continuous_admission_with_dynamic_sampling_trains_groups_with_signal_only(tiny_model_path, tmp_path):
    """admission=continuous with dynamic_sampling on real processes, with the label reward: the tiny
    model's groups of 2 are often flat (both right or both wrong). Each flat group is filtered and its
    place goes to a new task under the same budget: every trained group has signal, none is past
    max_staleness, none is trained twice, and the feeder admitted at least what was trained, refilled
    and dropped (the rest is still pending). `jury replay` of the run reproduces its losses."""
    from jury.cluster.driver import train
    from jury.experiments.replay import replay
    from jury.protocol.record import read_record

    run = tmp_path / "run"
    summary = train(load_config(None, [
        f"model={tiny_model_path}", "batch_groups=2", "generator.group_size=2", "max_staleness=1",
        "admission=continuous", "dynamic_sampling=true", "max_refills=32", "verifier.reward=ground_truth",
        "steps=3", "record_groups=true", "progress=false", f"run_dir={run}"]))
    ledger = [json.loads(line) for line in open(run / "ledger.jsonl")]
    indices = [r["index"] for r in ledger]
    assert len(indices) == len(set(indices)) == 3 * 2, "a step trained a short batch or a group twice"
    assert all(r["staleness"] <= 1 for r in ledger), [r["staleness"] for r in ledger]
    recorded = [g for f in sorted((run / "record").glob("step-*.msgpack")) for g in read_record(str(f))]
    assert sorted(g.group.task.index for g in recorded) == sorted(indices)
    assert all(len(set(g.rewards.tolist())) > 1 for g in recorded), [g.rewards for g in recorded]
    rows = read_metrics(run)
    refills = sum(r["dynamic/refills"] for r in rows)
    assert refills >= 1, "no flat group in 3 steps: the refill path did not run"
    assert summary["feeder/admitted"] >= 6 + refills + summary["feeder/dropped_stale"]
    assert max(indices) < summary["feeder/admitted"]
    result = replay(run)
    assert result["loss_max_abs_diff"] == 0.0, result


def test_a_step_whose_groups_are_all_flat_up_to_the_refill_cap_is_skipped(tiny_model_path, tmp_path):
    """dynamic_sampling with a label the tiny model never writes: every group scores 0, the step
    refills up to max_refills, then is skipped as README says (the version moves on, counted in
    learner/skipped_steps). The run finishes: the skipped step's row has the keys of any other (0
    tokens, nan rewards), which the driver and the run's summary read (a KeyError ended the run
    before)."""
    from jury.cluster.driver import train

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"problem": f"Compute {k}+1.", "answer": "-987654321"}) + "\n" for k in range(4)))
    run = tmp_path / "run"
    summary = train(load_config(None, [
        f"model={tiny_model_path}", f"dataset={data}", "batch_groups=1", "generator.group_size=2",
        "dynamic_sampling=true", "max_refills=1", "verifier.reward=ground_truth", "steps=2", "progress=false",
        f"run_dir={run}"]))
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [0, 1]
    assert [r["learner/skipped_step"] for r in rows] == [1, 1]
    assert [r["dynamic/refills"] for r in rows] == [1, 1]
    assert all(r["rollout/tokens"] == 0 and math.isnan(r["reward/mean"]) for r in rows)
    assert rows[-1]["learner/skipped_steps"] == 2 and not (run / "ledger.jsonl").read_text().strip()
    assert summary["steps"] == 2 and math.isnan(summary["max_staleness_seen"]), summary
