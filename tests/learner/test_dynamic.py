"""DAPO's dynamic sampling accounting (learner/dynamic.py) on constructed reward streams: which
groups are flat, the refill slots' indices, how many refills a step asks for, the cap."""
import numpy as np
import pytest

from jury.learner.dynamic import BatchFill, fill_metrics, flat
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup
from jury.protocol.plan import Overlong, Slots


def _group(index, rewards, lengths=None, views=None, error=None, version=0):
    lengths = lengths or [3] * len(rewards)
    views = views or [0] * len(rewards)
    task = PromptTask(task_id=f"t{index}", index=index, prompt="p", label="1", source="s")
    samples = [Sample(np.full(n, 5, np.int32), np.full(n, -1.0, np.float32), "", "stop", view=v)
               for n, v in zip(lengths, views)]
    group = RolloutGroup(task, np.array([1], np.int32), samples, version, version, "g", 0.0)
    scored = ScoredGroup(group, [], np.array(rewards, np.float32), "gt", None, 0.0, None, 0, 0.0)
    scored.error = error
    return scored


def test_flat_groups():
    assert flat(_group(0, [1, 1, 1, 1]))
    assert flat(_group(0, [0.3, 0.3]))
    assert not flat(_group(0, [1, 0, 1, 1]))
    assert flat(_group(0, [1, 0], error="verifier down"))  # trains nothing
    # CoReward: each view normalised apart, so flat views make a flat group though the views differ
    assert flat(_group(0, [1, 1, 0, 0], views=[0, 0, 1, 1]))
    assert not flat(_group(0, [1, 1, 0, 1], views=[0, 0, 1, 1]))
    # DAPO's rule is on the rewards: a group all right (or all wrong) is flat even when the overlong
    # penalty parts its samples (L_max 8, L_cache 4, lengths 4 and 6 -> 0, -1/2): it would teach length only
    assert flat(_group(0, [1, 1], lengths=[4, 6]), Overlong(8, 4, 1.0, False))
    assert flat(_group(0, [1, 1], lengths=[4, 6]))
    # rewards that differ but that the penalty makes equal (1 - 1 = 0 + 0): every advantage 0, flat too
    assert flat(_group(0, [1, 0], lengths=[8, 4]), Overlong(8, 4, 1.0, False))
    assert not flat(_group(0, [1, 0], lengths=[4, 6]), Overlong(8, 4, 1.0, False))


def test_slots_keep_todays_indices_without_refills():
    plain = Slots(batch_groups=4, refills=0)
    assert [plain.base_index(k) for k in range(9)] == list(range(9))
    s = Slots(batch_groups=4, refills=2)  # batch s owns [6s, 6s + 6): base 6s..6s+3, refills 6s+4, 6s+5
    assert [s.base_index(k) for k in range(9)] == [0, 1, 2, 3, 6, 7, 8, 9, 12]
    assert s.refill_index(1, 0) == 10 and s.refill_index(1, 1) == 11
    assert s.batch_of(11) == 1 and s.batch_of(12) == 2
    assert s.is_refill(10) and not s.is_refill(9)
    with pytest.raises(ValueError, match="refill 2"):
        s.refill_index(1, 2)


def test_a_reward_stream_with_refills_and_the_cap():
    """B = 4, R = 3, step 2 (indices 14..20: base 14-17, refills 18-20). Base groups arrive out
    of order, two flat: 2 refills. Of those one is flat: 1 more, the last slot. It is flat too:
    the cap is hit with 3 groups with signal."""
    slots = Slots(batch_groups=4, refills=3)
    fill = BatchFill(slots, step=2)
    for index, rewards in [(16, [1, 0]), (14, [1, 1]), (17, [0, 0]), (15, [0, 1])]:
        assert fill.want() == 0  # nothing is asked before the base groups are in
        fill.offer(_group(index, rewards, lengths=[2, 4]))
    assert fill.want() == 2 and not fill.done
    assert fill.take_refills(2) == [18, 19]
    assert fill.want() == 0  # both in flight cover the deficit
    fill.offer(_group(19, [1, 0], lengths=[5, 5]))
    assert fill.want() == 0 and not fill.done  # 18 is still out: it may have signal
    fill.offer(_group(18, [0, 0], lengths=[6, 6]))
    assert fill.want() == 1
    assert fill.take_refills(1) == [20]
    fill.offer(_group(20, [1, 1], lengths=[7, 1]))
    assert fill.done and fill.want() == 0
    assert [g.group.task.index for g in fill.kept_groups()] == [15, 16, 19]
    assert fill_metrics(fill) == {"dynamic/filtered_frac": 4 / 7, "dynamic/refills": 3.0,
                                  "dynamic/extra_samples": 6.0, "dynamic/extra_tokens": 10 + 12 + 8.0,
                                  "dynamic/short_groups": 1.0}


