"""Evaluating expression trees (stage 4 of the math verifier).

Three ways, cheapest first:
  * `exact`: Fraction arithmetic for rational trees (integers, decimals, + - * /,
    integer powers, perfect roots, small factorials). Sizes are checked *before*
    computing: a power whose result would exceed MAX_BITS, or n! with n > MAX_FACTORIAL,
    raises LimitExceeded, so `10^{10^{10}}` and `1000000!` end as "error", not a hang.
    Two rational values are equal only when their Fractions are.
  * `numeric`: complex floating point at fixed pseudo-random points (a randomised
    identity test, Schwartz-Zippel style). Points are a pure function of the symbol
    name, so results are deterministic across processes. Four lie in (0.15, 0.85),
    six outside (0, 1): negatives (all symbols negative at one of them, mixed signs at
    others) and integers 2..10, so `\\sqrt{x^2}` is not x, `\\arcsin(\\sin x)` is not x
    and x^{150} is not 0. Values are principal complex values (`e^{\\ln x}` is x); but a negative
    number to a rational power p/q with q odd is real, as `\\sqrt[q]{x^p}` is (x^{1/3} is
    `\\sqrt[3]{x}`, (-8)^{2/3} is 4). Outside (0, 1) a point where either side is not real
    is skipped, as is one where either side took a square root, log or fractional power of a
    negative (or an arcsin beyond 1) on the way: two formulas are compared on their common real
    domain, as an identity in a problem is meant (`\\ln x + \\ln y` is `\\ln(xy)`, `2\\ln x` is
    `\\ln(x^2)` and `\\sqrt{x}\\sqrt{y}` is `\\sqrt{xy}`, for positive values; `\\sqrt{x^3}` and
    `x\\sqrt{x}` at x = -2).
    Agreeing to 1e-9 in floating point is only a filter: `agree` then
    confirms at two of the points with mpmath, at a coarse and a fine precision set by
    the magnitudes in the trees: a real difference stays put, rounding noise shrinks
    (`e^{30}` is not `e^{30}+1`, `\\pi+10^{-9}` is not π, `10^{-13}x` is not 0).
  * `sympy_equal`: the last resort, for trees the points cannot decide (every point
    outside the domain). Only small trees go there; the tree is converted node by node,
    never through parse_expr/sympify, symbols as real (never positive: that would make
    `\\sqrt{x^2}` x). sympy is imported on first use only.
"""
from __future__ import annotations

import cmath
import hashlib
import math
import threading
import zlib
from fractions import Fraction
from functools import lru_cache

from .items import LimitExceeded

MAX_BITS = 20_000  # exact results above ~6000 digits are refused
MAX_FACTORIAL = 1_000
MAX_SYMPY_NODES = 60
REL_TOL, ABS_TOL = 1e-9, 1e-12
NARROW_POINTS = 4  # points in (0.15, 0.85); the others lie outside (0, 1)
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
    if name in ("gcd", "lcm") and args and all(a.denominator == 1 for a in args):
        values = [int(a) for a in args]
        return Fraction(math.gcd(*values) if name == "gcd" else math.lcm(*values))
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


# Whether the evaluation in progress (this thread's) took a value off the real line on the way: a
# square root or log of a negative, an arcsin beyond 1, a fractional power of a negative. At a
# point outside (0, 1) such a side is outside its real domain, even when its value ends up real
# (\sqrt{x}\sqrt{y} at two negatives is -\sqrt{xy}): `identical` skips the point.
_TRACK = threading.local()


def _off_real(z: complex, low: float = 0.0, high: float = math.inf, inclusive: bool = True) -> None:
    inside = abs(z.imag) <= 1e-12 * max(1.0, abs(z.real)) and (
        low <= z.real <= high if inclusive else low < z.real <= high)
    if not inside:
        _TRACK.left = True


