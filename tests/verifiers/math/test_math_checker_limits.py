"""The math checker's limits at start and on adversarial text: a check timeout below one check's
cost is refused before the run, and extraction runs in the check pool under the same timeout."""
import pytest

from jury.protocol.config import ConfigError, VerifierConfig
from jury.verifiers.math.checker import MathChecker


def test_a_check_timeout_below_one_checks_cost_is_refused_at_start_naming_it():
    checker = MathChecker(VerifierConfig(check_timeout_s=1e-6, pool_workers=1))
    try:
        with pytest.raises(ConfigError, match=r"verifier\.check_timeout_s \(1e-06s\) is not above the cost of one check: "
                                              r"\d+\.\d\d ms measured in a check process"):
            checker.preflight()
    finally:
        checker.close()


def test_preflight_passes_a_sound_timeout_and_reports_the_cost():
    checker = MathChecker(VerifierConfig(check_timeout_s=5.0, pool_workers=1))
    try:
        cost = checker.preflight()
        assert 0 < cost < 5.0 and checker.check_cost_s == cost
    finally:
        checker.close()


def test_an_adversarial_answer_times_out_in_the_pool_as_a_timeout_verdict():
    """A megabyte of boxes takes seconds to read (1.3 s for half of it on a 2-core machine). It
    used to hold the verifier for that long; now its reading is cut at check_timeout_s, its
    verdict is "timeout" (not a silent "no_answer"), and the checker goes on."""
    checker = MathChecker(VerifierConfig(check_timeout_s=0.3, pool_workers=1))
    try:
        texts = ["\\boxed{1} " * 100_000, "So the answer is \\boxed{12}."]
        answers = [checker.extract(t) for t in texts]
        assert answers == [None, "12"]
        verdicts = checker.check(answers, "12", texts)
        assert [v.kind for v in verdicts] == ["timeout", "correct"]
        assert checker.stats()["verifier/extract_timeouts"] == 1
        # the next group starts clean: the same text with no answer of its own is no_answer again
        assert [v.kind for v in checker.check([None], "12", ["no box here"])] == ["no_answer"]
    finally:
        checker.close()
