"""Weight-sync modes with a generation in flight, on a real vLLM engine (the CPU build): interrupt
regenerates; inflight swaps under it, each token labelled with the weights that sampled it, and no
KV computed by the old weights is used after the swap. The same engine then refuses a sync whose
names do not match its parameters."""

import os

import numpy as np
import pytest
import torch

from jury.protocol.config import GeneratorConfig
from jury.protocol.messages import PromptTask

pytestmark = pytest.mark.slow

# tokens per sample: the sync lands half a second in, and the tiny model takes about 6 s for 400
# tokens on these cores (15 s for 1000), so the group is far from done
LONG = 400
# a prompt of some 300 tokens (one character each): whole KV blocks, which the prefix cache keeps
CACHED = "Compute " + "+".join(str(i) for i in range(1, 90)) + ".\n"


def _start(tiny_model_path, mode, max_tasks_in_flight=64):
    import ray

    from jury.actors.generator import Generator
    from jury.learner.weight_sender import WeightSender

    cfg = GeneratorConfig(group_size=2, max_new_tokens=LONG, min_new_tokens=LONG, sync_mode=mode,
                          max_tasks_in_flight=max_tasks_in_flight)
    gen = ray.remote(Generator).options(runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}}) \
        .remote(cfg, tiny_model_path, "g0", 0, 4096)
    ray.get(gen.pid.remote())
    sender = WeightSender("127.0.0.1", 2)
    join = gen.init_weight_group.remote("127.0.0.1", sender.port, 2, 1, "gloo")
    sender.connect()
    assert ray.get(join) == [{"rank": 1, "dtype": "torch.float32"}]
    return gen, sender


def _sync(gen, sender, weights, version, bucket_bytes=64 << 20):
    import ray

    from jury.learner.weight_sender import WeightSender

    update = WeightSender.layout(list(weights.items()), version=version, bucket_bytes=bucket_bytes)
    ack = gen.update_weights.remote(update)
    try:
        sender.broadcast(update, weights)
    finally:
        out = ray.get(ack)
    return update, out


def test_interrupt_regenerates_a_group_on_the_new_weights(tiny_model_path):
    import time

    import ray
    from transformers import AutoModelForCausalLM

    from jury.protocol.transport import Receiver, Sender

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # one task at a time: the second waits for the first's slot, which the interrupt frees
        gen, sender = _start(tiny_model_path, "interrupt", max_tasks_in_flight=1)
        weights = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
        sink = Receiver(name="sink")
        feed = Sender(bind_host="127.0.0.1", name="feed")
        ray.get(gen.start.remote(feed.endpoint, [sink.endpoint]))  # through the task loop, which regenerates
        feed.send(PromptTask("long", 1, "Compute 2+2.\n", None, "t"))
        feed.send(PromptTask("next", 2, "Compute 3+3.\n", None, "t", max_new_tokens=8))
        time.sleep(0.5)  # the LONG-token group is under way, the next task waiting for its slot
        _sync(gen, sender, weights, version=1)
        group = sink.get(timeout=120)
        assert group.task.task_id == "long"  # the interrupted group goes first on the new weights
        assert all(len(s.token_ids) == LONG for s in group.samples)
        assert (group.version_start, group.version_end) == (1, 1)  # started over on the new weights
        # the waiting task did not take the freed slot during the sync: it too began on the new
        # weights (before the fix it started on the old ones while they were being replaced)
        waited = sink.get(timeout=120)
        assert waited.task.task_id == "next" and (waited.version_start, waited.version_end) == (1, 1)
        assert all(len(s.token_ids) == 8 for s in waited.samples)
        assert ray.get(gen.stats.remote())["interrupted"] == 1
        ray.get(gen.stop.remote())
    finally:
        ray.shutdown()


def _perturbed(weights, seed=0):
    """Other weights of the same model: every tensor moved by a tenth of its own spread, enough to
    change each token's log-prob by far more than the engine's agreement with Hugging Face (1e-4)."""
    g = torch.Generator().manual_seed(seed)
    return {k: v + 0.1 * v.std() * torch.randn(v.shape, generator=g) if v.numel() > 1 else v.clone()
            for k, v in weights.items()}


def _hf_logprobs(model, prompt_ids, completion_ids) -> np.ndarray:
    """Each completion token's log-prob as the engine reports it (processed log-probs): the generator
    sets min_tokens to the whole length here, so vLLM masks EOS before it normalises."""
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.no_grad():
        logits = model(ids).logits[0, :-1].double()
        logits[:, model.generation_config.eos_token_id] = float("-inf")
        logp = torch.log_softmax(logits, -1)
    rows = logp[len(prompt_ids) - 1:]
    return rows[torch.arange(len(completion_ids)), torch.tensor(completion_ids)].numpy()


