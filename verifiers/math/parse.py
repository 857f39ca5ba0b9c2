"""Recursive-descent parser: item tokens -> expression tree (stage 3 of the verifier).

Nothing is evaluated here and nothing is handed to eval/exec/sympify: the parser
builds plain tuples. Nesting is bounded (items.MAX_NESTING), so the recursion
depth is too.

Trees (all tuples, hashable):
    ("num", Fraction, places)  places = decimals written (None for integers)
    ("sym", name)   ("const", "pi" | "e" | "i" | "inf")
    ("add", terms)  ("mul", factors)  ("neg", x)  ("div", a, b)  ("pow", a, b)
    ("fn", name, args)   sqrt root log sin ... fact binom abs floor ceil max min apply:f
    ("sum" | "prod" | "integral", index, lo, hi, body)   big operators (bigops.py)
    ("pm", a | None, b)  a ± b      ("pct", x)  x%      ("deg", x)  x°
    ("tuple", items) ("set", items) ("interval", lo, hi, lo_closed, hi_closed)
    ("matrix", rows) ("union", parts) ("inter", parts) ("setminus", a, b)
    ("setbuilder", var, cond)  ("conds", "and" | "or", parts)
    ("rel", ops, exprs)  chains, ops from = < > <= >= !=
    ("text", words)      an item that is not maths
Grammar, loosest first: chain (relations) > set operations > sum > term (explicit and
implicit products, `:` as division) > factor (powers, !, %, °) > primary.
Readings where plain text is ambiguous: a tower associates to the right (2^3^2 is
2^9); a unary minus is looser than a power (-2^2 is -4); a factorial binds to what it
follows, as typeset (3!^2 is 36, 2^3! is (2^3)!); an implicit product right after a
division ("1/2x") has two readings in use, so it does not parse.
"""
from __future__ import annotations

from fractions import Fraction

from .bigops import big_operator
from .items import GREEK, ParseError, Tok
from .normalize import FUNCTION_NAMES

PI, E, IMAG, INF = ("const", "pi"), ("const", "e"), ("const", "i"), ("const", "inf")
FUNC_LETTERS = frozenset("fghFGH")  # f(x) is an application; a(x+1) is a product
_INVERSE = {"sin": "arcsin", "cos": "arccos", "tan": "arctan", "cot": "arccot"}
_RELOPS = {
    ("op", "="): "=", ("op", "<"): "<", ("op", ">"): ">", ("cmd", "le"): "<=",
    ("cmd", "ge"): ">=", ("cmd", "ne"): "!=", ("cmd", "approx"): "~",
}
_SETOPS = {("cmd", "cup"): "union", ("cmd", "cap"): "inter", ("cmd", "setminus"): "setminus", ("cmd", "backslash"): "setminus"}
_MATRIX_ENVS = frozenset({"pmatrix", "bmatrix", "Bmatrix", "matrix", "vmatrix", "smallmatrix", "array"})
_PRIMARY_CMDS = GREEK | FUNCTION_NAMES | {"pi", "infty", "frac", "sqrt", "binom", "lfloor", "lceil", "cdots", "sum", "prod", "int"}
SET_KINDS = frozenset({"set", "interval", "union", "inter", "setminus", "setbuilder"})
_END = Tok("end_of_input", "")


def add(*terms):
    flat = []
    for t in terms:
        flat.extend(t[1] if t[0] == "add" else (t,))
    return ("add", tuple(flat))


def mul(*factors):
    flat = []
    for f in factors:
        flat.extend(f[1] if f[0] == "mul" else (f,))
    return ("mul", tuple(flat))


def neg(x):
    return x[1] if x[0] == "neg" else ("neg", x)


def number(text: str):
    """A literal: "12", "0.50" (places 2), "4.2e1" (42, exact), "0.1(6)" (1/6, exact)."""
    if text.endswith(")"):  # a repeating decimal, from items._number
        head, block = text[:-1].split("(")
        whole, fixed = head.split(".")
        value = Fraction(int(whole or 0)) + Fraction(int(fixed or 0), 10 ** len(fixed))
        return ("num", value + Fraction(int(block), (10 ** len(block) - 1) * 10 ** len(fixed)), None)
    mantissa, _, exponent = text.lower().partition("e")
    places = (len(mantissa.split(".")[1]) if "." in mantissa else 0) - int(exponent or 0)
    return ("num", Fraction(text), places if places > 0 else None)


