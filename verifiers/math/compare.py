"""Deciding whether two parsed answers are the same answer (stage 5 of the verifier).

Units first: when both sides carry units (units.py), another dimension is never equal
(5 kg, 5 m) and the answer is converted to the reference's unit (50 cm is 0.5 m); a
unit on one side only is dropped. When both sides say which variable their values are
of (a label "y = 3", or an inequality in one symbol "y > 3"), the reference's variables
must be among the answer's: y = 3 does not answer x = 3 (a single letter in either case,
or a Greek letter; definitions, words and geometric names are left to the rules below).
Then, when both sides label every item with
distinct names ("a=1, b=2"), items pair up by label and that decides ("a=2, b=1" is
wrong although {1,2} = {2,1}); when one side labels every item distinctly and the
other is a bare list, the list must follow the labelled side's order ("x=1, y=2" is
not "2, 1"); values all given for one unknown ("x=1, x=1, x=3", "x_1=x_2=2") are a
set, duplicates and all. Numbered terms of one family ("x_1=3, x_2=5") are a set against
a bare list or the family's own name (roots in any order), and pair up by label against
another numbered labelling ("a_1=2, a_2=1" is not "a_1=1, a_2=2"; a_2 does not answer a_1). Otherwise views are tried in turn; the first that says
"equal" decides:
  1. items: several answers compare as a multiset (as a set when either side is
     written `\\{...\\}`); a single tuple/vector against a bare list compares in order;
     each pair of items by structure (tuples in order, sets without order, intervals
     with their closures, relations as chains, values by `value_equal`). A strict
     chain of names is an ordering: "b < a < d < c" is the list "b, a, d, c".
  2. the real line: when intervals or inequalities are involved, both sides become
     unions of intervals (`k<-5` = `(-\\infty,-5)`, `a\\le-2 \\text{or} a=1` =
     `(-\\infty,-2]\\cup\\{1\\}`).
  3. equations against expressions: an equation must determine the one symbol the
     expression lacks to be that expression (`xy=6` is y = 6/x, `2x=10` is 5; x^2=25 is
     neither 5 nor -5: solve.py); a chain `L=M=R` that no constant member contradicts
     against R (its last right-hand side).
  4. renaming: free symbols compare by name (`a^2+1` is not `x^2+1`, `x=2y` is not
     `y=2x`); only bound ones are renamed (binders.py): a definition's variable
     (`g(t)=t^2` = `f(x)=x^2`), and arbitrary constants (`k\\pi` = `n\\pi`, `x+C` =
     `x+K`, a declared "for some integer t"). Sum, integral and set-builder variables
     have canonical names from the parser, so those trees are equal as they stand.
  5. text: equal word lists ("Yes" = "\\text{yes}"); a short phrase inside a prose
     reference without negation ("stopped" in "A stopped clock shows the correct time
     more often.").
Values: exact rationals compare exactly; a decimal literal matches the value rounded
(or truncated) to the places written, when it has at least 3 significant digits (2
when both sides are decimal literals); `x%` also matches x/100, `x°` also x·π/180;
anything else goes through the randomised identity test, then sympy. Rounding is the
reference's privilege: a decimal reference is taken as rounded ("30.52" is met by
1587/52), while the answer's decimals are exact values unless accept_rounded ("0.333"
is not 1/3, "3.14159" is not π; verify.judge says when an accept needed rounding).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from .answer import Parsed
from .binders import renamings
from .evaluate import BIG_OPERATORS, EvalError, exact, fingerprint, free_symbols, identical, numeric, points, renamed, substituted, sympy_equal
from .items import GREEK, OPPOSITES, symbol_words
from .parse import PI
from .solve import unique_root
from .units import conversions
from .sets import INEQUALITIES, chain_intervals, infinity_sign, is_set_like, normalised, realsets_equal, to_realset

VALUE_KINDS = frozenset({"num", "sym", "const", "add", "mul", "neg", "div", "pow", "fn", "pct", "deg", "sum", "prod", "integral"})
_MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}
_STOP_WORDS = frozenset({"the", "a", "an"})
# words that state an answer without being part of it, around a short phrase in a sentence reference
# (function words only: a noun such as "triangle" or "function" may be the answer itself)
_FRAMING = frozenset("answer answers final result value it its is are was were be this that so thus therefore "
                     "hence equals we get have yes".split())
_NEGATIONS = frozenset({"not", "no", "never", "neither", "nor", "cannot", "doesn", "isn", "aren", "don", "won", "t"})


# --- values ----------------------------------------------------------------------


def _decimal_literal(node) -> tuple[Fraction, int] | None:
    sign = 1
    if node[0] == "neg":
        node, sign = node[1], -1
    if node[0] == "num" and node[2]:
        return sign * node[1], node[2]
    return None


def _significant_digits(value: Fraction, places: int) -> int:
    return len(str(abs(int(value * 10**places))).lstrip("0"))


def _rounds_to(x, value: Fraction, places: int, truncated_too: bool = True) -> bool:
    """x rounded half-up, or truncated (unless not `truncated_too`), to `places` decimals equals
    the literal."""
    target = value * 10**places
    scaled = x * 10**places
    if isinstance(scaled, float) and (not math.isfinite(scaled) or abs(scaled) > 1e14):
        return False
    sign = -1 if scaled < 0 else 1
    half = Fraction(1, 2) if isinstance(scaled, Fraction) else 0.5
    rounded, truncated = sign * math.floor(abs(scaled) + half), sign * math.floor(abs(scaled))
    return rounded == target or (truncated_too and truncated == target)


def _written_decimal(node) -> bool:
    """An answer's decimal taken as the exact value written (places 0: see exact_decimals)."""
    node = node[1] if node[0] == "neg" else node
    return node[0] == "num" and node[2] == 0


