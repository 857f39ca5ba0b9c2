"""The engine-occupancy timeline (actors/occupancy.py) on hand-made step sequences."""
import pytest

from jury.actors.occupancy import Occupancy, tail_shares


def test_counts_hold_until_the_next_step_and_fill_their_bins():
    occ = Occupancy(bin_s=1.0, max_hold_s=5.0)
    occ.record(8, 2, now=10.0)
    occ.record(4, 0, now=11.5)   # 8 running held over [10, 11.5)
    occ.record(0, 0, now=12.0)   # 4 running over [11.5, 12)
    tl = occ.timeline()
    assert tl["t"] == [10.0, 11.0, 12.0]  # the last step ended in bin 12, which nothing runs in yet
    assert tl["running"] == [8.0, pytest.approx(0.5 * 8 + 0.5 * 4), 0.0]
    assert tl["waiting"] == [2.0, 1.0, 0.0]
    assert tl["steps"] == [1, 1, 1]
    assert occ.running_area == pytest.approx(8 * 1.5 + 4 * 0.5)
    assert occ.max_running == 8


def test_a_gap_without_engine_steps_counts_as_idle():
    occ = Occupancy(bin_s=1.0, max_hold_s=0.5)
    occ.record(6, 0, now=0.0)
    occ.record(6, 0, now=10.0)  # vLLM reports nothing while it has no work: only 0.5 s was running
    assert occ.running_area == pytest.approx(3.0)
    assert occ.timeline()["running"] == [3.0, 0.0]
    assert occ.timeline()["t"] == [0.0, 10.0] and occ.timeline()["steps"] == [1, 1]
    assert occ.timeline(since=5.0)["t"] == [10.0]


def test_old_bins_are_dropped_past_the_limit():
    occ = Occupancy(bin_s=1.0, max_hold_s=1.0, max_bins=3)
    for t in range(6):
        occ.record(1, 0, now=float(t))
    assert occ.timeline()["t"] == [3.0, 4.0, 5.0]
    assert occ.running_area == pytest.approx(5.0)  # the integral keeps everything


def test_tail_share_is_the_time_with_few_sequences_left():
    # one batch is 64 sequences; the tail is 1..15 running (below a quarter)
    timeline = {"bin_s": 1.0, "t": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                "running": [64, 40, 10, 3, 1, 0, 0, 64, 64, 2]}
    # step 1 spans [0, 7): three tail bins (10, 3, 1); the empty ones (learner, sync) are not tail
    # step 2 spans [7, 10): one tail bin
    assert tail_shares(timeline, [0, 7, 10], full=64) == [pytest.approx(3 / 7), pytest.approx(1 / 3)]
    assert tail_shares(timeline, [0, 10], full=64, below=0.01) == [0.0]


def test_wall_clock_times_at_bin_edges_always_move_on():
    # times near 1.7e9 s where t - t % bin_s + bin_s rounds back onto t: the float-edge loop
    # this replaced never left such a bin
    occ = Occupancy()
    t = 1_795_000_000.0
    for i in range(2000):
        occ.record(8, 0, now=t + i * 0.1)
    assert occ.running_area == pytest.approx(8 * 199.9, rel=1e-6)
    assert len(occ.timeline()["t"]) == pytest.approx(1999, abs=1)


def test_a_long_timeline_is_given_in_wider_bins_with_the_same_area():
    occ = Occupancy(bin_s=1.0, max_hold_s=1.0)
    for t in range(10):
        occ.record(t, 1, now=float(t))  # t running over [t, t+1), for t = 0..8; the last step ends in bin 9
    fine = occ.timeline()
    assert fine["bin_s"] == 1.0 and fine["running"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 0.0]
    assert fine["steps"] == [1] * 10
    coarse = occ.timeline(max_points=4)  # 10 bins into at most 4: 3 wide
    assert coarse["bin_s"] == 3.0 and coarse["t"] == [0.0, 3.0, 6.0, 9.0]
    assert coarse["running"] == [1.0, 4.0, 7.0, 0.0] and coarse["waiting"] == [1.0, 1.0, 1.0, 0.0]
    assert coarse["steps"] == [3, 3, 3, 1]  # counts are summed, not averaged
    assert sum(coarse["running"]) * 3.0 == sum(fine["running"])  # sequence-seconds kept
    late = occ.timeline(since=3.0, max_points=3)  # 7 bins from t=3 into 3: 3 wide, edges on multiples of 3
    assert late["t"] == [3.0, 6.0, 9.0] and late["running"] == [4.0, 7.0, 0.0]


def test_each_bin_counts_the_steps_that_ended_in_it_and_their_tokens():
    occ = Occupancy(bin_s=1.0, max_hold_s=5.0)
    occ.record(8, 0, now=10.2, tokens=0, prompt_tokens=300)   # the step that prefilled 8 prompts
    occ.record(8, 0, now=10.6, tokens=8)
    occ.record(8, 0, now=11.1, tokens=8)
    occ.record(3, 0, now=11.9, tokens=8)
    occ.record(3, 0, now=14.5, tokens=3)  # after a gap: the bins between hold no step
    tl = occ.timeline()
    assert tl["t"] == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert tl["steps"] == [2, 2, 0, 0, 1]
    assert tl["tokens"] == [8, 16, 0, 0, 3]
    assert tl["prompt_tokens"] == [300, 0, 0, 0, 0]
    coarse = occ.timeline(max_points=2)  # 5 bins into 3 wide: the counts are summed
    assert coarse["t"] == [9.0, 12.0] and coarse["steps"] == [4, 1] and coarse["tokens"] == [24, 3]
    assert coarse["prompt_tokens"] == [300, 0]


def test_the_stat_logger_passes_each_steps_tokens():
    pytest.importorskip("vllm")
    from types import SimpleNamespace

    from jury.actors.occupancy import stat_logger

    occ = Occupancy(bin_s=1.0)
    logger = stat_logger(occ)(vllm_config=None)
    logger.record(SimpleNamespace(num_running_reqs=5, num_waiting_reqs=1),
                  SimpleNamespace(num_generation_tokens=5, num_prompt_tokens=40))
    # a report with no output (AsyncLLM's stats after an abort or a pause): occupancy, not a step
    logger.record(SimpleNamespace(num_running_reqs=0, num_waiting_reqs=2), None)
    assert occ._last[1:] == (0, 2)  # its counts are held from here on
    logger.record(SimpleNamespace(num_running_reqs=5, num_waiting_reqs=0), SimpleNamespace())  # fields renamed
    tl = occ.timeline()
    assert sum(tl["steps"]) == 2 and sum(tl["tokens"]) == 5 and sum(tl["prompt_tokens"]) == 40
