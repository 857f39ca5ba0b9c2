"""`jury check-sync`: is the weight plane right on this machine? (gloo on the CPU, NCCL on GPUs)

    pipe.start()                                  # the run's own actors, as `jury train` builds them
    group = generator0.generate(task)             # one group from the engine
    before = compare(pipe, prompt, completion)    # every engine's log-probs vs the learner's
    learner.train_on([group]); pipe.sync_weights()
    after = compare(pipe, prompt, completion)     # must agree again, and differ from before

The learner and every engine score the same fixed completion; after a sync they must agree to
`--tolerance` (1e-4 in float32; bf16 needs about 1e-2), and the step must have changed them.
"""
from __future__ import annotations

import sys

import numpy as np


def compare(pipe, prompt_ids: list[int], completion_ids: list[int]) -> dict[str, list[float]]:
    """Each engine's and the learner's log-prob of every completion token."""
    import ray

    out = {f"generator{i}": g.token_logprobs.remote(prompt_ids, completion_ids) for i, g in enumerate(pipe.generators)}
    out["learner"] = pipe.learner.logprobs_of(prompt_ids, completion_ids)[0]
    return {k: ray.get(v, timeout=300) for k, v in out.items()}


def max_gap(scores: dict[str, list[float]]) -> float:
    """The largest gap between any engine and the learner."""
    learner = np.asarray(scores["learner"])
    return max(float(np.abs(np.asarray(v) - learner).max()) for k, v in scores.items() if k != "learner")


def check_sync(pipe) -> dict[str, float]:
    """One group, one step, one sync on a started Pipeline; the gaps before and after and the change."""
    import ray

    from jury.protocol.messages import PromptTask, ScoredGroup, Verdict

    task = PromptTask(task_id="check-sync", index=0, prompt="Compute 12+7.\n", label="19", source="check-sync")
    group = ray.get(pipe.generators[0].generate.remote(task), timeout=600)
    prompt, completion = group.prompt_ids.tolist(), group.samples[0].token_ids.tolist()
    before = compare(pipe, prompt, completion)
    rewards = np.array([1.0] + [0.0] * (len(group.samples) - 1), np.float32)  # a gradient that moves the policy
    scored = ScoredGroup(group, [Verdict("correct", "check-sync", 0.0)] * len(rewards), rewards, "check-sync",
                         None, 0.0, None, 0, 0.0)
    pipe.learner.train_on([scored])
    sync = pipe.sync_weights()
    after = compare(pipe, prompt, completion)
    changed = float(np.abs(np.asarray(after["learner"]) - np.asarray(before["learner"])).max())
    return {"gap_before": max_gap(before), "gap_after": max_gap(after), "change": changed,
            "tokens": float(len(completion)), **sync}


def _run(args) -> int:
    from jury.models.registry import resolve_model
    from jury.cluster.pipeline import Pipeline
    from jury.protocol.config import ConfigError
    from jury.protocol.config_load import load_config

    try:
        cfg = load_config(args.config, ["steps=1", "batch_groups=1", "progress=false", *args.overrides])
    except (ConfigError, OSError) as e:
        print(f"jury check-sync: bad config: {e}", file=sys.stderr)
        return 2
    pipe = Pipeline(cfg, resolve_model(cfg.model, progress=cfg.progress))
    try:
        pipe.start()
        got = check_sync(pipe)
    finally:
        pipe.close()
    for k, v in got.items():
        print(f"{k:<24} {v:.6g}")
    ok = got["gap_after"] <= args.tolerance and got["change"] > args.tolerance
    print(f"weight sync ({cfg.weight_backend}, {cfg.num_generators} engine(s)): "
          + ("OK" if ok else f"FAILED: engines differ from the learner by {got['gap_after']:.3g} "
                             f"(tolerance {args.tolerance}) or the step changed nothing ({got['change']:.3g})"))
    return 0 if ok else 1


def add_command(sub):
    p = sub.add_parser("check-sync", help="check that a weight sync makes every engine score as the learner does")
    p.add_argument("--config", help="YAML config file (its model, backends and placement are used)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="max log-prob gap after a sync (bf16: ~1e-2)")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. weight_backend=nccl")
    p.set_defaults(func=_run)