def _one_engine_process_pinned(gen):
    """On the CPU the model runs inside vLLM's engine core (actors/cpu_engine.py): the engine core is
    the one process below the actor (no worker beside it), forked from it and named as vLLM names a
    spawned one, started on vLLM's "auto" cores with an OpenMP thread a core; the actor itself keeps
    every core it had."""
    import psutil
    import ray

    from jury.actors.cpu_engine import bind_cores

    actor = psutil.Process(ray.get(gen.pid.remote()))
    below = [p for p in actor.children(recursive=True) if "resource_tracker" not in " ".join(p.cmdline())]
    assert [" ".join(p.cmdline()).strip() for p in below] == ["VLLM::EngineCore"], [p.cmdline() for p in below]
    cores = bind_cores(None, sorted(os.sched_getaffinity(0)))
    assert below[0].cpu_affinity() == cores and actor.cpu_affinity() == sorted(os.sched_getaffinity(0))
    # every thread of the actor too, those the engine's start made while the pin held among them
    pinned = {t.id: sorted(os.sched_getaffinity(t.id)) for t in actor.threads()}
    assert all(c == sorted(os.sched_getaffinity(0)) for c in pinned.values()), pinned
    # the model's own process says so: torch's threads and cores there (a forked engine core's
    # /proc environ is the actor's at its exec, so it is asked, not read)
    assert ray.get(gen.engine_processes.remote()) == [{"pid": below[0].pid, "cores": cores, "threads": len(cores),
                                                       "forked": True}]
    assert ray.get(gen.stats.remote())["engine_forked"] == 1


def test_inflight_labels_each_token_with_the_weights_that_sampled_it(tiny_model_path):
    """The engine's log-prob of every token is the one the weights it is labelled with give, over the
    whole sequence (Hugging Face, recomputed): a label late by an engine step, or KV computed by the
    old weights under the new ones, would each break that. A new request for a prompt cached before
    the sync scores under the new weights: the prefix cache was reset although a request ran."""
    import time

    import ray
    from transformers import AutoModelForCausalLM

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        gen, sender = _start(tiny_model_path, "inflight")
        _one_engine_process_pinned(gen)
        hf = {0: AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()}
        w1 = _perturbed(hf[0].state_dict())
        hf[1] = AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()
        hf[1].load_state_dict(w1)
        ray.get(gen.generate.remote(PromptTask("warm", 0, CACHED, None, "t", max_new_tokens=4)))  # cached
        running = gen.generate.remote(PromptTask("long", 1, "Compute 2+2.\n", None, "t"))
        time.sleep(0.5)  # the LONG-token group is under way
        update, ack = _sync(gen, sender, w1, version=1, bucket_bytes=1 << 20)
        # loaded bucket by bucket: the ~3.8 MB model in 1 MiB buckets, one held at a time (the padded
        # embedding, which vLLM completes only at the end, is copied out of the first)
        assert len(update.buckets) >= 4 and ack["peak_buckets"] == 1, (len(update.buckets), ack)
        group = ray.get(running)
        assert (group.version_start, group.version_end) == (0, 1)
        for s in group.samples:
            v = s.token_versions
            assert len(v) == LONG and v[0] == 0 and v[-1] == 1 and list(v) == sorted(v)
            scored = {k: _hf_logprobs(m, group.prompt_ids, s.token_ids.tolist()) for k, m in hf.items()}
            expected = np.where(v == 0, scored[0], scored[1])
            gap = np.abs(s.logprobs - expected)
            assert gap.max() < 2e-3, (f"token {int(gap.argmax())} of {LONG} (swap at {int(np.argmax(v == 1))}): "
                                      f"engine {s.logprobs[gap.argmax()]}, weights v{v[gap.argmax()]} give "
                                      f"{expected[gap.argmax()]}")
            assert np.abs(scored[0] - scored[1]).mean() > 2e-2  # the two versions are told apart
        again = ray.get(gen.generate.remote(PromptTask("again", 2, CACHED, None, "t", max_new_tokens=8)))
        for s in again.samples:
            assert list(s.token_versions) == [1] * 8
            gap = np.abs(s.logprobs - _hf_logprobs(hf[1], again.prompt_ids, s.token_ids.tolist()))
            assert gap.max() < 2e-3, f"a prompt cached before the sync scores as the old weights did: {gap}"

        # a sync whose names do not all match the engine's parameters fails, naming them
        renamed = {("model.layers.0.mlp.down_proj.bias" if k == "model.layers.0.mlp.down_proj.weight" else k): t
                   for k, t in hf[0].state_dict().items()}
        with pytest.raises(ray.exceptions.RayTaskError, match=r"got no weights .*model\.layers\.0\.mlp\.down_proj"):
            _sync(gen, sender, renamed, version=2)
        ray.get(gen.stop.remote())
    finally:
        ray.shutdown()
