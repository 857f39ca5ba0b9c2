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
        # a list of two numbers is no decimal comma (an outside audit: 1.5 was paid for the label "1, 5")
        ("1.5", "1, 5", False), ("1, 5", "1.5", False), ("12, 34", "12.34", False), ("1,5", "1.5", True),
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
        # the same answer boxed again is one answer, not two copies of it
        ("5", r"So $x = \boxed{5}$. Checking, $x = \boxed{5}$ works.", True),
        ("5", r"The answer is $\boxed{5}$, that is $\boxed{5}$.", True),
        (r"\frac12", r"We get $\boxed{\frac{1}{2}}$; in lowest terms $\boxed{\dfrac12}$.", True),
        ("5, 5", r"So $\boxed{5}$, and again $\boxed{5}$.", False),
        ("5", r"So $\boxed{5}$, and then $\boxed{6}$.", False),
        ("2", r"$a = \boxed{2}$ and $b = \boxed{2}$", False),
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
    *_cases("operator_readings", [
        # a brace-less tower is read from the right, as mathematicians read it
        ("2^3^2", "512", True),
        ("2^3^2", "2^{3^2}", True),
        ("2^3^2", "64", False),
        ("2^3^2", "(2^3)^2", False),
        ("x^2^3", "x^8", True),
        ("x^2^3", "x^6", False),
        # unary minus is looser than a power
        ("-2^2", "-4", True),
        ("-2^2", "4", False),
        ("-x^2", "-(x^2)", True),
        ("-x^2", "(-x)^2", False),
        ("(-2)^2", "4", True),
        # a factorial binds to what it follows; an exponent in braces is whole
        ("3!^2", "36", True),
        ("3!^2", "(3^2)!", False),
        ("2^{3!}", "64", True),
        ("2^3!", "64", False),
        # "1/2x" is ambiguous, so it is neither reading; the unambiguous spellings are fine
        ("1/2x", r"\frac{x}{2}", False),
        ("1/2x", r"\frac{1}{2x}", False),
        ("1/(2x)", r"\frac{1}{2x}", True),
        ("(1/2)x", r"\frac{x}{2}", True),
        ("x/2", r"\frac{1}{2}x", True),
        ("2x/3", r"\frac{2x}{3}", True),
    ]),
    *_cases("boxed_equation", [
        # satisfied by the reference is not enough: several roots, or a whole range of them
        ("x^2=25", "5", False),
        ("x^2=25", "-5", False),
        ("x^2-5x+6=0", "2", False),
        ("(x-1)(x-2)=0", "1", False),
        ("x^3=8", "2", False),
        ("|x|=x", "3", False),
        (r"\sqrt{x^2}=x", "7", False),
        (r"\lfloor x \rfloor = x", "4", False),
        ("x+1=x+1", "3", False),
        ("2+2=5", "5", False),
        ("x^2=25", r"\pm 5", False),  # an unsolved equation, even where its roots are the list
        # an equation that determines the unknown to be the reference, and chains
        ("x=5", "5", True),
        ("2x=10", "5", True),
        ("3x+2=2x+7", "5", True),
        ("10=2x", "5", True),
        ("(x-5)^2=0", "5", True),
        (r"\frac{1}{x}=\frac{1}{5}", "5", True),
        ("xy=6", "6/x", True),
        ("2+3=5", "5", True),
        ("x=2+3=5", "5", True),
        (r"a_3=a_2+a_1=3+2=5", "5", True),
        (r"2 \cdot 3 = 6", "2", False),
        (r"\frac{12}{4} = 3", "12", False),
    ]),
    *_cases("units_both_sides", [
        # both sides carry units: they must agree, after conversion where it is known
        (r"5 \text{ cm}", r"5 \text{ m}", False),
        (r"5 \text{ kg}", r"5 \text{ m}", False),
        (r"3 \text{ days}", r"3 \text{ weeks}", False),
        (r"5 \text{ m}", r"5 \text{ m}^2", False),
        (r"60 \text{ km/h}", r"60 \text{ mph}", False),
        (r"240 \text{ yuan}", r"240 \text{ dollars}", False),
        (r"12 \text{ minutes}", r"12 \text{ seconds}", False),
        (r"50 \text{ cm}", r"0.5 \text{ m}", True),
        (r"90 \text{ minutes}", r"1.5 \text{ hours}", True),
        (r"3 \text{ weeks}", r"21 \text{ days}", True),
        (r"500 \text{ cm}^2", r"0.05 \text{ m}^2", True),
        (r"60 \text{ km/h}", r"\frac{50}{3} \text{ m/s}", True),
        (r"6 \text{ ft}", r"72 \text{ inches}", True),
        (r"12 \text{ meters}", r"12 \mathrm{m}", True),
        # a unit on one side only is dropped, as before
        (r"5 \text{ cm}", "5", True),
        ("5", r"5 \text{ m}", True),
        (r"5 \text{ cm}", "6", False),
    ]),
    *_cases("renamed_variables", [
        # a symbol free in the reference is the same symbol in the answer
        ("a^2+1", "x^2+1", False),
        ("t^2", "x^2", False),
        ("y = 3t + 1", "y = 3x + 1", False),
        (r"\frac{a}{b}", r"\frac{x}{y}", False),
        ("f(x) = ax", "f(x) = bx", False),
        (r"\{x \mid x > a\}", r"\{x \mid x > b\}", False),
        (r"\sum_{k=1}^{m} k", r"\sum_{k=1}^{n} k", False),
        (r"\int_0^a x\,dx", r"\int_0^b x\,dx", False),
        ("f(t) = t + s", "f(x) = x + y", False),
        ("f(x,y) = x+2y", "f(a,b) = 2a+b", False),
        ("2k+1", "2n+1", False),  # undeclared, k and n are free
        (r"2t+1 \text{ for some integer } t", "2x+1", False),  # declared on one side only
        (r"C_1 e^x + C_2 e^{-x}", r"c_1 e^{-x} + c_2 e^{-x}", False),
        # bound variables and arbitrary constants may be renamed
        ("g(t)=t^2", "f(x)=x^2", True),
        ("f(t) = t^2", "x^2", True),
        ("f(x,y) = x+2y", "f(a,b) = a+2b", True),
        ("a_n = 2n + 1", "a_k = 2k+1", True),
        (r"\{t \mid t^2 = 1\}", r"\{x \mid x^2 = 1\}", True),
        (r"\sum_{i=1}^{n} i^2", r"\sum_{k=1}^{n} k^2", True),
        (r"\int_0^1 t^2\,dt", r"\int_0^1 x^2\,dx", True),
        (r"\frac{\pi}{2} + n\pi", r"\frac{\pi}{2} + k\pi", True),
        (r"(-\frac{5\pi}{12} + n\pi, \frac{\pi}{12} + n\pi)", r"(-\frac{5\pi}{12} + k\pi, \frac{\pi}{12} + k\pi)", True),
        (r"30^\circ + 360^\circ n", r"30^\circ + k \cdot 360^\circ", True),
        (r"x = \frac{\pi}{2}+m\pi, m \in \mathbb{Z}", r"\frac{\pi}{2} + k\pi", True),
        (r"2n+1 \text{ for some integer } n", r"2k+1, k \in \mathbb{Z}", True),
        ("x^2 + C", "x^2 + K", True),
        (r"f(x) = \sin x + C", r"f(x) = \sin x + c", True),  # under a label too
        (r"f(x) = \sin x + a", r"f(x) = \sin x + b", False),
        (r"C_1 e^x + C_2 e^{-x}", r"c_1 e^{x} + c_2 e^{-x}", True),
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
    *_cases("response_comment_after_the_box", [
        # "the final answer is <a word>" after the box speaks of the boxed answer; it states none
        (r"So $\boxed{24}$. Checking: the final answer is consistent with step 3.", "24", True),
        (r"Hence $\boxed{7}$. The final answer is in the range from 1 to 10.", "7", True),
        (r"So $\boxed{12}$. This final answer is valid for $n \ge 1$.", "12", True),
        (r"So $\boxed{5}$. The final answer is correct for all 3 cases.", "5", True),
        (r"So $\boxed{5}$. The final answer is correct for all 3 cases.", "3", False),
        # a statement after the box still overrides it (the response corrected itself)
        (r"So $\boxed{4}$. Wait, that is wrong. The final answer is 5.", "5", True),
        (r"So $\boxed{4}$. Wait. The final answer is the value 5.", "5", True),
        (r"So $\boxed{4}$. Wait. The final answer is $5$.", "4", False),
        # after "final answer:" too: a sentence of prose comments on the box (an outside audit's case)
        ("\\boxed{4}\n\nThis is my final answer: it took 3 steps.", "4", True),
        ("\\boxed{4}\n\nThis is my final answer: it took 3 steps.", "3", False),
        (r"So $\boxed{5}$. Final answer: 4", "4", True),
        (r"So $\boxed{5}$. Final answer: $x = 4$ for $n = 3$.", "4", True),
        (r"So $\boxed{5}$. Final answer: $x = 4$ for $n = 3$.", "3", False),
        # a statement that takes its value back ("5 is wrong") states no answer: the box stands
        (r"So $\boxed{3}$. Final answer: 5 is wrong.", "5", False), (r"So $\boxed{3}$. Final answer: 5 is wrong.", "3", True),
        (r"So $\boxed{3}$. Final answer: 5 is not right.", "5", False), ("The answer is 5 is wrong.", "5", False),
    ]),
    *_cases("response_denied_answers", [
        # words right before an answer that take it back: the answer is what they leave
        ("The answer is $4$, not $3$.", "3", False), ("The answer is $4$, not $3$.", "4", True),
        ("The answer is $4$ (not $3$).", "3", False), (r"\boxed{4}, not \boxed{3}", "3", False),
        (r"\boxed{4}, not \boxed{3}", "4", True), ("The answer is not $3$.", "3", False),
        (r"It is not \boxed{3}", "3", False), ("The answer is $4$ rather than $3$.", "3", False),
        ("The answer is $4$ instead of $3$.", "3", False), ("The answer is 4, not 3.", "3", False),
        ("The answer is 4, not 3.", "4", True), ("The answer is 12 apples, not 13.", "12", True),
        ("The answer is not $3$ but $4$.", "4", True), ("The answer is $3$, not $4$.", "3", True),
        (r"This is not obvious, but after simplifying we get \boxed{3}", "3", True),
        (r"The answer is \boxed{3}, not \boxed{4}", "3", True), (r"Not $4$: the answer is $3$.", "3", True),
        # a statement's value is what follows its verb, not a condition after it
        ("The answer is $x = 4$ for $n = 3$.", "4", True), ("The answer is $x = 4$ for $n = 3$.", "3", False),
        ("The answer is $3$ or $4$.", "3", False),
    ]),
    *_cases("response_final_sentence", [
        # "Final Answer:" and a sentence: the value the sentence states, not the sentence
        (r"Final Answer: The value of $x$ is 5.", "5", True),
        (r"Final Answer: The value of $x$ is 5.", "x", False),
        ("Final Answer: There are 15 apples in total.", "15", True),
        ("Final Answer: There are 15 apples in total.", "16", False),
        ("Final Answer: The perimeter is 24 cm.", r"24 \text{ cm}", True),
        ("Final Answer: The perimeter is 24 cm.", r"24 \text{ m}", False),
        (r"Final Answer: $\frac{3}{4}$ of the class passed.", "0.75", True),
        (r"Final Answer: The sum is $1+2+3 = 6$.", "6", True),
        (r"Final Answer: The sum is $1+2+3 = 6$.", "1", False),
    ]),
    *_cases("response_split_boxes", [
        # an answer boxed in parts is one set of parts, as many as the reference has
        (r"The maximum is $\boxed{5}$ and the minimum is $\boxed{1}$.", "5, 1", True),
        (r"The maximum is $\boxed{5}$ and the minimum is $\boxed{1}$.", "(5, 1)", True),
        (r"For part (a) we get $\boxed{3}$. Then part (b) gives $\boxed{7}$.", "3, 7", True),
        (r"So $x = \boxed{2}$, and then $y = \boxed{3}$.", "x=2, y=3", True),
        (r"$\boxed{2, 3}$", r"The roots are $\boxed{2}$ and then $\boxed{3}$.", True),
        (r"The maximum is $\boxed{5}$ and the minimum is $\boxed{2}$.", "5, 1", False),
        (r"The maximum is $\boxed{5}$ and the minimum is $\boxed{1}$.", "5", False),
        (r"The maximum is $\boxed{5}$ and the minimum is $\boxed{1}$.", "5, 1, 0", False),
        (r"Try $\boxed{1}$, $\boxed{7}$. Wrong: the max is $\boxed{5}$, the min is $\boxed{1}$.", "1, 7", False),
        (r"So $x = \boxed{3}$, and then $y = \boxed{2}$.", "x=2, y=3", False),
        (r"$\boxed{2, 4}$", r"The roots are $\boxed{2}$ and then $\boxed{3}$.", False),
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
    *_cases("thin_space_thousands", [
        (r"12,\! 000", "12000", True),
        (r"1,\! 234,\! 567", "1234567", True),
        (r"12,\!  345", "12345", True),
        (r"3,\! 500", r"3.5\times 10^3", True),
        (r"12,\! 000", "12, 000", False),
        (r"12,\! 000", "12", False),
        (r"1,\! 234", "1, 234", False),
        (r"12,\! 345", r"\{12, 345\}", False),
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
    # found by an outside probe (2026-12-06): a percent or a degree on both sides is one reading,
    # not x/100 against x; a written decimal that only truncates to a decimal reference is another
    # value; a trailing word that scales, compares or takes back the number is no unit
    *_cases("percent_degree_both_sides", [
        (r"0.5\%", r"50\%", False), (r"1\%", r"100\%", False), (r"20\%", r"0.2\%", False),
        (r"50\%", r"50\%", True), (r"50\%", "0.5", True), (r"\frac{\pi}{3}^\circ", r"60^\circ", False),
        (r"60^\circ", r"60^\circ", True),
    ]),
    *_cases("decimal_truncation", [
        ("2.59", "2.5", False), ("0.259", "0.25", False), ("12.509", "12.50", False),
        ("2.54", "2.5", True), ("2.46", "2.5", True), (r"\sqrt{2}", "1.41", True),
    ]),
    *_cases("tail_words_not_units", [
        (r"5 \text{ more}", r"5 \text{ fewer}", False), (r"5 \text{ years older}", r"5 \text{ years younger}", False),
        (r"5 \text{ million}", "5", False), (r"3 \text{ (or 4)}", "3", False), (r"5 \text{ is wrong}", "5", False),
        (r"15 \text{ apples left}", "15", True), (r"5 \text{ dollars}", "5", True),
        # words that only say what the number counts (how many more, how much older) are no objection
        (r"5\text{ more}", "5", True), (r"7 \text{ times}", "7", True), (r"10 \text{ years older}", "10", True),
        (r"24 \text{ cm squared}", "24", True), (r"\$500 \text{ profit}", "500", True), (r"5 \text{ km north}", "5", True),
        (r"500 \text{ loss}", r"500 \text{ profit}", False),
    ]),
    *_cases("phrase_of_a_sentence_reference", [
        (r"\text{triangle}", r"\text{The shape is a triangle}", True), (r"\text{function}", r"\text{Yes, it is a function}", True), (r"\text{it}", r"\text{Yes, it is possible}", False),
        (r"\text{even}", r"\text{The function is even}", True), (r"\text{odd}", r"\text{The answer is odd}", True),
        (r"\text{first player}", r"\text{The first player wins}", True), (r"\text{Alice}", "Alice wins the game", True),
    ]),
    *_cases("three_term_ratio", [
        ("1:2:3", "1:3:2", False), ("2:3:4", "1:3:2", False), ("1:2:3", r"\frac16", False),
        ("1:2:3", "1:2:3", True), ("3:4", r"\frac34", True),
    ]),
    *_cases("labels_of_other_names", [
        ("x=2, z=1", "x=1, y=2", False), ("X=2, Y=1", "x=1, y=2", False), ("x=2, y=1, w=3", "x=1,y=2,z=3", False),
        ("AB=5, CD=4", "AB=4,BC=5", False), ("X=1, Y=2", "x=1, y=2", True), ("y=2, x=1", "x=1, y=2", True),
    ]),
    *_cases("values_of_another_variable", [
        # both sides name the unknown their values belong to: the reference's must be named too
        ("y=3", "x=3", False), ("t=4", "x=4", False), ("n = 5", "k = 5", False), ("y > 3", "x > 3", False),
        (r"y \le -1", r"x \le -1", False), ("a=1, c=2", "a=1, b=2", False), ("(a,b)=(1,2)", "(x,y)=(1,2)", False),
        (r"\alpha = 30^\circ", r"\beta = 30^\circ", False),
        ("N = 5", "n = 5", True), ("x = y = 3", "x = 3", True), ("y = 3", "3", True), ("3", "x = 3", True),
        (r"x > 3", r"(3, \infty)", True), (r"\angle BAC = 30^\circ", r"\angle A = 30^\circ", True),
        ("BA = 5", "AB = 5", True),
    ]),
    *_cases("conjoined_inequalities", [
        # "and" between two bounds of one variable is both at once, an intersection (an outside audit:
        # "x >= 2 and x <= 5" read as a union was the whole real line)
        (r"x \ge 2 \text{ and } x \le 5", r"(-\infty,\infty)", False), (r"x \ge 2 \text{ and } x \le 5", "[2,5]", True),
        (r"x>2 \text{ and } x<5", "(2,5)", True), (r"x > 2 \land x < 5", "(2,5)", True),
        (r"x<2 \text{ and } x>5", r"(-\infty,2)\cup(5,\infty)", False),
        (r"x<2 \text{ or } x>5", r"(-\infty,2)\cup(5,\infty)", True),
        (r"x=1 \text{ and } x=2", "1, 2", True), (r"x > 2 \text{ and } y < 3", "x>2, y<3", True),
        (r"x \ge 1 \text{ and } x \le 1", "1", True),
    ]),
    *_cases("tail_takes_it_back", [
        (r"3 \text{ false}", "3", False), (r"3 \text{ (false)}", "3", False), (r"3 \text{ apples}", "3", True),
    ]),
    *_cases("layout_commands_and_functions", [
        # an outside audit's wrong rejects: phantoms, aligned rows, gcd and lcm
        (r"\hphantom{0}3", "3", True), (r"\phantom{-}3", "3", True), (r"\begin{aligned}x&=3\end{aligned}", "3", True),
        (r"\begin{aligned}x&=3\\y&=4\end{aligned}", "x=3, y=4", True),
        (r"\begin{aligned}x&=3\\y&=4\end{aligned}", "x=4, y=3", False),
        (r"\gcd(3,6)", "3", True), (r"\operatorname{lcm}(4,6)", "12", True), (r"\gcd(3,6)", "6", False),
    ]),
    *_cases("approximations", [
        # an "≈" chain is answered by its exact side only when its sides agree ("3 ≈ 100" says nothing)
        (r"3 \approx 100", "3", False), (r"12 \approx 11.7", "11.7", False), (r"x \approx 3", "3", True),
        (r"\frac{31031}{7776} \approx 3.99", r"\frac{31031}{7776}", True), (r"\pi \approx 3.14", r"\pi", True),
        (r"\sqrt{2} \approx 1.414", r"\sqrt{2}", True), (r"2^{10} \approx 1000", "1024", True),
    ]),
    *_cases("real_line", [
        (r"\mathbb{R}", r"(-\infty,\infty)", True), (r"(-\infty,\infty)", r"\mathbb{R}", True),
        (r"x \in \mathbb{R}", r"(-\infty,\infty)", True), (r"\mathbb{R}", r"[0,\infty)", False),
        (r"\mathbb{R}", r"\mathbb{Z}", False),
    ]),
    *_cases("numbered_terms", [
        # a numbered subscript names one term: a_2 is not a_1, and two indexed labellings go term by term
        ("a_1=2, a_2=1", "a_1=1, a_2=2", False), ("a_{1}=2, a_{2}=1", "a_1=1, a_2=2", False), ("a_2 = 1", "a_1 = 1", False),
        ("x_1=5, x_2=3", "x_1=3, x_2=5", False), (r"\alpha_1 = 1, \alpha_2 = 2", r"\alpha_1 = 2, \alpha_2 = 1", False),
        ("P_1 = (1, 2), P_2 = (3, 4)", "P_1=(3,4), P_2=(1,2)", False), ("x_1 = 3, x_3 = 5", "x_1=3, x_2=5", False),
        ("y_1 = 3, y_2 = 5", "x_1 = 3, x_2 = 5", False), ("a_{10} = 5", "a_1 = 5", False),
        # a bare list, or the unknown's own name, may give the terms in any order (roots)
        ("x_2=5, x_1=3", "x_1=3, x_2=5", True), (r"x=3 \text{ or } x=5", "x_1=3, x_2=5", True),
        ("x_1 = 3, x_2 = 5", r"x=3 \text{ or } x=5", True), ("a_{1}=1", "a_1 = 1", True), ("x_1=x_2=2", "x=2", True),
        ("x_1=2, x_2=2", "2", True), ("a_{10} = 5", "a_{10}=5", True),
    ]),
    *_cases("definition_variables_by_place", [
        ("f(y,x)=x+2y", "f(x,y)=x+2y", False), ("f(t)=x^2", "f(x)=x^2", False), ("f(x) = 2y", "f(y) = 2y", False),
        ("f(t)=t^2", "f(x)=x^2", True), ("f(a,b)=a+2b", "f(x,y)=x+2y", True), ("f(t)=t^2+C", "f(x)=x^2+c", True),
    ]),
    *_cases("tuple_label_order", [
        ("(y,x)=(1,2)", "x=1, y=2", False), ("(b,a)=(1,2)", "(a,b)=(1,2)", False),
        ("(y,x)=(2,1)", "x=1, y=2", True), ("(y,x)=(2,1)", "(x,y)=(1,2)", True), ("(x,y)=(1,2)", "(1,2)", True),
        # against a bare tuple the order written stands (names in no alphabetical order)
        ("(m, b) = (2, 3)", "(2, 3)", True), ("(t, s) = (1, 2)", "(1, 2)", True), ("(m,b) = (2,3)", "m=2, b=3", True),
        ("x=2, y=1", "(y,x)=(2,1)", False),
    ]),
    *_cases("word_labels", [
        ("Maximum: 5, Minimum: 1", "Maximum: 1, Minimum: 5", False), ("Minimum: 1, Maximum: 5", "Maximum: 5, Minimum: 1", True),
        ("Paolo: 18, Qing: 14, Rayna: 7", "7,14,18", True),
    ]),
    *_cases("wrapped_numbers", [
        (r"\textbf{42}", "42", True), (r"\text{42}", "42", True), (r"\mathbf{-3.5}", r"-\frac{7}{2}", True),
        ("42", r"\text{42}", True), (r"\boxed{\textbf{12}}", "12", True),
        (r"\textbf{42}", "43", False), (r"\text{4}2", "4", False), (r"\mathbf{2}x", "2", False),
    ]),
    *_cases("numbers_side_by_side", [
        ("2 1/2", "1", False), ("2 3", "6", False), ("3!!", "720", False),
        ("2 1/2", "5/2", True), ("12 1/2", "12.5", True), ("1 234", "1234", True),
    ]),
    *_cases("response_stated_with_a_qualifier", [
        ("The answer is not 3.", "3", False), ("Final Answer: x is not 5.", "5", False),
        ("The answer is minus 5.", "5", False), ("The answer is negative 5.", "-5", True),
        ("Final Answer: The value is less than 5.", "5", False), ("The answer is 5 thousand.", "5", False),
        ("Final Answer: all numbers except 5.", "5", False), ("The answer is 15 apples.", "15", True),
        ("The answer is at least 5.", "5", False), ("The answer is 15 more apples.", "15", True),
        ("The answer is 7 times.", "7", True), ("The answer is 10 years older.", "10", True),
        ("The answer is 20 minutes less than before.", "20", True), ("The answer is 50 percent.", r"50\%", True),
    ]),
]


# Responses that neither box their answer nor state it ("the answer is", "Final Answer:"):
# what they answer depends on VerifierConfig.unanchored, so they are kept apart from CASES.
# The labels say whether the text gives the reference as its answer; the negatives are
# responses that end on a value without committing to it (what last_expression accepts).
NO_ANCHOR_CASES: list[Case] = [
    *_cases("response_no_anchor", [
        (r"So we get $x = 4$.", "4", True),
        ("Thus the total is 15.", "15", True),
        (r"We get $3 \times 4 = 12$.", "12", True),
        ("Hence $$x = 5$$", "5", True),
        ("Adding up, there are 42 marbles in all.", "42", True),
        (r"Therefore the probability is $\frac{1}{2}$.", "0.5", True),
        (r"The roots are $x = 2$ and $x = 3$.", "2, 3", True),
        (r"So we get $x = 4$.", "5", False),
        (r"Let me check whether $n = 7$ works.", "7", False),
        (r"Next we compute $f(3) = 10$ and continue.", "10", False),
        (r"Suppose the answer were $12$; then the sum would exceed $100$.", "100", False),
        (r"It remains to verify the case $k = 2$.", "2", False),
        (r"Find all real $x$ such that $x^2 = 4$.", "2", False),
        ("The result follows. I hope this helps!", "1", False),
        (r"We try $x = 4$ and $x = 5$ next.", "5", False),
    ]),
]
