"""check(): equivalence by structure, on hand-written cases (none from HardVerify-Math).

Each pair is (answer, reference). The "same" list must come out "correct", the
"different" list "incorrect"; together they pin down the rules in math_compare's
docstring without looking at the benchmark.
"""
import pytest
from jury.verifiers.math.answer import parse_answer
from jury.verifiers.math.normalize import normalize
from jury.verifiers.math.verify import VERDICTS, Judgement, check, judge

SAME = [
    # numbers: exact forms, decimals, percentages, mixed numbers, separators
    (r"\dfrac{3}{4}", "0.75"), ("75\\%", r"\frac34"), ("50", "50\\%"), ("40\\%", "0.4"), ("12,\\!000", "12000"),
    ("0.999...", "1"), (r"0.1\overline{6}", r"\frac16"), ("0.0909...", r"\frac{1}{11}"), ("4.2e1", "42"), ("1.5E-3", "0.0015"),
    ("3e8", r"3\times 10^8"), ("1,22", "1.22"), ("1.22", "1,22"), ("1 000", "1000"), ("28 percent", "0.28"), ("x >= 2", r"[2, \infty)"),
    (r"1\frac{1}{2}", r"\frac32"), (r"-1\frac{1}{2}", r"-\frac32"), ("12.0", "12"), ("1.50", "1.5"), ("-0", "0"),
    (r"2\times 10^{3}", "2000"), ("2^{10}", "1024"), (r"\sqrt[4]{16}", "2"), (r"\sqrt[3]{-8}", "-2"), ("5!", "120"),
    (r"\binom{5}{2}", "10"), (r"\log_{3} 81", "4"), (r"\ln e", "1"), (r"\cos\frac{\pi}{3}", r"\frac12"),
    # a decimal reference is taken as rounded to the places written (3 significant digits; 2 when both are decimals)
    (r"\frac13", "0.333"), (r"\pi", "3.14"), (r"\frac{\pi}{2}", "1.5708"), (r"2\sqrt{2}", "2.83"), ("1.27\\%", "1.3\\%"),
    # irrational constants and symbolic expressions
    (r"3\sqrt{2}", r"\sqrt{18}"), (r"\frac{2}{\sqrt{3}}", r"\frac{2\sqrt{3}}{3}"), (r"\frac{\sqrt{6}}{3}", r"\sqrt{\frac{2}{3}}"),
    ("i", r"\sqrt{-1}"), ("3 + 4i", "4i + 3"), (r"e^{i\pi}", "-1"), ("(x-1)(x+2)", "x^2+x-2"), ("a^2 - b^2", "(a-b)(a+b)"),
    (r"\frac{n(n-1)}{2}", r"\binom{n}{2}"), ("x^{-1}", r"\frac1x"), (r"\sin^2 x + \cos^2 x", "1"), (r"\tan^{-1} 1", r"\frac{\pi}{4}"),
    (r"\frac{-b}{2a}", r"-\frac{b}{2a}"), (r"\pi/2", r"\frac{\pi}{2}"),
    # degrees and units, labels and text wrappers
    (r"45^{\circ}", r"\frac{\pi}{4}"), (r"90^\circ", "90"), (r"1.5 \text{ hours}", r"\frac{3}{2}"), (r"5 \text{ dollars}", "5"),
    ("5^{\\text{th}}", "5"), (r"\$5", "5"), ("k=5", "5"), ("5", "x=5"), (r"\text{(B)}", "B"), (r"\text{Tuesday}", "Tuesday"),
    ("f(x)=x^2", "x^2"), ("g(t)=t^2", "f(x)=x^2"), (r"\text{The answer is } 5", "5"), (r"\frac{1}{2}\text{ m}^2", "0.5"),
    (r"\text{A, C}", "A, C"),
    ("4, 5", "AB=4, CD=5"), ("1", "|AB|=1"), ("11:21", "V_1:V_2=11:21"), (r"30^\circ", r"\angle ABC = 30^\circ"), ("BC = 6", "6"),
    # several answers, tuples, sets, vectors, matrices
    (r"x = \pm 2", "2, -2"), (r"\{1,2\}", r"\{2,1\}"), (r"\{1,2\}", r"\{1,2,2\}"), ("b=2,a=1", "a=1,b=2"), ("m = 3, n = 4", "(3, 4)"),
    ("1, 2", "x=1, y=2"), ("x=1, y=2", "1, 2"), (r"x=2 \text{ or } x=2", "2"), ("x=1, x=1, x=3", r"\{1, 3\}"), ("x_1 = 3, x_2 = 5", "5, 3"),
    (r"\left\{ 1, 2 \right\}", r"\{2, 1\}"), (r"\begin{pmatrix} 2 \\ -1 \end{pmatrix}", "(2, -1)"),
    (r"\begin{bmatrix}1&2\\3&4\end{bmatrix}", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}"), (r"x=1 \text{ or } x=2", r"\{1,2\}"),
    # intervals and inequalities
    ("(-2, 3]", r"-2 < x \le 3"), (r"\{x \mid x > 5\}", r"(5, \infty)"), ("[1,3)", r"1\le x<3"), (r"x \in (0, 1]", r"0 < x \le 1"),
    ("(2, 3)", "2 < x < 3"), (r"(-\infty,2)\cup(2,\infty)", r"x\neq 2"), (r"(0,\infty)", "x>0"), (r"\emptyset", r"\text{no solution}"),
    (r"(1, 2) \cup (3, 4)", r"1<x<2 \text{ or } 3<x<4"), (r"x \in [1, 2]", "[1,2]"),
    ("b, a, d, c", "b < a < d < c"), ("x_1, x_2, x_3", "x_1 > x_2 > x_3"),
    ("a < x < b", "(a, b)"), (r"a \le x < b", "[a, b)"), ("x > c", r"(c, \infty)"), (r"t \ge \sqrt{k}", r"[\sqrt{k}, \infty)"),
    ("{1, 2}", r"\{2,1\}"), ("{1, 1, 2}", "{2, 1}"), (r"{\frac12, 2}", r"\{0.5, 2\}"), ("1<x<2", r"x\in]1,2["), ("[1,2[", r"1 \le x < 2"),
    # equations
    (r"y = -\frac{1}{2}x + 3", "x + 2y = 6"), ("y = 2x+3", "2x - y + 3 = 0"), ("6/x", "xy=6"),
    # renamed arbitrary constants
    (r"\frac{\pi}{2} + k\pi", r"\frac{\pi}{2} + n\pi"),
    # sums and products: worked out over a rational range, at integer points over a symbolic one
    (r"\sum_{k=1}^{10} k", "55"), (r"\prod_{i=1}^{5} i", "120"), (r"\sum_{k=1}^{10} k + 1", "56"),
    (r"\sum_{k=1}^{n} k", r"\frac{n(n+1)}{2}"), (r"\sum_{j=0}^{n} 2^j", "2^{n+1}-1"),
    # prose references
    (r"\text{Alice}", "Alice wins the game"), (r"\text{infinitely many}", r"\infty"), ("Yes", r"\text{yes}"),
    (r"\text{non-negative}", r"\text{non negative}"), (r"a+b \text{ if } n \text{ is even}", r"a + b\text{ if }n\text{ is even}"),
]