def test_enough_signal_asks_nothing_and_arrival_order_does_not_matter():
    slots = Slots(batch_groups=3, refills=2)
    streams = [[(0, [1, 0]), (1, [0, 0]), (2, [0, 1])], [(2, [0, 1]), (0, [1, 0]), (1, [0, 0])]]
    kept = []
    for stream in streams:
        fill = BatchFill(slots, step=0)
        for index, rewards in stream:
            fill.offer(_group(index, rewards))
        assert fill.want() == 1
        fill.offer(_group(fill.take_refills(1)[0], [1, 0]))
        assert fill.done
        kept.append([g.group.task.index for g in fill.kept_groups()])
    assert kept == [[0, 2, 3], [0, 2, 3]]
    full = BatchFill(slots, step=0)
    for index in range(3):
        full.offer(_group(index, [1, 0]))
    assert full.done and full.want() == 0 and fill_metrics(full)["dynamic/refills"] == 0.0


def test_groups_outside_the_batch_or_its_admitted_slots_are_refused():
    fill = BatchFill(Slots(batch_groups=2, refills=2), step=1)  # indices 4..7
    with pytest.raises(ValueError, match="batch 0"):
        fill.offer(_group(3, [1, 0]))
    with pytest.raises(ValueError, match="never admitted"):
        fill.offer(_group(6, [1, 0]))
    fill.offer(_group(4, [1, 0]))
    with pytest.raises(ValueError, match="twice"):
        fill.offer(_group(4, [1, 0]))


def test_the_learner_fills_a_batch_round_by_round_from_its_inbox():
    """advance() against a real inbox fed a constructed stream: B = 2, R = 2, step 1 (indices
    4..7: base 4, 5; refills 6, 7), learner version 1. A base group flat: one refill (6) is asked;
    while it is out the round reports it missing; once in and with signal, the fill is done."""
    from jury.learner.dynamic import advance
    from jury.learner.inbox import ScoredInbox

    slots = Slots(batch_groups=2, refills=2)
    inbox = ScoredInbox(receiver=None, batch_groups=2, window_batches=1, slots=slots)
    assert not inbox.offer(_group(8, [1, 0]), version=1)  # batch 2: past the window of one batch
    assert not inbox.offer(_group(3, [1, 0]), version=1)  # batch 0: trained
    for index, rewards in [(5, [1, 1]), (4, [0, 1])]:
        assert inbox.offer(_group(index, rewards), version=1)
    fill = BatchFill(slots, step=1)
    assert advance(fill, inbox, version=1, timeout_s=5) == ([], [6])
    assert advance(fill, inbox, version=1, timeout_s=0) == ([6], [])  # not here yet: missing
    assert inbox.offer(_group(6, [0, 1]), version=1)
    assert advance(fill, inbox, version=1, timeout_s=5) == ([], [])
    assert fill.done and [g.group.task.index for g in fill.kept_groups()] == [4, 6]
    assert inbox.buffer == {}  # every group of the batch taken out of the inbox


def test_groups_already_judged_count_as_here_and_their_copies_as_duplicates():
    """At a recovery the driver re-sends whatever the learner lacks (Pipeline._resend_lacking asks
    `hold`). Groups that a step under dynamic sampling already took out of the inbox and judged
    are not lacking: they are not re-sent, and a copy that comes anyway is a duplicate, not a
    group that would stay in the buffer for good."""
    from jury.learner.dynamic import BatchFill, advance
    from jury.learner.inbox import ScoredInbox
    from jury.protocol.plan import Slots

    slots = Slots(batch_groups=2, refills=2)  # batch 0: base 0, 1; refill slots 2, 3
    inbox = ScoredInbox(receiver=None, batch_groups=2, window_batches=1, slots=slots)
    fill = BatchFill(slots, 0)
    for index, rewards in ((0, [1, 1]), (1, [0, 1])):  # group 0 flat: one refill asked
        assert inbox.offer(_group(index, rewards), version=0)
    assert advance(fill, inbox, version=0, timeout_s=5) == ([], [2])
    assert inbox.buffer == {}
    assert inbox.wait_for([0, 1, 2], version=0, timeout_s=0) == ([], [2])  # only the refill lacks
    assert not inbox.offer(_group(0, [1, 1]), version=0)  # a re-sent copy of a judged group
    assert inbox.counts["duplicates"] == 1 and inbox.buffer == {}
    assert inbox.offer(_group(2, [1, 0]), version=0)
    assert advance(fill, inbox, version=0, timeout_s=5) == ([], [])
    assert sorted(fill.kept) == [1, 2] and sorted(fill.flat) == [0]
    inbox.wait_for([], version=1, timeout_s=0)  # batch 0 trained: what it took is forgotten
    assert inbox.taken == set()


