"""Evaluating expression trees (stage 4 of the math verifier).

Three ways, cheapest first:
  * `exact`: Fraction arithmetic for rational trees (integers, decimals, + - * /,
    integer powers, perfect roots, small factorials). Sizes are checked *before*
    computing: a power whose result would exceed MAX_BITS, or n! with n > MAX_FACTORIAL,
    raises LimitExceeded, so `10^{10^{10}}` and `1000000!` end as "error", not a hang.
  * `numeric`: complex floating point at fixed pseudo-random points (a randomised
    identity test, Schwartz-Zippel style): two formulas that agree to 1e-9 at several
    points are taken as equal. Points are a pure function of the symbol name, so
    results are deterministic across processes.
  * `sympy_equal`: the last resort, for trees the points cannot decide (every point
    outside the domain). Only small trees go there; the tree is converted node by node,
    never through parse_expr/sympify. sympy is imported on first use only.
"""
from __future__ import annotations

import cmath
import hashlib
import math
import zlib
from fractions import Fraction
from functools import lru_cache

from .items import LimitExceeded

MAX_BITS = 20_000  # exact results above ~6000 digits are refused
MAX_FACTORIAL = 1_000
MAX_SYMPY_NODES = 60
REL_TOL, ABS_TOL = 1e-9, 1e-12
# a sum or product over a symbolic range is defined at integers only: wide points have some
NON_ANALYTIC = frozenset({"abs", "floor", "ceil", "max", "min", "sum", "prod"})
MAX_TERMS = 1_000  # terms of sums and products worked out in one evaluation, nested ones included
BIG_OPERATORS = frozenset({"sum", "prod", "integral"})  # (kind, index name, lo, hi, body)
_BINDING = BIG_OPERATORS | {"setbuilder"}  # ("setbuilder", variable tree, condition)


class EvalError(ArithmeticError):
    """Undefined here (domain, overflow, a set where a number was needed)."""


# --- exact ---------------------------------------------------------------------


def _int_root(n: int, k: int) -> int | None:
    if n < 0:
        if k % 2 == 0:
            return None
        r = _int_root(-n, k)
        return None if r is None else -r
    r = round(n ** (1.0 / k)) if n < 2**1000 else int(math.isqrt(n) if k == 2 else 0)
    for cand in (r - 1, r, r + 1):
        if cand >= 0 and cand**k == n:
            return cand
    return None


def _exact_root(x: Fraction, k: int) -> Fraction | None:
    if k <= 0 or k > 64:
        return None
    num, den = _int_root(x.numerator, k), _int_root(x.denominator, k)
    return None if num is None or den is None else Fraction(num, den)


def _exact_pow(base: Fraction, e: Fraction) -> Fraction | None:
    if e.denominator != 1:
        root = _exact_root(base, e.denominator) if base >= 0 else None
        return None if root is None else _exact_pow(root, Fraction(e.numerator))
    n = e.numerator
    if base == 0:
        if n < 0:
            raise EvalError("0 to a negative power")
        return Fraction(int(n == 0))
    bits = max(abs(base.numerator), abs(base.denominator)).bit_length()
    if abs(n) * bits > MAX_BITS and abs(base) != 1:
        raise LimitExceeded(f"power with about {abs(n) * bits} bits")
    return base**n


def _bounded(q: Fraction | None) -> Fraction | None:
    """Products of many big literals grow too: refuse before the next step multiplies."""
    if q is not None and max(q.numerator.bit_length(), q.denominator.bit_length()) > 2 * MAX_BITS:
        raise LimitExceeded("exact value too large")
    return q


def exact(node) -> Fraction | None:
    """The value as a Fraction when the tree is rational, else None."""
    return _bounded(_exact(node))


def _exact(node) -> Fraction | None:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "neg":
        x = exact(node[1])
        return None if x is None else -x
    if kind in ("add", "mul"):
        vals = [exact(t) for t in node[1]]
        if any(v is None for v in vals):
            return None
        return sum(vals, Fraction(0)) if kind == "add" else math.prod(vals, start=Fraction(1))
    if kind == "div":
        a, b = exact(node[1]), exact(node[2])
        if a is None or b is None or b == 0:
            return None
        return a / b
    if kind == "pow":
        a, b = exact(node[1]), exact(node[2])
        return None if a is None or b is None else _exact_pow(a, b)
    if kind == "pct":
        x = exact(node[1])
        return None if x is None else x / 100
    if kind == "fn":
        return _exact_fn(node[1], [exact(a) for a in node[2]])
    if kind in ("sum", "prod"):
        return _exact_big(node)
    return None


