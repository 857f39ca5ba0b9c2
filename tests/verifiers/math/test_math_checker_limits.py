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
        # a run with no label never calls check(): the failures it remembers stay bounded (outside
        # audit: they grew with the run, full texts), and unread() tells a failure from no answer
        assert checker.extract(texts[0]) is None and checker.unread(texts[0]) == "timeout"
        assert checker.unread(texts[1]) is None
        import jury.verifiers.math.checker as mc
        bound, mc.MAX_UNREAD = mc.MAX_UNREAD, 1
        try:
            other = "\\boxed{2} " * 100_000
            assert checker.extract(other) is None and checker.unread(other) == "timeout"
            assert checker.unread(texts[0]) is None  # the oldest went
        finally:
            mc.MAX_UNREAD = bound
    finally:
        checker.close()


def test_vote_keys_merge_equivalent_forms_by_the_checks_own_equivalence():
    """answer_key keeps rationals canonical but not other forms of one value; keys() merges each
    distinct key into the first earlier one that check() finds equal (exact, no rounding)."""
    checker = MathChecker(VerifierConfig(check_timeout_s=5.0, pool_workers=1))
    try:
        answers = ["2\\sqrt{2}", "\\sqrt{8}", "\\{1,2\\}", "\\{2,1\\}", "\\frac{\\pi}{2}", "\\pi/2", None, "7", "14/2",
                   "0.333", "\\frac{1}{3}", "x+1", "y+1", "(1,2)", "(2,1)"]
        keys = checker.keys(answers)
        k = dict(zip(range(len(answers)), keys))
        assert k[0] == k[1] and k[2] == k[3] and k[4] == k[5] and k[7] == k[8]  # one value, one key
        assert k[6] is None
        # not equal: rounding (the vote is exact), other variables, the order of a tuple
        assert k[9] != k[10] and k[11] != k[12] and k[13] != k[14]
        assert len(set(keys) - {None}) == 10
        stats = checker.stats()
        assert stats["verifier/key_merges"] == 3  # 14/2 and 7 had one key already (answer_key)
        assert stats["verifier/key_checks"] > 0 and stats["verifier/key_pairs_undecided"] == 0
        # the same answers again: every pair is in the cache, no check process is asked
        assert checker.keys(answers) == keys and checker.stats()["verifier/key_checks"] == stats["verifier/key_checks"]
        # one way round, a decimal reference is read as rounded: 3.14 is not \pi in a vote, whatever
        # order the samples came in (both ways round must say equal)
        assert checker.keys(["3.14", "\\pi", "\\pi"]) == ["157/50", "\\pi", "\\pi"]
        assert checker.keys(["\\pi", "3.14"]) == ["\\pi", "157/50"]
        assert checker.keys(["1.414", "\\sqrt{2}"]) == ["707/500", "\\sqrt{2}"]
        # a form answer_key cannot evaluate joins its value's rational key, whichever came first
        # (they split the vote before: the majority's other forms earned 0)
        assert checker.keys(["\\log_2 8", "3", "3"]) == ["3", "3", "3"]
        assert checker.keys(["e^0", "\\cos 0", "1"]) == ["1", "1", "1"]
        assert checker.keys(["90^\\circ", "90"]) == ["90", "90"]
        # two rationals are never checked against each other: 2\% is 1/50, not 2
        assert checker.keys(["2\\%", "2"]) == ["1/50", "2"]
        # a named value joins its bare form (check: x = 3 answers 3), two names stay two answers
        # without a check; units keep their base (5 cm and 5 kg are two answers, check agrees)
        before = checker.stats()["verifier/key_checks"]
        assert checker.keys(["x=3", "y=3"]) == ["x=3", "y=3"]
        assert checker.stats()["verifier/key_checks"] == before
        assert checker.keys(["x=3", "3", "X = 3"]) == ["3", "3", "3"]
        assert checker.keys(["5 \\text{ cm}", "5 \\text{ kg}"]) == ["1/20 m", "5000 g"]
        assert checker.keys(["(y,x)=(1,2)", "(x,y)=(2,1)", "(x,y)=(1,2)"]) == ["(x, y)=(2, 1)"] * 2 + ["(x, y)=(1, 2)"]
    finally:
        checker.close()


def test_vote_keys_stop_merging_past_the_checks_a_group_may_take():
    from jury.verifiers.math.checker import MERGE_CHECKS

    checker = MathChecker(VerifierConfig(check_timeout_s=5.0, pool_workers=1))
    try:
        answers = [f"{i}\\sqrt{{2}}" for i in range(2, 26)] + ["\\sqrt{8}"]  # 25 symbolic answers: 300 pairs
        keys = checker.keys(answers)
        stats = checker.stats()
        # one check parts a pair (the other way round is then not asked): 256 checks decide 256 pairs
        assert stats["verifier/key_checks"] == MERGE_CHECKS
        assert stats["verifier/key_pairs_undecided"] == 25 * 24 // 2 - MERGE_CHECKS
        assert len(set(keys)) == 25  # the pairs of √8 come last (from the 277th), past the limit: not merged
    finally:
        checker.close()


def test_an_answer_whose_checks_time_out_is_asked_about_no_more():
    checker = MathChecker(VerifierConfig(check_timeout_s=0.3, pool_workers=1))
    try:
        # each pair of these sends sympy's simplify past a minute (found by an outside probe)
        slow = [f"(x^{{3001}}+y+z+w+{c})^{{30}}" for c in (0, 1, 2)]
        keys = checker.keys([*slow, "2\\sqrt{2}", "\\sqrt{8}"])
        stats = checker.stats()
        assert keys[3] == keys[4] and len(set(keys[:3])) == 3
        # (0, 1) and (0, 2) timed out (one way round: the other is not asked then): 0 was asked about
        # no more; (1, 2) timed out: nor 1 and 2. Of the 10 pairs, (3, 4) was the only other one
        # asked, both ways round; the 9 others are left undecided
        assert stats["verifier/key_checks"] == 5 and stats["verifier/key_pairs_undecided"] == 9
    finally:
        checker.close()
