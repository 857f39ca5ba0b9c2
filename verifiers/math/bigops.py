"""Big operators: \\sum, \\prod and \\int, read into trees that bind their variable
(part of stage 3, parse; parse.Parser hands over after the command).

    \\sum_{k=1}^{n} k^2          -> ("sum", "k", 1, n, k^2)
    \\prod_{i=1}^{5} i           -> ("prod", "i", 1, 5, i)      (i the index, not sqrt(-1))
    \\int_0^1 x^2 \\, dx          -> ("integral", "x", 0, 1, x^2)
    \\int e^t dt                 -> ("integral", "t", None, None, e^t)

The index is bound: \\sum_{k=1}^{n} k^2 and \\sum_{i=1}^{n} i^2 are one value, while
the bounds are free (n must be n on both sides). `canonical` names every bound
variable (these indices and a set-builder's variable) by its binding depth, so two
trees equal up to renaming of bound variables (α-equivalent) are equal trees.
A sum's body is the term after it (\\sum_{k=1}^{n} k + 1 is (\\sum k) + 1, as typeset
and read); an integral's body runs to its differential. Standard library only.
"""
from __future__ import annotations

from .items import GREEK, ParseError, Tok

_IMPLICIT = {"i": ("const", "i"), "e": ("const", "e")}  # letters the parser reads as constants


def big_operator(p, name: str):
    """After `\\sum`, `\\prod` or `\\int` (p: the parse.Parser, its cursor past the command)."""
    var = lo = hi = None
    for _ in range(2):  # _{...} and ^{...}, in either order
        if p.at("op", "_") and lo is None:
            p.take()
            if name == "int":
                lo = p.arg()
            else:
                var, lo = _index(p)
        elif p.at("op", "^") and hi is None:
            p.take()
            hi = p.arg()
    if name == "int":
        if (lo is None) != (hi is None):
            raise ParseError("an integral with one bound")
        var, body = _integrand(p)
        return ("integral", var, lo, hi, _bound(body, var))
    if var is None or hi is None:
        raise ParseError(f"\\{name} without its index and bounds")
    return (name, var, lo, hi, _bound(p.signed_term(), var))


def _variable(tok: Tok) -> str | None:
    if tok.kind == "let" and len(tok.text) == 1:
        return tok.text
    return tok.text if tok.kind == "cmd" and tok.text in GREEK else None


def _index(p) -> tuple[str, tuple]:
    """`{k=1}` under a sum: the index and its lower bound."""
    p.expect("op", "{")
    var = _variable(p.take())
    if var is None:
        raise ParseError("a sum's index is one letter")
    p.expect("op", "=")
    lo = p.sum()
    p.expect("op", "}")
    return var, lo


def _differential(toks: list[Tok], k: int) -> tuple[str, int, str] | None:
    """(letters before it, tokens it takes, variable) when toks[k] holds `dx` (or ends in
    it: the letter run "xdx"), or is `d` followed by a Greek letter (d\\theta)."""
    t = toks[k]
    if t.kind != "let" or "d" not in t.text:
        return None
    if len(t.text) >= 2 and t.text[-2] == "d":
        return t.text[:-2], 1, t.text[-1]
    nxt = toks[k + 1] if k + 1 < len(toks) else None
    if t.text.endswith("d") and nxt is not None and nxt.kind == "cmd" and nxt.text in GREEK:
        return t.text[:-1], 2, nxt.text
    return None


def _integrand(p) -> tuple[str, tuple]:
    """The body of an integral, up to its differential at the same bracket depth."""
    depth = 0
    for k in range(p.i, len(p.toks)):
        t = p.toks[k]
        if t.kind == "op" and t.text in "([{":
            depth += 1
        elif t.kind == "op" and t.text in ")]}":
            depth -= 1
            if depth < 0:
                break
        elif depth == 0 and (found := _differential(p.toks, k)):
            before, taken, var = found
            body_toks = p.toks[p.i : k] + ([Tok("let", before)] if before else [])
            if not body_toks:
                raise ParseError("an integral without a body")
            body = type(p)(body_toks).parse_sum()
            p.i = k + taken
            return var, body
    raise ParseError("an integral without its differential")


def _bound(body, var: str):
    """The body with its index as a symbol: under \\prod_{i=1}, i is the index."""
    if var not in _IMPLICIT:
        return body
    const = _IMPLICIT[var]

    def walk(node):
        if node == const:
            return ("sym", var)
        if not isinstance(node, tuple) or not node:
            return node
        head, parts = (node[:1], node[1:]) if isinstance(node[0], str) else ((), node)
        return head + tuple(walk(x) for x in parts)

    return walk(body)


BINDERS = frozenset({"sum", "prod", "integral"})


def canonical(node, env: dict | None = None, depth: int = 0):
    """The tree with each bound variable renamed "$<depth>" (no symbol can be named so)."""
    if not isinstance(node, tuple) or not node:
        return node
    env = env or {}
    kind = node[0]
    if not isinstance(kind, str):  # a tuple of trees
        return tuple(canonical(x, env, depth) for x in node)
    if kind == "sym":
        return ("sym", env.get(node[1], node[1]))
    if kind in BINDERS:
        new = f"${depth}"
        inner = {**env, node[1]: new}
        lo, hi = (canonical(x, env, depth) for x in node[2:4])
        return (kind, new, lo, hi, canonical(node[4], inner, depth + 1))
    if kind == "setbuilder":
        names = [n[1] for n in ([node[1]] if node[1][0] == "sym" else node[1][1] if node[1][0] == "tuple" else [])
                 if isinstance(n, tuple) and n[0] == "sym"]
        inner = {**env, **{name: f"${depth}.{k}" for k, name in enumerate(names)}}
        return ("setbuilder", canonical(node[1], inner, depth + 1), canonical(node[2], inner, depth + 1))
    return (kind,) + tuple(canonical(x, env, depth) for x in node[1:])
