"""Problems: a seeded synthetic arithmetic task, and the stream the feeder draws from.

The synthetic task is what the embedded default trains on: short closed-form
arithmetic whose answers are written in `\\boxed{}`. Its statements contain exactly
one expression, so the label-free arithmetic proof gate can formalise them.
Real datasets (JSONL, Parquet, `datasets` folders) are read and checked in
cluster/dataset.py.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

PROMPT_SUFFIX = "\n"  # the model answers on the next line


class DataError(ValueError):
    """A dataset or prompt template a run cannot use; the message names the file, the row and the field."""


@dataclass(frozen=True)
class Problem:
    problem: str
    answer: str  # ground truth; only reward schemes that are allowed to read it do
    source: str


MAX_OPERAND = 30  # small enough for a 1M-parameter model to learn in minutes


def synthetic_problem(rng: random.Random) -> Problem:
    """One problem: addition or subtraction of operands up to MAX_OPERAND, or a product of small ones."""
    kind = rng.random()
    a, b = rng.randint(0, MAX_OPERAND), rng.randint(0, MAX_OPERAND)
    if kind < 0.4:
        expr, value = f"{a}+{b}", a + b
    elif kind < 0.8:
        expr, value = f"{a}-{b}", a - b
    else:
        a, b = rng.randint(2, 9), rng.randint(2, 12)
        expr, value = f"{a}*{b}", a * b
    return Problem(problem=f"Compute {expr}.", answer=str(value), source="synthetic")


def synthetic_solution(p: Problem) -> str:
    """The completion the warm-up teaches (and a correct sample looks like)."""
    return f"\\boxed{{{p.answer}}}"


def synthetic_problems(seed: int) -> Iterator[Problem]:
    """An endless, reproducible stream."""
    rng = random.Random(seed)
    while True:
        yield synthetic_problem(rng)


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-empty line; a line that is not JSON is refused with its number."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not JSON ({e.msg})") from None


def load_jsonl(path: str | Path) -> list[Problem]:
    """Every problem of a JSONL file with "problem" and "answer" fields, in file order.

    Any bad line refuses the whole file, naming its line numbers: a half-read dataset would
    silently change what an experiment trains on.
    """
    from jury.cluster.dataset import check_dataset, read_problems
    from jury.protocol.config import DataConfig

    data = DataConfig(format="jsonl")
    check_dataset(str(path), data)
    return list(read_problems(str(path), data))


def problem_stream(dataset: str, seed: int, data=None) -> Iterator[Problem]:
    """`synthetic` (endless), or a dataset read as `data` (a DataConfig) says, epoch after
    epoch, each reshuffled by (seed, epoch)."""
    if dataset == "synthetic":
        yield from synthetic_problems(seed)
        return
    from jury.cluster.dataset import epoch_stream
    from jury.protocol.config import DataConfig

    yield from epoch_stream(dataset, data or DataConfig(), seed)
