"""JURY-RL's label-free baselines on the chain task, one short run each: the figures of docs/results.md.

    python benchmarks/chain_baselines.py --run [--out runs/chain-baselines] [--steps 8]
    python benchmarks/chain_baselines.py DIR      # the report of runs already in DIR

Every run is configs/chain.yaml (the tiny-chain policy, G = 8, 8 groups a step) with one reward:
ground_truth (the reference), llm_judge (the judge: the tiny model), llm_kd (the teacher: tiny-chain
itself, greedy, so the pseudo-label is the initial policy's greedy answer), coreward with rewrites
from the dataset (a file of chain problems whose `rewrite` column says "Compute the sum 18+19." for
"Compute 18+19.", a wording the tiny-chain model still half follows) and coreward with rewrites
from an LLM at admission (the tiny model as rewriter: it cannot write Co-rewarding-I's marked
format, so every rewrite is refused and every group earns 0; the run shows the wiring and its cost).
None of these local judges, teachers or rewriters is a real one: the figures are the pipeline's,
not the methods'. The report: pass rate (the label check) in the first and second half, mean
reward, wall time and start-up, and the LLM calls of the run's judge, teacher or rewriter.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import run_set

RUNS = {
    "ground_truth": ["verifier.reward=ground_truth"],
    "llm_judge": ["verifier.reward=llm_judge", "verifier.judge_model=tiny", "verifier.judge_max_tokens=32"],
    "llm_kd": ["verifier.reward=llm_kd", "verifier.teacher_model=tiny-chain", "verifier.teacher_max_tokens=576"],
    "coreward_data": ["verifier.reward=coreward", "verifier.rewrites=data", "data.rewrite_key=rewrite",
                      "data.shuffle=false"],
    "coreward_llm": ["verifier.reward=coreward", "verifier.rewrites=llm", "verifier.rewrite_model=tiny",
                     "verifier.rewrite_max_tokens=64", "verifier.rewrite_ahead=64", "verifier.rewrite_batch=32"],
}
CALLS = {"llm_judge": "judge/llm_calls", "llm_kd": "kd/llm_calls", "coreward_llm": "coreward/llm_calls"}


def write_rewrites(path: Path, n: int = 4000, seed: int = 0):
    """Chain problems (the run's own stream) with a `rewrite` column: the same sum, other words."""
    from jury.data.tasks import chain_problems

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for _, p in zip(range(n), chain_problems(seed)):
            rewrite = "Compute the sum " + p.problem.removeprefix("Compute ")
            f.write(json.dumps({"problem": p.problem, "answer": p.answer, "rewrite": rewrite}) + "\n")


def commands(out: Path, steps: int) -> dict[str, list[str]]:
    config = str(Path(__file__).resolve().parents[1] / "configs" / "chain.yaml")
    data = out / "chain_rewrites.jsonl"
    runs = {}
    for name, overrides in RUNS.items():
        extra = [f"dataset={data}"] if name == "coreward_data" else []
        runs[name] = [sys.executable, "-m", "jury.experiments.cli", "train", "--config", config, f"steps={steps}",
                      f"run_dir={out / name}", "progress=false", *extra, *overrides]
    return runs


def summary(run_dir: Path) -> dict:
    import yaml

    from jury.cluster.metrics import read_metrics

    rows = read_metrics(run_dir)
    half = max(1, len(rows) // 2)
    mean = lambda xs: sum(xs) / len(xs) if xs else math.nan  # noqa: E731
    out = {"steps": len(rows),
           "pass_first": mean([r["reward/pass_rate"] for r in rows[:half]]),
           "pass_second": mean([r["reward/pass_rate"] for r in rows[half:]]),
           "reward": mean([r["reward/mean"] for r in rows]),
           "reward_std": mean([r["reward/std"] for r in rows]),
           "verify_s": mean([r["verifier/verify_s"] for r in rows]),  # per group: the judge's or teacher's time
           "wall_s": yaml.safe_load((run_dir / "summary.yaml").read_text()).get("wall_s", math.nan),
           "startup_s": yaml.safe_load((run_dir / "summary.yaml").read_text()).get("startup_s", math.nan)}
    name = run_dir.name
    if name in CALLS:
        out["llm_calls"] = sum(r.get(CALLS[name], 0.0) for r in rows)
    for key in ("judge/no_verdict", "judge/cache_hits", "kd/no_teacher_answer", "kd/unlabelled_groups",
                "coreward/no_rewrite_groups", "coreward/views_agree", "coreward/rewrites_written",
                "coreward/rewrites_unparsable", "coreward/admitted_without_rewrite"):
        if any(key in r for r in rows):
            out[key] = sum(r.get(key, 0.0) for r in rows)
    return out


def report(root: Path) -> str:
    lines = ["| run | steps | pass rate 1st half | 2nd half | mean reward | reward std | verify s/group | wall s (start-up) "
             "| LLM calls | counters |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in RUNS:
        if not (root / name / "summary.yaml").is_file():
            continue
        s = summary(root / name)
        counters = ", ".join(f"{k} {v:g}" for k, v in s.items() if "/" in k)
        lines.append(f"| {name} | {s['steps']} | {s['pass_first']:.3f} | {s['pass_second']:.3f} | {s['reward']:.3f} | "
                     f"{s['reward_std']:.3f} | {s['verify_s']:.2f} | {s['wall_s']:.0f} ({s['startup_s']:.0f}) | "
                     f"{s.get('llm_calls', 0):g} | {counters} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    return run_set.main(argv, doc=__doc__, out="runs/chain-baselines", steps=8, commands=commands, report=report, names=RUNS,
                    prepare=lambda root: write_rewrites(root / "chain_rewrites.jsonl"))


if __name__ == "__main__":
    sys.exit(main())
