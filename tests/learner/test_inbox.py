"""The learner's inbox: groups kept by admission index; duplicates, groups past the admission
window and frames of other kinds refused and counted, also when a stranger sends them."""
import subprocess
import sys
import textwrap
import time

import numpy as np

from jury.learner.inbox import ScoredInbox
from jury.protocol.plan import Admission
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup, Verdict
from jury.protocol.transport import Receiver


def scored(index: int, version: int = 0) -> ScoredGroup:
    """The group of task `index`, generated from policy `version` on."""
    task = PromptTask(f"t{index}", index, "Compute 1+1.\n", "2", "test")
    samples = [Sample(np.arange(3, dtype=np.int32), np.zeros(3, np.float32), "\\boxed{2}", "stop")]
    return ScoredGroup(RolloutGroup(task, np.arange(2, dtype=np.int32), samples, version, version, "g0", 0.1),
                       [Verdict("correct", "math", 0.0)], np.ones(1, np.float32), "test", "2", 1.0, None, 1, 0.0)


def test_duplicates_and_groups_past_the_window_are_refused():
    inbox = ScoredInbox(receiver=None, batch_groups=2, window_batches=2)  # version 1: indices [2, 6) admitted
    assert inbox.offer(scored(3), version=1) and inbox.offer(scored(5), version=1)
    assert not inbox.offer(scored(3), version=1)   # here already
    assert not inbox.offer(scored(1), version=1)   # its batch was trained
    assert not inbox.offer(scored(6), version=1)   # never admitted: past the window
    assert not inbox.offer(scored(10 ** 9), version=1)
    assert inbox.counts == {"duplicates": 2, "out_of_window": 2} and sorted(inbox.buffer) == [3, 5]


HOSTILE = textwrap.dedent("""
    import sys, zmq, numpy as np
    from jury.protocol.messages import (PromptTask, RolloutGroup, Sample, ScoredGroup, Shutdown, Verdict,
                                        WeightUpdate, encode)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, -1)  # every frame out before close
    sock.connect(sys.argv[1])
    big = np.zeros(100_000, np.int32)  # 0.8 MB per group with its log-probs: 100 kept would be 80 MB
    for i in range(100):
        task = PromptTask(f"x{i}", 10_000 + i, "p", "1", "hostile")
        group = RolloutGroup(task, big, [Sample(big, np.zeros(len(big), np.float32), "", "stop")], 0, 0, "x", 0.0)
        sock.send_multipart(encode(ScoredGroup(group, [Verdict("correct", "x", 0.0)], np.ones(1, np.float32),
                                               "x", None, 1.0, None, 1, 0.0)))
    sock.send_multipart(encode(WeightUpdate(9, ["w"], ["torch.float32"], [[1]], [[0]])))
    sock.send_multipart(encode(PromptTask("y", 0, "p", "1", "hostile")))
    sock.send_multipart(encode(Shutdown("from outside")))
    sock.send_multipart([b"\\x92\\x01"])
    sock.close()
    ctx.term()  # returns once every frame is out (linger -1)
""")


def test_a_stranger_cannot_fill_the_learners_memory_or_stop_it():
    receiver = Receiver(name="learner-scored", accept=(ScoredGroup,), hwm=1024, maxsize=1024)
    inbox = ScoredInbox(receiver, batch_groups=2, window_batches=2)
    try:
        subprocess.run([sys.executable, "-c", HOSTILE, receiver.endpoint], check=True, timeout=300)
        deadline = time.monotonic() + 120
        while (receiver.stats.received + receiver.stats.rejected < 104 or receiver.depth()) \
                and time.monotonic() < deadline:
            inbox.poll(version=0, timeout=1.0)
        assert inbox.counts["out_of_window"] == 100 and inbox.buffer == {}, (inbox.counts, receiver.stats)
        assert receiver.stats.rejected == 4  # a WeightUpdate, a PromptTask, a Shutdown, not a message
        # the learner goes on: its own batch still arrives whole
        from conftest import push_frames

        from jury.protocol.messages import encode

        push_frames(receiver.endpoint, [encode(scored(1)), encode(scored(0))])
        groups, missing = inbox.wait_batch(0, version=0, timeout_s=30)
        assert missing == [] and [g.group.task.index for g in groups] == [0, 1]
    finally:
        receiver.close()


