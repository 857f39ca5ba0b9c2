"""The rule-based math verifier (stages: extract, normalize, items, parse, compare; verify.py).

Entry points:
    MathChecker(cfg)                 the label checker a verifier worker runs (checker.py)
    judge(answer, reference)         one check, symbolic (may be slow: the worker runs it in a pool)
    quick_check(answer, reference)   the cheap in-process check, or None when it cannot tell
    extract_answer(text)             the final answer of a completion; answer_key(answer) its vote key
"""
from jury.verifiers.math.checker import MathChecker
from jury.verifiers.math.verify import answer_key, check, extract_answer, judge, quick_check

__all__ = ["MathChecker", "answer_key", "check", "extract_answer", "judge", "quick_check"]