def exact_decimals(node):
    """The tree with its decimal literals made exact ("0.333" is 333/1000, never ≈ 1/3):
    how an answer is read unless rounding is accepted. Places 0 marks "written as a
    decimal", so a coarser decimal reference still needs only 2 significant digits."""
    if not isinstance(node, tuple) or not node:
        return node
    if node[0] == "num":
        return node if node[2] is None else ("num", node[1], 0)
    if node[0] in ("sym", "const", "text"):
        return node
    head, parts = (node[:1], node[1:]) if isinstance(node[0], str) else ((), node)
    return head + tuple(exact_decimals(p) for p in parts)


def _decimal_match(a, b) -> bool:
    la, lb = _decimal_literal(a), _decimal_literal(b)
    if la and lb:
        (cv, cp), (fv, _) = sorted((la, lb), key=lambda t: t[1])
        return _significant_digits(cv, cp) >= 2 and _rounds_to(fv, cv, cp)
    (lv, lp), other = (la, b) if la else (lb, a)
    written = _written_decimal(other)
    if _significant_digits(lv, lp) < (2 if written else 3) or free_symbols(other):
        return False
    x = exact(other)
    if x is None:
        try:
            z = numeric(other, {})
        except EvalError:
            return False
        if abs(z.imag) > 1e-12:
            return False
        x = z.real
    # a reference may be a rounded (or cut) value of an irrational one (\sqrt{2} is 1.41); a decimal
    # the answer wrote is a value, and one that only truncates to the reference is another value
    # (2.59 is not 2.5, which a truncation would have accepted)
    return _rounds_to(x, lv, lp, truncated_too=not written)


def _alternatives(node) -> list:
    """The readings of a value: x% is x/100 or x; x° is x or x·π/180."""
    if node[0] == "pct":
        lit = _decimal_literal(node[1])
        scaled = ("num", lit[0] / 100, lit[1] + 2) if lit else ("div", node[1], ("num", Fraction(100), None))
        return [scaled, node[1]]
    if node[0] == "deg":
        return [node[1], ("mul", (node[1], PI, ("num", Fraction(1, 180), None)))]
    return [node]


def _scalar_equal(a, b) -> bool:
    if a == b:  # the same tree (bound variables have canonical names: α-equivalent trees are equal)
        return True
    if a[0] in BIG_OPERATORS and a[0] == b[0] and a[1] == b[1] and _binder_equal(a, b):
        return True
    ea, eb = exact(a), exact(b)
    if ea is not None and eb is not None and ea == eb:
        return True
    if _decimal_literal(a) or _decimal_literal(b):
        return _decimal_match(a, b)
    if ea is not None and eb is not None:
        return False
    if infinity_sign(a) or infinity_sign(b):
        return infinity_sign(a) == infinity_sign(b)
    verdict = identical(a, b)
    if verdict is None:
        verdict = sympy_equal(a, b)
    return bool(verdict)


