"""Big operators and bound variables: the trees bigops.py builds, by hand."""
from fractions import Fraction

import pytest
from jury.verifiers.math.answer import parse_answer
from jury.verifiers.math.normalize import normalize


def _node(text: str):
    items = parse_answer(normalize(text)).items
    assert len(items) == 1
    return items[0].node


ONE, FIVE, TWO = ("num", Fraction(1), None), ("num", Fraction(5), None), ("num", Fraction(2), None)


@pytest.mark.parametrize("text, tree", [
    # bound variables are named by binding depth: "$0" outermost
    (r"\sum_{k=1}^{n} k^2", ("sum", "$0", ONE, ("sym", "n"), ("pow", ("sym", "$0"), TWO))),
    (r"\prod_{i=1}^{5} i", ("prod", "$0", ONE, FIVE, ("sym", "$0"))),            # i is the index, not sqrt(-1)
    (r"\int_0^1 x^2\,dx", ("integral", "$0", ("num", Fraction(0), None), ONE, ("pow", ("sym", "$0"), TWO))),
    (r"\int t\,dt", ("integral", "$0", None, None, ("sym", "$0"))),
    (r"\sum_{k=1}^{5} k + 1", ("add", (("sum", "$0", ONE, FIVE, ("sym", "$0")), ONE))),  # the body is one term
    (r"\{t \mid t > a\}", ("setbuilder", ("sym", "$0.0"), ("rel", (">",), (("sym", "$0.0"), ("sym", "a"))))),
])
def test_trees(text, tree):
    assert _node(text) == tree


@pytest.mark.parametrize("text", [r"\sum_{k} a_k", r"\sum k", r"\int_0 x\,dx", r"\int_0^1 x^2"])
def test_incomplete_big_operators_are_text(text):
    assert _node(text)[0] == "text"