class _Terms:
    """The terms left to the evaluation under way: a sum inside a sum spends from the
    outer one's budget (999 x 999 terms took 24 s before)."""
    depth = 0
    left = 0

    def __init__(self, count: int):
        self.count = count

    def __enter__(self):
        if _Terms.depth == 0:
            _Terms.left = MAX_TERMS
        _Terms.depth += 1
        if self.count > _Terms.left:
            _Terms.depth -= 1
            raise EvalError("too many terms")
        _Terms.left -= self.count

    def __exit__(self, *exc):
        _Terms.depth -= 1


def _exact_big(node) -> Fraction | None:
    """A sum or product over a rational range, term by term (MAX_TERMS in all)."""
    kind, var, lo, hi, body = node
    lo, hi = exact(lo), exact(hi)
    if lo is None or hi is None or lo.denominator != 1 or hi.denominator != 1:
        return None
    out = Fraction(0) if kind == "sum" else Fraction(1)
    try:
        with _Terms(max(0, int(hi - lo) + 1)):
            for k in range(int(lo), int(hi) + 1):
                term = exact(substituted(body, var, ("num", Fraction(k), None)))
                if term is None:
                    return None
                out = _bounded(out + term if kind == "sum" else out * term)  # a product of powers grows fast
    except EvalError:
        return None
    return out


def _exact_fn(name: str, args: list) -> Fraction | None:
    if any(a is None for a in args):
        return None
    if name == "sqrt":
        return _exact_root(args[0], 2) if args[0] >= 0 else None
    if name == "root" and args[1].denominator == 1:
        return _exact_root(args[0], int(args[1]))
    if name == "abs":
        return abs(args[0])
    if name in ("floor", "ceil"):
        return Fraction(math.floor(args[0]) if name == "floor" else math.ceil(args[0]))
    if name in ("fact", "binom") and all(a.denominator == 1 and a >= 0 for a in args):
        if max(args) > MAX_FACTORIAL:
            raise LimitExceeded(f"factorial of {max(args)}")
        if name == "fact":
            return Fraction(math.factorial(int(args[0])))
        return Fraction(math.comb(int(args[0]), int(args[1])))
    return None


# --- numeric -------------------------------------------------------------------

_PI, _E = complex(math.pi), complex(math.e)


def _pseudo_function(name: str, z: complex) -> complex:
    """A fixed smooth function standing in for an unknown f(x): same name, same values."""
    c = (zlib.crc32(name.encode()) % 1000) / 1000
    return cmath.sin(1.3 * z + c) + 0.7 * z * z + c


def _real(z: complex) -> float:
    if abs(z.imag) > 1e-9 * max(1.0, abs(z.real)):
        raise EvalError("real function of a complex value")
    return z.real


def _gamma(x: complex) -> complex:
    try:
        return complex(math.gamma(_real(x)))
    except (ValueError, OverflowError) as exc:
        raise EvalError(str(exc)) from None


_UNARY = {
    "sqrt": cmath.sqrt, "sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan,
    "arcsin": cmath.asin, "arccos": cmath.acos, "arctan": cmath.atan,
    "sinh": cmath.sinh, "cosh": cmath.cosh, "tanh": cmath.tanh,
    "cot": lambda z: 1 / cmath.tan(z), "sec": lambda z: 1 / cmath.cos(z),
    "csc": lambda z: 1 / cmath.sin(z), "arccot": lambda z: cmath.atan(1 / z),
    "abs": lambda z: complex(abs(z)), "floor": lambda z: complex(math.floor(_real(z))),
    "ceil": lambda z: complex(math.ceil(_real(z))), "fact": lambda z: _gamma(z + 1),
}


def _unsigned_zero(z: complex) -> complex:
    """-1-0j lies on the other side of sqrt/log's branch cut than -1+0j: drop the sign."""
    return complex(z.real, 0.0) if z.imag == 0 else z


def _numeric_fn(name: str, args: list[complex]) -> complex:
    args = [_unsigned_zero(a) for a in args]
    if name in _UNARY and len(args) == 1:
        return _UNARY[name](args[0])
    if name == "log":
        return cmath.log(args[0]) if len(args) == 1 else cmath.log(args[0]) / cmath.log(args[1])
    if name == "root":
        x, k = args
        if abs(x.imag) < 1e-15 and x.real < 0 and abs(k.imag) < 1e-15 and round(k.real) % 2 == 1:
            return -((-x.real) ** (1 / k.real))  # the real odd root of a negative number
        return x ** (1 / k)
    if name == "binom":
        return _gamma(args[0] + 1) / (_gamma(args[1] + 1) * _gamma(args[0] - args[1] + 1))
    if name in ("max", "min"):
        pick = max if name == "max" else min
        return complex(pick(_real(a) for a in args))
    if name.startswith("apply:"):
        return _pseudo_function(name, args[0] if len(args) == 1 else sum(args) * 1.1)
    raise EvalError(f"no numeric rule for {name}")


