"""`jury bench`: throughput of the whole pipeline and of each stage alone, in one report.

    generator only   one generator fed as fast as it takes tasks; a sink drops its groups
    end to end       `jury train` at each max_staleness asked for (0 = synchronous), with
                     record_groups on, timed over the loop (engine start-up left out);
                     --sync-modes adds the largest max_staleness under each generator.sync_mode;
                     --arm NAME:K=V... adds it with other settings (a setting's cost, as a ratio
                     to the same run without them)
    learner only     `jury replay` of the synchronous run's record: the learner on
                     recorded batches, nothing else running
    verifier only    the same record's rollout groups through one verifier worker, in process
    critic (--critic) the same record replayed again with learner.advantage=gae: the learner with
                     a value model beside the policy, on the same batches; the ratio is its cost
    peer (--peer)    TRL's GRPOTrainer on the same model, data, G, completion length and
                     steps (benchmarks/trl_peer.py), completions/s side by side with ours

Every figure comes from this one invocation, so ratios compare like with like. Each end-to-end
run also reports its engine's occupancy (sequences running, mean and as a share of the
sequences one batch needs) and the tail's share of a step: the time the engine ran some
sequences but fewer than a quarter of a batch's, while a synchronous step waits for its
stragglers (actors/occupancy.py). Output: a table on the terminal, bench.json,
throughput.png, time.png and occupancy.png (sequences running over time, per run) in --out.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from jury.experiments.bench_rows import WARMUP_STEPS, engine_steps, run_summary  # noqa: F401  (bench's names)



def generator_only(cfg, model_path: str, tasks: int, binds: list[str] | None = None) -> dict:
    """Engines generating alone, fed every task at once: tokens/s over `tasks` groups after a warm-up
    of 8 a engine. One engine by default (vLLM's own CPU binding); `binds`: one engine each, with
    that VLLM_CPU_OMP_THREADS_BIND (benchmarks/cpu_engines.py compares bindings so)."""
    import ray

    from jury.actors.generator import Generator
    from jury.cluster.feeder import Feeder
    from jury.protocol.messages import RolloutGroup
    from jury.protocol.transport import Receiver

    engines = len(binds) if binds else 1
    ray.init(num_cpus=max(4, 2 + engines), include_dashboard=False, log_to_driver=False)
    sink = Receiver("127.0.0.1", hwm=1024, maxsize=1024, name="sink", accept=(RolloutGroup,))
    warm = 8 * engines  # the first generate is slow on vLLM's CPU backend
    # one "batch" of every task: the feeder's staleness bound never holds a generator back here
    feeder = Feeder(cfg.dataset, cfg.seed, tasks + warm, 1, "127.0.0.1")
    gens = []
    for i in range(engines):
        env = {"VLLM_CPU_KVCACHE_SPACE": str(cfg.generator.kv_cache_gib)}
        if binds:
            env["VLLM_CPU_OMP_THREADS_BIND"] = binds[i]
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
            g = sink.get(timeout=300)
            if not isinstance(g, RolloutGroup):
                raise RuntimeError(f"generator-only: expected a RolloutGroup, got {type(g).__name__}")
            tokens += sum(len(s.token_ids) for s in g.samples)
        dt = time.perf_counter() - t0
        ray.get([g.stop.remote() for g in gens])
    finally:
        feeder.close()
        sink.close()
        ray.shutdown()
    return {"tokens_per_s": tokens / dt, "groups_per_s": tasks / dt,
            "completions_per_s": tasks * cfg.generator.group_size / dt, "wall_s": dt}


def end_to_end(cfg, run_dir: Path) -> dict:
    """One training run; per-stage times and idle fractions from its metrics.jsonl."""
    from dataclasses import replace

    from jury.cluster.driver import train

    summary = train(replace(cfg, run_dir=str(run_dir), record_groups=True, progress=False))
    return run_summary(cfg, run_dir, summary)


def learner_only(run_dir: Path, overrides: tuple[str, ...] = (), name: str = "replay") -> dict:
    from jury.experiments.replay import replay

    s = replay(str(run_dir), str(run_dir / name), progress=False, overrides=list(overrides))
    rows = [json.loads(line) for line in open(run_dir / name / "metrics.jsonl")][WARMUP_STEPS:]
    train_s = sum(r["learner/train_s"] for r in rows)
    return {"tokens_per_s": sum(r["learner/tokens"] for r in rows) / train_s, "step_s": train_s / len(rows),
            "loss_max_abs_diff": s["loss_max_abs_diff"]}


def verifier_only(cfg, run_dir: Path) -> dict:
    """The recorded rollout groups through one worker (its process pool included), in this process."""
    from jury.experiments.replay import record_steps
    from jury.protocol.record import read_record
    from jury.verifiers.math.checker import VerdictCache
    from jury.verifiers.worker import VerifierWorker

    if cfg.verifier.reward == "tinyv" or cfg.verifier.gate == "lean":
        return {"skipped": f"verifier-only needs its LLMs (reward {cfg.verifier.reward}, gate {cfg.verifier.gate})"}
    from jury.cluster.recipes import CheckerRecipe, GateFactory, SchemeRecipe

    groups = [g.group for f in record_steps(run_dir) for g in read_record(str(f))]
    for g in groups:
        for s in g.samples:
            s.answer = None  # as a generator sends it
    gate = GateFactory(cfg.verifier.gate) if cfg.verifier.gate != "none" else None
    worker = VerifierWorker(cfg.verifier, "bench", checker=CheckerRecipe(cfg.verifier),
                            scheme=SchemeRecipe(cfg.verifier, gate))
    try:
        worker.score(groups[0])  # start the pool's processes outside the timing
        worker.checker.cache = VerdictCache(cfg.verifier.cache_size)  # and nothing cached by that call
        t0 = time.perf_counter()
        for g in groups:
            worker.score(g)
        dt = time.perf_counter() - t0
    finally:
        worker.stop()
    samples = sum(len(g.samples) for g in groups)
    return {"groups_per_s": len(groups) / dt, "samples_per_s": samples / dt, "groups": len(groups),
            "cache_hit_rate": worker.stats()["verifier/cache_hit_rate"]}


def peer(cfg, model_path: str, out: Path) -> dict:
    """TRL's GRPOTrainer on the same model, prompts, G, completion length, steps and learning rate,
    in a process of its own (its colocated vLLM engine opens a torch.distributed group)."""
    import subprocess

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "trl_peer.py"
    if not script.exists():
        return {"skipped": f"{script} not found (a source checkout has it)"}
    result = out / "peer_trl.json"
    cmd = [sys.executable, str(script), "--model", model_path, "--steps", str(cfg.steps),
           "--prompts-per-step", str(cfg.batch_groups), "--group-size", str(cfg.generator.group_size),
           "--max-new-tokens", str(cfg.generator.max_new_tokens), "--seed", str(cfg.seed), "--json", str(result),
           "--dataset", cfg.dataset, "--max-model-len", str(cfg.max_model_len)]
    # not this process's torch.distributed settings (the learner-only replay set them, and holds the port)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK",
                                                            "WORLD_SIZE", "LOCAL_WORLD_SIZE")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"TRL peer failed: {last}"}
    return json.loads(result.read_text())


def planned_runs(staleness: list[int], sync_modes: list[str], config_mode: str) -> list[tuple[int, str | None]]:
    """The end-to-end runs, in order: each max_staleness under the config's sync mode (None),
    then the largest under each other mode asked for (the config's own is not run twice)."""
    top = max(staleness)
    return [(k, None) for k in staleness] + [(top, m) for m in dict.fromkeys(sync_modes) if m != config_mode]


def parse_arm(text: str) -> tuple[str, list[str]]:
    """`NAME:KEY=VALUE [KEY=VALUE ...]` -> (name, overrides). The name labels the run and its ratio."""
    import re
    import shlex

    name, sep, rest = text.partition(":")
    overrides = shlex.split(rest)
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or not overrides or not all("=" in o for o in overrides):
        raise ValueError(f"--arm {text!r}: expected NAME:KEY=VALUE [KEY=VALUE ...], a name of letters, digits, "
                         "'_', '.' or '-'")
    return name, overrides


def bench(cfg, out: Path, staleness: list[int], with_peer: bool = False, sync_modes: list[str] = (),
          arms: list[tuple[str, object]] = (), with_critic: bool = False) -> dict:
    """`arms`: (name, config) pairs, each run end to end at the largest max_staleness (the config's
    own overrides plus the arm's, loaded and checked by the caller)."""
    from dataclasses import replace

    from jury.experiments.sim_costs import machine_cores
    from jury.models.registry import resolve_model

    out.mkdir(parents=True, exist_ok=True)
    model_path = resolve_model(cfg.model, progress=cfg.progress)
    cfg = replace(cfg, model=model_path)
    report: dict = {"config": {"steps": cfg.steps, "batch_groups": cfg.batch_groups,
                               "group_size": cfg.generator.group_size, "max_new_tokens": cfg.generator.max_new_tokens,
                               "staleness": staleness, "dataset": cfg.dataset, "sync_mode": cfg.generator.sync_mode,
                               "sync_modes": list(sync_modes), "arms": [name for name, _ in arms],
                               # the cores the roles shared (jury simulate's cores model reads it)
                               "cores": machine_cores()}}
    report["generator_only"] = generator_only(cfg, model_path, (cfg.steps - WARMUP_STEPS) * cfg.batch_groups)
    for k, mode in planned_runs(staleness, sync_modes, cfg.generator.sync_mode):
        if mode is None:
            report[f"end_to_end/max_staleness={k}"] = end_to_end(replace(cfg, max_staleness=k), out / f"staleness-{k}")
        else:
            report[f"end_to_end/max_staleness={k},{mode}"] = end_to_end(
                replace(cfg, max_staleness=k, generator=replace(cfg.generator, sync_mode=mode)),
                out / f"staleness-{k}-{mode}")
    top = max(staleness)
    for name, arm_cfg in arms:
        report[f"end_to_end/max_staleness={top},{name}"] = end_to_end(
            replace(arm_cfg, model=model_path, max_staleness=top), out / f"staleness-{top}-{name}")
    recorded = out / f"staleness-{staleness[0]}"
    report["learner_only"] = learner_only(recorded)
    report["verifier_only"] = verifier_only(cfg, recorded)
    if with_critic:
        report["learner_only/gae"] = learner_only(recorded, ("learner.advantage=gae",), "replay-gae")
    if with_peer:
        report["peer/trl"] = peer(cfg, model_path, out)
    sync = report[f"end_to_end/max_staleness={staleness[0]}"]
    arm_runs = {f"end_to_end/max_staleness={top},{name}" for name, _ in arms}  # other settings: not in the race
    fastest_name, fastest = max(((k, v) for k, v in report.items() if k.startswith("end_to_end/") and k not in arm_runs),
                                key=lambda kv: kv[1]["completions_per_s"])
    report["ratios"] = {
        f"async/sync (max_staleness {top} / {staleness[0]}, completions/s)":
            report[f"end_to_end/max_staleness={top}"]["completions_per_s"] / sync["completions_per_s"],
        f"fastest/sync ({fastest_name.removeprefix('end_to_end/')}, completions/s)":
            fastest["completions_per_s"] / sync["completions_per_s"],
        "end_to_end/generator_only (tokens/s)": fastest["tokens_per_s"] / report["generator_only"]["tokens_per_s"],
    }
    base = report[f"end_to_end/max_staleness={top}"]
    for name, _ in arms:
        arm = report[f"end_to_end/max_staleness={top},{name}"]
        report["ratios"][f"{name}/default (max_staleness {top}, completions/s)"] = \
            arm["completions_per_s"] / base["completions_per_s"]
        report["ratios"][f"{name}/default (max_staleness {top}, learner s per step)"] = \
            arm["learner_train_s"] / base["learner_train_s"]
    if with_critic:
        report["ratios"]["learner with a critic / without (learner-only step s, same batches)"] = \
            report["learner_only/gae"]["step_s"] / report["learner_only"]["step_s"]
    if "completions_per_s" in report.get("peer/trl", {}):
        trl = report["peer/trl"]
        report["ratios"][f"ours/trl ({fastest_name.removeprefix('end_to_end/')}, completions/s)"] = fastest["completions_per_s"] / trl["completions_per_s"]
        report["ratios"]["ours/trl (tokens/s)"] = fastest["tokens_per_s"] / trl["tokens_per_s"]
    (out / "bench.json").write_text(json.dumps(report, indent=2))
    plot_bench(report, out)
    return report


def format_bench(report: dict) -> str:
    lines = [f"{'stage':<28}{'tokens/s':>10}{'groups/s':>10}{'compl/s':>9}{'step s':>8}"
             f"{'idle gen':>9}{'idle ver':>9}{'idle lrn':>9}"]
    for name, r in report.items():
        if name in ("config", "ratios") or "skipped" in r:
            continue
        f = lambda key, spec: format(r[key], spec) if key in r else ""  # noqa: E731
        lines.append(f"{name:<28}{f('tokens_per_s', '>10.0f'):>10}{f('groups_per_s', '>10.2f'):>10}"
                     f"{f('completions_per_s', '>9.1f'):>9}{f('step_s', '>8.3f'):>8}{f('idle/generator', '>9.0%'):>9}"
                     f"{f('idle/verifier', '>9.0%'):>9}{f('idle/learner', '>9.0%'):>9}")
    e2e = {k: v for k, v in report.items() if k.startswith("end_to_end/")}
    lines.append("")
    lines.append(f"{'end to end':<28}{'wait s':>8}{'train s':>8}{'sync s':>8}{'gather':>8}{'bcast':>8}"
                 f"{'pause s':>8}{'q feed':>7}{'q gen':>7}{'q ver':>7}{'q lrn':>7}{'stale':>7}{'ver share':>10}"
                 f"{'running':>8}{'of batch':>9}{'tail':>6}")
    for k, r in e2e.items():
        lines.append(f"{k.removeprefix('end_to_end/'):<28}{r['learner_wait_s']:>8.3f}{r['learner_train_s']:>8.3f}"
                     f"{r['sync_total_s']:>8.3f}{r['sync_gather_s']:>8.3f}{r['sync_broadcast_s']:>8.3f}"
                     f"{r['generator_pause_s']:>8.3f}{r['queue/feeder']:>7.1f}{r['queue/generator_tasks']:>7.1f}"
                     f"{r['queue/verifier']:>7.1f}{r['queue/learner']:>7.1f}{r['staleness_mean']:>7.2f}"
                     f"{r['verify_share_of_life']:>10.1%}{r['occupancy_mean']:>8.1f}{r['occupancy_of_batch']:>9.0%}"
                     f"{r['tail_share']:>6.0%}")
    for name, r in report.items():
        if isinstance(r, dict) and "skipped" in r:
            lines.append(f"{name}: skipped: {r['skipped']}")
    lines.append("")
    lines += [f"{k}: {v:.2f}x" for k, v in report["ratios"].items()]
    return "\n".join(lines)


def plot_bench(report: dict, out: Path) -> list[Path]:
    """throughput.png: tokens/s per stage; time.png: where an end-to-end step's time goes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [(k, v) for k, v in report.items() if isinstance(v, dict) and "tokens_per_s" in v]
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(stages)), 4))
    ax.bar([k.replace("end_to_end/", "e2e ").replace("_", " ") for k, _ in stages],
           [v["tokens_per_s"] for _, v in stages], color="tab:blue")
    ax.set_ylabel("tokens/s")
    ax.set_title("throughput by stage (one run of jury bench)")
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    paths = [out / "throughput.png"]
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)

    e2e = [(k.removeprefix("end_to_end/"), v) for k, v in report.items() if k.startswith("end_to_end/")]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(e2e)), 4))
    bottom = [0.0] * len(e2e)
    for key, label in (("learner_wait_s", "learner waits for groups"), ("learner_train_s", "learner trains"),
                       ("sync_total_s", "weight sync")):
        vals = [v[key] for _, v in e2e]
        ax.bar([k for k, _ in e2e], vals, bottom=bottom, label=label)
        bottom = [b + x for b, x in zip(bottom, vals)]
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")  # run names overlap side by side
    ax.set_ylabel("seconds per learner step")
    ax.set_title("where a step's time goes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "time.png")
    fig.savefig(paths[1], dpi=110)
    plt.close(fig)

    # occupancy.png: sequences running in the (first) engine over the timed loop, one panel per run
    fig, axes = plt.subplots(len(e2e), 1, figsize=(9, 1.8 * len(e2e) + 0.6), sharex=True, squeeze=False)
    batch = report["config"]["batch_groups"] * report["config"]["group_size"]
    for ax, (name, r) in zip(axes[:, 0], e2e):
        gens = json.loads((Path(r["run_dir"]) / "occupancy.json").read_text())["generators"]
        for gen_name, t in list(gens.items())[:1]:
            xs = [x - r["loop_start_s"] for x in t["t"]]
            keep = [i for i, x in enumerate(xs) if x >= 0]
            ax.fill_between([xs[i] for i in keep], [t["running"][i] for i in keep], step="post", alpha=0.6,
                            label="running")
            ax.plot([xs[i] for i in keep], [t["waiting"][i] for i in keep], lw=0.6, color="tab:red",
                    label="waiting")
            if "tokens" in t:  # the engine's pace: tokens it generated a second, bin by bin
                twin = ax.twinx()
                twin.plot([xs[i] for i in keep], [t["tokens"][i] / t["bin_s"] for i in keep], lw=0.5,
                          color="tab:green", alpha=0.8)
                twin.set_ylabel("tokens/s", fontsize=7, color="tab:green")
                twin.tick_params(labelsize=6, colors="tab:green")
        ax.axhline(batch, color="gray", lw=0.8, ls="--", label="one batch")
        ax.set_ylabel("sequences", fontsize=8)
        pace = (f", a step {1e3 * r['engine_step_s']:.1f} ms at {r['engine_tokens_per_step']:.0f} tokens"
                if "engine_step_s" in r else "")
        ax.set_title(f"{name}: mean {r['occupancy_mean']:.1f} running, tail {r['tail_share']:.0%} of a step{pace}",
                     fontsize=9)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("seconds since the timed loop began")
    fig.tight_layout()
    paths.append(out / "occupancy.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def add_command(sub):
    p = sub.add_parser("bench", help="throughput of the pipeline and of each stage alone, in one report")
    p.add_argument("--config", help="YAML config (default: the embedded default)")
    p.add_argument("--steps", type=int, default=30, help="learner steps per end-to-end run")
    p.add_argument("--staleness", default="0,1,2", help="max_staleness values, the first is the reference")
    p.add_argument("--sync-modes", default="", help="e.g. drain,interrupt,inflight: the largest max_staleness "
                                                     "also under each of these generator.sync_mode")
    p.add_argument("--arm", action="append", default=[], metavar="NAME:KEY=VALUE...",
                   help="also run the largest max_staleness with these overrides (repeatable), e.g. "
                        "'recompute:learner.recompute_old=true': its completions/s and learner time as a "
                        "ratio to the same run without them")
    p.add_argument("--peer", action="store_true", help="also run TRL's GRPOTrainer on the same work")
    p.add_argument("--critic", action="store_true", help="also replay the synchronous run's batches with "
                                                         "learner.advantage=gae: the value model's cost")
    p.add_argument("--out", default="", help="output folder (default runs/bench-<time>)")
    p.add_argument("overrides", nargs="*", help="key=value config overrides for every run")
    p.set_defaults(func=_main)


def _main(args) -> int:
    import typing

    from jury.protocol.config import ConfigError, GeneratorConfig
    from jury.protocol.config_load import load_config

    known = typing.get_args(typing.get_type_hints(GeneratorConfig)["sync_mode"])
    try:
        # the run's length is --steps: a steps=N among the overrides (or an arm's) would be overridden by it
        if any(o.startswith("steps=") for o in args.overrides) or \
                any(part.startswith("steps=") for a in args.arm for part in parse_arm(a)[1]):
            raise ConfigError("steps: give the run's length as --steps N (a steps= override would be replaced by it)")
        cfg = load_config(args.config, [*args.overrides, f"steps={args.steps}"])
        try:
            staleness = [int(x) for x in args.staleness.split(",")]
        except ValueError:
            raise ConfigError(f"--staleness {args.staleness!r}: whole numbers separated by commas, e.g. 0,1,2") from None
        if not staleness or any(k < 0 for k in staleness):
            raise ConfigError(f"--staleness {args.staleness!r}: each bound must be >= 0")
        modes = [m for m in args.sync_modes.split(",") if m]
        bad = [m for m in modes if m not in known]
        if bad:
            raise ConfigError(f"--sync-modes: {', '.join(bad)}: each must be one of {', '.join(known)}")
        arms = []
        for text in args.arm:
            name, overrides = parse_arm(text)
            if name in known or name in [a for a, _ in arms]:
                raise ConfigError(f"--arm {name}: the name of a sync mode or of another arm")
            arms.append((name, load_config(args.config, [*args.overrides, *overrides, f"steps={args.steps}"])))
        if args.critic and cfg.learner.advantage == "gae":
            raise ConfigError("--critic compares the learner with and without a value model: give the bench a "
                              "group advantage (learner.advantage=grpo, drgrpo or rloo)")
        if args.steps <= WARMUP_STEPS + 1:
            raise ConfigError(f"--steps must be > {WARMUP_STEPS + 1} (the first {WARMUP_STEPS} are warm-up)")
    except (ConfigError, ValueError, OSError) as e:
        print(f"jury bench: {e}", file=sys.stderr)
        return 2
    out = Path(args.out or f"runs/bench-{time.strftime('%Y%m%d-%H%M%S')}")
    report = bench(cfg, out, staleness, with_peer=args.peer, sync_modes=modes, arms=arms, with_critic=args.critic)
    print(format_bench(report))
    print(f"\n{out / 'bench.json'}\n{out / 'throughput.png'}\n{out / 'time.png'}\n{out / 'occupancy.png'}")
    return 0
