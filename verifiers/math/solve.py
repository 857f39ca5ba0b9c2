"""Does an equation pin its unknown down? (used by compare's equation view)

A boxed equation answers a question about x only when it determines x. Being
satisfied by the reference is not enough: x^2 = 25 is satisfied by 5 and by -5, and
|x| = x by every x >= 0, so an answer that boxes the unsolved equation would be paid
whenever the reference is a root. `unique_root` therefore looks for the solution set
symbolically, and never by trying values:

    2x = 10          -> 5          (linear: one root)
    xy = 6, for y    -> 6/x        (linear in y, its coefficient x not identically 0)
    (x-5)^2 = 0      -> 5          (a polynomial c·(x - r)^n: one root, repeated)
    1/x = 1/5        -> 5          (cleared of denominators that do not vanish there)
    x^2 = 25         -> None       (two roots)
    |x| = x, 2^x = 8 -> None       (not a polynomial in x: not shown to have one root)
    x + 1 = x + 1    -> None       (an identity: every x)

The unknown is read as a rational function of the tree (sums, products, quotients,
integer powers); anything else holding the unknown (a root, a function, an exponent)
is not solved. Coefficients are trees free of the unknown; rational ones are compared
exactly, others with the identity test every value comparison uses. Over the complex
numbers: x^3 = 8 has three roots, so it does not determine x either.
"""
from __future__ import annotations

from fractions import Fraction

from .evaluate import EvalError, exact, free_symbols, identical, substituted
from .parse import add, mul, neg

MAX_DEGREE = 8
# Expanding (x + a + b + ...)^8 builds coefficient trees whose evaluation (the identity
# test walks a tree once per point, with no sharing) grows with the terms: past this
# many nodes in all, the equation is not solved here (a plain "2x = 10" has a dozen)
MAX_COEFFICIENT_NODES = 2_000
_ZERO, _ONE = ("num", Fraction(0), None), ("num", Fraction(1), None)

Poly = dict  # degree -> coefficient tree free of the unknown; {} is the zero polynomial


def _const(c: Fraction):
    return ("num", c, None) if c >= 0 else neg(("num", -c, None))


def _number(c) -> Fraction | None:
    """The value of a plain rational literal (or its negation), without walking a tree."""
    if c[0] == "neg":
        inner = _number(c[1])
        return None if inner is None else -inner
    return c[1] if c[0] == "num" else None


def _plus(a, b):
    qa, qb = _number(a), _number(b)
    return _const(qa + qb) if qa is not None and qb is not None else add(a, b)


def _times(a, b):
    """a·b, folded when both are numbers: rational coefficients stay one literal each,
    so (x - 5)^8 does not grow trees."""
    qa, qb = _number(a), _number(b)
    if qa is not None and qb is not None:
        return _const(qa * qb)
    if qa == 1 or qb == 1:
        return b if qa == 1 else a
    return mul(a, b)


def _add(p: Poly, q: Poly) -> Poly:
    out = dict(p)
    for k, c in q.items():
        out[k] = _plus(out[k], c) if k in out else c
    return out


def _mul(p: Poly, q: Poly) -> Poly | None:
    if p and q and max(p) + max(q) > MAX_DEGREE:
        return None
    out: Poly = {}
    for i, a in p.items():
        for j, b in q.items():
            term = _times(a, b)
            out[i + j] = _plus(out[i + j], term) if i + j in out else term
    return out


def _scale(p: Poly, c) -> Poly:
    return {k: _times(c, a) for k, a in p.items()}


def _power(p: Poly, n: int) -> Poly | None:
    out: Poly | None = {0: _ONE}
    for _ in range(n):
        out = _mul(out, p)
        if out is None:
            return None
    return out


