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
    """`jury bench`'s generator_only with `engines` engines: vLLM's auto binding each, or `binds`."""
    from jury.experiments.bench import generator_only

    return generator_only(cfg, model_path, tasks, binds or ["auto"] * engines)


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
