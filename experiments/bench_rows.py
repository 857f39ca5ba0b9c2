"""A finished run's figures as `jury bench` reports an end-to-end run: per-stage times, idle shares,
queues and occupancy over its timed steps, read from its metrics.jsonl and occupancy.json. Files
only: no engine, trainer or cluster, so that `jury simulate --calibration RUN_DIR` reads a run too
(experiments/sim_costs.py)."""
from __future__ import annotations

import json
import math
from pathlib import Path

WARMUP_STEPS = 2  # the first steps include vLLM's slow first generate and the pipeline filling


def run_summary(cfg, run_dir: Path, summary: dict | None = None) -> dict:
    """A finished run's per-stage times, idle fractions, queues and occupancy over its timed steps (after
    WARMUP_STEPS), from its metrics.jsonl and occupancy.json: a bench row, also of a `jury train` run
    (jury simulate --calibration RUN_DIR). Reads files only: no engine, trainer or cluster."""
    from jury.cluster.metrics import read_metrics

    from jury.actors.occupancy import tail_shares

    summary = summary or {}
    rows = read_metrics(run_dir)
    if len(rows) <= WARMUP_STEPS:
        raise ValueError(f"bench needs more than {WARMUP_STEPS} steps, got {len(rows)}")
    before, rows = rows[WARMUP_STEPS - 1], rows[WARMUP_STEPS:]
    occupancy = json.loads((run_dir / "occupancy.json").read_text())["generators"]
    batch_seqs = cfg.batch_groups * cfg.generator.group_size
    ends = [before["time_s"]] + [r["time_s"] for r in rows]
    tails = [x for t in occupancy.values() for x in tail_shares(t, ends, batch_seqs)]
    engine = engine_steps(occupancy.values(), ends[0], ends[-1])
    wall = sum(r["perf/step_s"] for r in rows)
    n = len(rows)
    mean = lambda key: sum(r.get(key, 0.0) for r in rows) / n  # noqa: E731
    delta = lambda key: rows[-1].get(key, 0.0) - before.get(key, 0.0)  # counters summed by the roles  # noqa: E731
    gens, vers = range(cfg.num_generators), range(cfg.num_verifiers)
    # the groups and completions the steps trained (dynamic sampling may train fewer than B a step;
    # runs from before these counters: B and B x G)
    groups = sum(r.get("rollout/groups", cfg.batch_groups) for r in rows)
    completions = sum(r.get("rollout/completions", cfg.batch_groups * cfg.generator.group_size) for r in rows)
    running = sum(delta(f"generator{i}/running_seq_s") for i in gens) / (wall * len(gens))
    return {
        "tokens_per_s": sum(r["rollout/tokens"] for r in rows) / wall,
        "groups_per_s": groups / wall,
        "completions_per_s": completions / wall,
        "step_s": wall / n,
        "startup_s": summary.get("startup_s", math.nan),
        "learner_wait_s": mean("learner/wait_s"), "learner_train_s": mean("learner/train_s"),
        "sync_total_s": mean("sync/total_s"), "sync_gather_s": mean("sync/gather_s"),
        "sync_broadcast_s": mean("sync/broadcast_s"), "generator_pause_s": mean("sync/generator_pause_s"),
        "generator_load_s": mean("sync/generator_load_s"),
        # idle: the share of the loop's wall time a role had nothing to do
        "idle/learner": sum(r["learner/wait_s"] for r in rows) / wall,
        "idle/generator": 1 - sum(delta(f"generator{i}/busy_s") for i in gens) / (wall * len(gens)),
        "idle/verifier": 1 - sum(delta(f"verifier{i}/verify_s") for i in vers) / (wall * len(vers)),
        "queue/feeder": mean("feeder/queue_depth"),
        "queue/generator_tasks": sum(mean(f"generator{i}/task_queue") for i in gens),
        "queue/verifier": sum(mean(f"verifier{i}/queue_depth") for i in vers),
        "queue/learner": mean("learner/queue_depth"),
        "staleness_mean": mean("staleness/mean"),
        "verify_share_of_life": mean("staleness/verify_share"),
        "reward_mean": mean("reward/mean"),
        # sequences running in an engine, time-weighted over the loop (per generator)
        "occupancy_mean": running,
        "occupancy_of_batch": running / batch_seqs,
        "tail_share": sum(tails) / len(tails) if tails else math.nan,
        **engine,
        "loop_start_s": before["time_s"],
        "run_dir": str(run_dir),
    }


def engine_steps(timelines, start: float, end: float) -> dict:
    """The engines' own pace over [start, end) (occupancy.json's clock), from the steps each bin
    counts: seconds per engine step while an engine had sequences running, and the tokens a step
    generated (the sequences it advanced). Empty for a timeline without step counts (runs from
    before occupancy counted them)."""
    steps = tokens = 0
    running_s = 0.0
    for t in timelines:
        if "steps" not in t:
            return {}
        for at, n, k, made in zip(t["t"], t["running"], t["steps"], t["tokens"]):
            # a bin with nothing running holds no decode step: vLLM reports its stats after an
            # abort or a pause too, which the stat logger counted as steps before it skipped them
            # (occupancy.json of runs before 2026-11-28)
            if start <= at < end and n > 0:
                steps, tokens, running_s = steps + k, tokens + made, running_s + t["bin_s"]
    if not steps or not tokens:  # nothing decoded in the span (a short run can finish before it)
        return {}
    return {"engine_step_s": running_s / steps, "engine_tokens_per_step": tokens / steps}