class Parser:
    def __init__(self, toks: list[Tok]):
        self.toks = list(toks)
        self.i = 0
        self.approximations: list[tuple] = []  # the members of each "≈" chain read as its first member

    # --- cursor ---
    def peek(self, k: int = 0) -> Tok:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else _END

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.peek()
        return t.kind == kind and (text is None or t.text == text)

    def take(self) -> Tok:
        t = self.peek()
        if t is _END:
            raise ParseError("unexpected end")
        self.i += 1
        return t

    def expect(self, kind: str, text: str) -> None:
        if not self.at(kind, text):
            raise ParseError(f"expected {text!r}, got {self.peek().text!r}")
        self.i += 1

    def split_letters(self) -> None:
        """Make the next letter run a single letter (x^ab is x^a b, \\frac{1}ab)."""
        t = self.peek()
        if t.kind == "let" and len(t.text) > 1:
            self.toks[self.i : self.i + 1] = [Tok("let", t.text[0]), Tok("let", t.text[1:])]

    # --- grammar, loosest first ---
    def parse_item(self):
        node = self.chain()
        if self.peek() is not _END:
            raise ParseError(f"trailing {self.peek().text!r}")
        return node

    def parse_sum(self):
        """A whole token list as one expression without relations (an integrand)."""
        node = self.sum()
        if self.peek() is not _END:
            raise ParseError(f"trailing {self.peek().text!r}")
        return node

    def chain(self):
        exprs, ops = [self.setexpr()], []
        while (self.peek().kind, self.peek().text) in _RELOPS:
            ops.append(_RELOPS[tuple(self.take())])
            exprs.append(self.setexpr())
        if not ops:
            return exprs[0]
        if "~" in ops:  # "31031/7776 ≈ 3.99": the exact side is the answer (answer.py checks the sides agree)
            self.approximations.append(tuple(exprs))
            return exprs[0]
        return ("rel", tuple(ops), tuple(exprs))

    def setexpr(self):
        node = self.sum()
        while (self.peek().kind, self.peek().text) in _SETOPS:
            op = _SETOPS[tuple(self.take())]
            rhs = self.sum()
            if op == "union":
                node = ("union", (node[1] if node[0] == "union" else (node,)) + (rhs,))
            else:
                node = (op, node, rhs) if op == "setminus" else ("inter", (node, rhs))
        return node

    def sum(self):
        node = self.signed_term()
        while True:
            t = self.peek()
            if t == Tok("op", "+"):
                self.take()
                node = add(node, self.term())
            elif t == Tok("op", "-"):
                self.take()
                rhs = self.term()
                both_sets = node[0] in SET_KINDS and rhs[0] in SET_KINDS
                node = ("setminus", node, rhs) if both_sets else add(node, neg(rhs))
            elif t in (Tok("cmd", "pm"), Tok("cmd", "mp")):
                self.take()
                node = ("pm", node, self.term())
            else:
                return node

    def signed_term(self):
        t = self.peek()
        if t == Tok("op", "-"):
            self.take()
            return neg(self.signed_term())
        if t == Tok("op", "+"):
            self.take()
            return self.signed_term()
        if t in (Tok("cmd", "pm"), Tok("cmd", "mp")):
            self.take()
            return ("pm", None, self.signed_term())
        return self.term()

    def starts_primary(self, t: Tok) -> bool:
        if t.kind == "num" or t.kind == "begin":
            return True
        if t.kind == "let":
            return t.text not in ("and", "or")
        if t.kind == "cmd":
            return t.text in _PRIMARY_CMDS
        return t == Tok("op", "(")

    def term(self):
        node = self.factor()
        colons = 0
        while True:
            t = self.peek()
            if t in (Tok("op", "*"), Tok("cmd", "cdot"), Tok("cmd", "times")):
                self.take()
                node = mul(node, self.signed_factor())
            elif t in (Tok("op", "/"), Tok("cmd", "div"), Tok("op", ":")):
                colons += t == Tok("op", ":")
                if colons > 1:
                    # "1:2:3" is a ratio of three parts, not (1/2)/3 = 1/6 (which "1:3:2" equals)
                    raise ParseError("a ratio of more than two terms")
                self.take()
                node = ("div", node, self.signed_factor())
                if self.starts_primary(self.peek()):
                    # "1/2x": (1/2)x to some readers, 1/(2x) to others (and to every
                    # textbook that writes implicit products tighter); no reading is safe
                    raise ParseError("implicit product after a division")
            elif self.starts_primary(t):
                mixed = self.mixed_fraction(node)
                if mixed is None and node[0] == "num" and t.kind == "num":
                    mixed = self.spaced_mixed_number(node)
                node = add(node, mixed) if mixed else mul(node, self.factor())
            else:
                return node

    def spaced_mixed_number(self, whole):
        """`2 1/2` (two numbers apart, the second a proper fraction after a whole number) is 2 + 1/2;
        any other two numbers side by side ("2 3") have no safe reading (a product? digits?)."""
        ks = [self.peek(k) for k in range(4)]
        proper = (whole[2] is None and ks[0].kind == "num" and ks[1] == Tok("op", "/") and ks[2].kind == "num"
                  and "." not in ks[0].text + ks[2].text and 0 < Fraction(ks[0].text) < Fraction(ks[2].text)
                  and not self.starts_primary(ks[3]) and ks[3] not in (Tok("op", "^"), Tok("op", "!")))
        if not proper:
            raise ParseError("two numbers side by side")
        for _ in range(3):
            self.take()
        return ("num", Fraction(ks[0].text) / Fraction(ks[2].text), None)

    def mixed_fraction(self, whole):
        """`6\\frac{1}{64}` after an integer is 6 + 1/64 (a mixed number), not 6 * 1/64."""
        if whole[0] != "num" or whole[2] is not None or self.peek() != Tok("cmd", "frac"):
            return None
        ks = [self.peek(k) for k in range(1, 7)]
        shape = [ks[0].text, ks[2].text, ks[3].text, ks[5].text]
        if shape != ["{", "}", "{", "}"] or ks[1].kind != "num" or ks[4].kind != "num":
            return None
        num, den = Fraction(ks[1].text), Fraction(ks[4].text)
        if "." in ks[1].text + ks[4].text or not 0 < num < den:
            return None
        self.i += 7
        return ("div", ("num", num, None), ("num", den, None))

    def signed_factor(self):
        if self.at("op", "-"):
            self.take()
            return neg(self.signed_factor())
        return self.factor()

    def factor(self):
        node = self.postfix(self.primary())
        while self.at("op", "^"):
            self.take()
            kind, exponent = self.exponent()
            if kind == "deg":
                node = ("deg", node)
            elif kind == "pow":
                node = ("pow", node, exponent)
            node = self.postfix(node)
        if self.at("op", "%"):
            self.take()
            node = ("pct", node)
        return node

    def postfix(self, node):
        while self.at("op", "!"):
            self.take()
            if self.at("op", "!"):  # n!! is the double factorial to most readers, (n!)! to a parser
                raise ParseError("n!! (a double factorial) is not read")
            node = ("fn", "fact", (node,))
        if self.at("op", "'"):
            raise ParseError("primes / minutes")
        return node

    def exponent(self):
        """What follows a `^`: ("deg", None) for a degree sign, else ("pow", exponent).
        A tower without braces is read as mathematicians read it, from the right:
        2^3^2 is 2^(3^2) = 512, never (2^3)^2; a sign belongs to the whole rest of the
        tower (e^-x^2 is e^(-(x^2)))."""
        t = self.peek()
        if t == Tok("cmd", "circ"):
            self.take()
            return "deg", None
        if t.kind == "op" and t.text in "-+":
            self.take()
            x = self.exponent()[1]
            return "pow", neg(x) if t.text == "-" else x
        if t == Tok("op", "{"):
            inner = self.peek(1)
            if self.peek(2) == Tok("op", "}") and (inner == Tok("cmd", "circ")):
                self.i += 3
                return "deg", None
            base = self.group()
        else:
            self.split_letters()
            base = self.primary()
        if self.at("op", "^"):
            self.take()
            kind, upper = self.exponent()
            if kind == "deg":
                raise ParseError("a degree sign on an exponent")
            base = ("pow", base, upper)
        return "pow", base

    def group(self):
        """`{ ... }` as a grouping."""
        self.expect("op", "{")
        node = self.chain()
        self.expect("op", "}")
        return node

    def arg(self):
        """A command argument: a brace group or a single token (\\frac{1}c, \\sqrt2)."""
        if self.at("op", "{"):
            return self.group()
        self.split_letters()
        return self.primary()

    # --- primaries ---
    def primary(self):
        t = self.peek()
        if t.kind == "num":
            self.take()
            return number(t.text)
        if t.kind == "let":
            return self.letters()
        if t.kind == "begin":
            return self.matrix()
        if t.kind == "op":
            if t.text in "([]":
                return self.bracket()
            if t.text == "{":  # a group, or a set written without backslashes: {1, 2}
                self.take()
                return self.brace_set(Tok("op", "}"))
            if t.text == "|":
                self.take()
                x = self.sum()
                self.expect("op", "|")
                return ("fn", "abs", (x,))
        if t.kind == "cmd":
            return self.command()
        raise ParseError(f"unexpected {t.text!r}")

    def command(self):
        name = self.take().text
        simple = {"pi": PI, "infty": INF, "cdots": ("sym", "…"), "emptyset": ("set", ())}
        if name in simple:
            return simple[name]
        if name in GREEK:
            sub = self.subscript()
            return ("sym", name + ("_" + sub if sub else ""))
        if name in FUNCTION_NAMES:
            return self.function(name)
        if name == "frac":
            return ("div", self.arg(), self.arg())
        if name == "binom":
            return ("fn", "binom", (self.arg(), self.arg()))
        if name == "sqrt":
            if self.at("op", "["):
                self.take()
                index = self.sum()
                self.expect("op", "]")
                return ("fn", "root", (self.arg(), index))
            return ("fn", "sqrt", (self.arg(),))
        if name in ("lfloor", "lceil"):
            x = self.sum()
            self.expect("cmd", "rfloor" if name == "lfloor" else "rceil")
            return ("fn", name[1:], (x,))
        if name == "{":
            return self.brace_set(Tok("cmd", "}"))
        if name in ("sum", "prod", "int"):
            return big_operator(self, name)
        raise ParseError(f"unsupported command \\{name}")

    def subscript(self) -> str | None:
        if not self.at("op", "_"):
            return None
        self.take()
        if self.at("op", "{"):
            start = self.i
            depth = 0
            while True:
                t = self.take()
                depth += t == Tok("op", "{")
                depth -= t == Tok("op", "}")
                if depth == 0:
                    return "".join(tok.text for tok in self.toks[start + 1 : self.i - 1])
        self.split_letters()
        return self.take().text

    def letters(self):
        """A letter run: a function name, or single-letter symbols multiplied (xy = x*y)."""
        word = self.peek().text
        if word in FUNCTION_NAMES or word == "pi":
            self.take()
            return self.function(word) if word != "pi" else PI
        if len(word) >= 4 or word in ("and", "or"):
            raise ParseError(f"word {word!r}")
        self.split_letters()  # the rest of the run is picked up as implicit products
        ch = self.take().text
        sub = self.subscript()
        if sub is not None:
            return ("sym", ch + "_" + sub)
        if ch in FUNC_LETTERS and self.at("op", "("):
            return ("fn", "apply:" + ch, self.call_args())
        return self.symbol(ch)

    @staticmethod
    def symbol(ch: str):
        return E if ch == "e" else IMAG if ch == "i" else ("sym", ch)

    def function(self, name: str):
        inverse, power, base = False, None, None
        while self.peek().text in ("^", "_"):
            if self.take().text == "_":
                base = self.arg()
            elif self._inverse_marker():
                inverse = True
            else:
                power = self.exponent()[1]
        args = self.call_args() if self.at("op", "(") else (self.implicit_arg(),)
        if inverse:
            if name not in _INVERSE:
                raise ParseError(f"inverse of {name}")
            name = _INVERSE[name]
        if name == "exp":
            node = ("pow", E, args[0])
        elif name in ("ln", "lg", "log"):
            base = ("num", Fraction(10), None) if name == "lg" else base
            node = ("fn", "log", (args[0],) if base is None else (args[0], base))
        else:
            node = ("fn", name, args)
        return node if power is None else ("pow", node, power)

    def _inverse_marker(self) -> bool:
        """`^{-1}` or `^-1` after a function name: the inverse function (\\tan^{-1})."""
        ahead = [t.text for t in self.toks[self.i : self.i + 4]]
        for marker in (["{", "-", "1", "}"], ["-", "1"]):
            if ahead[: len(marker)] == marker:
                self.i += len(marker)
                return True
        return False

    def implicit_arg(self):
        """`\\sin 2x` is sin(2x); the argument stops at operators and at other functions."""
        node = self.factor()
        while self.starts_primary(self.peek()) and not self.starts_function(self.peek()):
            node = mul(node, self.factor())
        return node

    @staticmethod
    def starts_function(t: Tok) -> bool:
        return t.kind in ("cmd", "let") and t.text in FUNCTION_NAMES

    def call_args(self) -> tuple:
        self.expect("op", "(")
        args = [self.chain()]
        while self.at("op", ","):
            self.take()
            args.append(self.chain())
        self.expect("op", ")")
        return tuple(args)

    def bracket(self):
        """(a), [a], tuples, and intervals: (a, b], [a, b), and ]a, b[ for the open (a, b)."""
        opener = self.take().text
        elems = [self.chain()]
        while self.peek() in (Tok("op", ","), Tok("op", ";")):
            self.take()
            elems.append(self.chain())
        closer = self.take().text
        if closer not in ")][":
            raise ParseError("unclosed bracket")
        if (opener == "]" or closer == "[") and (len(elems) != 2 or "(" in opener or ")" in closer):
            raise ParseError("reversed bracket outside an interval")
        if len(elems) == 1:
            if opener + closer in ("()", "[]"):
                return elems[0]
            raise ParseError("half-open bracket around one element")
        if len(elems) == 2 and opener + closer != "()":
            return ("interval", elems[0], elems[1], opener == "[", closer == "]")
        return ("tuple", tuple(elems))

    def brace_set(self, close: Tok):
        """After `\\{` (close `\\}`) or a plain `{` (close `}`): a set, a set-builder, or,
        for a plain `{x}` holding one element, just the grouping."""
        if self.peek() == close:
            self.take()
            return ("set", ())
        first = self.chain()
        if self.at("op", "|") or self.at("op", ":"):
            self.take()
            cond = self.conditions()
            self.expect(*close)
            return ("setbuilder", first, cond)
        elems = [first]
        while self.at("op", ","):
            self.take()
            elems.append(self.chain())
        self.expect(*close)
        if len(elems) == 1 and close.kind == "op":
            return first
        return ("set", tuple(elems))

    def conditions(self):
        parts, joins = [self.chain()], set()
        while self.at("let", "or") or self.at("let", "and") or self.at("op", ","):
            joins.add("and" if self.take().text in ("and", ",") else "or")
            parts.append(self.chain())
        if len(joins) > 1:
            raise ParseError("mixed and/or in a set-builder")
        return parts[0] if len(parts) == 1 else ("conds", joins.pop(), tuple(parts))

    def matrix(self):
        env = self.take().text
        if env not in _MATRIX_ENVS:
            raise ParseError(f"environment {env}")
        if env == "array" and self.at("op", "{"):
            while self.take() != Tok("op", "}"):
                pass
        rows, row = [], []
        while not self.at("end"):
            row.append(self.chain())
            if self.at("op", "&"):
                self.take()
            elif self.at("row"):
                self.take()
                rows.append(tuple(row))
                row = []
        self.take()
        if row:
            rows.append(tuple(row))
        if not rows or len({len(r) for r in rows}) != 1:
            raise ParseError("ragged matrix")
        return ("matrix", tuple(rows))