def test_dynamic_sampling_settings_and_refusals():
    from jury.protocol.config import ConfigError, RunConfig, VerifierConfig
    from jury.protocol.plan import make_plan

    assert make_plan(RunConfig(batch_groups=4)).slots == Slots(4, 0)  # off: today's indices
    assert make_plan(RunConfig(batch_groups=4, dynamic_sampling=True, max_refills=3)).slots == Slots(4, 3)
    with pytest.raises(ConfigError, match="forced_staleness"):
        RunConfig(dynamic_sampling=True, forced_staleness={1: 1.0})
    with pytest.raises(ConfigError, match="self_certainty"):
        RunConfig(dynamic_sampling=True, verifier=VerifierConfig(reward="self_certainty"))
    with pytest.raises(ConfigError, match="max_refills"):
        RunConfig(dynamic_sampling=True, max_refills=0)


# ---- dynamic sampling under continuous admission: the first B groups scored that have signal

def test_a_scored_stream_keeps_signal_grants_refills_up_to_the_cap_and_stops_at_b_plus_r():
    """B = 3, R = 2, step 4, groups judged in the order they arrived: 12 has signal; 13 and 15 are
    flat and each frees its place (2 refills, the cap); 14 is flat too, past the cap: filtered with
    no refill; 16 has signal. Five judged = B + R: the step trains on its 2 groups with signal."""
    from jury.learner.dynamic import ScoredFill, scored_fill_metrics

    fill = ScoredFill(batch_groups=3, max_refills=2, step=4)
    for index, rewards, lengths in [(12, [1, 0], [2, 2]), (13, [1, 1], [3, 5]), (15, [0, 0], [4, 4]),
                                    (14, [0, 0], [9, 9])]:
        fill.offer(_group(index, rewards, lengths=lengths))
        assert not fill.done
    assert fill.take_granted() == [13, 15] and fill.take_granted() == []
    fill.offer(_group(16, [0, 1]))
    assert fill.done and [g.group.task.index for g in fill.kept] == [12, 16] and fill.filtered() == [13, 15, 14]
    with pytest.raises(ValueError, match="done"):
        fill.offer(_group(17, [0, 1]))
    # the extra generation: the two refilled groups' samples (4) and tokens (3 + 5 + 4 + 4); 14 is not
    assert scored_fill_metrics(fill) == {"dynamic/filtered_frac": 3 / 5, "dynamic/refills": 2.0,
                                         "dynamic/extra_samples": 4.0, "dynamic/extra_tokens": 16.0,
                                         "dynamic/short_groups": 1.0}
    enough = ScoredFill(batch_groups=2, max_refills=2, step=0)
    for index, rewards in [(1, [1, 1]), (0, [1, 0]), (2, [0, 1])]:
        enough.offer(_group(index, rewards))
    assert enough.done and enough.refills == 1 and enough.take_granted() == [1]  # judged 3 = B + refills


def test_the_learner_judges_a_continuous_batch_round_by_round_from_its_inbox():
    """advance_scored against a real inbox: B = 2, R = 2, max_staleness 1 (indices below (0 + 2)·2 = 4
    admitted at version 0). Group 1 arrives first and is flat: it is reported at once as a refill, and
    the bound takes one more index; with nothing else here the round names what is missing; group 4
    (the refill's task) and 0 come, with signal: the step is done with both."""
    from jury.learner.dynamic import ScoredFill, advance_scored
    from jury.learner.inbox import ScoredInbox
    from jury.protocol.plan import Admission

    inbox = ScoredInbox(receiver=None, batch_groups=2, window_batches=2, admission=Admission(True, 1, True, 2))
    fill = ScoredFill(batch_groups=2, max_refills=2, step=0)
    assert inbox.offer(_group(1, [1, 1]), version=0)
    assert not inbox.offer(_group(4, [0, 1]), version=0)  # not admitted yet: past the bound
    assert advance_scored(fill, inbox, version=0, timeout_s=5) == ([], [1], [])
    assert inbox.admission_bound(0) == 5 and 1 not in inbox.arrived
    assert advance_scored(fill, inbox, version=0, timeout_s=0) == ([0, 2, 3, 4], [], [])
    assert not inbox.offer(_group(1, [1, 1]), version=0)  # a copy of a filtered group: a duplicate
    for t, (index, rewards) in enumerate([(4, [0, 1]), (0, [1, 0])]):
        assert inbox.offer(_group(index, rewards), version=0)
        inbox.arrived[index] = 1000.0 + t
    assert advance_scored(fill, inbox, version=0, timeout_s=5) == ([], [], [])
    assert fill.done and [g.group.task.index for g in fill.kept] == [4, 0] and fill.filtered() == [1]


