"""Subsets of the real line: intervals, inequalities, set-builders, unions, points.

`to_realset` turns an item into a normalised list of disjoint intervals, so that
`(-\\infty,-5)`, `k<-5` and `\\{x|x<-5\\}` all become the same list; `a\\le-2
\\text{or} a=1` and `(-\\infty,-2]\\cup\\{1\\}` too. Endpoints must be constants
(`\\sqrt{11}` is fine, `k\\pi` is not: then the caller compares trees). A rational
endpoint is its Fraction and compares exactly ([0, 1000000001] is not [0, 10^9]);
another is a float that keeps its tree (`Inexact`), and two of those, or one and a
Fraction, are equal when `agree` says so at high precision; ±inf are floats.
"""
from __future__ import annotations

import math
from fractions import Fraction

from .evaluate import EvalError, agree, close, exact, free_symbols, numeric


class Inexact(float):
    """An endpoint with no exact value: its float orders it, its tree decides equality."""

    node: tuple

    def __new__(cls, value: float, node):
        out = super().__new__(cls, value)
        out.node = node
        return out


Bound = Fraction | float  # a Fraction, an Inexact, or ±inf
# (lo, hi, lo_closed, hi_closed); infinite ends are always open
Interval = tuple[Bound, Bound, bool, bool]
_FULL: list[Interval] = [(-math.inf, math.inf, False, False)]
_MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}
SET_ITEM_KINDS = frozenset({"interval", "union", "inter", "setminus", "setbuilder"})
INEQUALITIES = frozenset({"<", ">", "<=", ">=", "!="})
INF_NODE, NEG_INF_NODE = ("const", "inf"), ("neg", ("const", "inf"))


def infinity_sign(node) -> int:
    if node == ("const", "inf"):
        return 1
    if node[0] == "neg" and node[1] == ("const", "inf"):
        return -1
    return 0


def _infinite(x: Bound) -> bool:
    return isinstance(x, float) and math.isinf(x)


def constant(node) -> Bound | None:
    """A real constant's value (±inf allowed), or None: a Fraction when rational, else
    an Inexact."""
    sign = infinity_sign(node)
    if sign:
        return sign * math.inf
    if free_symbols(node):
        return None
    try:
        q = exact(node)
        if q is not None:
            return q
        z = numeric(node, {})
    except (EvalError, OverflowError):
        return None
    return Inexact(z.real, node) if abs(z.imag) <= 1e-12 * max(1.0, abs(z.real)) else None


def same_bound(x: Bound, y: Bound) -> bool:
    """Exact for two Fractions and for infinities; high precision otherwise."""
    if _infinite(x) or _infinite(y):
        return x == y
    if not (isinstance(x, Inexact) or isinstance(y, Inexact)):
        return x == y
    a, b = (v.node if isinstance(v, Inexact) else ("num", v, None) for v in (x, y))
    try:
        fx, fy = float(x), float(y)
    except OverflowError:  # a rational beyond floats, against a float
        return False
    verdict = agree(a, b, {}, complex(fx - fy))
    return close(fx, fy) if verdict is None else verdict  # None: mpmath could not evaluate them


def normalised(parts: list[Interval]) -> list[Interval]:
    """Sorted, merged, non-empty intervals."""
    live = [p for p in parts if p[0] < p[1] or (p[0] == p[1] and p[2] and p[3])]
    live.sort(key=lambda p: (p[0], not p[2]))
    out: list[Interval] = []
    for lo, hi, lc, hc in live:
        if out:
            plo, phi, plc, phc = out[-1]
            touching = lo < phi or (lo == phi and (phc or lc))
            if touching:
                if hi > phi or (hi == phi and hc):
                    out[-1] = (plo, hi, plc, hc if hi > phi else phc or hc)
                continue
        out.append((lo, hi, lc, hc))
    return out


def complement(parts: list[Interval]) -> list[Interval]:
    out, lo, lc = [], -math.inf, False
    for a, b, ac, bc in normalised(parts):
        out.append((lo, a, lc, not ac))
        lo, lc = b, not bc
    out.append((lo, math.inf, lc, False))
    return normalised(out)


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    out = []
    for alo, ahi, alc, ahc in a:
        for blo, bhi, blc, bhc in b:
            lo, lc = (alo, alc) if alo > blo else (blo, blc) if blo > alo else (alo, alc and blc)
            hi, hc = (ahi, ahc) if ahi < bhi else (bhi, bhc) if bhi < ahi else (ahi, ahc and bhc)
            out.append((lo, hi, lc, hc))
    return normalised(out)


def _constraint(op: str, c: Bound) -> list[Interval]:
    """{x : x op c}."""
    if op in ("<", "<="):
        return [(-math.inf, c, False, op == "<=")]
    if op in (">", ">="):
        return [(c, math.inf, op == ">=", False)]
    if op == "=":
        return [(c, c, True, True)]
    return [(-math.inf, c, False, False), (c, math.inf, False, False)]


