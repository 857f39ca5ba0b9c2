"""The weight plane: after a learner step and a sync, vLLM scores a completion as the learner does."""
import numpy as np
import pytest

from jury.protocol.config import load_config
from jury.protocol.messages import PromptTask, ScoredGroup, Verdict

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("zero_stage", [0, 3])
def test_sync_makes_vllm_match_the_learner(tiny_model_path, tmp_path, zero_stage):
    """ZeRO-3: the learner holds partitions; each bucket is gathered whole only while it is sent."""
    import ray

    from jury.cluster.driver import Pipeline

    cfg = load_config(None, ["steps=1", "batch_groups=1", "progress=false", f"run_dir={tmp_path}",
                             "learner.lr=0.01", f"learner.zero_stage={zero_stage}", "bucket_mb=1"])
    pipe = Pipeline(cfg, tiny_model_path)
    try:
        pipe.start()
        gen, learner = pipe.generators[0], pipe.learner
        task = PromptTask(task_id="x", index=0, prompt="Compute 12+7.\n", label="19", source="test")
        group = ray.get(gen.generate.remote(task))
        prompt = group.prompt_ids.tolist()
        completion = group.samples[0].token_ids.tolist()
        before_vllm = ray.get(gen.token_logprobs.remote(prompt, completion))
        before_learner = ray.get(learner.logprobs_of.remote(prompt, completion))
        np.testing.assert_allclose(before_vllm, before_learner, atol=1e-4)

        rewards = np.array([1.0] + [0.0] * (len(group.samples) - 1), np.float32)
        scored = ScoredGroup(group, [Verdict("correct", "test", 0.0)] * len(rewards), rewards, "test",
                             None, 0.0, None, 0, 0.0)
        ray.get(learner.train_on.remote([scored]))
        sync = pipe.sync_weights()
        assert pipe.version == 1 and ray.get(gen.stats.remote())["version"] == 1
        from transformers import AutoModelForCausalLM

        full = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
        assert sync["sync/bytes"] == sum(t.numel() * t.element_size() for t in full.values())
        assert sync["sync/gather_s"] > 0 and sync["sync/broadcast_s"] > 0

        after_vllm = ray.get(gen.token_logprobs.remote(prompt, completion))
        after_learner = ray.get(learner.logprobs_of.remote(prompt, completion))
        np.testing.assert_allclose(after_vllm, after_learner, atol=1e-4)
        assert np.abs(np.array(after_vllm) - np.array(before_vllm)).max() > 1e-3, "the sync changed nothing"

        # the Hugging Face copy a checkpoint writes is whole (ZeRO-3 gathers it) and is the trained model
        ray.get(learner.save.remote(str(tmp_path / "ckpt")))
        ray.get(learner.save.remote(str(tmp_path / "ckpt")))  # again: one engine tag kept, not two
        assert sorted(p.name for p in (tmp_path / "ckpt" / "engine").iterdir() if p.is_dir()) == ["v1"]
        saved = AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt").state_dict()
        assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in full.items()}
        assert any((saved[k] - full[k]).abs().max() > 0 for k in full)
    finally:
        pipe.close()
