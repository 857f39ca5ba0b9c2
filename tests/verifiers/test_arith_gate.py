"""The label-free arithmetic proof gate: prove, refute, or stay inconclusive."""
from fractions import Fraction

import pytest
from jury.verifiers.arith_gate import MAX_PROBLEM_CHARS, arith_gate, formalize
from jury.verifiers.rewards import GroupView, jury


@pytest.mark.parametrize("problem, value", [
    ("Compute 37+45*(2-9).", Fraction(-278)),                      # 37 + 45*(-7) = 37 - 315
    ("What is 1/3 + 1/6?", Fraction(1, 2)),                         # 2/6 + 1/6
    ("Evaluate -(3-10)*-2.", Fraction(-14)),                         # -(-7) * -2
    ("Compute (-(-(3)))*2 (give the answer as an integer).", Fraction(6)),
    (r"Compute $12 \div (1+3) \times 5$. Put your final answer within \boxed{}.", Fraction(15)),
    ("Calculate 7 / 4 - 1 / 4.", Fraction(3, 2)),
])
def test_formalize_evaluates_exactly(problem, value):
    assert formalize(problem) == value


@pytest.mark.parametrize("answer, proved", [
    ("-278", True), ("x = -278", True), (r"\boxed{-278}", True), ("-278.0", True),
    ("-277", False), ("278", False), ("-278.5", False),
])
def test_gate_proves_or_refutes(answer, proved):
    assert arith_gate("Compute 37+45*(2-9).", answer) is proved


def test_gate_fractions():
    assert arith_gate("What is 1/3 + 1/6?", r"\frac{1}{2}") is True
    assert arith_gate("What is 1/3 + 1/6?", "0.5") is True
    assert arith_gate("What is 1/3 + 1/6?", "0.33") is False     # exact arithmetic: not one half


@pytest.mark.parametrize("problem", [
    "Compute 3+4, then double it.",          # words outside the instruction vocabulary
    "Let x = 3+4. Compute 2x.",              # variables and other numbers
    "Compute 3+4 and 5+6.",                  # two expressions
    "Compute 7.",                            # no operation: not a closed form to prove
    "Compute 2.5+1.",                        # decimals are outside the task's grammar
    "Compute 5/(3-3).",                      # undefined
    "Compute 2^10 + 1.",                     # powers are outside the grammar
    "Compute __import__('os').system('x')+1.",
    "Compute " + "(" * 50 + "1" + ")" * 50 + "+1.",   # deeper than the parser's limit
    "Compute " + "+".join(["1"] * 300) + ".",          # more tokens than the limit
    "Compute " + "9" * 40 + "+1.",                     # integer literal too long
    "Compute 1+1." + " " * MAX_PROBLEM_CHARS,
])
def test_inconclusive_problems(problem):
    assert formalize(problem) is None
    assert arith_gate(problem, "2") is None


@pytest.mark.parametrize("answer", [None, "", r"\sqrt{2}", "two", "1, 2", "10^{10^{10}}"])
def test_inconclusive_answers(answer):
    assert arith_gate("Compute 1+1.", answer) is None


def test_gate_drives_jury():
    # majority "-278" is proved: supporters 1, the rest 0; a refuted majority falls back to ResZero
    keys = ["-278", "-278", "-277", None]
    view = GroupView(answer_keys=keys, verdicts=None, problem="Compute 37+45*(2-9).")
    assert jury(view, gate=arith_gate).rewards == [1.0, 1.0, 0.0, 0.0]
    wrong = GroupView(answer_keys=["-277", "-277", "-278", None], verdicts=None,
                      problem="Compute 37+45*(2-9).")
    res = jury(wrong, gate=arith_gate)
    assert res.gate == "inconclusive" and res.rewards[0] < 0 < res.rewards[2]
