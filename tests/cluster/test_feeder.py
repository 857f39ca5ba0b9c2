"""Data and admission control: the staleness budget in tasks, refusal of over-long prompts."""
import json

import pytest

from conftest import load_jsonl
from jury.data.tasks import synthetic_problems
from jury.protocol.config_load import load_config
from jury.protocol.plan import make_plan
from jury.cluster.feeder import Feeder
from jury.protocol.transport import Receiver


def test_synthetic_task_is_seeded_and_boxed():
    a = [p for _, p in zip(range(50), synthetic_problems(3))]
    b = [p for _, p in zip(range(50), synthetic_problems(3))]
    assert a == b and a != [p for _, p in zip(range(50), synthetic_problems(4))]
    for p in a:
        expr = p.problem.removeprefix("Compute ").removesuffix(".")
        x, op, y = next((expr.partition(o) for o in "+-*" if o in expr[1:]))
        assert str({"+": int(x) + int(y), "-": int(x) - int(y), "*": int(x) * int(y)}[op]) == p.answer


def test_jsonl_loader_refuses_bad_lines(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"problem": "1+1?", "answer": 2}\n\n{"problem": "2+2?", "answer": "4"}\n')
    assert [(p.problem, p.answer) for p in load_jsonl(good)] == [("1+1?", "2"), ("2+2?", "4")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "1+1?", "answer": 2}\n{"question": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        load_jsonl(bad)
    (tmp_path / "nojson.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="not JSON"):
        load_jsonl(tmp_path / "nojson.jsonl")


def _drain(recv, n):
    return [recv.get(timeout=5) for _ in range(n)]


def test_admission_follows_the_staleness_budget():
    feeder = Feeder("synthetic", 0, batch_groups=4, window=3, host="127.0.0.1")
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    try:
        # at version v, tasks of batches s <= v + max_staleness may be out: (v + 3) * 4 in total
        assert feeder.admit(version=0, stop_at=1000) == 12
        assert feeder.admit(version=0, stop_at=1000) == 0
        assert feeder.admit(version=1, stop_at=1000) == 4
        assert feeder.admit(version=5, stop_at=30) == 14  # capped by the run's total
        tasks = _drain(recv, 30)
        assert [t.index for t in tasks] == list(range(30))
        assert [t.admitted_version for t in tasks[10:14]] == [0, 0, 1, 1]
        assert len({t.task_id for t in tasks}) == 30
    finally:
        recv.close()
        feeder.close()


def test_synchronous_budget_admits_one_batch_per_version():
    feeder = Feeder("synthetic", 0, batch_groups=3, window=1, host="127.0.0.1")
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    try:
        assert [feeder.admit(v, stop_at=100) for v in (0, 0, 1, 2)] == [3, 0, 3, 3]
        assert [t.index for t in _drain(recv, 9)] == list(range(9))
    finally:
        recv.close()
        feeder.close()


def test_prompts_over_the_limit_are_skipped_and_counted(tmp_path, tiny_model_path):
    from transformers import AutoTokenizer

    data = tmp_path / "d.jsonl"
    rows = [{"problem": "Compute 1+1.", "answer": "2"}, {"problem": "x" * 5000, "answer": "0"},
            {"problem": "Compute 2+2.", "answer": "4"}]
    data.write_text("\n".join(json.dumps(r) for r in rows))
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    feeder = Feeder(str(data), 0, batch_groups=2, window=2, host="127.0.0.1",
                    tokenizer=tok, max_prompt_tokens=64)
    recv = Receiver(connect=[feeder.endpoint], name="gen")
    try:
        # 4 tasks take more than one pass over the 3 problems, so the long one was met at least once
        assert feeder.admit(0, stop_at=4) == 4
        assert feeder.refused_too_long >= 1
        assert sorted(t.label for t in _drain(recv, 4)) == ["2", "2", "4", "4"]
    finally:
        recv.close()
        feeder.close()


def test_forced_staleness_releases_each_task_exactly_k_versions_before_its_batch():
    feeder = Feeder("synthetic", 0, batch_groups=4, window=4, host="127.0.0.1", forced={0: 0.5, 3: 0.5})
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    try:
        ks = [feeder.staleness_of(i) for i in range(40)]
        assert set(ks) == {0, 3}  # both drawn, and the draw is a function of (seed, index) only
        assert ks[:8] != [0] * 8 and ks == [feeder.staleness_of(i) for i in range(40)]
        sent = {}
        for v in range(7):
            feeder.admit(v, stop_at=40)
            for i in feeder.released_at(v):
                sent[i] = v
            got = [recv.get(timeout=5) for _ in range(len(feeder.released_at(v)))]
            assert sorted(t.index for t in got) == feeder.released_at(v)  # exactly these, nothing early
            assert recv.get(timeout=0.2) is None
            feeder.consumed(v * 4)  # the learner trained batch v - 1
        for i, v in sent.items():
            assert v == max(0, i // 4 - ks[i])  # released at the version k_i before its batch
    finally:
        recv.close()
        feeder.close()


def test_forced_staleness_window_admits_the_stalest_batch():
    # the plan's window reaches the largest forced k, whatever max_staleness says
    assert make_plan(load_config(None, ["forced_staleness=5", "max_staleness=0"])).window == 6
    feeder = Feeder("synthetic", 1, batch_groups=2, window=6, host="127.0.0.1", forced={5: 1.0})
    try:
        assert feeder.window == 6 and feeder.limit(0) == 12
        feeder.admit(0, stop_at=100)
        # batches 0..5 may only come from version 0; from batch 5 on, k = 5 holds exactly
        assert feeder.released_at(0) == list(range(12)) and feeder.release_version(14) == 2
        assert not feeder.held
        feeder.admit(1, stop_at=100)
        assert feeder.released_at(1) == [12, 13] and not feeder.held
    finally:
        feeder.close()


def test_dynamic_sampling_admits_refills_into_their_batch_slots():
    """B = 2, R = 2 refill slots (batch s = indices [4s, 4s + 4)), window 2: base tasks take the
    first two slots of each batch under the same budget; refills only when asked, into their batch."""
    from jury.protocol.plan import Slots

    feeder = Feeder("synthetic", 0, batch_groups=2, window=2, host="127.0.0.1", slots=Slots(2, 2))
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    try:
        assert feeder.admit(version=0, stop_at=100) == 4  # batches 0 and 1: indices 0, 1, 4, 5
        assert feeder.admit_refills([2, 3], version=0) == 2  # step 0 asked for both its refills
        assert feeder.admit(version=1, stop_at=100) == 2  # batch 2: 8, 9
        tasks = _drain(recv, 8)
        assert [t.index for t in tasks] == [0, 1, 4, 5, 2, 3, 8, 9]
        assert len({t.task_id for t in tasks}) == 8 and len({t.problem for t in tasks}) == 8
        with pytest.raises(ValueError, match="refill 4"):
            feeder.admit_refills([4], version=1)  # a base slot
        feeder.consumed(4)  # batch 0 trained
        assert sorted(feeder.pending) == [4, 5, 8, 9]
        # a resumed run at version 2 starts numbering at batch 2's first base slot
        feeder.fast_forward(next_index=8, stream_position=feeder.position_of(8))
        assert feeder.admitted == 4 and feeder.slots.base_index(feeder.admitted) == 8
    finally:
        recv.close()
        feeder.close()


def test_continuous_admission_admits_one_more_task_for_each_dropped_group_and_restores_pending():
    """A group dropped as too stale frees its place in the budget and in the run's total; the
    ledger forgets tasks consumed out of order; a resumed feeder sends the pending tasks again."""
    feeder = Feeder("synthetic", 0, batch_groups=2, window=2, host="127.0.0.1")
    recv = Receiver(connect=[feeder.endpoint], name="gen", hwm=100, maxsize=100)
    try:
        assert feeder.admit(version=0, stop_at=6) == 4            # (0 + 2) * 2
        feeder.consumed_indices([3, 1])                            # the first two scored
        feeder.drop([0])                                           # too stale when its turn came
        assert feeder.admit(version=0, stop_at=6) == 1 and sorted(feeder.pending) == [2, 4]
        assert feeder.admit(version=5, stop_at=6) == 2             # the total is 6 trained: 7 admitted
        tasks = _drain(recv, 7)
        assert [t.index for t in tasks] == list(range(7))
        resumed = Feeder("synthetic", 0, batch_groups=2, window=2, host="127.0.0.1")
        recv2 = Receiver(connect=[resumed.endpoint], name="gen2", hwm=100, maxsize=100)
        try:
            pending = [t for t in tasks if t.index in (2, 4)]
            resumed.restore(next_index=7, stream_position=feeder.drawn, pending=pending, dropped=1)
            assert resumed.admit(version=3, stop_at=7) == 1         # a total of 7 trained + 1 dropped
            again = _drain(recv2, 3)
            assert [t.index for t in again] == [2, 4, 7]
            assert again[0] == pending[0] and again[2].problem != tasks[6].problem  # the stream went on
        finally:
            recv2.close()
            resumed.close()
    finally:
        recv.close()
        feeder.close()
