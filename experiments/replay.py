"""`jury replay RUN_DIR`: train again, synchronously, on exactly the groups a run trained on.

A run with `record_groups: true` writes each learner step's batch to
`RUN_DIR/record/step-NNNNNN.msgpack` (the wire codec's frames: tokens, behaviour
log-probs, rewards, versions; never pickle). Replay builds a fresh learner from the
run's starting model (as many ranks as `learner.num_ranks`, on a local Ray), feeds it
those batches in step order, and compares each step's loss with the run's metrics.jsonl. The learner is the same code
and the data is bit-identical, so the losses agree to float rounding: what differs
between an asynchronous run and its replay is only timing. This is also the
learner-only throughput measurement of `jury bench` (no generator, no verifier).

    run (async, record_groups)  ──record/──►  replay (sync, learner only)  ──►  OUT/metrics.jsonl, OUT/final/

For an on-policy twin of an asynchronous run (same tasks per step, fresh samples),
run it again with `max_staleness=0`: the feeder draws the same tasks in the same
order for the same seed.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path


def record_steps(run_dir: str | Path) -> list[Path]:
    """The recorded batches of a run, in step order; refuses a record with a gap."""
    files = sorted((Path(run_dir) / "record").glob("step-*.msgpack"))
    if not files:
        raise FileNotFoundError(f"{run_dir}: no record/ (run it with record_groups=true)")
    steps = [int(f.stem.removeprefix("step-")) for f in files]
    if steps != list(range(steps[0], steps[0] + len(steps))):
        raise ValueError(f"{run_dir}/record: steps {steps[0]}..{steps[-1]} have gaps")
    if steps[0] != 0:
        raise ValueError(f"{run_dir}/record starts at step {steps[0]}; replay needs it from step 0")
    return files


def replay(run_dir: str, out_dir: str | None = None, *, steps: int = 0, progress: bool = True,
           overrides: list[str] = ()) -> dict:
    """Replay the first `steps` recorded steps (0: all); returns a summary, writes OUT/metrics.jsonl.
    `overrides` change the learner (e.g. learner.num_ranks=2 learner.zero_stage=3) over the run's config."""
    import os

    import ray
    from tqdm import tqdm

    from jury.models.registry import resolve_model
    from jury.cluster.learner_group import LearnerGroup
    from jury.cluster.metrics import read_metrics
    from jury.protocol.config_load import load_run_config
    from jury.protocol.plan import make_plan

    run = Path(run_dir)
    cfg = load_run_config(str(run), list(overrides))
    files = record_steps(run)[: steps or None]
    original = {r["step"]: r for r in read_metrics(run)} if (run / "metrics.jsonl").exists() else {}
    _read(files[0])  # a broken record is refused before a learner is built
    out = Path(out_dir or run / "replay")
    out.mkdir(parents=True, exist_ok=True)
    started = not ray.is_initialized()
    if started:
        ray.init(include_dashboard=False, log_to_driver=True,
                 num_cpus=max(os.cpu_count() or 1, int(cfg.learner.num_ranks * cfg.learner.num_cpus) + 1))
    plan = make_plan(cfg)  # the learner needs the window and the sampling, no LLM server
    try:
        group = LearnerGroup.create(cfg, plan, resolve_model(cfg.model, progress=cfg.progress),
                                    env={"TOKENIZERS_PARALLELISM": "false"}, checkpoint=None, initial_version=0)
    except BaseException:  # a learner that did not start leaves no Ray behind (replay in a longer process)
        if started:
            ray.shutdown()
        raise
    diffs, train_s, tokens = [], 0.0, 0.0
    try:
        with open(out / "metrics.jsonl", "w", encoding="utf-8") as f:
            for step, path in enumerate(tqdm(files, desc="replay", unit="step", disable=not progress)):
                groups = _read(path)
                t0 = time.perf_counter()
                row = group.train_on(groups)
                dt = time.perf_counter() - t0
                train_s, tokens = train_s + dt, tokens + row.get("learner/tokens", 0.0)
                row.update({"step": step, "learner/train_s": dt})
                if step in original and "learner/loss" in row:
                    diff = abs(row["learner/loss"] - original[step]["learner/loss"])
                    row["replay/loss_abs_diff"] = diff
                    diffs.append(diff)
                f.write(json.dumps(row) + "\n")
        final = str(out / "final")  # the model replay trained, as a checkpoint (`jury eval`, comparisons)
        group.save(final, {"replayed_from": str(run), "steps": len(files)})
    finally:
        group.kill()
        if started:
            ray.shutdown()
    summary = {"replay_dir": str(out), "steps": len(files), "ranks": cfg.learner.num_ranks,
               "zero_stage": cfg.learner.zero_stage, "learner_train_s": train_s,
               "learner_tokens_per_s": tokens / train_s if train_s else math.nan,
               # nan if any step's is (a non-finite loss on either side): max() would drop a nan after the first
               "loss_max_abs_diff": math.nan if not diffs or any(map(math.isnan, diffs)) else max(diffs),
               "final": final}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _read(path: Path) -> list:
    from jury.protocol.record import read_record

    try:
        return read_record(str(path))
    except Exception as e:  # msgpack's and the codec's errors alike: name the file
        raise ValueError(f"{path}: not a recorded batch ({type(e).__name__}: {e})") from None


def add_command(sub):
    p = sub.add_parser("replay", help="train again, synchronously, on a run's recorded groups")
    p.add_argument("run_dir", help="a run made with record_groups=true")
    p.add_argument("--out", default=None, help="output folder (default RUN_DIR/replay)")
    p.add_argument("--steps", type=int, default=0, help="replay only the first N steps")
    p.add_argument("overrides", nargs="*", help="learner settings over the run's, e.g. learner.num_ranks=2")
    p.set_defaults(func=_main)


def _main(args) -> int:
    import sys

    try:
        if args.steps < 0:
            raise ValueError(f"--steps {args.steps}: the first N steps, N >= 1 (0: all)")
        s = replay(args.run_dir, args.out, steps=args.steps, overrides=args.overrides)
    except (FileNotFoundError, ValueError) as e:
        print(f"jury replay: {e}", file=sys.stderr)
        return 2
    for k, v in s.items():
        print(f"{k:<22}{v:.6g}" if isinstance(v, float) else f"{k:<22}{v}")
    return 0
