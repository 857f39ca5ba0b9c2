"""A problem, the unit a dataset row becomes, and the error that refuses a dataset.

    Problem(problem, answer, source)     one row: the statement, the label (ground truth;
                                         only reward schemes allowed to read it do), where it came from;
                                         with data.rewrite_key, the statement rewritten (CoReward)
    DataError                            a dataset or template a run cannot use; the message names
                                         the file, the row and the field
"""
from __future__ import annotations

from dataclasses import dataclass

PROMPT_SUFFIX = "\n"  # the model answers on the next line


class DataError(ValueError):
    """A dataset or prompt template a run cannot use; the message names the file, the row and the field."""


@dataclass(frozen=True)
class Problem:
    problem: str
    answer: str  # ground truth; only reward schemes that are allowed to read it do
    source: str
    rewrite: str | None = None  # the same problem in other words (CoReward's second prompt), from data.rewrite_key
