"""Which symbols of an answer may be renamed (used by compare's renaming view).

A symbol free in the reference must be the same symbol in the answer: a^2+1 does not
answer x^2+1, and x=2y does not answer y=2x. Free symbols compare by name; only bound
ones compare up to renaming (α-equivalence):

  * the index of a sum, product or integral and a set-builder's variable: parse gives
    them canonical names (bigops.canonical), so such trees are simply equal;
  * the variables of a definition: g(t) = t^2 answers f(x) = x^2, and against a bare
    x^2 (no definition on that side) the definition is read at x;
  * the arbitrary constants of a general solution, which may be renamed into one
    another: an integer parameter of a periodic family (π/2 + kπ against π/2 + nπ:
    shifting it by one shifts the value by a rational multiple of π, 2π or 360°), a
    constant named as constants of integration are named (C, c, K, C_1, c_2), and a
    symbol the answer declares ("for some integer t", "k \\in \\mathbb{Z}").

A bare letter ("n", "C") is the answer itself, never a constant to rename.
"""
from __future__ import annotations

import cmath
import itertools
import re
from fractions import Fraction

from .answer import Parsed
from .evaluate import EvalError, free_symbols, numeric
from .solve import as_rational

MAX_RENAMED = 3
_CONSTANT_NAME = re.compile(r"[CcK](?:_.+)?")  # C, c, K, C_1, c_2: how constants of integration are named
_STRUCTURE = frozenset({"tuple", "set", "interval", "union", "inter", "setminus", "setbuilder", "rel", "matrix", "conds"})
_MAX_DENOMINATOR = 12  # kπ/6, 2kπ/3, k·30°: the periods a family is written with


def _value_trees(node):
    """The value subtrees of an item: its members, endpoints, cells and sides."""
    if not isinstance(node, tuple) or not node:
        return
    if not isinstance(node[0], str):
        for part in node:
            yield from _value_trees(part)
    elif node[0] in _STRUCTURE:
        for part in node[1:]:
            yield from _value_trees(part)
    else:
        yield node


def _period_step(tree, name: str) -> bool:
    """tree = A + c·name with c a nonzero rational multiple of π (A free of name)."""
    form = as_rational(tree, name)
    if form is None:
        return False
    num, den = form
    if set(den) != {0} or set(num) - {0, 1} or 1 not in num:
        return False
    coefficient = ("div", num[1], den[0])
    if free_symbols(coefficient):
        return False
    try:
        q = numeric(coefficient, {}) / cmath.pi
    except EvalError:
        return False
    if abs(q.imag) > 1e-9 or abs(q.real) < 1e-9:
        return False
    close = Fraction(q.real).limit_denominator(_MAX_DENOMINATOR)
    return abs(q.real - float(close)) < 1e-9


def _periodic(nodes: list, name: str) -> bool:
    """Every value tree that holds the symbol steps by a multiple of π along it."""
    holding = [t for n in nodes for t in _value_trees(n) if name in free_symbols(t)]
    return bool(holding) and all(_period_step(t, name) for t in holding)


def _kinds(p: Parsed, nodes: list, names: list) -> dict[str, tuple]:
    """Which of `names` an answer may rename: ("arg", position) for a definition's
    variable, ("constant",) for an arbitrary constant; the others are not keys."""
    kinds = {}
    for item in p.items:
        for k, name in enumerate(item.args):
            kinds.setdefault(name, ("arg", k))
    for name in set(names) - set(kinds):
        if name in p.declared or _CONSTANT_NAME.fullmatch(name) or _periodic(nodes, name):
            kinds[name] = ("constant",)
    return kinds


def renamings(a: Parsed, xs: list, r: Parsed, ys: list):
    """Renamings of the answer's symbols (nodes xs) into the reference's (nodes ys) that
    α-equivalence allows: each symbol only on one side goes to one only on the other,
    a constant to a constant, a definition's variable to the variable in the same place
    of the other's definition, or, when the other side defines nothing and the sides
    differ in that one symbol, to the other side's free symbol."""
    if any(i.node[0] == "sym" and not i.labels for i in a.items + r.items):
        return  # a bare letter is the answer itself (choice "B", variable "n"), not a dummy
    sa, sr = set().union(*map(free_symbols, xs)), set().union(*map(free_symbols, ys))
    only_a, only_r = sorted(sa - sr), sorted(sr - sa)
    if not only_a or len(only_a) != len(only_r) or len(only_a) > MAX_RENAMED:
        return
    ka, kr = _kinds(a, xs, only_a), _kinds(r, ys, only_r)
    # a definition against a side that defines nothing is read at that side's variable,
    # when that is the one symbol the sides differ in
    defines_a, defines_r = (any(k[0] == "arg" for k in kinds.values()) for kinds in (ka, kr))
    single = len(only_a) == 1
    a_reads = single and not defines_r and ka.get(only_a[0], ("",))[0] == "arg"
    r_reads = single and not defines_a and kr.get(only_r[0], ("",))[0] == "arg"
    if a_reads or r_reads:
        yield {only_a[0]: only_r[0]}
        return
    for perm in itertools.permutations(only_r):
        pairs = list(zip(only_a, perm))
        if all(x in ka and ka[x] == kr.get(y) for x, y in pairs):  # the same kind, the same position
            yield dict(pairs)
