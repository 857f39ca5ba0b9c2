"""Safety: model output is data, never code; pathological inputs end as "error" fast."""
import pathlib
import re
import subprocess
import sys
import time

import pytest
from jury.verifiers.math import verify as math_verify
from jury.verifiers.math.verify import answer_key, check, quick_check

VERIFIER_DIR = pathlib.Path(__file__).resolve().parents[3] / "verifiers"


def test_prime_grader_exploit_is_not_executed(capsys, tmp_path):
    """The PRIME grader eval'd `\\boxed{print('X') or 1\\pi}` and scored it 1."""
    canary = tmp_path / "ran"
    payloads = [
        r"\boxed{print('X') or 1\pi}",
        rf"\boxed{{__import__('os').system('touch {canary}') or 1}}",
        r"\boxed{(lambda: exec('print(1)'))()}",
    ]
    for text in payloads:
        assert check(text, r"\pi") != "correct"
        assert check(text, "1") != "correct"
        answer_key(text)
    assert capsys.readouterr().out == ""
    assert not canary.exists()


def test_no_eval_exec_or_sympify_in_the_verifier_sources():
    pattern = re.compile(r"(?<!re\.)\b(eval|exec|sympify|parse_expr|parse_latex|compile|__import__)\s*\(")
    stages = sorted(p.stem for p in (VERIFIER_DIR / "math").glob("*.py"))  # a new stage is covered too
    assert {"extract", "normalize", "parse", "compare", "solve"} <= set(stages), stages
    for name in [f"math/{stage}" for stage in stages] + ["../protocol/boxed", "arith_gate", "rewards", "tinyv"]:
        source = (VERIFIER_DIR / f"{name}.py").read_text()
        assert not pattern.search(source), f"{name}.py calls {pattern.search(source).group(1)}"


@pytest.mark.parametrize("answer", [
    "10^{10^{10}}", "9^{9^{9^{9}}}", "2^{2^{2^{2^{2^{2}}}}}", "1000000!", r"\binom{10^{9}}{5}", "(10^{100})!",
    "{" * 100_000 + "1" + "}" * 100_000, "(" * 100_000 + "1" + ")" * 100_000, r"\sqrt" * 5_000 + "2",
    "-" * 5_000 + "1", r"\frac{" * 3_000 + "1", "1" * 1_000_000, "x^" * 3_000 + "2", "9" * 300,
])
def test_pathological_inputs_end_as_error_quickly(answer):
    t0 = time.perf_counter()
    assert check(answer, "5") == "error"
    assert quick_check(answer, "5") in (None, "error")
    answer_key(answer)  # must not raise or hang either
    assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("answer", [r"\sum_{k=1}^{10^{9}} k", r"\prod_{k=1}^{10^{6}} k", r"\sum_{k=1}^{n} \sum_{j=1}^{k} j^{k}",
                                    r"\sum_{k=1}^{999} \sum_{j=1}^{999} j", r"\prod_{k=1}^{999} k^{k}",
                                    r"\int_0^1 " * 200 + "x dx" * 200])
def test_big_operators_are_bounded(answer):
    """Sums are worked out term by term only up to MAX_TERMS in all (nested ones share
    the budget: 999 x 999 terms took 24 s), and a product stops once it is too large."""
    t0 = time.perf_counter()
    assert check(answer, "5") in ("incorrect", "error")
    assert time.perf_counter() - t0 < 2.0


def test_huge_but_computable_values_are_fine():
    assert check("2^{1000}", "2^{1000}") == "correct"
    assert check("2^{1000}", "2^{999} \\cdot 2") == "correct"
    assert check("2^{1000}", "2^{1001}") == "incorrect"
    assert check("100!", "100 \\cdot 99!") == "correct"


def test_module_import_is_light():
    """Verifier processes start fast: no sympy (it is imported on first symbolic need),
    no engine or trainer."""
    code = ("import sys, jury.verifiers.math.verify, jury.verifiers.rewards, jury.verifiers.arith_gate, "
            "jury.verifiers.tinyv; print(','.join(m for m in ('sympy', 'torch', 'vllm', 'ray', 'deepspeed') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_exact_value_helper():
    assert math_verify.exact_value(r"x = -\frac{6}{4}") == -1.5
    assert math_verify.exact_value("0.25") == 0.25
    assert math_verify.exact_value(r"\sqrt{2}") is None
    assert math_verify.exact_value("1, 2") is None
    assert math_verify.exact_value("10^{10^{10}}") is None