def as_rational(node, var: str) -> tuple[Poly, Poly] | None:
    """The tree as numerator / denominator polynomials in `var`, or None."""
    if var not in free_symbols(node):
        return {0: node}, {0: _ONE}
    kind = node[0]
    if node == ("sym", var):
        return {1: _ONE}, {0: _ONE}
    if kind == "neg":
        inner = as_rational(node[1], var)
        return None if inner is None else (_scale(inner[0], ("num", Fraction(-1), None)), inner[1])
    if kind in ("add", "mul"):
        parts = [as_rational(t, var) for t in node[1]]
        if any(p is None for p in parts):
            return None
        num, den = parts[0]
        for pn, pd in parts[1:]:
            if kind == "mul":
                num, den = _mul(num, pn), _mul(den, pd)
            else:
                left, right, den = _mul(num, pd), _mul(pn, den), _mul(den, pd)
                num = None if left is None or right is None else _add(left, right)
            if num is None or den is None:
                return None
        return num, den
    if kind == "div":
        a, b = as_rational(node[1], var), as_rational(node[2], var)
        if a is None or b is None:
            return None
        num, den = _mul(a[0], b[1]), _mul(a[1], b[0])
        return None if num is None or den is None else (num, den)
    if kind == "pow" and var not in free_symbols(node[2]):
        n = _exact_or_none(node[2])
        base = as_rational(node[1], var)
        if base is None or n is None or n.denominator != 1 or abs(n) > MAX_DEGREE:
            return None
        num, den = _power(base[0], abs(int(n))), _power(base[1], abs(int(n)))
        if num is None or den is None:
            return None
        return (num, den) if n >= 0 else (den, num)
    return None


def _exact_or_none(node) -> Fraction | None:
    try:
        return exact(node)
    except (EvalError, ArithmeticError, ValueError):
        return None


def _is_zero(c) -> bool | None:
    """True/False when the coefficient is (not) identically zero; None when unknown."""
    q = _exact_or_none(c)
    if q is not None:
        return q == 0
    same = identical(c, _ZERO)
    return same


def _trimmed(p: Poly) -> Poly | None:
    """Without its identically-zero coefficients; None when one cannot be decided."""
    out = {}
    for k, c in p.items():
        zero = _is_zero(c)
        if zero is None:
            return None
        if not zero:
            out[k] = c
    return out


def _same(a, b) -> bool:
    qa, qb = _exact_or_none(a), _exact_or_none(b)
    if qa is not None and qb is not None:
        return qa == qb
    return bool(identical(a, b))


def _one_root(p: Poly):
    """r when p = a·(v - r)^n (one distinct root over the complex numbers), else None."""
    n = max(p)
    lead = p[n]
    root = ("div", neg(p.get(n - 1, _ZERO)), mul(("num", Fraction(n), None), lead))
    if n == 1:
        return root
    # compare with the expansion a·(v - r)^n = a·Σ C(n,k)·(-r)^(n-k)·v^k, coefficient by coefficient
    binom = 1
    for k in range(n, -1, -1):
        expected = mul(lead, _const(Fraction(binom)), ("pow", neg(root), _const(Fraction(n - k))))
        if not _same(p.get(k, _ZERO), expected):
            return None
        binom = binom * k // (n - k + 1)
    return root


def unique_root(lhs, rhs, var: str):
    """The one value of `var` that satisfies lhs = rhs, as a tree, or None when the
    equation has several, none, every value, or is not solved here."""
    left, right = as_rational(lhs, var), as_rational(rhs, var)
    if left is None or right is None:
        return None
    a, b = _mul(left[0], right[1]), _mul(right[0], left[1])
    if a is None or b is None:
        return None
    difference = _add(a, _scale(b, ("num", Fraction(-1), None)))
    memo: dict = {}
    if sum(_size(c, memo) for part in (difference, left[1], right[1]) for c in part.values()) > MAX_COEFFICIENT_NODES:
        return None
    p = _trimmed(difference)
    if not p or max(p) == 0:
        return None  # an identity (every value) or a contradiction (none)
    root = _one_root(p)
    if root is None:
        return None
    for den in (left[1], right[1]):  # a root of a cleared denominator is no solution
        value = substituted(_tree(den, var), var, root)
        if _is_zero(value) is not False:
            return None
    return root


def _size(node, memo: dict) -> int:
    """Nodes of the tree as evaluation walks it (a shared subtree counts each time),
    counted in time linear in the distinct subtrees."""
    if not isinstance(node, tuple):
        return 0
    key = id(node)
    if key not in memo:
        memo[key] = 1 + sum(_size(part, memo) for part in node)
    return memo[key]


def _tree(p: Poly, var: str):
    terms = [c if k == 0 else mul(c, ("pow", ("sym", var), _const(Fraction(k)))) for k, c in sorted(p.items())]
    return add(*terms) if len(terms) > 1 else terms[0] if terms else _ZERO