def _relation_set(ops, exprs) -> list[Interval] | None:
    """A chain like -4 < m <= 0 in one variable."""
    var = [e for e in exprs if e[0] == "sym"]
    if not var or any(v != var[0] for v in var):
        return None
    result = _FULL
    for op, left, right in zip(ops, exprs, exprs[1:]):
        if left == var[0] and right != var[0]:
            c, rel = constant(right), op
        elif right == var[0] and left != var[0]:
            c, rel = constant(left), _MIRROR[op]
        else:
            return None
        if c is None or rel not in _MIRROR:
            return None
        result = intersect(result, _constraint(rel, c))
    return result


def to_realset(node, allow_tuple: bool) -> list[Interval] | None:
    kind = node[0]
    if kind == "interval" or (kind == "tuple" and allow_tuple and len(node[1]) == 2):
        lo, hi = (node[1], node[2]) if kind == "interval" else node[1]
        a, b = constant(lo), constant(hi)
        closed = node[3:5] if kind == "interval" else (False, False)
        if a is None or b is None or a > b:
            return None
        return normalised([(a, b, closed[0] and a != -math.inf, closed[1] and b != math.inf)])
    if kind == "rel":
        return _relation_set(node[1], node[2])
    if kind == "setbuilder":
        return _condition_set(node[2])
    if kind in ("set", "union", "inter"):
        parts = [to_realset(p, allow_tuple and kind != "set") for p in node[1]]
        if any(p is None for p in parts):
            return None
        if kind == "inter":
            result = _FULL
            for p in parts:
                result = intersect(result, p)
            return result
        return normalised([iv for p in parts for iv in p])
    if kind == "setminus":
        a, b = to_realset(node[1], allow_tuple), to_realset(node[2], allow_tuple)
        return None if a is None or b is None else intersect(a, complement(b))
    if node == REALS:  # the real numbers
        return list(_FULL)
    c = constant(node)
    if c is None or _infinite(c):
        return None
    return [(c, c, True, True)]


def _condition_set(cond) -> list[Interval] | None:
    if cond[0] == "conds":
        parts = [_condition_set(p) for p in cond[2]]
        if any(p is None for p in parts):
            return None
        if cond[1] == "or":
            return normalised([iv for p in parts for iv in p])
        result = _FULL
        for p in parts:
            result = intersect(result, p)
        return result
    return _relation_set(cond[1], cond[2]) if cond[0] == "rel" else None


def realsets_equal(a: list[Interval], b: list[Interval]) -> bool:
    if len(a) != len(b):
        return False
    for (alo, ahi, alc, ahc), (blo, bhi, blc, bhc) in zip(a, b):
        if (alc, ahc) != (blc, bhc) or not (same_bound(alo, blo) and same_bound(ahi, bhi)):
            return False
    return True


def chain_intervals(rel) -> list[tuple]:
    """The interval trees an inequality chain can mean, one per symbol that may be its
    variable: `a < x \\le b` -> [("interval", a, b, False, True)]; `x > c` -> (c, ∞) or,
    reading c as the variable, (-∞, x). Endpoints stay trees, so symbolic ones compare
    too (`a < x < b` = `(a, b)`); the caller drops readings whose variable is an
    endpoint of the interval it compares with."""
    ops, exprs = rel[1], rel[2]
    if not set(ops) <= {"<", ">", "<=", ">="}:
        return []
    out = []
    for var in {e for e in exprs if e[0] == "sym"}:
        bounds = {"lo": (NEG_INF_NODE, False), "hi": (INF_NODE, False)}
        ok = True
        for op, left, right in zip(ops, exprs, exprs[1:]):
            if left == var and right != var:
                bound, rel_op = right, op
            elif right == var and left != var:
                bound, rel_op = left, _MIRROR[op]
            else:
                ok = False
                break
            side = "hi" if rel_op in ("<", "<=") else "lo"
            if bounds[side][0] not in (NEG_INF_NODE, INF_NODE) or var[1] in free_symbols(bound):
                ok = False
                break
            bounds[side] = (bound, rel_op in ("<=", ">="))
        if ok:
            (lo, lc), (hi, hc) = bounds["lo"], bounds["hi"]
            out.append((var, ("interval", lo, hi, lc, hc)))
    return out


def is_set_like(node) -> bool:
    """Items that put the set view in play (plain lists of numbers do not)."""
    return node[0] in SET_ITEM_KINDS or (node[0] == "rel" and bool(set(node[1]) & INEQUALITIES)) or \
        node == REALS


REALS = ("text", "\\mathbb r")  # \\mathbb{R}, as the parser leaves it