def test_continuous_admission_with_dynamic_sampling_keeps_the_budget_over_a_run():
    """The driver's loop in miniature, with the real feeder and inbox: B = 2, R = 2, max_staleness 1
    (window 2), 6 steps, sync every step. Every task admitted is scored at once, the latest first
    (later tasks overtake earlier ones); the constructed reward stream makes the groups in FLAT flat.
    At every admission at most (v + window)·B tasks that will be trained are out (admitted less
    filtered-and-refilled); every step judges exactly B + its refills, refills <= R; the step that
    meets three flat groups after one with signal hits the cap and trains on fewer; the run never starves, and
    at its end every task admitted was judged exactly once."""
    from jury.cluster.feeder import Feeder
    from jury.learner.dynamic import ScoredFill, advance_scored
    from jury.learner.inbox import ScoredInbox
    from jury.protocol.plan import Admission
    from jury.protocol.transport import Receiver

    B, R, window, steps = 2, 2, 2, 6
    FLAT = {2, 4, 5, 6, 7, 9}
    feeder = Feeder("synthetic", 0, batch_groups=B, window=window, host="127.0.0.1")
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    inbox = ScoredInbox(receiver=None, batch_groups=B, window_batches=window, admission=Admission(True, 1, True, R))
    version, scored, judged = 0, [], []
    per_step = []

    def score_everything_admitted():
        sent = [recv.get(timeout=5) for _ in range(len(feeder.pending) - len(set(feeder.pending) & set(scored)))]
        for task in sorted(sent, key=lambda t: -t.index):
            assert inbox.offer(_group(task.index, [1, 1] if task.index in FLAT else [0, 1], version=version), version)
            inbox.arrived[task.index] = float(len(scored))
            scored.append(task.index)

    def admit():
        feeder.admit(version, stop_at=steps * B)
        assert feeder.admitted - feeder.refilled <= (version + window) * B

    try:
        admit()
        for step in range(steps):
            fill = ScoredFill(B, R, step)
            while True:
                score_everything_admitted()
                missing, refill, dropped = advance_scored(fill, inbox, version, timeout_s=0)
                assert dropped == []
                if refill:
                    feeder.refill_places(refill)
                    admit()
                elif fill.done:
                    break
                else:
                    raise AssertionError(f"step {step} starved: every task admitted was judged, {missing} missing")
            kept = [g.group.task.index for g in fill.kept]
            assert len(kept) + len(fill.flat) == B + fill.refills and fill.refills <= R
            per_step.append((kept, fill.filtered()))
            judged += kept + fill.filtered()
            version += 1
            feeder.consumed_indices(kept + fill.filtered())
            admit()
        # step 0: 3 kept, 2 flat (a refill: task 4), 1 kept. Step 1 (0, 4, 6, 5 here in that order):
        # 0 kept, 4 and 6 flat and refilled, 5 flat past the cap: B + R judged, one group trained.
        # Then one flat group a step, each refilled, while the overtaken keep their turn
        assert per_step == [([3, 1], [2]), ([0], [4, 6, 5]), ([8, 10], [7]), ([11, 13], [9]), ([12, 14], []),
                            ([16, 15], [])]
        assert feeder.refilled == 1 + 2 + 1 + 1  # step 1 filtered 3 groups but refilled only R = 2
        # the run's total: 6·B trained but for the one the cap cost, plus every group filtered
        assert sorted(judged) == list(range(feeder.admitted)) == list(range(6 * B + 5)) and feeder.pending == {}
    finally:
        recv.close()
        feeder.close()


def test_the_plan_gives_refills_as_slots_under_batch_admission_and_as_places_under_continuous():
    from jury.protocol.config_load import load_config
    from jury.protocol.plan import make_plan

    batch = make_plan(load_config(None, ["batch_groups=4", "dynamic_sampling=true", "max_refills=3"]))
    assert batch.slots == Slots(4, 3) and batch.admission.refills == 0
    cont = make_plan(load_config(None, ["batch_groups=4", "dynamic_sampling=true", "max_refills=3",
                                        "admission=continuous"]))
    assert cont.slots == Slots(4, 0) and cont.admission.continuous and cont.admission.refills == 3
    assert make_plan(load_config(None, ["admission=continuous"])).admission.refills == 0
