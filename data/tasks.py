"""The built-in tasks, and the stream of problems the feeder draws from.

- `synthetic`, what the embedded default trains on: short closed-form arithmetic whose
  answers are written in `\\boxed{}`.
- `chain`, a long chain-of-thought task: sums of 2 to 40 consecutive integers, worked one
  addition per line, so solutions run from about 20 to about 520 tokens and longer problems
  are harder (more steps to get right, each sampled). See `chain_problem`.

Both tasks' statements contain exactly one expression, so the label-free arithmetic proof
gate can formalise them. Dataset files (JSONL, Parquet, `datasets` folders) are read and
checked in data/files.py; `problem_stream` draws from either.
"""
from __future__ import annotations

import random
from typing import Iterator

from jury.data.problems import Problem

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


# ── the long chain-of-thought task (dataset: chain) ──
CHAIN_TERMS = range(2, 41)  # terms per problem
CHAIN_TAIL = 1.5            # P(n terms) ∝ n^-CHAIN_TAIL: median 4 terms, mean 8, one in ten 20 or more
CHAIN_WEIGHTS = tuple(n ** -CHAIN_TAIL for n in CHAIN_TERMS)
CHAIN_LOW, CHAIN_HIGH = 10, 98  # every term has two digits
CHAIN_WIDTH = 4                 # running totals are written with four digits (the largest sum is 3,140)
# term-count buckets: tiny-chain's pass_rate.json has a pass rate per bucket (models/chain.py)
CHAIN_BUCKETS = ((2, 3), (4, 7), (8, 15), (16, 40))


def chain_problem(rng: random.Random, terms: int | None = None) -> Problem:
    """`Compute 18+19+20+21.`: the sum of `terms` (default: drawn long-tailed) consecutive
    two-digit integers.

    The statement is one expression, as the synthetic task's, so the arithmetic gate proves
    answers to it and `verifier.reward: jury` works unchanged. Why consecutive: a model of a
    million parameters learns in minutes to copy what sits a fixed number of tokens back, but
    not to look a term up by its content (with random terms, ~600 warm-up steps left the term
    it copies from the statement at chance). Consecutive terms come from the line before.
    """
    n = terms if terms is not None else rng.choices(CHAIN_TERMS, CHAIN_WEIGHTS)[0]
    if n not in CHAIN_TERMS:
        raise ValueError(f"chain_problem: terms must be in {CHAIN_TERMS.start}..{CHAIN_TERMS.stop - 1}, got {n}")
    first = rng.randint(CHAIN_LOW, CHAIN_HIGH + 1 - n)
    xs = range(first, first + n)
    return Problem(problem=f"Compute {'+'.join(map(str, xs))}.", answer=str(sum(xs)), source="chain")


def chain_terms(problem: str) -> list[int]:
    """The terms of a chain statement, in order."""
    return [int(x) for x in problem.removeprefix("Compute ").removesuffix(".").split("+")]


def chain_solution(p: Problem) -> str:
    """The worked solution the warm-up teaches: one addition per line from the last term
    down, the running total with CHAIN_WIDTH digits, then that total boxed. For
    `Compute 18+19+20+21.`:

        0021+20=0041
        0041+19=0060
        0060+18=0078
        \\boxed{0078}

    Every line has the same shape, so what a line needs is a fixed number of tokens back:
    the total and the term of the line before; the first line's two terms sit right before
    the end of the statement. Only stopping (the term has reached the first one) looks back
    far, into the statement. The box keeps the four digits for the same reason (with the
    zeros stripped, the tiny model miscopied one box in two); every verifier here reads 0078
    as 78.
    """
    xs = chain_terms(p.problem)[::-1]
    lines, total = [], xs[0]
    for x in xs[1:]:
        lines.append(f"{total:0{CHAIN_WIDTH}d}+{x}={total + x:0{CHAIN_WIDTH}d}")
        total += x
    return "\n".join(lines + [f"\\boxed{{{total:0{CHAIN_WIDTH}d}}}"])


def chain_problems(seed: int) -> Iterator[Problem]:
    """An endless, reproducible stream of chain problems."""
    rng = random.Random(seed)
    while True:
        yield chain_problem(rng)


# dataset name -> endless stream of a seed; any other `dataset` is a file or folder
BUILTIN_DATASETS = {"synthetic": synthetic_problems, "chain": chain_problems}


def problem_stream(dataset: str, seed: int, data=None) -> Iterator[Problem]:
    """A built-in task (`synthetic`, `chain`: endless), or a dataset read as `data` (a
    DataConfig) says, epoch after epoch, each reshuffled by (seed, epoch)."""
    if dataset in BUILTIN_DATASETS:
        yield from BUILTIN_DATASETS[dataset](seed)
        return
    from jury.data.files import epoch_stream
    from jury.protocol.config import DataConfig

    yield from epoch_stream(dataset, data or DataConfig(), seed)