def numeric(node, env: dict[str, complex]) -> complex:
    try:
        value = _numeric(node, env)
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        raise EvalError(str(exc)) from None
    if not (cmath.isfinite(value)):
        raise EvalError("not finite")
    return value


def _numeric(node, env) -> complex:
    kind = node[0]
    if kind == "num":
        return complex(node[1])
    if kind == "sym":
        return env[node[1]]
    if kind == "const":
        if node[1] == "inf":
            raise EvalError("infinity is not a number")
        return {"pi": _PI, "e": _E, "i": 1j}[node[1]]
    if kind == "neg":
        return -_numeric(node[1], env)
    if kind == "add":
        return sum((_numeric(t, env) for t in node[1]), 0j)
    if kind == "mul":
        out = 1 + 0j
        for f in node[1]:
            out *= _numeric(f, env)
        return out
    if kind == "div":
        return _numeric(node[1], env) / _numeric(node[2], env)
    if kind == "pow":
        base, e = _unsigned_zero(_numeric(node[1], env)), _numeric(node[2], env)
        if base == 0 and e.real > 0:
            return 0j
        if abs(e) * math.log2(abs(base) + 2) > 3000:
            raise EvalError("power too large for floating point")
        return base**e
    if kind == "pct":
        return _numeric(node[1], env) / 100
    if kind == "deg":
        return _numeric(node[1], env) * _PI / 180
    if kind == "fn":
        return _numeric_fn(node[1], [_numeric(a, env) for a in node[2]])
    if kind in ("sum", "prod"):
        return _numeric_big(node, env)
    raise EvalError(f"{kind} is not a number")


def _integer(z: complex) -> int:
    k = round(z.real)
    if abs(z.imag) > 1e-9 or abs(z.real - k) > 1e-9:
        raise EvalError("a range bound that is no integer")
    return k


def _numeric_big(node, env) -> complex:
    kind, var, lo, hi, body = node
    lo, hi = _integer(_numeric(lo, env)), _integer(_numeric(hi, env))
    out = 0j if kind == "sum" else 1 + 0j
    with _Terms(max(0, hi - lo + 1)):
        for k in range(lo, hi + 1):
            term = _numeric(body, {**env, var: complex(k)})
            out = out + term if kind == "sum" else out * term
    return out


def close(a: complex, b: complex) -> bool:
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b)) + ABS_TOL


# --- symbols and points ----------------------------------------------------------


def free_symbols(node, acc: set | None = None) -> set[str]:
    """Symbols not bound inside the tree: the index of a sum or integral and the
    variable of a set-builder are not free ({x | x > a} has the one free symbol a)."""
    acc = set() if acc is None else acc
    if isinstance(node, tuple) and node:
        head = node[0]
        if not isinstance(head, str):  # a tuple of trees (checked first: hashing one walks it)
            for part in node:
                free_symbols(part, acc)
            return acc
        if head == "sym" and isinstance(node[1], str):
            acc.add(node[1])
            return acc
        if head in _BINDING:
            inner = set()
            for part in node[2:]:
                free_symbols(part, inner)
            acc |= inner - ({node[1]} if head in BIG_OPERATORS else free_symbols(node[1]))
            return acc
        for part in node[1:]:
            if isinstance(part, tuple):
                free_symbols(part, acc)
    return acc


def function_names(node, acc: set | None = None) -> set[str]:
    """Names of the functions applied in the tree; "sum" and "prod" for those operators."""
    acc = set() if acc is None else acc
    if isinstance(node, tuple) and node:
        if node[0] == "fn":
            acc.add(node[1])
        elif node[0] in ("sum", "prod"):
            acc.add(node[0])
        for part in node[1:] if isinstance(node[0], str) else node:
            if isinstance(part, tuple):
                function_names(part, acc)
    return acc


