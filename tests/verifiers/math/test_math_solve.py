"""solve.unique_root: an equation determines its unknown only with exactly one root,
found symbolically (hand-worked roots; no value is ever tried)."""
import time
from fractions import Fraction

import pytest
from jury.verifiers.math.answer import parse_answer
from jury.verifiers.math.evaluate import exact
from jury.verifiers.math.normalize import normalize
from jury.verifiers.math.solve import unique_root


def _sides(equation: str):
    node = parse_answer(normalize(equation)).items[0].node
    assert node[0] == "rel" and node[1] == ("=",), node
    return node[2]


@pytest.mark.parametrize("equation, root", [
    ("2x = 10", 5), ("3x + 2 = 2x + 7", 5), ("x/4 = 3", 12), (r"\frac{1}{x} = \frac{1}{5}", 5),
    ("(x - 5)^2 = 0", 5), ("x^2 - 10x + 25 = 0", 5), ("(2x + 1)^3 = 0", Fraction(-1, 2)), ("x^{1} = -3", -3),
    ("(x - 5)^8 = 0", 5), ("(x - 5)^2 (x - 5)^6 = 0", 5),
])
def test_one_root(equation, root):
    assert exact(unique_root(*_sides(equation), "x")) == root


@pytest.mark.parametrize("equation", [
    "x^2 = 25",                           # 5 and -5
    "x^3 = 8",                            # 2 and two complex roots
    "(x - 1)^2 (x - 2) = 0",              # 1 and 2
    "x + 1 = x + 1",                      # every x
    "x + 1 = x + 2",                      # no x
    r"\frac{x^2 - 25}{x - 5} = 10",       # 5 is the only root of the numerator, and a pole
    "|x| = x", r"\sqrt{x} = 3", "2^x = 8", r"\sin x = 0",   # not solved here: not a rational function of x
    "x^{100} = 0",                        # over the degree bound: not expanded
])
def test_no_single_root(equation):
    assert unique_root(*_sides(equation), "x") is None


def test_symbolic_coefficients():
    lhs, rhs = _sides("xy = 6")
    root = unique_root(lhs, rhs, "y")                    # y = 6/x
    assert root is not None and unique_root(lhs, rhs, "z") is None
    lhs, rhs = _sides("(a - a) y = 1")                   # the coefficient of y is identically 0
    assert unique_root(lhs, rhs, "y") is None


def test_expansion_is_bounded():
    """(x + sqrt2 + ... + sqrt21)^8 expands into coefficient trees of many thousand nodes:
    past MAX_COEFFICIENT_NODES the equation is left unsolved, at once (it took 9 s)."""
    terms = "+".join(r"\sqrt{%d}" % k for k in range(2, 22))
    t0 = time.perf_counter()
    assert unique_root(*_sides(f"(x + {terms})^8 = 0"), "x") is None
    assert time.perf_counter() - t0 < 0.5