def _binder_equal(a, b) -> bool:
    """Two sums (products, integrals) over the same range whose bodies are equal values;
    an integral has no numeric value here, so this is how two integrals compare."""
    ends = [(x, y) for x, y in zip(a[2:4], b[2:4])]
    if any((x is None) != (y is None) for x, y in ends):
        return False
    return all(x is None or value_equal(x, y) for x, y in ends) and value_equal(a[4], b[4])


def value_equal(a, b) -> bool:
    if a[0] == b[0] and a[0] in ("pct", "deg"):  # 0.5% and 50% are two values, as are (π/3)° and 60°
        return value_equal(a[1], b[1])
    return any(_scalar_equal(x, y) for x in _alternatives(a) for y in _alternatives(b))


# --- items -------------------------------------------------------------------------


def _vector(node):
    """A one-row or one-column matrix as a tuple of cells."""
    rows = node[1]
    if len(rows) == 1 or all(len(r) == 1 for r in rows):
        return ("tuple", tuple(c for r in rows for c in r))
    return None


def _rel_equal(x, y) -> bool:
    (ox, ex), (oy, ey) = x[1:], y[1:]
    if len(ex) == len(ey):
        if ox == oy and all(item_equal(p, q) for p, q in zip(ex, ey)):
            return True
        if tuple(_MIRROR[o] for o in reversed(ox)) == oy and all(item_equal(p, q) for p, q in zip(reversed(ex), ey)):
            return True
    if len(ex) == len(ey) == 2:
        sign = 1 if ox == oy else -1 if (_MIRROR[ox[0]],) == oy else 0
        if sign:
            return _proportional(("add", (ex[0], ("neg", ex[1]))), ("add", (ey[0], ("neg", ey[1]))), sign, ox[0] in INEQUALITIES)
    return False


def _proportional(d1, d2, sign: int, ordered: bool) -> bool:
    """d1 = k·d2 for a constant k != 0 (k > 0 for same-direction inequalities)."""
    syms = free_symbols(d1) | free_symbols(d2)
    if not syms:
        return False
    ratios, anchor = [], None
    for env in points(syms):
        try:
            v1, v2 = numeric(d1, env), numeric(d2, env)
        except EvalError:
            continue
        if abs(v2) < 1e-12:
            if abs(v1) > 1e-9:
                return False
            continue
        ratios.append(v1 / v2)
        anchor = anchor or env
    if len(ratios) < 2 or any(abs(r - ratios[0]) > 1e-9 * max(1.0, abs(r)) for r in ratios) or abs(ratios[0]) < 1e-12:
        return False
    # a ratio of 1 - 1e-11 (x - 123456789012 against x - 123456789013) is no constant: d1(x)·d2(p)
    # = d2(x)·d1(p) must hold identically, p a point where d2 is not 0, at high precision too
    def at(d):
        for s in syms:
            d = substituted(d, s, ("num", Fraction(anchor[s].real), None))
        return d
    if identical(("mul", (d1, at(d2))), ("mul", (d2, at(d1)))) is False:
        return False
    return not ordered or (abs(ratios[0].imag) < 1e-12 and ratios[0].real * sign > 0)


def item_equal(x, y) -> bool:
    kx, ky = x[0], y[0]
    if kx in VALUE_KINDS and ky in VALUE_KINDS:
        return value_equal(x, y)
    if kx == "matrix" and ky != "matrix":
        v = _vector(x)
        return v is not None and item_equal(v, y)
    if ky == "matrix" and kx != "matrix":
        return item_equal(y, x)
    if kx != ky:
        if {kx, ky} in ({"interval", "rel"}, {"tuple", "rel"}):  # a < x < b is (a, b), symbolic ends too
            iv, rel = (x, y) if ky == "rel" else (y, x)
            if iv[0] == "tuple":  # (a, b) beside an inequality is the open interval
                if len(iv[1]) != 2:
                    return False
                iv = ("interval", iv[1][0], iv[1][1], False, False)
            ends = free_symbols(iv)
            return any(item_equal(iv, as_iv) for var, as_iv in chain_intervals(rel) if var[1] not in ends)
        if {kx, ky} == {"interval", "tuple"}:
            iv, tu = (x, y) if kx == "interval" else (y, x)
            return len(tu[1]) == 2 and not iv[3] and not iv[4] and all(map(item_equal, iv[1:3], tu[1]))
        return False
    if kx == "tuple":
        return len(x[1]) == len(y[1]) and all(map(item_equal, x[1], y[1]))
    if kx == "matrix":
        same_shape = [len(r) for r in x[1]] == [len(r) for r in y[1]]
        return same_shape and all(item_equal(p, q) for rx, ry in zip(x[1], y[1]) for p, q in zip(rx, ry))
    if kx in ("set", "union"):
        return match_items(list(x[1]), list(y[1]), as_sets=True)
    if kx == "interval":
        return x[3:5] == y[3:5] and item_equal(x[1], y[1]) and item_equal(x[2], y[2])
    if kx == "rel":
        return _rel_equal(x, y)
    if kx == "text":
        return _content_words(x[1]) == _content_words(y[1])
    return x == y


