"""Whole answers: split into items, clean, parse, expand ± (stages 2-3 put together).

    parse_answer("x=1\\pm\\sqrt{2}, y=3") -> Parsed(items=(1+√2 [x], 1-√2 [x], 3 [y]), ...)

An item that does not parse becomes ("text", its words and operators), so prose
answers still compare as words, and "a+b \\text{if} n" is not "a-b \\text{if} n". Raises LimitExceeded for inputs over the size limits.
"""
from __future__ import annotations

import math
import re
from typing import NamedTuple

from .bigops import canonical
from .evaluate import free_symbols
from .items import (LimitExceeded, ParseError, check_nesting, declaration, prepare_item, split_items_joined,
                    symbol_words, token_words, tokenize)
from .parse import Parser, add, neg
from .units import Unit

_BINDER_MARKS = re.compile(r"\\sum|\\prod|\\int|[|:]")  # a set-builder has "|" or ":"


class Item(NamedTuple):
    node: tuple
    labels: frozenset  # symbols named by dropped labels ("x" in "x = 3")
    unit: Unit | None = None  # the unit written after it ("cm" in "5 cm"), when known
    args: tuple = ()  # variables its definition label binds, in order ("x" in "f(x) = x^2")
    names: tuple = ()  # a tuple label's names, in the order of the tuple's values ("(y, x) = (1, 2)")
    tail: str = ""  # the words dropped after it as a unit ("years older")


MAX_PM_BRANCHES = 64


def expand_pm(node) -> list:
    """All sign choices of the ± inside a tree: 1±√5 -> [1+√5, 1-√5]."""
    if not isinstance(node, tuple) or not node:
        return [node]
    if isinstance(node[0], str) and node[0] in ("num", "sym", "const", "text"):
        return [node]
    if node[0] == "pm":
        out = []
        for a in [None] if node[1] is None else expand_pm(node[1]):
            for b in expand_pm(node[2]):
                out += [b, neg(b)] if a is None else [add(a, b), add(a, neg(b))]
        return _capped(out)
    if node[0] == "set":  # {1±√5, -2}: the choices are all members
        return [("set", tuple(x for e in node[1] for x in expand_pm(e)))]
    head, parts = (node[:1], node[1:]) if isinstance(node[0], str) else ((), node)
    options = [head]
    for part in parts:
        options = _capped([o + (c,) for o in options for c in expand_pm(part)])
    return options


def _capped(xs: list) -> list:
    if len(xs) > MAX_PM_BRANCHES:
        raise LimitExceeded("too many ± branches")
    return xs


class Parsed(NamedTuple):
    items: tuple  # of Item
    text: str  # the normalised answer
    declared: frozenset = frozenset()  # parameters it declares ("k" in "..., k \\in \\mathbb{Z}")


def _approximately_equal(members: tuple) -> bool:
    """Do the constant members of an "≈" chain agree, each within a unit of its last written decimal
    place or 5% of the larger ("31031/7776 ≈ 3.99", "\\pi ≈ 3.14", "2^{10} ≈ 1000"; not "3 ≈ 100")?
    Members with symbols are not compared."""
    from .sets import constant

    values = []
    for m in members:
        v = constant(m)
        if v is not None and not isinstance(v, float) or (isinstance(v, float) and math.isfinite(v)):
            places = m[2] if m[0] == "num" and m[2] else 0
            values.append((float(v), places))
    for (a, pa), (b, pb) in zip(values, values[1:]):
        unit = max(10.0 ** -pa if pa else 0.0, 10.0 ** -pb if pb else 0.0)
        if abs(a - b) > max(unit, 0.05 * max(abs(a), abs(b))):
            return False
    return True


_ORDERINGS = frozenset({"<", ">", "<=", ">="})


def _inequality_symbols(node) -> set[str] | None:
    """The free symbols of an inequality (a chain of <, >, <=, >=), or of an intersection of such;
    None for anything else."""
    if node[0] == "inter":
        parts = [_inequality_symbols(p) for p in node[1]]
        return None if any(p is None for p in parts) else set().union(*parts)
    if node[0] == "rel" and set(node[1]) <= _ORDERINGS:
        return free_symbols(node)
    return None


def _conjoined(previous: Item, node, labels: frozenset) -> bool:
    """Do "previous and node" bound one variable together (an intersection), as inequalities in
    the same single symbol under the same labels?"""
    mine, theirs = _inequality_symbols(node), _inequality_symbols(previous.node)
    return mine is not None and theirs is not None and len(mine) == 1 and mine == theirs and \
        previous.labels == labels


def parse_answer(normalized: str) -> Parsed:
    """Split, clean, parse and ±-expand a normalised answer. Raises LimitExceeded."""
    check_nesting(normalized)
    try:
        toks = tokenize(normalized)
    except ParseError:
        return Parsed((Item(("text", " ".join(symbol_words(normalized))), frozenset()),), normalized)
    items, declared = [], set()
    # bound variables get canonical names (bigops.canonical): trees equal up to renaming are equal
    has_binder = _BINDER_MARKS.search(normalized) is not None
    for k, (join, raw) in enumerate(split_items_joined(toks)):
        name = declaration(raw) if k > 0 else None
        if name is not None:  # "k \\in \\mathbb{Z}" after the answer: no item of its own
            declared.add(name)
            continue
        item_toks, labels, is_text, unit, args, qualified, order, tail = prepare_item(raw)
        declared |= qualified
        node = None
        if not is_text and item_toks:
            try:
                parser = Parser(item_toks)
                node = parser.parse_item()
                if not all(map(_approximately_equal, parser.approximations)):
                    node = None  # "3 ≈ 100" says two things: it is no answer, as words it equals nothing
            except RecursionError:
                raise LimitExceeded("expression nested too deeply") from None
            except (ParseError, ZeroDivisionError, ValueError) as exc:
                if isinstance(exc, LimitExceeded):
                    raise
                node = None
        if node is None:
            source = item_toks or raw
            items.append(Item(("text", " ".join(token_words(source))), labels))
            continue
        if has_binder:
            node = canonical(node)
        if join == "and" and items and _conjoined(items[-1], node, labels):
            # "x >= 2 and x <= 5" is one set of x, both conditions at once: [2, 5], not their union
            items[-1] = items[-1]._replace(node=("inter", (items[-1].node, node)))
            continue
        # a tuple label's names in their order, for the comparison to align by (compare.by_names)
        names = order if order and node[0] == "tuple" and len(node[1]) == len(order) else ()
        items.extend(Item(n, labels, unit, args, names, tail) for n in expand_pm(node))
    return Parsed(tuple(items), normalized, frozenset(declared))
