"""A label-free proof gate for closed-form arithmetic problems (the synthetic task).

For a statement like `Compute 37+45*(2-9).` the statement *is* its formalisation:
the one integer expression in it (integers, + - * /, parentheses, unary minus) is
evaluated exactly with Fractions, and the proposed answer is proved (True) or refuted
(False) by comparing exact values. Anything else is inconclusive (None): no
expression or more than one, other numbers or symbols in the statement, words
outside a small instruction vocabulary (so "Compute 3+4, then double it" is not
mistaken for 3+4), an unparsable or non-rational answer, division by zero, inputs
over the size limits. It never reads a dataset label; it is the JURY gate δ:

    ArithGate().verify(problem, answer).proved     # True -> δ = 1; refuted/inconclusive -> fallback

The parser is a small recursive descent over integer tokens: nothing is eval'd.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from jury.verifiers.math.verify import exact_value

MAX_PROBLEM_CHARS = 2_000
MAX_EXPR_TOKENS = 200
MAX_DEPTH = 32
MAX_INT_DIGITS = 30

_INSTRUCTION_WORDS = frozenset(
    "compute calculate evaluate find what is the value of simplify give your answer as "
    "a an exact fraction integer in lowest terms reduced simplest form express result "
    "please put final within boxed expression following number it its and show work "
    "step by reduce to".split()
)
_LATEX_OPS = [(r"\times", "*"), (r"\cdot", "*"), (r"\div", "/"), ("×", "*"), ("÷", "/"), ("−", "-"),
              (r"\left", ""), (r"\right", "")]
_RUN = re.compile(r"[0-9+\-*/() ]*[0-9][0-9+\-*/() ]*")
_TOKEN = re.compile(r"\s*(\d+|[-+*/()])")


class _Inconclusive(Exception):
    pass


def _candidates(statement: str) -> tuple[list[str], str]:
    """Maximal runs of digits/operators holding a binary operator, and the rest."""
    found, rest = [], []
    last = 0
    for m in _RUN.finditer(statement):
        start, end = m.start(), m.end()
        while end > start and statement[end - 1] in " (":  # "2 (give ...": the "(" is prose
            end -= 1
        while start < end and statement[start] in " )":
            start += 1
        run = statement[start:end]
        if not re.search(r"[0-9)]\s*[-+*/]\s*[-(0-9]", run):
            continue  # a lone number is not a closed form; it stays in the rest
        found.append(run)
        rest.append(statement[last:start])
        last = end
    rest.append(statement[last:])
    return found, " ".join(rest)


def _only_instructions(rest: str) -> bool:
    rest = rest.replace("\\boxed{}", " ").replace("$", " ")
    if re.search(r"[^A-Za-z\s.,:;?!'\"()]", rest):
        return False  # digits, symbols, LaTeX: there is more to the problem than the expression
    return all(w.lower() in _INSTRUCTION_WORDS for w in re.findall(r"[A-Za-z]+", rest))


class _Expr:
    """expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
    unary := '-' unary | '+' unary | INT | '(' expr ')'."""

    def __init__(self, text: str):
        self.toks = _tokens(text)
        self.i = 0

    def value(self) -> Fraction:
        v = self.expr(0)
        if self.i != len(self.toks):
            raise _Inconclusive("trailing tokens")
        return v

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def expr(self, depth: int) -> Fraction:
        v = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.toks[self.i]
            self.i += 1
            v = v + self.term(depth) if op == "+" else v - self.term(depth)
        return v

    def term(self, depth: int) -> Fraction:
        v = self.unary(depth)
        while self.peek() in ("*", "/"):
            op = self.toks[self.i]
            self.i += 1
            rhs = self.unary(depth)
            if op == "/" and rhs == 0:
                raise _Inconclusive("division by zero")
            v = v * rhs if op == "*" else v / rhs
        return v

    def unary(self, depth: int) -> Fraction:
        if depth > MAX_DEPTH:
            raise _Inconclusive("nested too deeply")
        tok = self.peek()
        self.i += 1
        if tok == "-":
            return -self.unary(depth + 1)
        if tok == "+":
            return self.unary(depth + 1)
        if tok == "(":
            v = self.expr(depth + 1)
            if self.peek() != ")":
                raise _Inconclusive("unbalanced parenthesis")
            self.i += 1
            return v
        if tok is not None and tok.isdigit():
            return Fraction(int(tok))
        raise _Inconclusive(f"unexpected {tok!r}")


def _tokens(text: str) -> list[str]:
    toks, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise _Inconclusive("not an integer expression")
        if m.group(1).isdigit() and len(m.group(1)) > MAX_INT_DIGITS:
            raise _Inconclusive("integer too long")
        toks.append(m.group(1))
        pos = m.end()
        if len(toks) > MAX_EXPR_TOKENS:
            raise _Inconclusive("expression too long")
    return toks


def formalize(problem: str) -> Fraction | None:
    """The exact value of the problem's single closed-form expression, or None."""
    if len(problem) > MAX_PROBLEM_CHARS:
        return None
    for latex, plain in _LATEX_OPS:
        problem = problem.replace(latex, plain)
    found, rest = _candidates(problem)
    if len(found) != 1 or not _only_instructions(rest):
        return None
    try:
        return _Expr(found[0]).value()
    except _Inconclusive:
        return None


def arith_gate(problem: str, answer: str) -> bool | None:
    """True: the answer provably equals the expression; False: provably not; None: no
    proof either way."""
    target = formalize(problem)
    if target is None or answer is None:
        return None
    value = exact_value(answer)
    if value is None:
        return None
    return value == target


@dataclass(frozen=True)
class ArithOutcome:
    proved: bool
    refuted: bool  # provably wrong (not merely inconclusive)

    def metrics(self) -> dict[str, float]:
        return {"verifier/arith_refuted": float(self.refuted)}


class ArithGate:
    """`arith_gate` behind the gate protocol (verifiers/gate.py); it owns nothing to close."""

    def verify(self, problem: str, answer: str) -> ArithOutcome:
        decided = arith_gate(problem, answer)
        return ArithOutcome(proved=decided is True, refuted=decided is False)

    def close(self) -> None:
        pass
