"""units.read_unit and conversions: scales worked by hand from the unit definitions."""
from fractions import Fraction

import pytest
from jury.verifiers.math.units import Unit, conversions, read_unit

M, S, G = ("m", 1), ("s", 1), ("g", 1)


@pytest.mark.parametrize("text, unit", [
    ("cm", Unit(Fraction(1, 100), (M,))),
    ("meters", Unit(Fraction(1), (M,))),
    ("cm ^2", Unit(Fraction(1, 10_000), (("m", 2),))),
    ("square feet", Unit(Fraction(3048, 10_000) ** 2, (("m", 2),))),
    ("km/h", Unit(Fraction(1000, 3600), (M, ("s", -1)))),
    ("km per hour", Unit(Fraction(1000, 3600), (M, ("s", -1)))),
    ("m/s^2", Unit(Fraction(1), (M, ("s", -2)))),
    ("mph", Unit(Fraction(1_609_344, 3_600_000), (M, ("s", -1)))),
    ("kg", Unit(Fraction(1000), (G,))),
    ("hours", Unit(Fraction(3600), (S,))),
])
def test_known_units(text, unit):
    assert read_unit(text) == unit


@pytest.mark.parametrize("text", ["apples", "square units", "yuan (A)", "in", "", "per", "cm and"])
def test_text_that_is_no_unit(text):
    assert read_unit(text) is None


def test_conversions():
    cm, m, kg = read_unit("cm"), read_unit("m"), read_unit("kg")
    assert conversions([cm], [m]) == [Fraction(1, 100)]       # 50 cm is 50 * 1/100 m
    assert conversions([m], [m]) == [None]                    # the same unit: left as written
    assert conversions([cm], [None]) == [None]                # one side only: dropped
    assert conversions([None], [m]) == [None]
    assert conversions([kg], [m]) is None                     # another dimension
    assert conversions([kg, cm], [m, kg]) == [None, Fraction(1, 100)]
