"""Several vLLM CPU engines on one machine: generation alone, with vLLM's own core binding against ours.

    python benchmarks/cpu_engines.py                      # 2 engines, the tiny model, 96 groups an arm, 2 rounds
    python benchmarks/cpu_engines.py --engines 2 --tasks 64 --rounds 3

Left to itself (VLLM_CPU_OMP_THREADS_BIND=auto), every vLLM CPU engine pins its worker's threads to
the same cores: all of the machine's but the last. The pipeline gives each engine cores of its own
instead (cluster.placement.engine_cpu_binds, when num_generators > 1). This runs E Generator actors
(the project's own, as `jury bench`'s generator_only arm runs one) fed from one Feeder, each arm
("auto", then "split") in turn for --rounds rounds, and prints the generated tokens/s of all the
engines together, after a warm-up of 8 groups an engine. No learner runs beside them: this is the
generators' side alone.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", type=int, default=2)
    p.add_argument("--tasks", type=int, default=96, help="groups timed per arm (after the warm-up)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", default="")
    p.add_argument("overrides", nargs="*", help="key=value run settings (the embedded default's otherwise)")
    args = p.parse_args()
    for name in ("engines", "tasks", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name} {getattr(args, name)}: at least 1")
    return args


def one_arm(cfg, model_path: str, engines: int, tasks: int, binds: list[str] | None) -> dict:
    import ray

    from jury.actors.generator import Generator
    from jury.cluster.feeder import Feeder
    from jury.protocol.messages import RolloutGroup
    from jury.protocol.transport import Receiver

    ray.init(num_cpus=2 + engines, include_dashboard=False, log_to_driver=False)
    sink = Receiver("127.0.0.1", hwm=1024, maxsize=1024, name="sink", accept=(RolloutGroup,))
    warm = 8 * engines
    feeder = Feeder(cfg.dataset, cfg.seed, tasks + warm, 1, "127.0.0.1")
    gens = []
    for i in range(engines):
        env = {"VLLM_CPU_KVCACHE_SPACE": str(cfg.generator.kv_cache_gib),
               "VLLM_CPU_OMP_THREADS_BIND": binds[i] if binds else "auto"}
        gens.append(ray.remote(Generator).options(num_cpus=1, runtime_env={"env_vars": env}).remote(
            cfg.generator, model_path, f"generator{i}", cfg.seed + i, cfg.max_model_len))
    try:
        ray.get([g.start.remote(feeder.endpoint, [sink.endpoint]) for g in gens])
        feeder.admit(0, stop_at=warm)
        for _ in range(warm):
            sink.get(timeout=300)
        t0 = time.perf_counter()
        feeder.admit(0, stop_at=tasks + warm)
        tokens = 0
        for _ in range(tasks):
            tokens += sum(len(s.token_ids) for s in sink.get(timeout=300).samples)
        dt = time.perf_counter() - t0
        ray.get([g.stop.remote() for g in gens])
    finally:
        feeder.close()
        sink.close()
        ray.shutdown()
    return {"tokens_per_s": tokens / dt, "groups_per_s": tasks / dt, "wall_s": dt}


def main():
    args = parse_args()
    from dataclasses import replace

    from jury.cluster.placement import engine_cpu_binds
    from jury.models.registry import resolve_model
    from jury.protocol.config_load import load_config

    cfg = load_config(None, args.overrides)
    model_path = resolve_model(cfg.model, progress=False)
    cfg = replace(cfg, model=model_path)
    cores = sorted(os.sched_getaffinity(0))
    split = engine_cpu_binds(args.engines, cores)
    rows = []
    for r in range(args.rounds):
        for arm, binds in (("auto", None), ("split", split)):
            result = one_arm(cfg, model_path, args.engines, args.tasks, binds)
            rows.append({"round": r + 1, "arm": arm, "binds": binds or "auto", **result})
            print(f"round {r + 1} {arm:5s} {result['tokens_per_s']:8.0f} tokens/s  {result['groups_per_s']:6.2f} "
                  f"groups/s", file=sys.stderr, flush=True)
    mean = {arm: sum(x["tokens_per_s"] for x in rows if x["arm"] == arm) / args.rounds for arm in ("auto", "split")}
    print(f"{args.engines} engines on cores {cores}: split {split}; tokens/s auto {mean['auto']:.0f}, split "
          f"{mean['split']:.0f} ({mean['split'] / mean['auto']:.2f}x)", file=sys.stderr)
    line = json.dumps({"engines": args.engines, "cores": cores, "split": split, "rows": rows, "mean": mean})
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
