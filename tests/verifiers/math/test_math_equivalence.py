"""The equivalence suite (equivalence_cases.py): every case gets its label, by default.

The suite is built from the kinds of wrong accepts and wrong rejects found on outside
corpora; benchmarks/verifier.py runs it beside math-verify. With accept_rounded the
only cases that change are rounded decimal answers, and they change to accepts.
"""
import pytest
from equivalence_cases import CASES
from jury.verifiers.math.verify import check, extract_answer, judge, reference_parts


def _answer(case):
    """As the worker extracts for a check: with the reference's number of parts."""
    text = case.text if case.is_response else "\\boxed{" + case.text + "}"
    return extract_answer(text, parts=reference_parts(case.reference))


def test_the_suite_is_large_and_has_both_labels():
    assert len(CASES) >= 200
    assert sum(c.expected for c in CASES) >= 100 and sum(not c.expected for c in CASES) >= 100


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.kind}:{c.text[:30]}")
def test_case(case):
    assert (check(_answer(case), case.reference) == "correct") == case.expected


def test_accept_rounded_only_adds_rounded_accepts():
    changed = [c for c in CASES if judge(_answer(c), c.reference, accept_rounded=True).rounded]
    assert changed and all(not c.expected for c in changed)
    # 3.14159... is cut off, not repeating; 2.59 against 2.5 is accepted under accept_rounded only (cut to its places)
    assert {c.kind for c in changed} <= {"rounded_decimal", "repeating_decimal", "decimal_truncation"}
    for c in CASES:
        if c not in changed:
            assert judge(_answer(c), c.reference, accept_rounded=True).verdict == check(_answer(c), c.reference)