def _numeric_fn(name: str, args: list[complex]) -> complex:
    args = [_unsigned_zero(a) for a in args]
    if name == "sqrt" and args:
        _off_real(args[0])
    elif name == "log" and args:
        for a in args:
            _off_real(a, inclusive=False)
    elif name in ("arcsin", "arccos") and args:
        _off_real(args[0], -1.0, 1.0)
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
    if name in ("gcd", "lcm"):  # of whole numbers only (exact() computes them)
        values = [_real(a) for a in args]
        if not all(v == int(v) and abs(v) < 2**53 for v in values):
            raise EvalError(f"{name} of non-integers")
        ints = [int(v) for v in values]
        return complex(math.gcd(*ints) if name == "gcd" else math.lcm(*ints))
    if name.startswith("apply:"):
        return _pseudo_function(name, args[0] if len(args) == 1 else sum(args) * 1.1)
    raise EvalError(f"no numeric rule for {name}")


def numeric(node, env: dict[str, complex]) -> complex:
    _TRACK.left = False
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
        if base.imag == 0 and base.real < 0:
            q = _odd_root_exponent(node[2])
            if q is not None:  # the real root, as \sqrt[3]{x} is: x^{1/3} at x = -8 is -2
                return complex((-1) ** q.numerator * (-base.real) ** float(q))
        if not (e.imag == 0 and e.real == int(e.real)):  # a fractional power: of a positive real only
            _off_real(base)
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


def _odd_root_exponent(node) -> Fraction | None:
    """The exponent when it is a rational p/q with q odd and > 1: a negative base then has
    a real power (x^{2/3} is \\sqrt[3]{x^2}, not the principal complex value)."""
    if node[0] == "sym":
        return None
    try:
        q = exact(node)
    except LimitExceeded:
        return None
    return q if q is not None and q.denominator % 2 == 1 and q.denominator > 1 else None


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
    """Equal to floating-point accuracy: a filter only (1e-9 cannot tell e^{30} from e^{30}+1)."""
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b)) + ABS_TOL


# --- high precision ------------------------------------------------------------------
#
# The same tree, the same point, in mpmath, at a coarse and a fine precision. The
# difference of two equal formulas is rounding noise and shrinks by about 2^-(fine -
# coarse); a real difference (e^{30} against e^{30}+1, 10^{-13}x against 0) stays put.
# The coarse pass must see the span of magnitudes the trees go through (2^-30 and 2^30
# in \sqrt[10^9]{2}, 2^-332 in \pi+10^{-100}): when that span is small the floats are the
# coarse pass and HP_BASE bits the fine one, else 2*span + 96 bits and HP_STEP more.

HP_BASE, HP_STEP, HP_MARGIN = 192, 160, 64
HP_SPAN_FOR_ONE_PASS = 48  # 53-bit floats are the coarse pass when 192 bits are fine enough
# bits between the largest and the smallest magnitude a confirmation takes on: past it (a sum of
# x^k! over a thousand k) mpmath would take seconds a point, so the floating-point verdict stands
HP_MAX_SPAN = 1_024
HP_POINTS = 2  # points confirmed at high precision (after all agreed in floating point)
_INVERSE_TRIG = frozenset({"arcsin", "arccos", "arctan", "arccot"})


@lru_cache(maxsize=1)
def _mpmath():
    import mpmath  # deferred: sympy's dependency, needed only once floats say "equal"

    return mpmath


# values one high-precision pass may work out: a sum of a thousand x^k! took 5 s (past the check
# timeout) at 192 bits; past it the floating-point verdict stands
HP_MAX_VALUES = 2_000


class _Span:
    """The smallest and largest magnitudes (in bits) of the values a pass went through."""

    def __init__(self):
        self.lo = self.hi = None
        self.values = 0

    def see(self, v, mpm):
        self.values += 1
        if self.values > HP_MAX_VALUES:
            raise EvalError("too many values for a high-precision pass")
        if v:
            m = int(mpm.mag(v))
            self.lo = m if self.lo is None or m < self.lo else self.lo
            self.hi = m if self.hi is None or m > self.hi else self.hi
        return v

    @property
    def bits(self) -> int:
        return 0 if self.lo is None else self.hi - self.lo


