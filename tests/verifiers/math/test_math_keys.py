"""quick_check (the worker's in-process fast path) and answer_key (the vote key)."""
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jury.verifiers.math.verify import answer_key, check, quick_check


@pytest.mark.parametrize("answer, reference, expected", [
    ("42", "42", "correct"),
    ("42", "43", "incorrect"),
    ("-3/6", r"-\frac{1}{2}", "correct"),
    ("1,000", "1000", "correct"),
    (None, "1", "no_answer"),
    ("0.33", r"\frac{1}{3}", None),        # decimals may match by rounding: check decides
    (r"\sqrt{4}", "2", None),              # not a plain number
    ("x=2", "2", None),
    (r"\boxed{2}", "2", None),
    ("1" * 500, "1", None),                # too long for the fast path
])
def test_quick_check(answer, reference, expected):
    assert quick_check(answer, reference) == expected
    if expected is not None:
        assert check(answer, reference) == expected


@pytest.mark.parametrize("spellings, key", [
    (["0.5", r"\frac{1}{2}", r"\dfrac{2}{4}", "50\\%", "1/2"], "1/2"),
    (["-278", r"\boxed{-278}", "-278.0"], "-278"),
    (["x=-278", "x = -278.0", "X=-278"], "x=-278"),  # a named value keeps its name (y=-278 is another answer)
    (["3, 1", "1, 3", r"x = 1 \text{ or } x = 3"], "1, 3"),
    ([r"5 \text{ cm}", r"0.05 \text{ m}"], "1/20 m"),  # in the unit's base: 5 kg is another answer
    (["(y, x) = (1, 2)", "(x, y) = (2, 1)"], "(x, y)=(2, 1)"),
    ([r"\pm 2", "2, -2"], "-2, 2"),
    (["(1, 0.5)", r"\left(1, \frac12\right)"], "(1, 1/2)"),
    (["a=1, b=2", "b=2, a=1"], "a=1, b=2"),
    (["a_1=1, a_2=2", "a_{2}=2, a_{1}=1"], "a_1=1, a_2=2"),
])
def test_answer_key_merges_spellings_of_one_answer(spellings, key):
    assert {answer_key(s) for s in spellings} == {key}


def test_answer_key_keeps_different_answers_apart():
    keys = [answer_key(s) for s in ["1/2", "1/3", "a=1, b=2", "a=2, b=1", "a_1=2, a_2=1", r"\sqrt{2}", r"\text{Petya}", "(1, 2)", "1, 2",
                                    # outside audit: each pair below was one key, and check calls them two answers
                                    r"5 \text{ cm}", r"5 \text{ kg}", "x=3", "y=3", "(x,y)=(1,2)", "(y,x)=(1,2)",
                                    r"5 \text{ more apples}", r"5 \text{ fewer apples}"]]
    assert len(set(keys)) == len(keys)


def test_answer_key_none_only_without_an_answer():
    assert answer_key(None) is None
    assert answer_key("") is None
    assert answer_key(r"\boxed{}") is None
    assert answer_key("x" * 100_000) is None
    assert answer_key(r"\text{Petya}") == r"\text{Petya}"   # prose is a valid answer: its normal form
    assert answer_key("10^{10^{10}}") == "10^{10^{10}}"     # too big to evaluate: its normal form


def _spell(q: Fraction, style: int) -> str:
    sign = "-" if q < 0 else ""
    a = abs(q)
    if style == 0:
        return f"{sign}{a.numerator}/{a.denominator}"
    if style == 1:
        return rf"{sign}\frac{{{a.numerator * 3}}}{{{a.denominator * 3}}}"
    if style == 2:
        return rf"x = {sign}\dfrac{{{a.numerator}}}{{{a.denominator}}}"
    return rf"\boxed{{{sign}\frac{{{a.numerator}}}{{{a.denominator}}}}}"


fractions = st.fractions(min_value=-10**6, max_value=10**6, max_denominator=10**4)


@settings(max_examples=200, deadline=None)
@given(fractions, st.integers(0, 3), st.integers(0, 3))
def test_equal_keys_mean_check_correct(q, s1, s2):
    a, b = _spell(q, s1), _spell(q, s2)
    # a value named by its variable (style 2, "x = ...") keeps the name in its key: y = ... is another answer
    assert (answer_key(a), answer_key(b)) == tuple(("x=" if s == 2 else "") + str(q) for s in (s1, s2))
    assert check(a, b) == "correct"


@settings(max_examples=200, deadline=None)
@given(fractions, fractions)
def test_quick_check_never_disagrees_with_check(q1, q2):
    a, r = _spell(q1, 0), _spell(q2, 1)
    fast = quick_check(a, r)
    assert fast in (None, check(a, r))
    assert check(a, r) == ("correct" if q1 == q2 else "incorrect")