def _print(node):
    return fingerprint(node) if node[0] in VALUE_KINDS else ("node", node)


def _dedupe(nodes: list) -> list:
    out: list = []
    for n in nodes:
        if not any(item_equal(n, m) for m in out):
            out.append(n)
    return out


def match_items(xs: list, ys: list, as_sets: bool) -> bool:
    """Multiset (or set) equality under item_equal; exact fingerprints pair up first."""
    if as_sets:
        xs, ys = _dedupe(xs), _dedupe(ys)
    if len(xs) != len(ys):
        return False
    free = list(range(len(ys)))
    prints = [_print(y) for y in ys]
    for x in xs:
        px = _print(x)
        order = sorted(free, key=lambda j: prints[j] != px)  # likely partners first
        hit = next((j for j in order if (prints[j] == px and px[0] == "q") or item_equal(x, ys[j])), None)
        if hit is None:
            return False
        free.remove(hit)
    return True


# --- whole answers -------------------------------------------------------------------


def _unwrap(nodes: list) -> tuple[list, bool]:
    if len(nodes) == 1 and nodes[0][0] == "set":
        return list(nodes[0][1]), True
    return nodes, False


def _ordered_against_list(xs: list, ys: list) -> bool:
    """(x,y,z)=(1,2,3) against "1,2,3": a lone tuple or vector is an ordered list."""
    if len(xs) == 1 and len(ys) > 1:
        lone = _vector(xs[0]) if xs[0][0] == "matrix" else xs[0]
        if lone is not None and lone[0] == "tuple" and len(lone[1]) == len(ys):
            return all(map(item_equal, lone[1], ys))
    return False


def _realsets_view(xs: list, ys: list) -> bool:
    if not any(is_set_like(n) for n in xs + ys):
        return False
    sets = []
    for nodes in (xs, ys):
        parts = [to_realset(n, allow_tuple=True) for n in nodes]
        if any(p is None for p in parts):
            return False
        sets.append(sorted(iv for p in parts for iv in p))
    return realsets_equal(normalised(sets[0]), normalised(sets[1]))


def _equation_view(eq, value) -> bool:
    """An equation against a value. A chain is a computation and its last right-hand
    side is the answer: "2+3=5", and "a_2+a_1 = 3+2 = 5" (three members or more), as
    long as no constant member contradicts it ("2+2 = 5" is no answer 5). A single
    equation must determine the one symbol the value lacks to be that value (`2x=10` is
    5, `xy=6` is y = 6/x): satisfying it is not enough (x^2=25 holds for 5 and for -5;
    solve.py)."""
    if eq[0] != "rel" or set(eq[1]) != {"="} or value[0] not in VALUE_KINDS:
        return False
    members, last = eq[2], eq[2][-1]
    if all(identical(p, q) for p, q in zip(members, members[1:])):
        return value_equal(value, last)
    if len(members) > 2:
        steps = [m for m in members[:-1] if not free_symbols(m)]
        return all(identical(m, last) for m in steps) and value_equal(value, last)
    missing = (free_symbols(members[0]) | free_symbols(members[1])) - free_symbols(value)
    if len(missing) != 1:
        return False
    root = unique_root(members[0], members[1], missing.pop())
    return root is not None and value_equal(value, root)