@lru_cache(maxsize=4096)
def _unit(name: str, point: int) -> float:
    """A fixed pseudo-random number in [0, 1) for a symbol at a point. A real hash: CRC32
    is linear, so names one letter apart (m, n) got points 0.01 apart, and at the
    integer points of a floor or a sum the two symbols took the same value (floor(m)
    "equalled" floor(n))."""
    digest = hashlib.blake2b(f"{name}|{point}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def points(symbols: set[str], wide: bool) -> list[dict[str, complex]]:
    """Evaluation points. Narrow: every symbol in (0.15, 0.85), where sqrt/log/arcsin
    are real. Wide (for floor/abs/max ...): negatives, larger values and integers."""
    out = []
    for p in range(4):
        out.append({s: complex(0.15 + 0.7 * _unit(s, p)) for s in symbols})
    if wide:
        for p in range(4, 10):
            if p % 2:
                out.append({s: complex(2 + int(9 * _unit(s, p))) for s in symbols})
            else:
                out.append({s: complex((1.3 + 2.5 * _unit(s, p)) * (-1) ** int(2 * _unit(s, -p))) for s in symbols})
    return out


def renamed(node, mapping: dict[str, str]):
    if not isinstance(node, tuple) or not node:
        return node
    if node[0] == "sym" and isinstance(node[1], str):
        return ("sym", mapping.get(node[1], node[1]))
    head, parts = (node[:1], node[1:]) if isinstance(node[0], str) else ((), node)
    return head + tuple(renamed(p, mapping) for p in parts)


def substituted(node, name: str, value):
    if not isinstance(node, tuple) or not node:
        return node
    if node == ("sym", name):
        return value
    if node[0] in BIG_OPERATORS and node[1] == name:  # the name is bound again inside: only the range is free
        return node[:2] + tuple(substituted(p, name, value) for p in node[2:4]) + node[4:]
    head, parts = (node[:1], node[1:]) if isinstance(node[0], str) else ((), node)
    return head + tuple(substituted(p, name, value) for p in parts)


def identical(a, b) -> bool | None:
    """True/False when the points decide whether the two formulas are equal, None when
    no point is inside both domains."""
    syms = free_symbols(a) | free_symbols(b)
    wide = bool((function_names(a) | function_names(b)) & NON_ANALYTIC)
    decided = 0
    for env in points(syms, wide) if syms else [{}]:
        try:
            va, vb = numeric(a, env), numeric(b, env)
        except EvalError:
            continue
        if not close(va, vb):
            return False
        decided += 1
    return True if decided else None


def fingerprint(node):
    """A hashable summary: equal values give equal prints (up to rounding at a boundary)."""
    value = exact(node)
    if value is not None:
        return ("q", value)
    syms = free_symbols(node)
    try:
        vals = [numeric(node, env) for env in (points(syms, False)[:2] if syms else [{}])]
    except EvalError:
        return ("tree", node)
    return ("f", tuple((float(f"{v.real:.8g}"), float(f"{v.imag:.8g}")) for v in vals))


# --- sympy, the last resort --------------------------------------------------------


def _node_count(node) -> int:
    if not isinstance(node, tuple):
        return 0
    return 1 + sum(_node_count(p) for p in node[1:] if isinstance(p, tuple))


def _to_sympy(node, sp):
    kind = node[0]
    if kind == "num":
        return sp.Rational(node[1].numerator, node[1].denominator)
    if kind == "sym":
        return sp.Symbol(node[1], positive=True)
    if kind == "const":
        return {"pi": sp.pi, "e": sp.E, "i": sp.I, "inf": sp.oo}[node[1]]
    if kind in ("neg", "add", "mul", "div", "pow", "pct", "deg"):
        parts = [_to_sympy(p, sp) for p in (node[1] if kind in ("add", "mul") else node[1:])]
        return {
            "neg": lambda: -parts[0], "add": lambda: sp.Add(*parts), "mul": lambda: sp.Mul(*parts),
            "div": lambda: parts[0] / parts[1], "pow": lambda: sp.Pow(parts[0], parts[1]),
            "pct": lambda: parts[0] / 100, "deg": lambda: parts[0] * sp.pi / 180,
        }[kind]()
    if kind == "fn":
        args = [_to_sympy(a, sp) for a in node[2]]
        table = {"sqrt": sp.sqrt, "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "log": sp.log,
                 "arcsin": sp.asin, "arccos": sp.acos, "arctan": sp.atan, "abs": sp.Abs,
                 "floor": sp.floor, "ceil": sp.ceiling, "fact": sp.factorial}
        if node[1] in table:
            return table[node[1]](*args)
    raise EvalError(f"no sympy form for {kind}")


def sympy_equal(a, b) -> bool | None:
    """Symbolic equivalence of two small trees; None when sympy cannot tell."""
    text = repr((a, b))
    if _node_count(a) + _node_count(b) > MAX_SYMPY_NODES or "inf" in text or any(f"'{k}'" in text for k in BIG_OPERATORS):
        return None  # (big operators have no sympy form here: no need to import it)
    import sympy  # deferred: the common path never needs it

    try:
        diff = sympy.simplify(_to_sympy(a, sympy) - _to_sympy(b, sympy))
    except Exception:  # sympy is a black box here: any failure means "cannot tell"
        return None
    return True if diff == 0 else None
