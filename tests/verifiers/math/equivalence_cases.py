"""An equivalence suite for math verifiers, one block per kind of mistake.

Written for this project (no third-party data), from the kinds of wrong accepts and
wrong rejects found when verifiers were tried on outside corpora. Each case is
(kind, text, reference, expected): `text` is a bare final answer, or a whole model
response when the kind starts with "response"; `expected` says whether the text
answers the reference. The benchmark (benchmarks/verifier.py) runs the suite through
our verifier and math-verify side by side; tests/verifiers/math/test_math_equivalence.py
holds ours to it.

The labels follow these readings, which the verifier's docstrings state as rules:
  * a comma followed by a space separates items; "1,234" (groups of three, no space)
    and "1 234" are thousands; "1,22" (one comma, a group not of three) is a decimal
    comma only against a number written with a decimal point;
  * a decimal answer is the value written: 0.333 is not 1/3 (rounding is a setting,
    off by default), while a decimal reference is taken as rounded to its places;
  * a response's answer is its last group of boxes (boxes joined by "and", "or",
    commas, labels), unless a "final answer" statement follows it; all the boxes of a
    reference are its answer;
  * a reference that labels each value ("x=1, y=2", "AB=4, CD=5") against a bare list
    is compared in order; values given for one unknown ("x=1 or x=1") are a set.
"""
from __future__ import annotations

from typing import NamedTuple


class Case(NamedTuple):
    kind: str
    text: str  # an answer, or a whole response when kind starts with "response"
    reference: str
    expected: bool

    @property
    def is_response(self) -> bool:
        return self.kind.startswith("response")


def _cases(kind: str, rows: list[tuple[str, str, bool]]) -> list[Case]:
    return [Case(kind, text, ref, expected) for text, ref, expected in rows]


