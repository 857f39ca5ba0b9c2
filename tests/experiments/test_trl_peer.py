"""The TRL peer benchmark on the tiny model: real GRPOTrainer, real colocated vLLM engine.

TRL is an optional extra; without it this file skips with the reason.
"""
import os
import pathlib
import sys

import pytest

pytest.importorskip("trl", reason="TRL is not installed (optional extra for the peer benchmark)")
pytest.importorskip("vllm", reason="vLLM is not installed")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
from conftest import descendants, live_pids
from trl_peer import run_trl_peer


@pytest.mark.slow
def test_trl_peer_trains_and_counts_completions(tiny_model_path):
    import torch
    import torch.distributed as dist

    steps, prompts, group = 3, 2, 4
    env, children = dict(os.environ), set(descendants(os.getpid()))
    set_num_threads, threads = torch.set_num_threads, torch.get_num_threads()
    r = run_trl_peer(tiny_model_path, steps=steps, prompts_per_step=prompts, group_size=group,
                     max_new_tokens=8, seed=0)

    assert r["completions_per_step"] == [prompts * group] * steps, r["completions_per_step"]
    assert r["completions"] == steps * prompts * group == 24, r["completions"]
    assert r["timed_steps"] == steps - 1
    assert r["completions_per_s"] > 0 and r["tokens_per_s"] > 0, (r["completions_per_s"], r["tokens_per_s"])
    # three AdamW steps at lr 1e-4 move every weight by about 1e-4 each
    assert 1e-5 < r["max_abs_weight_change"] < 1e-2, r["max_abs_weight_change"]
    # the colocated engine samples from the trained weights: a float32 copy is exact
    assert r["use_vllm"] and r["vllm_dtype"] == "float32"
    assert r["engine_weight_gap"] == 0.0, r["engine_weight_gap"]
    # the process is left as found: no engine process, no process group, no RANK/MASTER_PORT,
    # and torch.set_num_threads works again (vLLM's CPU worker swaps in a no-op)
    assert not live_pids(set(descendants(os.getpid())) - children)
    assert not (dist.is_available() and dist.is_initialized())
    assert dict(os.environ) == env, set(os.environ.items()) ^ set(env.items())
    assert torch.set_num_threads is set_num_threads and torch.get_num_threads() == threads
