"""Generator-only vs end-to-end tokens/s, for max_staleness 0 and 2, in one run.

Generator-only: one generator actor fed as fast as it takes tasks, its groups
dropped by a sink in this process (no verifier, no learner, no weight sync).
End to end: `jury train` with the same model, group size and completion length,
measured over the training loop (engine start-up excluded). The ratio says how much
of the generator's speed the whole loop keeps.

    python benchmarks/pipeline.py [--steps 30] [--batch-groups 8] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time


def generator_only(cfg, model_path: str, tasks: int) -> dict:
    import ray

    from jury.actors.generator import Generator
    from jury.cluster.feeder import Feeder
    from jury.cluster.messages import RolloutGroup
    from jury.cluster.transport import Receiver

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    sink = Receiver("127.0.0.1", hwm=1024, maxsize=1024, name="sink")
    # one "batch" of every task: the feeder's staleness bound never holds the generator back here
    feeder = Feeder(cfg.dataset, cfg.seed, tasks + 8, 0, "127.0.0.1")
    gen = ray.remote(Generator).options(
        num_cpus=1, runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": str(cfg.generator.kv_cache_gib)}}
    ).remote(cfg.generator, model_path, "generator0", cfg.seed, cfg.max_model_len)
    try:
        ray.get(gen.start.remote(feeder.endpoint, [sink.endpoint]))
        feeder.admit(0, stop_at=8)  # warm-up: the first generate is slow on vLLM's CPU backend
        for _ in range(8):
            sink.get(timeout=300)
        t0 = time.perf_counter()
        feeder.admit(0, stop_at=tasks + 8)
        tokens = 0
        for _ in range(tasks):
            g = sink.get(timeout=300)
            assert isinstance(g, RolloutGroup)
            tokens += sum(len(s.token_ids) for s in g.samples)
        dt = time.perf_counter() - t0
        ray.get(gen.stop.remote())
    finally:
        feeder.close()
        sink.close()
        ray.shutdown()
    return {"tokens_per_s": tokens / dt, "groups_per_s": tasks / dt, "tokens": tokens}


def end_to_end(model_path: str, steps: int, batch_groups: int, staleness: int, extra: list[str]) -> dict:
    from jury.cluster.config import load_config
    from jury.cluster.driver import train
    from jury.cluster.metrics import read_metrics

    with tempfile.TemporaryDirectory() as d:
        cfg = load_config(None, [f"model={model_path}", f"run_dir={d}", f"steps={steps}",
                                 f"batch_groups={batch_groups}", f"max_staleness={staleness}", "progress=false",
                                 *extra])
        train(cfg)
        rows = read_metrics(d)
    rows = rows[2:]  # the first steps include vLLM's slow first generate
    wall = sum(r["perf/step_s"] for r in rows)
    tokens = sum(r["rollout/tokens"] for r in rows)
    return {"tokens_per_s": tokens / wall, "groups_per_s": len(rows) * batch_groups / wall,
            "step_s": wall / len(rows), "learner_wait_s": sum(r["learner/wait_s"] for r in rows) / len(rows),
            "learner_train_s": sum(r["learner/train_s"] for r in rows) / len(rows),
            "sync_s": sum(r.get("sync/total_s", 0.0) for r in rows) / len(rows),
            "reward_mean": sum(r["reward/mean"] for r in rows) / len(rows)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-groups", type=int, default=8)
    ap.add_argument("--json", default="")
    ap.add_argument("overrides", nargs="*", help="extra key=value config overrides for every run")
    args = ap.parse_args()
    from jury.cluster.config import load_config
    from jury.cluster.driver import resolve_model

    cfg = load_config(None, args.overrides)
    model_path = resolve_model(cfg)
    results = {"generator_only": generator_only(cfg, model_path, args.steps * args.batch_groups)}
    for m in (0, 2):
        results[f"end_to_end_staleness_{m}"] = end_to_end(model_path, args.steps, args.batch_groups, m,
                                                           args.overrides)
    gen = results["generator_only"]["tokens_per_s"]
    print(f"\n{'setting':<28}{'tokens/s':>10}{'groups/s':>10}{'vs gen-only':>13}{'step s':>8}{'wait s':>8}{'train s':>9}{'sync s':>8}")
    for name, r in results.items():
        print(f"{name:<28}{r['tokens_per_s']:>10.0f}{r['groups_per_s']:>10.2f}{r['tokens_per_s'] / gen:>13.2f}"
              f"{r.get('step_s', float('nan')):>8.2f}{r.get('learner_wait_s', float('nan')):>8.2f}"
              f"{r.get('learner_train_s', float('nan')):>9.2f}{r.get('sync_s', float('nan')):>8.2f}")
    s0, s2 = (results[f"end_to_end_staleness_{m}"]["tokens_per_s"] for m in (0, 2))
    print(f"async (max_staleness 2) / sync (0): {s2 / s0:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