CASES: list[Case] = [
    # --- wrong accepts -----------------------------------------------------------------
    *_cases("comma_space_list", [
        ("12, 345", "12345", False),
        ("1, 000", "1000", False),
        ("3, 141", "3141", False),
        ("12345", "12, 345", False),
        ("1, 234, 567", "1234567", False),
        ("2, 500", "2500", False),
        ("12,345", "12, 345", False),
        ("12,345", "12345", True),
        ("1,000,000", "10^6", True),
        ("12{,}345", "12345", True),
        (r"\$1,250", "1250", True),
        ("12, 345", r"\{12, 345\}", True),
        ("12, 345", "345, 12", True),
        ("1, 234, 567", "1, 234, 567", True),
    ]),
    *_cases("text_operators", [
        (r"\text{the sum } a + b", r"\text{the sum } a - b", False),
        (r"\text{maximum at } x = 1 + \sqrt{2}", r"\text{maximum at } x = 1 - \sqrt{2}", False),
        (r"\text{minimum } -2 \text{ at } x = 1", r"\text{minimum } 2 \text{ at } x = 1", False),
        (r"a+b \text{ if } n \text{ is even}", r"a-b \text{ if } n \text{ is even}", False),
        (r"2^n + 1 \text{ if } n \text{ is odd}", r"2^n - 1 \text{ if } n \text{ is odd}", False),
        (r"\text{product } a \cdot b \text{ when } a>b", r"\text{product } a \cdot b \text{ when } a<b", False),
        (r"\text{grows like } n^2 \text{ for large } n", r"\text{grows like } n/2 \text{ for large } n", False),
        (r"\text{the sum } a + b", r"\text{the sum }a+b", True),
        (r"\text{maximum at } x = 1 + \sqrt{2}", r"\textbf{maximum at } x=1+\sqrt{2}", True),
        (r"\text{minimum } -2 \text{ at } x = 1", r"\mathrm{minimum}\ -2\ \text{at}\ x = 1", True),
        (r"a+b \text{ if } n \text{ is even}", r"a + b\text{ if }n\text{ is even}", True),
        (r"\text{Yes}", "yes", True),
        (r"\text{grows like } n^2 \text{ for large } n", r"\text{grows like }n^{2}\text{ for large }n", True),
    ]),
    *_cases("reference_boxes", [
        ("1", r"\boxed{1} \text{ and } \boxed{2}", False),
        ("2", r"\boxed{1} \text{ and } \boxed{2}", False),
        ("1, 2", r"\boxed{1} \text{ and } \boxed{2}", True),
        (r"\{2, 1\}", r"\boxed{1} \text{ and } \boxed{2}", True),
        ("3", r"The roots are $\boxed{3}$ and $\boxed{-3}$.", False),
        ("-3", r"The roots are $\boxed{3}$ and $\boxed{-3}$.", False),
        (r"\pm 3", r"The roots are $\boxed{3}$ and $\boxed{-3}$.", True),
        ("5", r"(a) $\boxed{5}$; (b) $\boxed{7}$", False),
        ("5, 7", r"(a) $\boxed{5}$; (b) $\boxed{7}$", True),
        ("0.5", r"So the answer is $\boxed{\frac{1}{2}}$.", True),
        ("7", r"First $\boxed{5}$ for part one, then $\boxed{7}$ for part two.", False),
    ]),
    *_cases("labelled_order", [
        ("2, 1", "x=1, y=2", False),
        ("1, 2", "x=1, y=2", True),
        ("(1, 2)", "x=1, y=2", True),
        ("y=2, x=1", "x=1, y=2", True),
        ("x=2, y=1", "x=1, y=2", False),
        ("4, 3", "a=3, b=4", False),
        ("3, 4", "a=3, b=4", True),
        ("2, 5", "m=5, n=2", False),
        ("5, 2", "m=5, n=2", True),
        ("(2, 5)", "m=5, n=2", False),
        ("x=1, y=2", "1, 2", True),
        ("x=2, y=1", "1, 2", False),
        (r"-1, \frac{1}{2}", r"p = \frac12, q = -1", False),
        (r"\frac{1}{2}, -1", r"p = \frac12, q = -1", True),
    ]),
    *_cases("rounded_decimal", [
        ("0.333", r"\frac13", False),
        ("3.14159", r"\pi", False),
        ("1.414", r"\sqrt2", False),
        ("2.718", "e", False),
        ("0.67", r"\frac23", False),
        ("85.71", r"\frac{600}{7}", False),
        ("3.14", r"\pi", False),
        ("1.73", r"\sqrt{3}", False),
        ("0.1667", r"\frac16", False),
        (r"33.3\%", r"\frac13", False),
        ("1.3", "1.27", False),
        ("0.375", r"\frac38", True),
        ("2.5", r"\frac52", True),
        ("0.125", r"\frac18", True),
        ("1.25", r"\frac{5}{4}", True),
        (r"12.5\%", r"\frac18", True),
        ("0.5", r"50\%", True),
        (r"\frac{1}{3}", "0.333", True),
        (r"\frac{600}{7}", "85.71", True),
        ("1.27", "1.3", True),
    ]),
    # --- wrong rejects -----------------------------------------------------------------
    *_cases("response_boxes", [
        (r"At first I get $\boxed{2}$, but checking again the answer is $\boxed{3}$.", "3", True),
        (r"At first I get $\boxed{2}$, but checking again the answer is $\boxed{3}$.", "2", False),
        (r"So $x = \boxed{2}$ and $y = \boxed{3}$.", "x=2, y=3", True),
        (r"So $x = \boxed{2}$ and $y = \boxed{3}$.", "x=3, y=2", False),
        (r"The solutions are $\boxed{1}$, $\boxed{2}$ and $\boxed{3}$.", "1, 2, 3", True),
        (r"The solutions are $\boxed{1}$, $\boxed{2}$ and $\boxed{3}$.", "3", False),
        (r"The solutions are $\boxed{2}$ and $\boxed{-2}$.", r"\pm 2", True),
        (r"It is $\boxed{3}$ or $\boxed{4}$.", "3", False),
        (r"It is $\boxed{3}$ or $\boxed{4}$.", "4", False),
        (r"\boxed{1} \boxed{2}", "2", False),
        (r"$\boxed{x=1}$, $\boxed{y=2}$", "(1, 2)", True),
        (r"First try: $\boxed{7}$. That is wrong; redo the sum: $\boxed{8}$.", "8", True),
        (r"First try: $\boxed{7}$. That is wrong; redo the sum: $\boxed{8}$.", "7", False),
        (r"A guess would be $\boxed{4}$. Working it out properly, the final answer is $5$.", "5", True),
        (r"A guess would be $\boxed{4}$. Working it out properly, the final answer is $5$.", "4", False),
        (r"Candidate: \boxed{4}. Final Answer: The final answer is $6$. I hope it is correct.", "6", True),
        (r"We find $\boxed{5}$. The final answer is 5.", "5", True),
        (r"The final answer is $\boxed{\frac{3}{2}}$. I hope it is correct.", "1.5", True),
        (r"Hence $a=\boxed{3}$, $b=\boxed{-1}$.", "a=3, b=-1", True),
        (r"Hence $a=\boxed{3}$, $b=\boxed{-1}$.", "a=-1, b=3", False),
    ]),
    *_cases("response_final_answer", [
        ("Final Answer: The total number of apples is 15.", "15", True),
        (r"Final Answer: The area of the triangle is $6\sqrt{3}$.", r"6\sqrt3", True),
        (r"**Final Answer:** The probability is $\frac{1}{4}$.", "0.25", True),
        ("Final Answer: 42", "42", True),
        ("Final Answer: x = 3 and y = 4.", "(3, 4)", True),
        (r"Final answer: $x=5$. I hope it is correct.", "5", True),
        ("Final Answer: The number of apples is 16.", "15", False),
        ("Final Answer: The perimeter is 24 cm.", "20", False),
        (r"Final Answer: The probability is $\frac{1}{3}$.", r"\frac14", False),
        ("Final Answer: The smallest such n is 7.", "7", True),
        ("Final Answer: The smallest such n is 7.", "8", False),
        ("**Final Answer**\nThe value is $-2$.", "-2", True),
        ("Final Answer: The answer is 12 meters.", "12", True),
    ]),
    *_cases("ascii_relations", [
        ("x >= 2", r"[2,\infty)", True),
        ("x<=3", r"x \le 3", True),
        ("x != 2", r"x \ne 2", True),
        ("x >= 2", r"x\ge 2", True),
        ("1 <= x <= 3", "[1,3]", True),
        ("a != 0", r"a \neq 0", True),
        ("y >= -1", r"[-1, \infty)", True),
        ("x >= 2", "x > 2", False),
        ("x <= 3", "x < 3", False),
        ("x != 2", "x = 2", False),
        ("x >= 2", r"(-\infty, 2]", False),
        ("1 <= x <= 3", "(1,3)", False),
    ]),
    *_cases("ascii_infinity", [
        ("oo", r"\infty", True),
        ("(-oo, 2)", r"(-\infty, 2)", True),
        ("[0, oo)", r"x \ge 0", True),
        ("-oo", r"-\infty", True),
        ("(1, oo)", "x>1", True),
        ("oo", r"-\infty", False),
        ("(-oo, 2)", r"(-\infty, 2]", False),
        ("[0, oo)", "x > 0", False),
        ("oo", "0", False),
    ]),
    *_cases("repeating_decimal", [
        ("0.999...", "1", True),
        ("0.333...", r"\frac13", True),
        ("0.1666...", r"\frac16", True),
        ("0.142857142857...", r"\frac17", True),
        (r"0.\overline{3}", r"\frac13", True),
        ("1.999...", "2", True),
        ("0.0909...", r"\frac{1}{11}", True),
        (r"0.1\overline{6}", r"\frac16", True),
        ("0.999...", "0.998", False),
        ("0.333...", r"\frac{3}{10}", False),
        ("3.14159...", r"\pi", False),
        ("0.1666...", r"\frac{1}{7}", False),
        ("0.999...", "0", False),
        ("1.41421...", r"\sqrt2", False),
    ]),
    *_cases("scientific_notation", [
        ("4.2e1", "42", True),
        ("1.5E-3", "0.0015", True),
        ("3e8", r"3 \times 10^8", True),
        ("6.02e23", r"6.02\times10^{23}", True),
        ("2.5e-1", r"\frac14", True),
        ("-1e3", "-1000", True),
        ("4.2e1", "4.2", False),
        ("1.5E-3", "0.015", False),
        ("3e8", "3e^8", False),
        ("1e-3", "1000", False),
        ("2e3", "2e", False),
    ]),
    *_cases("decimal_comma", [
        ("1,22", "1.22", True),
        ("3,5", "3.5", True),
        ("0,75", "0.75", True),
        ("1.22", "1,22", True),
        ("-2,5", "-2.5", True),
        ("1,22", "1.23", False),
        ("3,5", "35", False),
        ("1,5", "15", False),
        ("2,50", "2.05", False),
        ("1,234", "1.234", False),
        ("1,5", r"\{1, 5\}", True),
    ]),
    *_cases("space_thousands", [
        ("1 000", "1000", True),
        ("12 345 678", "12345678", True),
        (r"1\,000", "1000", True),
        ("2 500 000", r"2.5\times10^6", True),
        ("1 000 000", "10^6", True),
        (r"1\ 000", "1000", True),
        ("1 000", "100", False),
        ("1 000", "1001", False),
        ("10 000", "1000", False),
        ("12 345", "12, 345", False),
    ]),
    *_cases("percent_words", [
        ("28 percent", r"28\%", True),
        ("28 pct", "0.28", True),
        (r"28\text{ percent}", r"28\%", True),
        ("12.5 percent", r"\frac18", True),
        ("50 per cent", r"50\%", True),
        ("28 percent", "0.028", False),
        ("28 pct", r"2.8\%", False),
        ("12 percent", "0.21", False),
        ("5 percent", r"50\%", False),
    ]),
    *_cases("named_quantities", [
        ("4, 5", "AB=4, CD=5", True),
        ("1", "|AB|=1", True),
        ("11:21", "V_1:V_2=11:21", True),
        (r"\frac{11}{21}", "V_1:V_2=11:21", True),
        ("AB = 4", "4", True),
        ("6", "BC = 6", True),
        (r"30^\circ", r"\angle ABC = 30^\circ", True),
        (r"2\sqrt{3}", r"|PQ| = 2\sqrt{3}", True),
        ("3:4", "AE:EC = 3:4", True),
        ("5, 4", "AB=4, CD=5", False),
        ("2", "|AB|=1", False),
        ("21:11", "V_1:V_2=11:21", False),
        ("4", "AB=4, CD=5", False),
        ("3:5", "AE:EC=3:4", False),
        (r"60^\circ", r"\angle ABC = 30^\circ", False),
    ]),
    *_cases("plain_brace_sets", [
        ("{1, 2}", r"\{1,2\}", True),
        ("{1,2,3}", r"\{3,2,1\}", True),
        ("{-1, 1}", r"\pm 1", True),
        ("{2, 3}", r"x=2 \text{ or } x=3", True),
        (r"\{1, 2\}", "{2, 1}", True),
        (r"{\frac12, 2}", r"\{0.5, 2\}", True),
        ("{1, 2}", r"\{1,3\}", False),
        ("{1,2,3}", r"\{1,2\}", False),
        ("{-1, 1}", "1", False),
        ("{1, 2}", r"\{1, 2, 4\}", False),
    ]),
    *_cases("duplicate_items", [
        (r"x=2 \text{ or } x=2", "2", True),
        ("2", r"x = 2 \text{ or } x = 2", True),
        ("x=1, x=1, x=3", r"x=1 \text{ or } x=3", True),
        ("x = -1, x = -1", "-1", True),
        ("{1,1,2}", "{1,2}", True),
        (r"\{1, 1, 2\}", "1, 2", True),
        ("x=2, x=2", "-2", False),
        ("x=1, x=1, x=3", "x=1", False),
        ("1, 2", "1, 2, 2", False),
        ("{1,1,2}", "{1,2,3}", False),
    ]),
    *_cases("inequality_chain", [
        ("a < x < b", "(a, b)", True),
        ("(a, b)", "a < x < b", True),
        (r"a \le x < b", "[a, b)", True),
        (r"x > c", r"(c, \infty)", True),
        (r"0 < x < \pi", r"(0, \pi)", True),
        (r"-1 \le x \le 1", "[-1, 1]", True),
        ("2 > x > 1", "(1, 2)", True),
        (r"0 \le t < 5", "t \\in [0, 5)", True),
        (r"\frac12 \le x \le 1", "[0.5, 1]", True),
        ("1 < x < 2", r"x\in]1,2[", True),
        ("a < x < b", "[a, b]", False),
        ("a < x < b", "(b, a)", False),
        (r"x > c", r"[c, \infty)", False),
        (r"-1 \le x < 1", "[-1, 1]", False),
        ("2 > x > 1", "(1, 3)", False),
        ("1 < x < 2", r"x\in]1,2]", False),
    ]),
]
