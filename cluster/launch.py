"""Start a run on a running Ray cluster: the script `ray submit` and `ray job submit` run.

    ray submit cluster/cluster.yaml cluster/launch.py -- --config configs/qwen3-1.7b-jury.yaml steps=20
    ray job submit --working-dir . -- python cluster/launch.py --config configs/qwen3-1.7b-jury.yaml

Unlike `jury train` it never starts a Ray of its own: it joins the cluster it runs in
(RAY_ADDRESS, else the Ray started on this node) and stops if there is none. The config
is checked before anything connects, so a bad one costs no cluster time (exit 2).
`ray submit` runs a copy of this file as ~/launch.py, so a relative --config not found
from the current folder is looked up in the project folder (~/jury-rl on the nodes).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from jury.protocol.config import ConfigError, RunConfig
from jury.protocol.config_load import load_config


def project_root() -> Path:
    import jury.cluster

    return Path(jury.cluster.__file__).resolve().parents[1]


def find_config(path: str) -> str:
    if Path(path).is_absolute() or Path(path).exists():
        return path
    in_project = project_root() / path
    return str(in_project) if in_project.exists() else path


def parse(argv=None) -> RunConfig:
    parser = argparse.ArgumentParser(prog="launch.py", description="Run jury-rl training on a Ray cluster.")
    # required: the embedded default builds its tiny model on the driver's node only
    parser.add_argument("--config", required=True, help="YAML config (relative: from here, then the project)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. steps=20 generator.group_size=4")
    args = parser.parse_args(argv)
    return load_config(find_config(args.config), args.overrides)


def main(argv=None) -> int:
    try:
        cfg = parse(argv)
    except (ConfigError, OSError) as e:
        print(f"launch: bad config: {e}", file=sys.stderr)
        return 2
    import ray

    from jury.data.problems import DataError
    from jury.cluster.driver import train

    address = os.environ.get("RAY_ADDRESS") or "auto"
    try:
        ray.init(address=address)
    except ConnectionError as e:
        print(f"launch: no Ray cluster at {address}: {e}", file=sys.stderr)
        return 1
    try:
        summary = train(cfg)
    except KeyboardInterrupt:
        print("launch: interrupted; every actor was stopped", file=sys.stderr)
        return 130
    except DataError as e:  # refused before any actor started
        print(f"launch: bad data: {e}", file=sys.stderr)
        return 2
    finally:
        ray.shutdown()
    print(yaml.safe_dump(summary, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
