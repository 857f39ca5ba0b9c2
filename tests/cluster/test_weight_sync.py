"""The weight plane: after a learner step and a sync, vLLM scores a completion as the learner does."""
import pytest

from jury.protocol.config_load import load_config

pytestmark = pytest.mark.slow


# ZeRO-3 (2 ranks, every bucket gathered) is checked in test_learner_ranks.py
@pytest.mark.parametrize("zero_stage", [0])
def test_sync_makes_vllm_match_the_learner(tiny_model_path, tmp_path, zero_stage):
    """ZeRO-3: the learner holds partitions; each bucket is gathered whole only while it is sent."""
    import ray

    from jury.cluster.driver import Pipeline
    from jury.experiments.check_sync import check_sync

    cfg = load_config(None, ["steps=1", "batch_groups=1", "progress=false", f"run_dir={tmp_path}",
                             "learner.lr=0.01", f"learner.zero_stage={zero_stage}", "bucket_mb=1"])
    pipe = Pipeline(cfg, tiny_model_path)
    try:
        pipe.start()
        learner = pipe.learner
        sync = check_sync(pipe)  # what `jury check-sync` runs: one group, one step, one sync
        assert sync["gap_before"] <= 1e-4 and sync["gap_after"] <= 1e-4, sync
        assert sync["change"] > 1e-3, "the sync changed nothing"
        assert pipe.version == 1 and ray.get(pipe.generators[0].stats.remote())["version"] == 1
        from transformers import AutoModelForCausalLM

        full = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
        assert sync["sync/bytes"] == sum(t.numel() * t.element_size() for t in full.values())
        assert sync["sync/gather_s"] > 0 and sync["sync/broadcast_s"] > 0

        # the Hugging Face copy a checkpoint writes is whole (ZeRO-3 gathers it) and is the trained model
        learner.save(str(tmp_path / "ckpt"), {})
        learner.save(str(tmp_path / "ckpt"), {})  # again: one engine tag kept, not two
        assert sorted(p.name for p in (tmp_path / "ckpt" / "engine").iterdir() if p.is_dir()) == ["v1"]
        saved = AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt").state_dict()
        assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in full.items()}
        assert any((saved[k] - full[k]).abs().max() > 0 for k in full)
    finally:
        pipe.close()
