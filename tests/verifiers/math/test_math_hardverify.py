"""The issue's accuracy targets on HardVerify-Math (TinyV), read from the shared data.

Only the thresholds are asserted; which items pass is not pinned (the rules must
generalise, not memorise). Skipped when the data file is not there.
"""
import json

import pytest
from conftest import shared_dir
from jury.verifiers.math.verify import check, extract_answer

DATA = shared_dir() / "data" / "HardVerify-Math.json"


@pytest.fixture(scope="module")
def items():
    if not DATA.exists():
        pytest.skip(f"HardVerify-Math not found at {DATA} (set JURY_SHARED to the shared folder)")
    return json.loads(DATA.read_text())


def verdict(answer: str, reference: str) -> str:
    return check(extract_answer("\\boxed{" + answer + "}"), reference)


def test_accepts_correct_answers(items):
    accepted = sum(verdict(x["fn_output"], x["ground_truth"]) == "correct" for x in items)
    assert accepted >= 180, f"accepted {accepted}/{len(items)} correct answers, target 180"


def test_rejects_wrong_answers(items):
    rejected = sum(verdict(x["tn_output"], x["ground_truth"]) != "correct" for x in items)
    assert rejected >= 249, f"rejected {rejected}/{len(items)} wrong answers, target 249"


def test_every_item_gets_a_verdict_kind(items):
    for x in items:
        for field in ("fn_output", "tn_output"):
            assert verdict(x[field], x["ground_truth"]) in ("correct", "incorrect", "error")
