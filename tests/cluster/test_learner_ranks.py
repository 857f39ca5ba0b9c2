"""N learner ranks make the same update as one: the same recorded batches (completions of very
different lengths) replayed on 1 and on 2 ranks, ZeRO 0, 2 and 3, give the same losses, gradient
norms and weights. Real processes: Ray actors, DeepSpeed over gloo."""
import json

import numpy as np
import pytest
import yaml

from jury.protocol.config import load_config, to_dict
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup, Verdict
from jury.protocol.record import write_record

pytestmark = pytest.mark.slow
STEPS, GROUPS, G = 3, 4, 4


def _batch(step: int, rng: np.random.Generator) -> list[ScoredGroup]:
    groups = []
    for g in range(GROUPS):
        index = step * GROUPS + g
        task = PromptTask(f"t{index}", index, f"Compute {index}+1.\n", str(index + 1), "test")
        samples = []
        for _ in range(G):
            n = int(rng.choice([1, 3, 40, 120]))  # short and long completions in one batch
            ids = rng.integers(5, 300, size=n).astype(np.int32)
            samples.append(Sample(ids, rng.uniform(-4, -0.1, size=n).astype(np.float32), "", "length"))
        rewards = rng.integers(0, 2, size=G).astype(np.float32)
        group = RolloutGroup(task, rng.integers(5, 300, size=6).astype(np.int32), samples, step, step, "g0", 0.1)
        groups.append(ScoredGroup(group, [Verdict("correct", "test", 0.0)] * G, rewards, "test", None, 0.0, None,
                                  1, 0.0))
    return groups


@pytest.fixture(scope="module")
def recorded(tiny_model_path, tmp_path_factory):
    """A run folder with a config and STEPS recorded batches, as `record_groups=true` writes them."""
    run = tmp_path_factory.mktemp("recorded")
    cfg = load_config(None, ["batch_groups=4", "learner.lr=1e-3", "learner.micro_batch=3", "progress=false",
                             f"generator.group_size={G}", "generator.max_new_tokens=120", "max_model_len=256",
                             "max_prompt_tokens=64"])
    (run / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg)))
    (run / "record").mkdir()
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        write_record(str(run / "record" / f"step-{step:06d}.msgpack"), _batch(step, rng))
    return run


def _replay(run, out, *overrides):
    from jury.experiments.replay import replay

    summary = replay(str(run), str(out), progress=False, overrides=list(overrides))
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    return summary, rows


def _weights(folder):
    from transformers import AutoModelForCausalLM

    return {k: v.float() for k, v in AutoModelForCausalLM.from_pretrained(folder).state_dict().items()}


@pytest.mark.parametrize("zero", [0, 2, 3])
def test_two_ranks_make_the_update_of_one(recorded, tmp_path, zero):
    one, rows1 = _replay(recorded, tmp_path / "one", f"learner.zero_stage={zero}", "learner.num_ranks=1")
    two, rows2 = _replay(recorded, tmp_path / "two", f"learner.zero_stage={zero}", "learner.num_ranks=2")
    assert two["ranks"] == 2 and [r["learner/ranks"] for r in rows2] == [2.0] * STEPS
    for a, b in zip(rows1, rows2):
        assert a["learner/tokens"] == b["learner/tokens"]
        np.testing.assert_allclose(b["learner/loss"], a["learner/loss"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(b["learner/grad_norm"], a["learner/grad_norm"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(b["learner/entropy"], a["learner/entropy"], rtol=1e-4)
    w1, w2 = _weights(one["final"]), _weights(two["final"])
    start = _weights(_tiny())
    assert max(float((w1[k] - start[k]).abs().max()) for k in w1) > 1e-4, "the replay trained nothing"
    for k in w1:
        np.testing.assert_allclose(w2[k].numpy(), w1[k].numpy(), rtol=1e-4, atol=2e-6, err_msg=k)


def _tiny():
    from jury.cluster.tiny_model import make_tiny_model

    return str(make_tiny_model(progress=False))
