"""The plans of docs/simulate.md, "Plans": every row of its two tables, simulated again.

    python benchmarks/sim_plans.py [--plan paper|32b|all] [--out runs/sim_plans]

Each row is one `jury simulate --config configs/qwen3-1.7b-jury.yaml --hardware ...` with the doc's
common assumptions (`COMMON`) and the row's own settings; the script prints each table as the doc
shows it (markdown), so that a change to the hardware table or the cost model is one command away
from the doc. Simulated, not measured: the hardware figures and their sources are in
configs/simulate/hardware.yaml.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

CONFIG = "configs/qwen3-1.7b-jury.yaml"
COMMON = ["eval.every=0", "costs.generation.lengths.median=600", "costs.generation.lengths.sigma=0.8",
          "costs.generation.prompt_tokens=200"]
PAPER_HW = "generator=l40s,learner=h100-sxm"
# a cold gate keeps a group for minutes: the driver's re-send (resend_after_s, 120 s by default) would
# generate and check the missing tasks again, which the simulator does not model, so the plan raises it
COLD = ["costs.verifier.gate_s=200", "resend_after_s=900"]
PAPER = [  # (label, overrides); the steps: `steps_for`
    ("as configured (sync, warm gate)", []),
    ("+ `max_staleness=1` (sync_mode drain, the default)", ["max_staleness=1"]),
    ("+ `max_staleness=1 generator.sync_mode=inflight`", ["max_staleness=1", "generator.sync_mode=inflight"]),
    ("+ `max_staleness=2`, inflight, `num_generators=16`",
     ["max_staleness=2", "generator.sync_mode=inflight", "num_generators=16"]),
    ("cold gate, as configured (2 verifiers)", COLD),
    ("cold gate, `num_verifiers=128`", [*COLD, "num_verifiers=128"]),
    ("cold gate, 128 verifiers, `max_staleness=2` (drain)", [*COLD, "num_verifiers=128", "max_staleness=2"]),
    ("cold gate, 512 verifiers, `max_staleness=2` (drain)", [*COLD, "num_verifiers=512", "max_staleness=2"]),
    ("cold gate, 1,024 verifiers, `max_staleness=2`, inflight",
     [*COLD, "num_verifiers=1024", "max_staleness=2", "generator.sync_mode=inflight"]),
    ("cold gate, 1,024 verifiers, `max_staleness=8`, inflight",
     [*COLD, "num_verifiers=1024", "max_staleness=8", "generator.sync_mode=inflight"]),
]
BIG = ["model=/mnt/models/Qwen2.5-32B", "generator.tensor_parallel_size=2", "num_generators=16",
       "learner.num_ranks=32", "learner.zero_stage=3", "generator.resources={}", "learner.resources={}"]
PLAN_32B = [
    ("sync, micro-batch 4", []),
    ("sync, `learner.micro_batch=16`", ["learner.micro_batch=16"]),
    ("micro-batch 16, `max_staleness=2`, inflight",
     ["learner.micro_batch=16", "max_staleness=2", "generator.sync_mode=inflight"]),
]


def steps_for(overrides: list[str]) -> int:
    """48 steps, or eight admission windows of timed steps after the warm-up where the window is wider.
    The simulator's floor for a steady state is four windows (simulate.STEADY_WINDOWS), but a plan's
    lognormal lengths are drawn per sample, and a short run's mean moves with its draw: the cold-gate,
    1,024-worker row at max_staleness 2 took 107.0, 98.5, 100.7 and 101.7 s a step at 16, 24, 48 and
    96 steps, and at max_staleness 8 (window 9) 33.6, 34.9 and 34.9 s at 38, 74 and 120."""
    from jury.experiments.simulate import STEADY_WINDOWS, WARMUP_STEPS
    from jury.protocol.config_load import load_config
    from jury.protocol.plan import make_plan

    window = make_plan(load_config(CONFIG, [o for o in overrides if not o.startswith("costs.")])).window
    return max(48, WARMUP_STEPS + 2 * STEADY_WINDOWS * window)


def simulate(hardware: str, overrides: list[str], out: Path) -> dict:
    from jury.experiments.cli import main

    steps = f"steps={steps_for(overrides)}"
    argv = ["simulate", "--config", CONFIG, "--hardware", hardware, "--out", str(out), *COMMON, steps, *overrides]
    if main(argv) != 0:
        raise SystemExit(f"sim_plans.py: jury {' '.join(argv)} failed")
    return json.loads((out / "simulate.json").read_text())


def per_step_traffic_s(overrides: list[str]) -> float:
    """The learner's per-step optimizer and ZeRO traffic (experiments/sim_gpu.learner_step_s)."""
    from jury.experiments.sim_gpu import learner_step_s, load_hardware, load_model
    from jury.protocol.config_load import load_config

    cfg = load_config(CONFIG, [o for o in [*COMMON, *BIG, *overrides] if not o.startswith("costs.")])
    return learner_step_s(load_model(cfg.model), load_hardware("h100-sxm")["learner"], cfg)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", choices=("paper", "32b", "all"), default="all")
    ap.add_argument("--out", default="", help="keep each row's simulate.json and timeline.png here")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="sim_plans-"))
    tables = []
    if args.plan in ("paper", "all"):
        lines = ["| setting | steps | s / step | tokens/s | mean staleness | idle: generator / learner / verifier | "
                 "wait / training / sync s |", "|---|---|---|---|---|---|---|"]
        for i, (label, overrides) in enumerate(PAPER):
            r = simulate(PAPER_HW, overrides, out / f"paper-{i}")["report"]
            lines.append(f"| {label} | {steps_for(overrides)} | {r['step_s']:,.1f} | {r['tokens_per_s']:,.0f} | "
                         f"{r['staleness_mean']:.2f} | "
                         f"{r['idle/generator']:.2f} / {r['idle/learner']:.2f} / {r['idle/verifier']:.2f} | "
                         f"{r['learner_wait_s']:.1f} / {r['learner_train_s']:.1f} / {r['sync_total_s']:.1f} |")
        tables.append(("JURY-RL at paper scale", lines))
    if args.plan in ("32b", "all"):
        lines = ["| setting | steps | s / step | tokens/s | mean staleness | idle: generator / learner | "
                 "learner: training / of which per-step ZeRO-3 traffic |", "|---|---|---|---|---|---|---|"]
        for i, (label, overrides) in enumerate(PLAN_32B):
            r = simulate("h100-sxm", [*BIG, *overrides], out / f"32b-{i}")["report"]
            lines.append(f"| {label} | {steps_for([*BIG, *overrides])} | {r['step_s']:.1f} | {r['tokens_per_s']:,.0f} | "
                         f"{r['staleness_mean']:.2f} | "
                         f"{r['idle/generator']:.2f} / {r['idle/learner']:.2f} | "
                         f"{r['learner_train_s']:.1f} s / {per_step_traffic_s(overrides):.1f} s |")
        tables.append(("A 32B learner over 4 nodes", lines))
    for title, lines in tables:
        print(f"\n### {title}\n")
        print("\n".join(lines))
    print(f"\nrun folders: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
