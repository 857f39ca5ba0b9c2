"""The `jury` command."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def _train(args) -> int:
    from jury.protocol.config import ConfigError
    from jury.protocol.config_load import load_config, load_run_config
    from jury.data.problems import DataError
    from jury.cluster.driver import RunFailed, train
    from jury.cluster.errors import Interrupted

    if args.resume and args.config:
        print("jury train: --resume uses the run's own config.yaml; give changes as key=value", file=sys.stderr)
        return 2
    try:
        cfg = load_run_config(args.resume, args.overrides) if args.resume else load_config(args.config, args.overrides)
    except (ConfigError, OSError) as e:
        print(f"jury train: bad config: {e}", file=sys.stderr)
        return 2
    try:
        summary = train(cfg, resume=args.resume, plots=_run_plots)
    except ConfigError as e:
        print(f"jury train: bad config: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:  # Ctrl-C or SIGTERM during the run: says whether it can be resumed
        print(f"jury train: {e.message}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("jury train: interrupted; every actor was stopped", file=sys.stderr)
        return 130
    except RunFailed as e:
        print(f"jury train: {e}", file=sys.stderr)
        return 1
    except DataError as e:  # refused before anything started
        print(f"jury train: {e}", file=sys.stderr)
        return 2
    print(_table(summary))
    return 0


def _run_plots(run_dir) -> list:
    """`jury plot`'s PNGs of one run, into run_dir/plots/: what train() sends to the trackers."""
    from jury.experiments.plots import plot_runs

    return plot_runs([run_dir], run_dir / "plots")


def _make_tiny_model(args) -> int:
    from jury.models.chain import make_tiny_chain_model
    from jury.models.registry import build_local_model
    from jury.models.tiny import make_tiny_model

    if not args.path:
        print(build_local_model(args.model))
        return 0
    if Path(args.path).exists() and not Path(args.path).is_dir():
        print(f"jury make-tiny-model: --path {args.path}: a file, not a folder", file=sys.stderr)
        return 2
    builders = {"tiny": make_tiny_model, "tiny-chain": make_tiny_chain_model}
    if args.model not in builders:
        print(f"jury make-tiny-model: --path is for --model tiny or tiny-chain ({args.model} is built beside tiny)",
              file=sys.stderr)
        return 2
    print(builders[args.model](args.path))
    return 0


def _table(summary: dict) -> str:
    keys = ["run_dir", "wall_s", "startup_s", "steps", "reward_first_fifth", "reward_last_fifth",
            "pass_rate_first_fifth", "pass_rate_last_fifth", "max_staleness_seen", "error_samples",
            "final_checkpoint"]
    rows = [(k, summary[k]) for k in keys if k in summary]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v:.3f}" if isinstance(v, float) else f"{k:<{width}}  {v}" for k, v in rows)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    parser = argparse.ArgumentParser(prog="jury", description="Asynchronous RL with verifiable rewards.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="run a training run (no arguments: the embedded default)")
    p.add_argument("--config", help="YAML config file")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. steps=20 generator.group_size=4")
    p.set_defaults(func=_train)
    p = sub.add_parser("make-tiny-model", help="build (or reuse) a local tiny model; prints its folder")
    p.add_argument("--model", default="tiny", choices=("tiny", "tiny-chat", "tiny-chain"),
                   help="tiny (the synthetic task), tiny-chat (with a chat template) or tiny-chain (the long "
                        "chain-of-thought task, `dataset: chain`; a few minutes on 2 cores)")
    p.add_argument("--path", default=None, help="output folder (default: ~/.cache/jury-rl/tiny-model, "
                                                "~/.cache/jury-rl/tiny-chain)")
    p.set_defaults(func=_make_tiny_model)
    from jury.experiments import bench, check_sync, evaluate, plots, replay, select, simulate, staleness, sweep

    for module in (bench, evaluate, sweep, plots, select, replay, staleness, check_sync, simulate):
        module.add_command(sub)
    # key=value overrides may come after options too (`jury replay RUN --out X learner.num_ranks=2`):
    # argparse takes a command's positionals in one run, so later ones come back as extras
    args, extra = parser.parse_known_args(argv)
    if extra:
        if not hasattr(args, "overrides") or any(a.startswith("-") or "=" not in a for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = [*args.overrides, *extra]
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