def _ordering(nodes: list) -> tuple | None:
    """The names of a strict chain of three or more names ("b < a < d < c"), in the order
    written, or those of a bare list of names ("b, a, d, c"): an ordering either way."""
    if len(nodes) == 1 and nodes[0][0] == "rel":
        ops, exprs = nodes[0][1], nodes[0][2]
        nodes = list(exprs) if len(set(ops)) == 1 and ops[0] in ("<", ">") else []
    names = tuple(n[1] for n in nodes if n[0] == "sym")
    return names if len(names) >= 3 and len(names) == len(nodes) == len(set(names)) else None


def _items_view(xs: list, ys: list, as_sets: bool = False) -> bool:
    if len(xs) == 1 or len(ys) == 1:  # "b < a < d < c" against "b, a, d, c"
        order = _ordering(xs)
        if order is not None and order == _ordering(ys) and (xs[0][0] == "rel") != (ys[0][0] == "rel"):
            return True
    (xs, xset), (ys, yset) = _unwrap(xs), _unwrap(ys)
    if match_items(xs, ys, as_sets=as_sets or xset or yset):
        return True
    # a set has no order: {1, 2} is not the point (1, 2)
    if (not yset and _ordered_against_list(xs, ys)) or (not xset and _ordered_against_list(ys, xs)):
        return True
    if _realsets_view(xs, ys):
        return True
    if len(xs) == len(ys) == 1:
        return _equation_view(xs[0], ys[0]) or _equation_view(ys[0], xs[0])
    return False


_MATH_CHARS = re.compile(r"[\d\\^_=+*/<>()\[\]{}|%&]")


def _is_prose(normalized: str) -> bool:
    """Words only: no digits, operators or commands once \\text{...} wrappers are gone."""
    return not _MATH_CHARS.search(re.sub(r"\\text\{([^{}]*)\}", r"\1", normalized))


def _content_words(text: str) -> list[str]:
    return [w for w in symbol_words(text) if w not in _STOP_WORDS]


def _text_view(a: Parsed, r: Parsed) -> bool:
    aw, rw = _content_words(a.text), _content_words(r.text)
    a_is_text = all(i.node[0] == "text" for i in a.items)
    r_is_text = all(i.node[0] == "text" for i in r.items)
    if a_is_text and r_is_text and aw and aw == rw:
        return True
    # "Yes" parses as Y·e·s; as prose it is the word "yes", like "\text{yes}"
    if aw and aw == rw and _is_prose(a.text) and _is_prose(r.text) and all(len(w) > 1 for w in aw):
        return True
    if a_is_text and r_is_text and [i.node for i in a.items] == [i.node for i in r.items]:
        return True  # same words once labels and units are gone: "x \in \mathbb{R}"
    reference_is_sentence = r_is_text and len(rw) >= 3
    # a phrase of real words: "odd", "the round trip"; never a formula like "x" or "2n"
    short_phrase = 0 < len(aw) <= 4 and all(w.isalpha() and len(w) > 1 for w in aw)
    if not (reference_is_sentence and short_phrase) or _NEGATIONS & set(rw):
        return False
    n = len(aw)
    # a phrase of framing words only is no answer ("it" of "Yes, it is possible"). A phrase cut out of
    # a claim still passes ("Bob" of "Alice beats Bob", "function" of "The function is even"):
    # requiring the rest of the sentence to frame it, or the phrase to be its subject, lost three of
    # HardVerify's right answers ("odd" of "Any odd number of participants", "the round trip" of
    # "More time is required for the round trip on the river")
    return not set(aw) <= _FRAMING and any(rw[k : k + n] == aw for k in range(len(rw) - n + 1))


def _by_label(a: Parsed, r: Parsed) -> list | None:
    """When both sides label every item distinctly with the same names ("a=1, b=2"),
    the reference items in the answer's label order; else None."""
    la, lr = [i.labels for i in a.items], [i.labels for i in r.items]
    labelled = all(la) and all(lr) and len(set(la)) == len(la) and len(set(lr)) == len(lr)
    if not labelled or set(la) != set(lr):
        return None
    position = {labels: k for k, labels in enumerate(lr)}
    return [r.items[position[labels]].node for labels in la]


_INDEXED = re.compile(r"(.+)_\d+")  # a_1, x_2, \\alpha_3: the names items.py gives numbered subscripts


