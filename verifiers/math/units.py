"""Units of measure written after a value (used by items and compare).

items.prepare_item cuts a trailing unit off an item ("50 \\text{cm}", "9.8 \\text{m/s}^2",
"1.5 hours") and `read_unit` names it: a scale to a base unit and a dimension. A unit
written on one side only is dropped, as before ("5 \\text{cm}" answers "5"). When both
sides carry one, they must agree:

    50 cm   vs 0.5 m      same dimension: the answer is converted (50/100 = 0.5): equal
    5 cm    vs 5 m        same dimension, another scale: 0.05 is not 5
    5 kg    vs 5 m        another dimension: never equal
    3 days  vs 72 hours   equal;  3 weeks vs 3 days: not
    240 yuan vs 240 dollars   currencies are dimensions of their own (no rates here)

Text that is not a known unit ("\\text{apples}", "\\text{square units}", "\\text{yuan
(A)}") names no unit and constrains nothing. Standard library only.
"""
from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple


class Unit(NamedTuple):
    scale: Fraction  # how many base units one of it is
    dims: tuple  # sorted (base, exponent) pairs: (("m", 1), ("s", -1)) for a speed


# base -> (spellings, scale to the base). Only exact, unambiguous conversions: a unit
# whose length is not fixed (a month, a year) is a base of its own.
_GROUPS = {
    # ("in" is no spelling of the inch: "5 in" is as likely the start of a sentence)
    "m": [("mm millimeter millimeters millimetre millimetres", Fraction(1, 1000)),
          ("cm centimeter centimeters centimetre centimetres", Fraction(1, 100)),
          ("m meter meters metre metres", Fraction(1)), ("km kilometer kilometers kilometre kilometres", Fraction(1000)),
          ("inch inches", Fraction(254, 10_000)), ("ft foot feet", Fraction(3048, 10_000)),
          ("yd yard yards", Fraction(9144, 10_000)), ("mi mile miles", Fraction(1_609_344, 1000))],
    "g": [("mg milligram milligrams", Fraction(1, 1000)), ("g gram grams", Fraction(1)),
          ("kg kilogram kilograms", Fraction(1000)), ("tonne tonnes", Fraction(10**6))],
    "s": [("s sec secs second seconds", Fraction(1)), ("min mins minute minutes", Fraction(60)),
          ("h hr hrs hour hours", Fraction(3600)), ("day days", Fraction(86_400)), ("week weeks wk wks", Fraction(604_800))],
    "l": [("ml mL milliliter milliliters millilitre millilitres", Fraction(1, 1000)),
          ("l L liter liters litre litres", Fraction(1))],
    "dollar": [("dollar dollars usd", Fraction(1)), ("cent cents", Fraction(1, 100))],
    "yuan": [("yuan rmb", Fraction(1))],
    "euro": [("euro euros eur", Fraction(1))],
    "month": [("month months", Fraction(1))],
    "year": [("year years yr yrs", Fraction(1))],
}
_UNITS = {name: Unit(scale, ((base, 1),)) for base, rows in _GROUPS.items() for names, scale in rows for name in names.split()}
_UNITS.update(mph=Unit(Fraction(1_609_344, 3_600_000), (("m", 1), ("s", -1))),
              kmh=Unit(Fraction(1000, 3600), (("m", 1), ("s", -1))), kph=Unit(Fraction(1000, 3600), (("m", 1), ("s", -1))))
# one-letter symbols are units only inside \text{}: "5m" is five times m
_LETTER_SYMBOLS = frozenset({"m", "g", "s", "h", "l", "L"})
_POWER_WORDS = {"square": 2, "sq": 2, "cubic": 3, "cu": 3}
_WORD = re.compile(r"[A-Za-z]+|\^\s*-?\d+|/")
_PER = frozenset({"/", "per"})


def _factor(words: list[str], k: int, sign: int, dims: dict, scale: list) -> int | None:
    """One factor ("square cm", "cm^2", "mph") at words[k]; the index past it, or None."""
    power = 1
    if words[k] in _POWER_WORDS:
        power, k = _POWER_WORDS[words[k]], k + 1
    if k >= len(words) or words[k] not in _UNITS:
        return None
    unit = _UNITS[words[k]]
    k += 1
    if k < len(words) and words[k].startswith("^"):
        power, k = power * int(words[k][1:].replace(" ", "")), k + 1
    for base, exponent in unit.dims:
        dims[base] = dims.get(base, 0) + sign * power * exponent
    scale[0] *= unit.scale ** (sign * power)
    return k


def read_unit(text: str) -> Unit | None:
    """The unit spelled by `text` ("cm", "m/s^2", "square meters", "km per hour"), or None."""
    words = _WORD.findall(text.replace("\\text", " ").replace("{", " ").replace("}", " "))
    words = [w if w in _UNITS else w.lower() for w in words]
    if not words:
        return None
    dims: dict[str, int] = {}
    scale = [Fraction(1)]
    k, sign = 0, 1
    while k < len(words):
        if words[k] in _PER and k > 0:
            sign, k = -1, k + 1
            continue
        k = _factor(words, k, sign, dims, scale)
        if k is None:
            return None
    return Unit(scale[0], tuple(sorted((b, e) for b, e in dims.items() if e)))


def letter_unit(word: str) -> bool:
    """A letter run after a number that is a unit ("5 cm", "3 hours"), not a product."""
    return word in _UNITS and word not in _LETTER_SYMBOLS


def conversions(answer: list, reference: list) -> list | None:
    """For each answer item (its Unit or None), the factor that converts it to the
    reference's unit of the same dimension (None: leave it as written); None when both
    sides carry units that cannot agree (another dimension: 5 kg against 5 m)."""
    ours, theirs = [u for u in answer if u], [u for u in reference if u]
    if not ours or not theirs:
        return [None] * len(answer)  # a unit on one side only is dropped
    if {u.dims for u in ours} != {u.dims for u in theirs}:
        return None
    target = {}
    for u in theirs:
        target.setdefault(u.dims, u)
    return [None if u is None or u.scale == target[u.dims].scale else u.scale / target[u.dims].scale for u in answer]
