"""A CPU engine's layouts side by side, in whole `jury train` runs.

    python benchmarks/engine_layout.py                        # 40 steps of the embedded default, 2 rounds
    python benchmarks/engine_layout.py --steps 60 --rounds 3 learner.threads=2
    python benchmarks/engine_layout.py --layouts spawn,inline --steps 4 --warmup 1 --rounds 3

On the CPU the pipeline runs each vLLM engine's model inside its engine core, which it forks from
the generator actor ("inline", actors/cpu_engine.py). "spawn" is the same engine core spawned, as
vLLM starts it in a Ray actor (JURY_CPU_ENGINE_START=spawn): it imports vLLM and torch again. vLLM's
own layout ("vllm", VLLM_ENABLE_V1_MULTIPROCESSING=1) starts a worker process beside the engine core
and pins it; the worker spins after each message. This runs the same `jury train` in each layout in
turn for --rounds rounds, each in a process of its own, and prints what a user sees: the start-up
(summary.yaml's startup_s), the tokens trained a second after the first --warmup steps, and the
learner's forward-backward and wait a step over the same steps. With two layouts it prints the
second's figures over the first's, round by round.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# the environment of each: vLLM's two processes; the model in the engine core, spawned as vLLM starts it;
# the same forked from the generator actor (the pipeline's default on the CPU)
LAYOUTS = {"vllm": {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}, "spawn": {"JURY_CPU_ENGINE_START": "spawn"},
           "inline": {}}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10,
                   help="the throughput is timed from the end of this step: steps 0..WARMUP are left out")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--layouts", default="vllm,inline", help=f"of {','.join(LAYOUTS)}, in this order each round")
    p.add_argument("--json", default="")
    p.add_argument("overrides", nargs="*", help="key=value run settings (the embedded default's otherwise)")
    args = p.parse_args(argv)
    for name in ("steps", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name} {getattr(args, name)}: at least 1")
    if not 0 <= args.warmup < args.steps - 1:
        p.error(f"--warmup {args.warmup}: from 0 to --steps - 2 ({args.steps - 2}), so that a step is timed")
    from jury.protocol.config import ConfigError
    from jury.protocol.config_load import load_config

    try:
        load_config(None, args.overrides)  # refused here, by name, not after a run has started
    except ConfigError as e:
        p.error(f"settings: {e}")
    args.layouts = args.layouts.split(",")
    unknown = [x for x in args.layouts if x not in LAYOUTS]
    if unknown or not args.layouts:
        p.error(f"--layouts: {unknown or 'none'} not among {', '.join(LAYOUTS)}")
    return args


def measure(run_dir: Path, warmup: int) -> dict:
    """A finished run's figures: start-up, tokens trained a second over steps warmup.. last (between
    the metrics rows' time_s), and the learner's mean forward-backward and wait a step over them."""
    import yaml

    from jury.cluster.metrics import read_metrics

    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    rows = [r for r in read_metrics(run_dir) if "step" in r and "time_s" in r]
    if len(rows) < warmup + 2:
        raise ValueError(f"{run_dir}: {len(rows)} steps in metrics.jsonl, fewer than --warmup + 2")
    first, timed = rows[warmup], rows[warmup + 1:]
    span = timed[-1]["time_s"] - first["time_s"]
    inline = [v for k, v in summary.items() if k.endswith("/engine_inline")]
    forked = [v for k, v in summary.items() if k.endswith("/engine_forked")]
    return {"startup_s": summary["startup_s"], "tokens_per_s": sum(r["learner/tokens"] for r in timed) / span,
            "forward_backward_s": sum(r["learner/forward_backward_s"] for r in timed) / len(timed),
            "wait_s": sum(r["learner/wait_s"] for r in timed) / len(timed),
            "engine_inline": bool(inline) and all(inline), "engine_forked": bool(forked) and all(forked)}


def one_run(layout: str, steps: int, overrides: list[str], folder: Path) -> Path:
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_ENABLE_V1_MULTIPROCESSING", "JURY_CPU_ENGINE_START")}
    env.update(LAYOUTS[layout])
    run_dir = folder / layout
    done = subprocess.run([sys.executable, "-m", "jury.experiments.cli", "train", f"steps={steps}", f"run_dir={run_dir}",
                           "progress=false", *overrides], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"jury train ({layout}) exited {done.returncode}: {done.stderr[-2000:]}")
    return run_dir


def main(argv=None):
    args = parse_args(argv)
    rows = []
    print(f"{'round':>5} {'layout':>7} {'startup s':>10} {'tokens/s':>9} {'fwd-bwd s':>10} {'wait s':>7}")
    for r in range(args.rounds):
        for layout in args.layouts:
            with tempfile.TemporaryDirectory(prefix="engine-layout-") as tmp:
                m = measure(one_run(layout, args.steps, args.overrides, Path(tmp)), args.warmup)
            if (m["engine_inline"], m["engine_forked"]) != (layout != "vllm", layout == "inline"):
                raise RuntimeError(f"the {layout} run's generators report engine_inline={m['engine_inline']}, "
                                   f"engine_forked={m['engine_forked']}")
            rows.append({"round": r + 1, "layout": layout, **m})
            print(f"{r + 1:>5} {layout:>7} {m['startup_s']:10.1f} {m['tokens_per_s']:9.0f} "
                  f"{m['forward_backward_s']:10.3f} {m['wait_s']:7.3f}", flush=True)
    if len(args.layouts) == 2:
        a, b = args.layouts
        for key in ("startup_s", "tokens_per_s", "forward_backward_s"):
            ratios = [y[key] / x[key] for x, y in zip(rows[0::2], rows[1::2])]
            print(f"{key}: {b} over {a}, each round: " + ", ".join(f"{q:.2f}x" for q in ratios))
    result = {"config": {k: v for k, v in vars(args).items() if k != "json"}, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