def _hp_real(z, mpm):
    if isinstance(z, mpm.mpc):
        if abs(z.imag) > mpm.mpf(2) ** (-(mpm.mp.prec // 2)) * max(1, abs(z.real)):
            raise EvalError("real function of a complex value")
        return z.real
    return z


def _hp_snapped(z, mpm):
    """Rounding noise off the imaginary part of a real value: -1 + 10^-60 i is -1, on the
    branch cut of sqrt and log as -1+0j is in cmath (e^{i\\pi} has such noise)."""
    if isinstance(z, mpm.mpc):
        if z.imag == 0 or abs(z.imag) <= mpm.mpf(2) ** (-(mpm.mp.prec // 2)) * abs(z.real):
            return z.real
    return z


def _hp_gamma(x, mpm):
    try:
        return mpm.gamma(_hp_real(x, mpm))
    except ValueError as exc:  # a pole
        raise EvalError(str(exc)) from None


def _hp_inverse_trig(name: str, z, mpm):
    """cmath's side of the branch cuts (the value above a real cut, right of an imaginary
    one): mpmath takes the other side of asin and acos beyond 1 and of atan below -i."""
    if name == "arccot":
        z = _hp_snapped(1 / z, mpm)
        name = "arctan"
    if name == "arctan":
        out = mpm.atan(z)
        if isinstance(z, mpm.mpc) and z.real == 0 and abs(z.imag) > 1 and out.real < 0:
            out += mpm.pi
        return out
    out = (mpm.asin if name == "arcsin" else mpm.acos)(z)
    if not isinstance(z, mpm.mpc) and abs(z) > 1 and isinstance(out, mpm.mpc):
        if (out.imag < 0) == (name == "arcsin"):
            out = mpm.conj(out)
    return out


def _hp_fn(name: str, args: list, mpm):
    if name in ("sqrt", "log", "root") or name in _INVERSE_TRIG:
        args = [_hp_snapped(a, mpm) for a in args]
    if len(args) == 1:
        z = args[0]
        if name in _INVERSE_TRIG:
            return _hp_inverse_trig(name, z, mpm)
        simple = {"sqrt": mpm.sqrt, "sin": mpm.sin, "cos": mpm.cos, "tan": mpm.tan, "sinh": mpm.sinh,
                  "cosh": mpm.cosh, "tanh": mpm.tanh, "log": mpm.log}
        if name in simple:
            return simple[name](z)
        if name in ("cot", "sec", "csc"):
            return 1 / {"cot": mpm.tan, "sec": mpm.cos, "csc": mpm.sin}[name](z)
        if name == "abs":
            return abs(z)
        if name in ("floor", "ceil"):
            return (mpm.floor if name == "floor" else mpm.ceil)(_hp_real(z, mpm))
        if name == "fact":
            return _hp_gamma(z + 1, mpm)
    if name == "log" and len(args) == 2:
        return mpm.log(args[0]) / mpm.log(args[1])
    if name == "root":
        x, k = args
        if not isinstance(x, mpm.mpc) and x < 0 and not isinstance(k, mpm.mpc) and int(mpm.nint(k)) % 2 == 1:
            return -mpm.power(-x, 1 / k)  # the real odd root of a negative number
        return mpm.power(x, 1 / k)
    if name == "binom":
        n, k = args
        return _hp_gamma(n + 1, mpm) / (_hp_gamma(k + 1, mpm) * _hp_gamma(n - k + 1, mpm))
    if name in ("max", "min"):
        reals = [_hp_real(a, mpm) for a in args]
        return max(reals) if name == "max" else min(reals)
    if name.startswith("apply:"):
        c = mpm.mpf(zlib.crc32(name.encode()) % 1000) / 1000
        z = args[0] if len(args) == 1 else sum(args) * mpm.mpf("1.1")
        return mpm.sin(mpm.mpf("1.3") * z + c) + mpm.mpf("0.7") * z * z + c
    raise EvalError(f"no numeric rule for {name}")


def _hp(node, env, span: _Span, mpm):
    v = _hp_node(node, env, span, mpm)
    if not mpm.isfinite(v):
        raise EvalError("not finite")
    return span.see(v, mpm)


def _hp_node(node, env, span, mpm):
    kind = node[0]
    if kind == "num":
        return mpm.mpf(node[1].numerator) / node[1].denominator
    if kind == "sym":
        z = env[node[1]]
        return mpm.mpf(z.real) if z.imag == 0 else mpm.mpc(z.real, z.imag)
    if kind == "const":
        if node[1] == "inf":
            raise EvalError("infinity is not a number")
        return {"pi": mpm.pi, "e": mpm.e, "i": mpm.j}[node[1]] + 0  # + 0: a value at this precision
    if kind == "neg":
        return -_hp(node[1], env, span, mpm)
    if kind == "add":
        out = mpm.mpf(0)
        for t in node[1]:
            out += _hp(t, env, span, mpm)
        return out
    if kind == "mul":
        out = mpm.mpf(1)
        for f in node[1]:
            out *= _hp(f, env, span, mpm)
        return out
    if kind == "div":
        return _hp(node[1], env, span, mpm) / _hp(node[2], env, span, mpm)
    if kind == "pow":
        base, e = _hp_snapped(_hp(node[1], env, span, mpm), mpm), _hp(node[2], env, span, mpm)
        if base == 0:
            if mpm.re(e) > 0:
                return mpm.mpf(0)
            raise EvalError("0 to a power that is not positive")
        if abs(e) * mpm.log(abs(base) + 2, 2) > 3000:
            raise EvalError("power too large")
        if not isinstance(base, mpm.mpc) and base < 0:
            q = _odd_root_exponent(node[2])
            if q is not None:
                return (-1) ** q.numerator * mpm.power(-base, e)
        return mpm.power(base, e)
    if kind == "pct":
        return _hp(node[1], env, span, mpm) / 100
    if kind == "deg":
        return _hp(node[1], env, span, mpm) * mpm.pi / 180
    if kind == "fn":
        return _hp_fn(node[1], [_hp(a, env, span, mpm) for a in node[2]], mpm)
    if kind in ("sum", "prod"):
        _, var, lo, hi, body = node
        lo, hi = (_integer(complex(_hp(t, env, span, mpm))) for t in (lo, hi))
        out = mpm.mpf(0) if kind == "sum" else mpm.mpf(1)
        with _Terms(max(0, hi - lo + 1)):
            for k in range(lo, hi + 1):
                term = _hp(body, {**env, var: complex(k)}, span, mpm)
                out = out + term if kind == "sum" else out * term
        return out
    raise EvalError(f"{kind} is not a number")


def _hp_difference(a, b, env, prec: int):
    mpm = _mpmath()
    span = _Span()
    with mpm.workprec(prec):
        try:
            d = _hp(a, env, span, mpm) - _hp(b, env, span, mpm)
        except (ZeroDivisionError, OverflowError, ValueError) as exc:
            raise EvalError(str(exc)) from None
    return d, span


def agree(a, b, env: dict[str, complex], float_difference: complex | None = None) -> bool | None:
    """Whether two values are equal at the point, at high precision; None when mpmath
    cannot evaluate them there (then the floating-point verdict stands). The first pass
    is at HP_BASE bits; when the magnitudes span at most HP_SPAN_FOR_ONE_PASS bits, the
    floating-point difference (53 bits) is the coarse one, else two more passes."""
    try:
        d_lo, span = _hp_difference(a, b, env, HP_BASE)
        if span.bits > HP_MAX_SPAN:
            return None
        if float_difference is not None and span.bits <= HP_SPAN_FOR_ONE_PASS:
            d_lo, d_hi, lo = float_difference, d_lo, 53
        else:
            lo = max(HP_BASE, 2 * span.bits + HP_MARGIN + 32)  # \sqrt{N^2+1}-N is 1/N: half the span below
            if lo > HP_BASE:
                d_lo, span = _hp_difference(a, b, env, lo)
            d_hi, _ = _hp_difference(a, b, env, lo + HP_STEP)
    except (ArithmeticError, ValueError, TypeError):  # EvalError, LimitExceeded, mpmath's own
        return None
    if not d_hi:
        return True
    mpm = _mpmath()
    noise = mpm.ldexp(1, (span.hi or 0) - lo)  # the rounding left at `lo` bits
    return abs(d_hi) <= mpm.ldexp(max(abs(mpm.mpmathify(d_lo)), noise), -HP_MARGIN)


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


@lru_cache(maxsize=4096)
def _unit(name: str, point: int) -> float:
    """A fixed pseudo-random number in [0, 1) for a symbol at a point. A real hash: CRC32
    is linear, so names one letter apart (m, n) got points 0.01 apart, and at the
    integer points of a floor or a sum the two symbols took the same value (floor(m)
    "equalled" floor(n))."""
    digest = hashlib.blake2b(f"{name}|{point}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def points(symbols: set[str]) -> list[dict[str, complex]]:
    """Evaluation points. The first NARROW_POINTS put every symbol in (0.15, 0.85), where
    sqrt/log/arcsin are real; the rest lie outside (0, 1): every symbol negative (point
    4), integers 2..10 (odd points: floor, sums over a symbolic range), and values of
    1.3..3.8 with a sign per symbol (mixed signs: a+b < 0 while a > 0). Every caller gets
    all ten (a `wide` flag once kept analytic trees in (0.15, 0.85), where \\sqrt{x^2} is x
    and \\sqrt{x^2} < 1 is x < 1); the narrow ones come first."""
    out = []
    for p in range(NARROW_POINTS):
        out.append({s: complex(0.15 + 0.7 * _unit(s, p)) for s in symbols})
    for p in range(NARROW_POINTS, 10):
        if p % 2:
            out.append({s: complex(2 + int(9 * _unit(s, p))) for s in symbols})
        else:
            sign = (lambda s: -1) if p == NARROW_POINTS else (lambda s: (-1) ** int(2 * _unit(s, -p)))
            out.append({s: complex((1.3 + 2.5 * _unit(s, p)) * sign(s)) for s in symbols})
    return out


def _real_value(z: complex) -> bool:
    return abs(z.imag) <= 1e-9 * max(1.0, abs(z.real))


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
    no point is inside both domains. Floating point first at every point (a filter),
    then high precision (`agree`) at the first HP_POINTS points that floats passed."""
    syms = free_symbols(a) | free_symbols(b)
    decided = []
    for k, env in enumerate(points(syms) if syms else [{}]):
        try:
            va = numeric(a, env)
            left = _TRACK.left
            vb = numeric(b, env)
            left = left or _TRACK.left
        except EvalError:
            continue
        if k >= NARROW_POINTS and (left or not (_real_value(va) and _real_value(vb))):
            # outside the two sides' common real domain: an identity is read where both are real all
            # the way (\ln x + \ln y is \ln(xy) and \sqrt{x}\sqrt{y} is \sqrt{xy}, as for x, y > 0)
            continue
        if not close(va, vb):
            return False
        decided.append((env, va - vb))
    if not decided:
        return None
    return all(agree(a, b, env, d) is not False for env, d in decided[:HP_POINTS])


def fingerprint(node):
    """A hashable summary: equal values give equal prints (up to rounding at a boundary)."""
    value = exact(node)
    if value is not None:
        return ("q", value)
    syms = free_symbols(node)
    try:
        vals = [numeric(node, env) for env in (points(syms)[:2] if syms else [{}])]
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
        return sp.Symbol(node[1], real=True)  # not positive: sqrt(x^2) would simplify to x
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