# ---- continuous admission: a batch is the first B groups scored, whatever their indices

def continuous(batch_groups=2, window_batches=2, drop_stale=True) -> ScoredInbox:
    return ScoredInbox(receiver=None, batch_groups=batch_groups, window_batches=window_batches,
                       admission=Admission(True, window_batches - 1, drop_stale))


def arrive(inbox, version, *groups):
    """Offer the groups, in this order of arrival (one second apart on the inbox's clock)."""
    for t, g in enumerate(groups):
        assert inbox.offer(g, version)
        inbox.arrived[g.group.task.index] = 1000.0 + t


def test_continuous_batch_is_the_first_groups_to_arrive():
    inbox = continuous()
    arrive(inbox, 0, scored(3), scored(0), scored(1))  # 3 overtook 0 and 1
    groups, dropped, missing = inbox.first_scored(0, version=0, timeout_s=0)
    assert [g.group.task.index for g in groups] == [3, 0] and dropped == [] and missing == []
    assert not inbox.offer(scored(3), version=1) and inbox.counts["duplicates"] == 1  # trained: a copy is refused
    assert inbox.offer(scored(2), version=1)  # 2 was never trained, though 3 was
    assert (inbox.floor, inbox.done) == (1, {3})


def test_continuous_drops_a_group_past_max_staleness_and_the_budget_admits_another():
    inbox = continuous()  # max_staleness 1, window 2 batches of 2: at version 2, indices below 8
    arrive(inbox, 2, scored(0, version=0), scored(4, version=1), scored(5, version=2))
    assert inbox.admission_bound(2) == 8
    groups, dropped, missing = inbox.first_scored(2, version=2, timeout_s=0)
    # group 0 started at version 0: trained at step 2 it would be 2 versions stale
    assert dropped == [0] and [g.group.task.index for g in groups] == [4, 5] and missing == []
    assert inbox.counts["stale_dropped"] == 1 and inbox.admission_bound(2) == 9  # one task in its place
    assert not inbox.offer(scored(0, version=0), version=2)  # dropped: a late copy is a duplicate


def test_continuous_with_over_budget_train_trains_the_stale_group():
    inbox = continuous(drop_stale=False)
    arrive(inbox, 2, scored(0, version=0), scored(4, version=1))
    groups, dropped, _ = inbox.first_scored(2, version=2, timeout_s=0)
    assert [g.group.task.index for g in groups] == [0, 4] and dropped == []


def test_continuous_wait_names_what_is_not_here_and_reports_drops_made_meanwhile():
    inbox = continuous()
    arrive(inbox, 2, scored(1, version=0), scored(5, version=2))
    groups, dropped, missing = inbox.first_scored(2, version=2, timeout_s=0)
    assert groups == [] and dropped == [1]
    # 1 is dropped, 5 is here; the bound is 8 + 1: every other index not trained may still come, and the
    # batch lacks one group: the oldest of them is what the step waits on (a re-send of all seven
    # repeated the generation of six groups the step never needed)
    assert missing == [0] and inbox.not_here(2) == [0, 2, 3, 4, 6, 7, 8]


def test_continuous_restore_after_a_resume():
    inbox = continuous()
    inbox.restore(next_index=7, pending=[3, 5], dropped_total=1)
    assert [i for i in range(9) if inbox.finished(i, version=3)] == [0, 1, 2, 4, 6]
    assert inbox.admission_bound(3) == (3 + 2) * 2 + 1