DIFFERENT = [
    ("0.75", r"\frac{3}{5}"), (r"x = \pm 2", "2"), ("(-2, 3)", r"-2 < x \le 3"), (r"\sqrt{18}", r"2\sqrt{3}"), ("(2, -1)", "(-1, 2)"),
    (r"y = -\frac12 x + 3", "x + 2y = 8"), ("y=2x+3", "2x+y+3=0"), ("2^{10}", "1000"), (r"\frac{n(n+1)}{2}", r"\binom{n}{2}"),
    ("3 + 4i", "3 - 4i"), (r"\text{Monday}", "Tuesday"), ("40\\%", "0.04"), ("50", "5\\%"), ("1", r"\text{infinitely many}"),
    (r"\{1, 2\}", r"\{1, 2, 3\}"), ("1,2", "1,2,2"), ("x < 3", r"x \le 3"), ("x>3", r"x\ge3"), (r"(0, \infty)", r"[0, \infty)"),
    ("[1,3]", r"1\le x<3"), ("e^{x}", "x^{e}"), (r"\sin x", r"\cos x"), (r"\ln 2", r"\log_{10} 2"), ("a/b", "b/a"),
    ("2000", r"2\times 10^{4}"), (r"\text{(A)}", "B"), ("x^2", "2x"), ("n!", "n"), (r"-\infty", r"\infty"), ("5", r"5\sqrt{2}"),
    ("5", "5x"), ("12", "1.2"), ("100", "10"), ("0.5", "5"), ("12", "12.4"), ("3", "2.5"), ("0.3", r"\frac13"), ("3.1", r"\pi"),
    ("3.15", r"\pi"), ("0.1", "0.10000001"), ("a+2b", "b+2a"), ("|x|", "x"), (r"\lfloor n/2 \rfloor", "n/2"), ("x=2y", "y=2x"),
    ("a=1, b=2", "a=2, b=1"), (r"x=1 \text{ or } x=3", r"\{1,2\}"), ("x^2+2x+1", "(x-1)^2"), ("(1,2)", "(2,1)"),
    (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\begin{pmatrix}1&3\\2&4\end{pmatrix}"), (r"\frac{\pi}{2} + k\pi", r"\frac{\pi}{2}"),
    (r"\sum_{k=1}^{n} k", r"\frac{n(n-1)}{2}"), (r"\sum_{k=1}^{10} k + 1", "66"), (r"\prod_{i=1}^{5} i", "5i"),
    (r"\int_0^1 x^2\,dx", r"\int_0^2 x^2\,dx"),
    (r"\text{Bob}", "Alice wins the game"), (r"\text{odd}", "The number is not odd"), ("n", "m"), ("N", "n"),
    ("Yes", "No"),
    # a comma and a space separate items; "2e-1" is 2e - 1; "1,5" is a decimal only beside a point
    ("12, 345", "12345"), ("1, 000", "1000"), ("2e-1", "0.2"), ("1,5", "15"), ("1,234", "1.234"), ("0.333...", r"\frac{3}{10}"),
    ("x != 2", "x = 2"), ("(-oo, 2)", r"(-\infty, 2]"),
    ("c, d, a, b", "b < a < d < c"), ("a, b", "a < b"), ("b, a, d, c", r"b \le a < d < c"),
    ("a < x < b", "[a, b]"), ("a < x < b", "(b, a)"), ("x > c", r"[c, \infty)"), ("x > c", r"(-\infty, c)"),
    ("{1, 2}", r"\{1,3\}"), ("{1, 2}", "(1, 2)"), ("]1,2[", "[1,2]"), ("]1,2]", "(1,2)"),
    # labels give a bare list its order; named quantities are labels
    ("2, 1", "x=1, y=2"), ("x=2, y=1", "1, 2"), ("5, 4", "AB=4, CD=5"), ("21:11", "V_1:V_2=11:21"), ("2", "|AB|=1"),
    ("x=1, x=1, x=3", "x=1"),
    # text that does not parse still compares its operators
    (r"a+b \text{ if } n \text{ is even}", r"a-b \text{ if } n \text{ is even}"), (r"\text{the sum } a + b", r"\text{the sum } a - b"),
    (r"\text{grows like } n^2", r"\text{grows like } n/2"), (r"\text{maximum at } x = 1 + \sqrt{2}", r"\text{maximum at } x = 1 - \sqrt{2}"),
]


@pytest.mark.parametrize("answer, reference", SAME)
def test_equivalent_answers_are_correct(answer, reference):
    assert check(answer, reference) == "correct"


@pytest.mark.parametrize("answer, reference", DIFFERENT)
def test_different_answers_are_incorrect(answer, reference):
    assert check(answer, reference) == "incorrect"


@pytest.mark.parametrize("answer, reference", SAME[::7] + DIFFERENT[::7])
def test_check_is_symmetric_on_these(answer, reference):
    assert check(answer, reference) == check(reference, answer)


# Rounded decimal answers against exact references: accepted before, a wrong accept by
# the measure (the policy learns to round); now only with accept_rounded.
ROUNDED = [("0.333", r"\frac13"), ("3.14", r"\pi"), ("1.5708", r"\frac{\pi}{2}"), ("2.83", r"2\sqrt{2}"), ("1.3\\%", "1.27\\%"),
           ("3.14159...", r"\pi"), ("85.71", r"\frac{600}{7}")]


@pytest.mark.parametrize("answer, reference", ROUNDED)
def test_rounded_decimal_answers_are_accepted_only_when_asked(answer, reference):
    assert check(answer, reference) == "incorrect"
    assert judge(answer, reference) == Judgement("incorrect", False)
    assert check(answer, reference, accept_rounded=True) == "correct"
    assert judge(answer, reference, accept_rounded=True) == Judgement("correct", True)  # counted apart


@pytest.mark.parametrize("answer, reference", [("0.375", r"\frac38"), (r"\frac13", "0.333"), ("1.27", "1.3"), ("1/3", "1/3")])
def test_exact_accepts_are_not_rounded(answer, reference):
    for accept_rounded in (False, True):
        assert judge(answer, reference, accept_rounded) == Judgement("correct", False)


def test_rounding_never_accepts_a_wrong_value():
    for answer, reference in [("0.3", r"\frac13"), ("3.15", r"\pi"), ("0.334", r"\frac13"), ("1.4", "1.27")]:
        assert judge(answer, reference, accept_rounded=True) == Judgement("incorrect", False)


def test_verdict_kinds():
    assert check(None, "1") == "no_answer"
    assert check("", "1") == "no_answer"
    assert check(r"\boxed{}", "1") == "no_answer"
    assert check(r"The result: \boxed{\frac{6}{4}}", "1.5") == "correct"  # a whole response is extracted first
    assert check("1", "") == "error"
    assert set(VERDICTS) == {"correct", "incorrect", "no_answer", "error"}


@pytest.mark.parametrize("answer, reference", [
    (r"\lfloor m \rfloor", r"\lfloor n \rfloor"), (r"\lceil a \rceil", r"\lceil b \rceil"),
    (r"\sum_{k=1}^{m} k", r"\sum_{k=1}^{n} k"), (r"\lfloor x/2 \rfloor", r"\lfloor y/2 \rfloor"),
])
def test_symbols_one_letter_apart_are_different(answer, reference):
    """Evaluation points came from CRC32, linear in the name's bits: m and n sat 0.01
    apart, so at every integer point floor(m) = floor(n). Free symbols compare by name."""
    assert check(answer, reference) == "incorrect"
    assert check(answer, answer) == "correct"


@pytest.mark.parametrize("answer, declared", [
    (r"(3t, 5t) \text{ for some integer } t", {"t"}),
    (r"f(x) = 1 \text{ for all } x \in \mathbb{R}", {"x"}),        # not the R of the number set
    (r"x = \frac{\pi}{2} + k\pi, k \in \mathbb{Z}", {"k"}),        # a declaration item is no answer item
    (r"x + C \text{ where } C \in \mathbb{R}", {"C"}),
    (r"x \in \mathbb{R}", set()),                                   # alone, it is the answer
])
def test_declared_parameters(answer, declared):
    parsed = parse_answer(normalize(answer))
    assert parsed.declared == declared and parsed.items


def test_sympy_is_the_last_resort():
    """x^5000 overflows floating point at every test point, so only sympy can decide."""
    assert check(r"x^{5000} \cdot x", "x^{5001}") == "correct"
    assert check("x^{5000}", "x^{5001}") == "incorrect"
