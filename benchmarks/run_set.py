"""What the benchmarks that train a named set of runs on the chain task share: the command line
(`--run` trains the runs not finished yet, then reports; a DIR alone reports), and the loop that
skips a run folder already holding its summary.yaml, so that an interrupted set resumes."""
from __future__ import annotations

import argparse
import subprocess
from pathlib import Path


def train_missing(root: Path, commands: dict[str, list[str]], only: set[str] | None = None):
    """Run each command whose run folder (root / name) has no summary.yaml yet; a failed run has
    none either, and the others go on."""
    for name, cmd in commands.items():
        if (only is None or name in only) and not (root / name / "summary.yaml").is_file():
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=False)


def main(argv, *, doc: str, out: str, steps: int, commands, report, names=None, prepare=None) -> int:
    """`commands(root, steps)` -> {run name: argv}; `report(root)` -> the text printed. `names`: the
    runs `--only` may pick from; `prepare(root)`: called before training (files the runs read)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("dir", nargs="?", help="report the runs already in DIR")
    p.add_argument("--run", action="store_true", help="train the runs (skipping finished ones), then report")
    p.add_argument("--out", default=out)
    p.add_argument("--steps", type=int, default=steps)
    if names is not None:
        p.add_argument("--only", default="", help="comma-separated run names (default: all)")
    args = p.parse_args(argv)
    root = Path(args.dir or args.out)
    if args.run:
        if prepare is not None:
            prepare(root)
        only = None
        if names is not None:
            only = set(filter(None, args.only.split(","))) or set(names)
        train_missing(root, commands(root, args.steps), only)
    print(report(root))
    return 0