def _index_base(name: str) -> str | None:
    """"x" for x_1; None for a name without a numbered subscript."""
    m = _INDEXED.fullmatch(name)
    return m.group(1) if m else None


def _labelling(p: Parsed) -> str:
    """"none"; "distinct" (a=1, b=2: named values, in an order); "one" (x=1, x=3: values of
    one unknown, a set); "indexed" (x_1=3, x_2=5: numbered terms of one family, which a bare
    list may give in any order, roots as much as terms, but which another indexed labelling
    must give term by term: a_1=2, a_2=1 is not a_1=1, a_2=2); or "mixed"."""
    labels = [i.labels for i in p.items]
    if not any(labels):
        return "none"
    names = [next(iter(lab)) if len(lab) == 1 else "" for lab in labels]
    bases = {_index_base(n) for n in names}
    if len(names) > 1 and len(bases) == 1 and None not in bases and len(set(names)) == len(names):
        return "indexed"
    if all(labels) and len(set(labels)) == len(labels):
        return "distinct"
    return "one" if all(labels) and len(set(labels)) == 1 else "mixed"


def _converted(node, factor, accept_rounded: bool):
    """An answer item as the reference would write it: in the reference's unit (50 cm is
    0.5 m) and, unless accept_rounded, with its decimals the values written."""
    if not accept_rounded:
        node = exact_decimals(node)
    if factor is None:
        return node
    return ("mul", (node, ("num", factor, None))) if node[0] in VALUE_KINDS else node


def _definition_renaming(a: Parsed, r: Parsed) -> dict | None:
    """When every item of both sides defines a function of the same variables' count ("f(x, y) =
    ..."): the answer's variables to the reference's, place by place, and any other symbol of the
    answer named like a reference variable to a name of its own (in f(t) = x^2, x is no variable:
    not f(x) = x^2). f(y, x) = x + 2y is then not f(x, y) = x + 2y, which the renaming by free
    symbols alone let through (both sides have x and y). None when either side defines nothing."""
    if not a.items or not r.items or not all(i.args for i in a.items + r.items):
        return None
    ours, theirs = {i.args for i in a.items}, {i.args for i in r.items}
    if len(ours) != 1 or len(theirs) != 1:
        return None
    (args_a,), (args_r,) = ours, theirs
    if len(args_a) != len(args_r):
        return None
    mapping = dict(zip(args_a, args_r))
    for name in set().union(*(free_symbols(i.node) for i in a.items)) - set(args_a):
        if name in args_r:
            mapping[name] = name + "'"
    return mapping


def _tail_words(p: Parsed) -> set[str]:
    return {w.lower() for i in p.items for w in re.findall(r"[A-Za-z]+", i.tail)}


def _opposed(a: Parsed, r: Parsed) -> bool:
    """The words dropped after the numbers say opposite things (more / fewer, older / younger)."""
    wa, wr = _tail_words(a), _tail_words(r)
    return any((x in wa and y in wr and y not in wa) or (y in wa and x in wr and x not in wa) for x, y in OPPOSITES)


def _names_of(p: Parsed) -> tuple | None:
    """The names p gives its values in order: a tuple label's ("(y, x) = ..."), or one name per
    item ("x=1, y=2"); None when it gives none."""
    if len(p.items) == 1 and p.items[0].names:
        return p.items[0].names
    names = [next(iter(i.labels)) if len(i.labels) == 1 else None for i in p.items]
    return tuple(names) if len(names) > 1 and None not in names and len(set(names)) == len(names) else None


def _by_names(p: Parsed, theirs: tuple) -> Parsed:
    """p's tuple-labelled values in the order of the other side's names, when both name the same
    values: (y, x) = (2, 1) against x=1, y=2 or (x, y) = (1, 2) is read (2, 1) -> (1, 2). Against a
    bare tuple the order written stands ((m, b) = (2, 3) for (2, 3))."""
    item = p.items[0]
    position = {n: k for k, n in enumerate(item.names)}
    values = tuple(item.node[1][position[n]] for n in theirs)
    return p._replace(items=(item._replace(node=("tuple", values), names=theirs),))


