"""The codec: round trips of every message, arrays as raw buffers, refusal of bad frames."""
import msgpack
import numpy as np
import pytest
import torch

from jury.protocol.messages import (CorrectSample, DecodeError, LedgerRow, PromptTask, RolloutGroup, Sample,
                                   ScoredGroup, Shutdown, StepResult, Verdict, WeightUpdate, decode, encode)


def _task(**kw):
    return PromptTask(**{"task_id": "t1", "index": 3, "prompt": "Compute 1+2.\n", "label": "3",
                         "source": "synthetic", **kw})


def _group(samples):
    return RolloutGroup(task=_task(), prompt_ids=np.arange(4, dtype=np.int32), samples=samples,
                        version_start=2, version_end=2, actor_id="g0", generate_s=0.5)


def test_round_trip_every_message():
    s = Sample(np.array([5, 6, 7], np.int32), np.array([-0.1, -2.5, -0.0], np.float32), "\\boxed{3}", "stop")
    g = _group([s, s])
    sg = ScoredGroup(group=g, verdicts=[Verdict("correct", "math", 0.01, True), Verdict("timeout", "math", 5.0)],
                     rewards=np.array([1.0, 0.0], np.float32), scheme="jury", majority_answer="3", vote_share=0.5,
                     gate="proved", num_distinct=2, verify_s=0.2, pass_rate=0.5,
                     counts={"derl/judged_samples": 2.0})
    wu = WeightUpdate(version=7, names=["a", "b"], dtypes=["torch.float32"] * 2, shapes=[[2, 3], []],
                      buckets=[[0, 1]])
    row = LedgerRow(task_id="t1", index=3, step=4, kind="original", source="synthetic", admitted_version=2,
                    version_start=2, version_end=3, staleness=2, generator="g0", verifier="v0", length=3.0,
                    reward=0.5, pass_rate=float("nan"), majority_answer=None, error="refused", generate_s=0.5,
                    verify_wait_s=0.1, verify_s=0.2, learner_wait_s=0.3, verify_share=0.2, arrived=1.0,
                    trained=2.0, tokens_by_version={"2": 4, "3": 2})
    step = StepResult(step=4, metrics={"learner/loss": 0.25, "reward/mean": 0.5}, staleness_hist={"2": 1},
                      verdicts={"correct": 1, "timeout": 1}, ledger=[row],
                      correct=[CorrectSample(3, "original", "\\boxed{3}", "3")])
    for msg in (_task(label=None), g, sg, wu, Shutdown("done"), step, StepResult(step=5, missing=[10, 11])):
        back = decode(encode(msg))
        assert type(back) is type(msg)
        assert repr(back) == repr(msg)
    back = decode(encode(sg))
    np.testing.assert_array_equal(back.group.samples[1].logprobs, s.logprobs)
    assert back.group.samples[0].token_ids.dtype == np.int32


def test_arrays_travel_as_frames_not_in_the_header():
    ids = np.arange(8 * 1024, dtype=np.int32)
    frames = encode(_group([Sample(ids, np.zeros(len(ids), np.float32), "x", "length")]))
    # header, prompt ids, token ids, log-probs, token versions, rewrite prompt ids
    assert len(frames) == 1 + 2 + 1 + 1 + 1
    assert len(frames[-2]) == 0          # token versions: empty outside sync_mode inflight
    assert len(frames[-1]) == 0          # rewrite prompt ids: empty without a CoReward rewrite
    assert len(frames[0]) < 1024      # the header holds no array bytes
    assert b"pickle" not in frames[0]


def test_empty_and_non_contiguous_arrays():
    base = np.arange(20, dtype=np.int32).reshape(4, 5)
    s = Sample(base[:, 1], np.zeros(0, np.float32), "", "abort")  # a strided column view, and an empty array
    assert not s.token_ids.flags["C_CONTIGUOUS"]
    back = decode(encode(_group([s]))).samples[0]
    np.testing.assert_array_equal(back.token_ids, [1, 6, 11, 16])
    assert back.logprobs.shape == (0,) and back.logprobs.dtype == np.float32


def test_bf16_tensor_round_trip():
    t = torch.randn(3, 4).to(torch.bfloat16)[:, ::2]  # bf16 and non-contiguous
    s = Sample(t, torch.zeros(0, dtype=torch.bfloat16), "", "stop")
    back = decode(encode(_group([s]))).samples[0]
    assert back.token_ids.dtype == torch.bfloat16
    assert torch.equal(back.token_ids, t)
    assert back.logprobs.shape == (0,)


@pytest.mark.parametrize("frames, why", [
    ([], "empty"),
    ([b"\xc1garbage"], "not MessagePack"),
    ([msgpack.packb([1, 2])], "must be a map"),
    ([msgpack.packb({"t": "Evil", "v": 1, "f": {}})], "unknown message type"),
    ([msgpack.packb({"t": "Shutdown", "v": 99, "f": {}})], "wire version"),
    ([msgpack.packb({"t": "Shutdown", "v": 1, "f": {"reason": "x", "extra": 1}})], "unexpected fields"),
    ([msgpack.packb({"t": "Verdict", "v": 1, "f": {"kind": "correct"}})], "missing field"),
    ([msgpack.packb({"t": "Shutdown", "v": 1, "f": {"reason": 5}})], "expected str"),
])
def test_malformed_frames_are_refused(frames, why):
    with pytest.raises(DecodeError, match=why):
        decode(frames)


def test_array_with_wrong_size_or_missing_buffer_is_refused():
    frames = encode(_group([Sample(np.arange(4, dtype=np.int32), np.zeros(4, np.float32), "", "stop")]))
    with pytest.raises(DecodeError, match="needs 16 bytes"):
        decode([frames[0], frames[1], b"\x00" * 3, frames[3]])
    with pytest.raises(DecodeError, match="refers to frame"):
        decode(frames[:2])


def test_a_pickle_payload_is_never_unpickled():
    import pickle

    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('pwned')",))

    with pytest.raises(DecodeError):
        decode([pickle.dumps(Boom())])


def test_unknown_python_objects_cannot_be_encoded():
    with pytest.raises(TypeError):
        encode(_task(label={"a"}))
    with pytest.raises(TypeError):
        encode({"t": "PromptTask"})


@pytest.mark.parametrize("fields, why", [
    ({"kind": "maybe", "verifier": "math", "latency_s": 0.0}, r"Verdict\.kind: 'maybe' is not one of"),
    ({"kind": 1, "verifier": "math", "latency_s": 0.0}, r"Verdict\.kind"),
])
def test_a_kind_outside_its_literal_is_refused(fields, why):
    frame = msgpack.packb({"t": "Verdict", "v": 1, "f": fields})
    with pytest.raises(DecodeError, match=why):
        decode([frame])
    good = decode([msgpack.packb({"t": "Verdict", "v": 1, "f": {**fields, "kind": "timeout"}})])
    assert good.kind == "timeout"