def _variables_named(p: Parsed) -> frozenset | None:
    """The variables p's items are the values of, when every item names them by a variable: its
    label ("y = 3", "x = y = 3", "(a, b) = (1, 2)") or, for an inequality in one symbol, that
    symbol ("y > 3"). A single letter (either case: models write N for n) or a Greek letter.
    None when any item names none, or names a function's definition (matched by place: f(t) =
    2t is f(x) = 2x), a word ("Maximum: 5") or a geometric name (AB, \\angle BAC: \\angle A
    names the same angle)."""
    names: set[str] = set()
    for item in p.items:
        if item.args:
            return None
        named = set(item.labels)
        if not named and item.node[0] == "rel" and set(item.node[1]) & INEQUALITIES:
            named = free_symbols(item.node)
        if not named or any(len(n) > 1 and n not in GREEK and _index_base(n) is None for n in named):
            return None
        names |= {n.lower() for n in named}
    return frozenset(names) or None


def _names_cover(ours: frozenset, theirs: frozenset) -> bool:
    """Does an answer naming `ours` give the values of the reference's `theirs`? Each of theirs
    is among ours, or is the family of one of ours, or of its family: x = 3 or x = 5 gives
    x_1 = 3, x_2 = 5, and the other way; a_2 = 1 does not give a_1 = 1."""
    families = {_index_base(n) for n in ours}
    return all(n in ours or n in families or _index_base(n) in ours for n in theirs)


def answers_equivalent(a: Parsed, r: Parsed, accept_rounded: bool = False) -> bool:
    """Is the answer `a` the reference `r`? Unless accept_rounded, the answer's decimals
    are the values written (0.333 is not 1/3); the reference's may be rounded."""
    if _opposed(a, r):  # "5 more" is not "5 fewer"
        return False
    ours, theirs = _variables_named(a), _variables_named(r)
    if ours is not None and theirs is not None and not _names_cover(ours, theirs):
        return False  # y = 3 is the value of another unknown than x = 3's (x = y = 3 names x too)
    ours, theirs = _names_of(a), _names_of(r)
    if ours and theirs and ours != theirs and set(ours) == set(theirs):
        if len(a.items) == 1 and a.items[0].names:
            a = _by_names(a, theirs)
        elif len(r.items) == 1 and r.items[0].names:
            r = _by_names(r, ours)
    factors = conversions([i.unit for i in a.items], [i.unit for i in r.items])
    if factors is None:  # both sides carry units, of other dimensions (5 kg, 5 m)
        return False
    a = a._replace(items=tuple(i._replace(node=_converted(i.node, f, accept_rounded)) for i, f in zip(a.items, factors)))
    xs, ys = [i.node for i in a.items], [i.node for i in r.items]
    aligned = _by_label(a, r)  # "a=1, b=2" is not "a=2, b=1", although {1,2} = {2,1}
    kinds = {_labelling(a), _labelling(r)}
    # "x=1, y=2" against "2, 1": the labels put the values in order, the bare list must keep it; so
    # do two labellings with other names ("x=2, z=1" against "x=1, y=2" is not the same pair, though
    # {1,2} = {2,1}: the names do not match, the order still says which value is which)
    named = any(w.startswith("word:") for i in a.items + r.items for w in i.labels)  # "Paolo: 18" names, no order
    ordered = ((kinds == {"distinct", "none"} and not named) or (kinds == {"distinct"} and aligned is None)) \
        and len(xs) > 1 and len(ys) > 1
    # x=2 or x=2 is the solution set {2}; x_1=3, x_2=5 against a bare "5, 3" too (roots in any order)
    as_sets = "one" in kinds or kinds == {"indexed", "none"}

    def equal(nodes: list) -> bool:
        if aligned is not None:
            return all(map(item_equal, nodes, aligned))
        if ordered:
            return len(nodes) == len(ys) and all(map(item_equal, nodes, ys))
        return _items_view(nodes, ys, as_sets)

    by_place = _definition_renaming(a, r)
    if by_place is not None:  # both define a function: its variables are matched by place first
        xs = [renamed(x, by_place) for x in xs]
        a = a._replace(items=tuple(i._replace(node=x, args=tuple(by_place.get(v, v) for v in i.args))
                                   for i, x in zip(a.items, xs)))
    # bound symbols may be renamed under the labels' rules too (f(x) = x + C is f(x) = x + c)
    if equal(xs) or any(equal([renamed(x, mapping) for x in xs]) for mapping in renamings(a, xs, r, ys)):
        return True
    return aligned is None and not ordered and _text_view(a, r)  # where labels decided, words do not
