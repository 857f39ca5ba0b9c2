"""`jury simulate --hardware` and `--sweep`: the GPU formulas against numbers worked by hand from
the datasheets in configs/simulate/hardware.yaml and Qwen3-1.7B's shape, the tables' parsing and
their refusals, and a sweep on a tiny grid. Pure functions and millisecond simulations."""
import dataclasses
import json
import math

import pytest

from jury.experiments.sim_costs import Costs, Generation, Learner, Lengths, Sharing, load_costs
from jury.experiments.sim_gpu import (ModelShape, collective_bytes, critic_passes, decode_step_s, hardware_costs,
                                      kv_limited_seqs, learner_step_s, load_hardware, load_model, prefill_s,
                                      train_efficiency, train_flops_per_token, train_passes)
from jury.protocol.config import ConfigError
from jury.protocol.config_load import load_config

# the learner as a plain update: the monitor's initial-KL forward (on by default) priced apart
PLAIN = ("monitor.enabled=false",)

# Qwen3-1.7B by hand: a layer is q and o 2048x2048 each, k and v 2048x1024 each (8 KV heads of 128),
# the MLP 3 x 2048 x 6144: 12,582,912 + 37,748,736 = 50,331,648; 28 layers 1,409,286,144; the tied
# embedding 151,936 x 2048 = 311,164,928; all 1,720,451,072 (the model card's 1.72 B).
QWEN3_1_7B = 1_720_451_072
KV_PER_TOKEN = 2 * 28 * 8 * 128 * 2  # K and V, 28 layers, 8 heads of 128, bf16: 114,688 bytes


@pytest.fixture(scope="module")
def qwen():
    return load_model("/mnt/models/Qwen3-1.7B-Base")


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")["generator"]


def test_a_models_shape_gives_its_published_parameter_count(qwen):
    assert qwen.total_params() == QWEN3_1_7B
    assert qwen.matmul_params() == QWEN3_1_7B  # tied: the head is the embedding, counted once
    assert qwen.kv_bytes_per_token() == KV_PER_TOKEN
    # Qwen2.5-32B, untied: the model card's 32.8 B (its q/k/v biases, 0.01%, are left out)
    assert load_model("Qwen2.5-32B").total_params() == pytest.approx(32.76e9, rel=1e-3)


def test_decode_is_memory_bound_at_long_context_and_flop_bound_at_large_short_batches(qwen, h100):
    bw = 3.35e12 * 0.6          # H100 SXM's HBM at the decode fraction
    flops = 989.5e12 * 0.5      # its dense bf16 at the inference fraction
    # 64 sequences at 1000 tokens of context: weights 3,440,902,144 B + 64 x 1000 x 114,688 B of KV
    memory = (2 * QWEN3_1_7B + 64 * 1000 * KV_PER_TOKEN) / bw + 0.002
    assert decode_step_s(qwen, h100, 1, 64, 1000) == pytest.approx(memory)
    assert memory == pytest.approx(0.0073637, rel=1e-4)
    # 2048 sequences with no context: 2048 x 2 x 1.72e9 FLOPs is 14.2 ms against 3.7 ms of weights
    compute = 2048 * 2 * QWEN3_1_7B / flops
    assert decode_step_s(qwen, h100, 1, 2048, 0) == pytest.approx(compute)
    assert compute == pytest.approx(0.014243, rel=1e-4)
    # two GPUs of tensor parallelism halve both sides (the overhead stays)
    assert decode_step_s(qwen, h100, 2, 64, 1000) == pytest.approx((memory - 0.002) / 2 + 0.002)


def test_prefill_and_training_flops_by_hand(qwen, h100):
    # a 512-token prompt: 512 x (2 x the layers' 1.41e9 + 4 x 28 layers x 2048 x 256 keys on average),
    # and the LM head (151,936 x 2048) on its last position only: the first token's logits
    per_token = 2 * 1_409_286_144 + 4 * 28 * 2048 * 256
    assert prefill_s(qwen, h100, 1, 512) == pytest.approx((512 * per_token + 2 * 311_164_928) / (989.5e12 * 0.5))
    # forward + backward (3) + checkpointing (1) + pi_old recomputed once over 2 epochs (1/2); a row of
    # 100 prompt and 1,000 completion tokens: the layers over its 1,100 positions, the head over the
    # 1,000 completion positions only, and causal attention, 2 x 28 layers x 2048 x 1,100² a forward
    cfg = load_config(None, [*PLAIN, "learner.gradient_checkpointing=true", "learner.recompute_old=true",
                             "learner.epochs=2"])
    body, head = 1_409_286_144, 311_164_928
    row = 2 * body * 1100 + 2 * head * 1000 + 2 * 28 * 2048 * 1100**2
    assert train_flops_per_token(qwen, cfg, 100, 1000, 1000**2) == pytest.approx(4.5 * row / 1000)
    # completions of 500 and 1,500 (mean 1,000): the longer row's attention outweighs the shorter's saving
    rows = 2 * body * 2200 + 2 * head * 2000 + 2 * 28 * 2048 * (600**2 + 1600**2)
    assert train_flops_per_token(qwen, cfg, 100, 1000, (500**2 + 1500**2) / 2) == pytest.approx(4.5 * rows / 2000)


def test_the_learners_passes_are_the_forwards_update_py_runs():
    """learner/update.py train_shard: the KL reference's forward runs in every micro-batch of every
    epoch; one forward a batch gives the proximal log-probs (any correction, or recompute_old) and the
    self-rewards' scores; the critic (advantage=gae) adds its values once a batch and its own forward
    and backward each epoch, without the LM head."""
    def passes(*over):
        cfg = load_config(None, [*PLAIN, "learner.epochs=2", *over])
        return train_passes(cfg), critic_passes(cfg)
    assert passes() == (3, 0)
    assert passes("learner.kl_coef=0.01") == (4, 0)                  # per epoch, not spread over them
    assert passes("learner.correction=tis_token") == (3.5, 0)        # the proximal forward, once a batch
    assert passes("verifier.reward=self_certainty") == (3.5, 0)      # the scores' forward, once a batch
    assert passes("learner.correction=tis_token", "verifier.reward=self_certainty") == (3.5, 0)  # one forward for both
    assert passes("learner.advantage=gae") == (3, 3.5)
    assert passes("learner.advantage=gae", "learner.gradient_checkpointing=true") == (4, 4.5)


def test_a_critic_is_priced_as_the_policys_layers_and_a_second_engine(qwen):
    h100 = load_hardware("h100-sxm")["learner"]
    gae = load_config(None, [*PLAIN, "learner.advantage=gae", "learner.num_ranks=8", "learner.zero_stage=2"])
    plain = load_config(None, [*PLAIN, "learner.num_ranks=8", "learner.zero_stage=2"])
    body, head = 1_409_286_144, 311_164_928
    layers = 2 * body * 1100 + 2 * 28 * 2048 * 1100**2
    assert train_flops_per_token(qwen, gae, 100, 1000, 1000**2) == pytest.approx(
        (3 * (layers + 2 * head * 1000) + 4 * layers) / 1000)  # epochs=1: the values' forward is a whole pass
    assert learner_step_s(qwen, h100, gae) == pytest.approx(2 * learner_step_s(qwen, h100, plain))
    other = load_config(None, [*PLAIN, "learner.advantage=gae", "learner.critic_model=/m/Qwen3-0.6B"])
    with pytest.raises(ConfigError, match="learner.critic_model=/m/Qwen3-0.6B"):
        critic_passes(other)


def test_zero_collectives_by_hand():
    # 8 ranks, 1e9 parameters (2e9 bf16 bytes): a reduce-scatter or all-gather moves 7/8 x 2e9 per rank
    share = 7 / 8 * 2e9
    assert collective_bytes(0, 1e9, 8, 16) == pytest.approx(2 * share)       # one all-reduce
    assert collective_bytes(1, 1e9, 8, 16) == pytest.approx(2 * share)
    assert collective_bytes(2, 1e9, 8, 16) == pytest.approx(17 * share)      # 16 reductions + the gather
    assert collective_bytes(3, 1e9, 8, 16) == pytest.approx(48 * share)      # 2 gathers + 1 reduction each
    assert collective_bytes(3, 1e9, 1, 16) == 0.0


def test_the_learners_step_by_hand(qwen):
    h100 = load_hardware("h100-sxm")["learner"]
    cfg = load_config(None, [*PLAIN, "learner.num_ranks=8", "learner.zero_stage=2", "learner.micro_batch=4",
                             "batch_groups=128", "generator.group_size=8"])
    optimizer = 32 * QWEN3_1_7B / 8 / (3.35e12 * 0.6)
    micro = 128 * 8 // (8 * 4)  # 32 micro-batches per rank
    comm = (micro + 1) * 7 / 8 * 2 * QWEN3_1_7B / (450e9 * 0.8)  # within one node: NVLink
    assert learner_step_s(qwen, h100, cfg) == pytest.approx(optimizer + comm)
    # 16 ranks span two nodes: the network's 50 GB/s instead
    wide = load_config(None, [*PLAIN, "learner.num_ranks=16", "learner.zero_stage=1"])
    assert learner_step_s(qwen, h100, wide) == pytest.approx(
        32 * QWEN3_1_7B / 16 / (3.35e12 * 0.6) + 2 * 15 / 16 * 2 * QWEN3_1_7B / (50e9 * 0.8))


def test_hardware_costs_put_the_formulas_into_the_simulators_costs(qwen):
    gpus = load_hardware("generator=l40s,learner=h100-sxm")
    cfg = load_config(None, [*PLAIN, "learner.num_ranks=8", "generator.max_new_tokens=4096", "max_model_len=4352",
                             "learner.micro_batch=8"])  # the micro-batch train_mfu was measured at
    # a CPU calibration's sharing factors in the base: on GPUs each role has its own, none slows another
    base = Costs(generation=Generation(prompt_tokens=100, lengths=Lengths(kind="fixed", tokens=1000)),
                 sharing=Sharing(learner=0.6, generator=0.5), learner=Learner(token_s=1.0, overhead_s=0.03))
    c = hardware_costs(cfg, qwen, gpus, base)
    assert c.sharing == Sharing(learner=0.0, generator=0.0)
    assert c.learner.overhead_s == 0.03  # the driver's bookkeeping a step: the GPUs do not change it
    context = 100 + 1000 / 2
    for n in (1, 64, 256):  # the simulator's step, at the mean context, is the formula's
        assert c.generation.decode_step_s(n) == pytest.approx(decode_step_s(qwen, gpus["generator"], 1, n, context))
    # the weights cross the slower network: L40S's g6e.12xlarge, 100 Gbps over 4 GPUs, at 0.8
    assert c.sync.seconds(256) == pytest.approx(
        0.05 + 2 * QWEN3_1_7B / (3.125e9 * 0.8) + math.ceil(2 * QWEN3_1_7B / 2**28) * 0.005)
    row = 2 * 1_409_286_144 * 1100 + 2 * 311_164_928 * 1000 + 2 * 28 * 2048 * 1100**2
    assert c.learner.token_s == pytest.approx(3 * row / 1000 / (989.5e12 * 0.216))  # the H100's own train_mfu
    assert c.verifier == base.verifier and c.generation.lengths == base.generation.lengths


def test_a_shapes_measured_training_gain_scales_the_cards_train_mfu(qwen, tmp_path):
    """models.yaml's train_mfu_scale: Qwen2.5-32B's layers were measured at 1.775 / 1.912 / 1.904x
    Qwen3-1.7B's MFU in micro-batches of 4 / 8 / 16 rows (an H200, docs/results.md). Between two
    measured micro-batches the factor goes linearly in log2(rows); outside, the nearest is kept; a
    shape with none measured trains at the card's figure; a bad table is refused by name."""
    big = load_model("/mnt/models/Qwen2.5-32B")
    assert big.train_mfu_scale == ((4, 1.775), (8, 1.912), (16, 1.904))
    assert [big.train_scale(r) for r in (1, 4, 8, 16, 64)] == [1.775, 1.775, 1.912, 1.904, 1.904]
    assert big.train_scale(6) == pytest.approx(1.775 + math.log2(1.5) * (1.912 - 1.775))
    assert qwen.train_scale(4) == 1.0 and qwen.train_scale(16) == 1.097
    unmeasured = load_model("/mnt/models/Qwen2.5-Math-7B")
    assert unmeasured.train_mfu_scale == () and unmeasured.train_scale(16) == 1.0

    h100 = load_hardware("h100-sxm")
    base = Costs(generation=Generation(prompt_tokens=100, lengths=Lengths(kind="fixed", tokens=1000)))
    for rows, factor in ((4, 1.775), (16, 1.904)):
        cfg = load_config(None, [*PLAIN, f"learner.micro_batch={rows}"])
        plain = hardware_costs(cfg, dataclasses.replace(big, train_mfu_scale=()), h100, base)
        assert hardware_costs(cfg, big, h100, base).learner.token_s == pytest.approx(plain.learner.token_s / factor)
        assert train_efficiency(big, h100["learner"], rows) == pytest.approx(0.216 * factor)
    # a model folder with its own config.json takes its measured gain from models.yaml by name
    folder = tmp_path / "Qwen2.5-32B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "num_hidden_layers": 64, "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8,
        "intermediate_size": 27648, "vocab_size": 152064, "tie_word_embeddings": False}))
    assert load_model(str(folder)) == big
    # the command line's model.train_mfu_scale replaces it; a table that is not one is refused
    assert load_model(str(folder), overrides=["model.train_mfu_scale={8: 1.5}"]).train_scale(32) == 1.5
    for bad in ("2", "{0: 1.0}", "{8: -1}", "{8: true}", "[1, 2]"):
        with pytest.raises(ConfigError, match="train_mfu_scale must map micro-batch rows"):
            load_model("/mnt/models/Qwen2.5-32B", overrides=[f"model.train_mfu_scale={bad}"])


def test_decode_is_priced_at_the_context_each_step_reads_summed_over_the_steps(qwen):
    """A group of a 40-token and a 400-token completion after a 100-token prompt: its decode steps read
    the KV of 100 + t tokens at step t of each sequence. Summed by hand over every step of both,
    that is what the simulator's per-sequence price (seq_s at one context for every step) must add
    up to; the mean length's midpoint (100 + 220 / 2) would price it a quarter short."""
    gpus = load_hardware("h100-sxm")
    cfg = load_config(None, [*PLAIN, "generator.max_new_tokens=1024", "max_model_len=1280"])
    base = Costs(generation=Generation(prompt_tokens=100, lengths=Lengths(kind="trace", groups=((40, 400),))))
    c = hardware_costs(cfg, qwen, gpus, base)
    read = sum(100 + t for n in (40, 400) for t in range(n)) * KV_PER_TOKEN / (3.35e12 * 0.6)
    priced = (40 + 400) * c.generation.seq_s
    assert priced == pytest.approx(read, rel=2e-3)
    assert (40 + 400) * (100 + 220 / 2) * KV_PER_TOKEN / (3.35e12 * 0.6) < 0.75 * read


def test_the_kv_cache_bounds_an_engines_sequences(qwen):
    l40s = load_hardware("l40s")["generator"]
    cfg = load_config(None, [*PLAIN, "generator.max_new_tokens=4096", "max_model_len=4352"])
    base = Costs(generation=Generation(prompt_tokens=100, lengths=Lengths(kind="fixed", tokens=1900)))
    # 0.9 x 48 GB less 3.44 GB of weights, over 2000 tokens x 114,688 B: 173 sequences
    assert kv_limited_seqs(cfg, qwen, l40s, base) == (0.9 * 48e9 - 2 * QWEN3_1_7B) // (2000 * KV_PER_TOKEN) == 173
    with pytest.raises(ConfigError, match="tensor_parallel_size"):
        kv_limited_seqs(cfg, load_model("Qwen2.5-32B"), l40s, base)  # 65.5 GB of weights on a 48 GB card
    # the share of the GPU the run gives vLLM, not a fixed 0.9: at 0.3, 0.3 x 48 GB less the weights
    third = load_config(None, [*PLAIN, "generator.max_new_tokens=4096", "max_model_len=4352",
                               "generator.gpu_memory_utilization=0.3"])
    assert kv_limited_seqs(third, qwen, l40s, base) == (0.3 * 48e9 - 2 * QWEN3_1_7B) // (2000 * KV_PER_TOKEN) == 47


def test_the_hardware_table_parses_and_refuses_what_it_does_not_know():
    both = load_hardware("h200")
    assert both["generator"] == both["learner"]
    h200 = both["learner"]
    assert (h200.bf16_flops, h200.hbm_bytes, h200.hbm_bytes_per_s) == (989.5e12, 141e9, 4.8e12)
    assert h200.efficiency.train_mfu == 0.226  # ours, docs/results.md
    # a card's own `efficiency:` block overrides the shared one for that card alone
    assert load_hardware("h100-sxm")["learner"].efficiency.train_mfu == 0.216
    assert load_hardware("h100-sxm")["learner"].efficiency.decode_bandwidth == h200.efficiency.decode_bandwidth
    split = load_hardware("generator=l40s,learner=a100-80gb")
    assert (split["generator"].name, split["learner"].bf16_flops) == ("l40s", 312e12)
    assert load_hardware("h100-sxm", overrides=["efficiency.train_mfu=0.4"])["learner"].efficiency.train_mfu == 0.4
    with pytest.raises(ConfigError, match=r"unknown GPU 'b200' \(known: a100-80gb, h100-sxm, h20, h200, h800, l40s\)"):
        load_hardware("b200")
    with pytest.raises(ConfigError, match="roles must be generator and learner"):
        load_hardware("generator=h100-sxm,verifier=l40s")
    with pytest.raises(ConfigError, match="roles must be generator and learner"):
        load_hardware("generator=h100-sxm")
    with pytest.raises(ConfigError, match="unknown key mfu"):
        load_hardware("h100-sxm", overrides=["efficiency.mfu=0.4"])


def test_a_models_shape_comes_from_its_config_json_the_table_or_overrides(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": False}))
    m = load_model(str(tmp_path))
    assert m == ModelShape(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=1000,
                           tied_embeddings=False)
    # q, o 64x64; k, v 64x32; MLP 3x64x128: 36,864 a layer; two embeddings of 64,000
    assert m.total_params() == 2 * 36_864 + 2 * 64_000
    # model.params: weights and FLOPs scale to the count given, the shape's KV cache stays
    big = load_model(str(tmp_path), overrides=["model.params=4.0e+6"])
    assert big.total_params() == 4e6
    assert load_model(str(tmp_path), overrides=["model.params=4e6"]) == big  # YAML reads 4e6 as a string
    assert big.matmul_params() == pytest.approx((2 * 36_864 + 64_000) * 4e6 / (2 * 36_864 + 2 * 64_000))
    # the head scales with them, so the layers keep their share: never negative however small `params`
    assert big.head_params() / big.matmul_params() == pytest.approx(64_000 / (2 * 36_864 + 64_000))
    small = load_model(str(tmp_path), overrides=["model.params=1.0e+4"])
    assert small.matmul_params() - small.head_params() == pytest.approx(2 * 36_864 * 1e4 / (2 * 36_864 + 2 * 64_000))
    assert big.kv_bytes_per_token() == m.kv_bytes_per_token()
    with pytest.raises(ConfigError, match=r"missing: layers, hidden, heads, kv_heads, head_dim, intermediate, vocab"):
        load_model("/m/a-model-of-its-own")  # no config.json here, no entry in models.yaml, not a local model


# Qwen3-30B-A3B by hand: attention q, o 2048x4096 and k, v 2048x512 (32 heads and 4 KV heads of 128):
# 18,874,368; an expert 3 x 2048 x 768 = 4,718,592, 128 of them 603,979,776; the router 2048 x 128 =
# 262,144. A layer 623,116,288, 48 of them 29,909,581,824, and two embeddings of 151,936 x 2048:
# 30,531,911,680 (the model card's 30.5 B). A token's matmuls: 8 experts, 56,885,248 a layer, 48 of
# them and the head: 3,041,656,832 (the card's 3.3 B activated counts the input embedding too).
QWEN3_30B_A3B, QWEN3_30B_A3B_ACTIVE = 30_531_911_680, 3_041_656_832
ROUTED_30B = 48 * 603_979_776


@pytest.fixture(scope="module")
def moe():
    return load_model("/mnt/models/Qwen3-30B-A3B-Base")


def test_a_mixtures_weights_count_every_expert_and_its_flops_the_routed_ones(moe, h100):
    assert moe.total_params() == QWEN3_30B_A3B and moe.matmul_params() == QWEN3_30B_A3B_ACTIVE
    assert moe.routed_params() == ROUTED_30B
    # training FLOPs: the active layers (no head) over every position, the head over the completion
    cfg = load_config(None, [*PLAIN, ])
    body = QWEN3_30B_A3B_ACTIVE - 151_936 * 2048
    row = 2 * body * 1100 + 2 * 151_936 * 2048 * 1000 + 2 * 48 * 4096 * 1100**2
    assert train_flops_per_token(moe, cfg, 100, 1000, 1000**2) == pytest.approx(3 * row / 1000)
    # what scales with every parameter: the optimizer and ZeRO (learner_step_s), the weight sync, the
    # KV cache's room; a dense model of the same total prices them the same
    dense = dataclasses.replace(moe, experts=0, experts_per_token=0, expert_intermediate=0,
                                params=QWEN3_30B_A3B)
    gpus = load_hardware("h100-sxm")
    cfg8 = load_config(None, [*PLAIN, "learner.num_ranks=8", "learner.zero_stage=3"])
    assert learner_step_s(moe, gpus["learner"], cfg8) == pytest.approx(learner_step_s(dense, gpus["learner"], cfg8))
    base = Costs(generation=Generation(prompt_tokens=100, lengths=Lengths(kind="fixed", tokens=900)))
    assert hardware_costs(cfg, moe, gpus, base).sync == hardware_costs(cfg, dense, gpus, base).sync
    assert kv_limited_seqs(cfg, moe, h100, base) == kv_limited_seqs(cfg, dense, h100, base)


def test_a_mixtures_decode_reads_the_experts_its_sequences_are_routed_to(moe, h100):
    bw = 3.35e12 * 0.6
    kv = 2 * 48 * 4 * 128 * 2
    shared = 2 * (QWEN3_30B_A3B - ROUTED_30B)  # attention, routers, embeddings: read every step
    for n, reached in ((1, 8 / 128), (8, 1 - (120 / 128) ** 8), (64, 1 - (120 / 128) ** 64)):
        memory = (shared + 2 * ROUTED_30B * reached + n * 1000 * kv) / bw + 0.002
        assert decode_step_s(moe, h100, 1, n, 1000) == pytest.approx(memory)
    # one sequence reads 1/16 of the experts: 6.7 GB a step against all 61 GB; 64 reach 98.4% of them
    assert moe.weight_bytes_read(1) == pytest.approx(shared + 2 * ROUTED_30B / 16)
    assert moe.weight_bytes_read(1) / (2 * QWEN3_30B_A3B) == pytest.approx(0.1098, abs=1e-4)
    assert moe.experts_read(64) == pytest.approx(0.9840, abs=1e-4)
    # the simulator's step (sim_costs.Generation) is the formula's at every running count
    gpus = load_hardware("h100-sxm")
    cfg = load_config(None, [*PLAIN, "generator.max_new_tokens=4096", "max_model_len=4352"])
    c = hardware_costs(cfg, moe, gpus, Costs(generation=Generation(prompt_tokens=100,
                                                                   lengths=Lengths(kind="fixed", tokens=1000))))
    assert c.generation.expert_share == 8 / 128
    for n in (0, 1, 8, 64, 512):
        assert c.generation.decode_step_s(n) == pytest.approx(decode_step_s(moe, gpus["generator"], 1, n, 100 + 500))


def test_a_mixtures_shape_comes_from_its_config_json_and_what_it_cannot_price_is_refused(tmp_path):
    def shape(**hf):
        (tmp_path / "config.json").write_text(json.dumps({
            "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
            "intermediate_size": 128, "vocab_size": 1000, **hf}))
        return load_model(str(tmp_path))

    qwen3_moe = shape(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
                      mlp_only_layers=[], sliding_window=None)
    assert (qwen3_moe.experts, qwen3_moe.experts_per_token, qwen3_moe.expert_intermediate) == (8, 2, 32)
    # q, o 64x64; k, v 64x32: 12,288; 8 experts of 3 x 64 x 32 = 6,144; the router 64 x 8
    assert qwen3_moe.total_params() == 2 * (12_288 + 8 * 6_144 + 512) + 2 * 64_000
    assert qwen3_moe.matmul_params() == 2 * (12_288 + 2 * 6_144 + 512) + 64_000
    # Qwen2-MoE's shared expert runs for every token: in the weights and in the active count
    qwen2_moe = shape(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                      shared_expert_intermediate_size=64, sliding_window=4096, use_sliding_window=False)
    assert qwen2_moe.matmul_params() == qwen3_moe.matmul_params() + 2 * 3 * 64 * 64
    # Mixtral: each expert is intermediate_size wide
    mixtral = shape(num_local_experts=8, num_experts_per_tok=2)
    assert (mixtral.experts, mixtral.expert_intermediate) == (8, 128)
    assert shape().experts == 0  # dense
    for hf, name in (({"kv_lora_rank": 512, "n_routed_experts": 64, "num_experts_per_tok": 6}, "kv_lora_rank"),
                     ({"num_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [0]}, "mlp_only_layers"),
                     ({"num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 2}, "decoder_sparse_step"),
                     ({"first_k_dense_replace": 1}, "first_k_dense_replace"),
                     ({"sliding_window": 4096}, "sliding_window"),
                     # an architecture the shape does not know, whatever its keys: Jamba's Mamba layers
                     # would be priced as attention, Ernie-4.5's experts (moe_num_experts) as a dense MLP
                     ({"model_type": "jamba", "num_experts": 16, "num_experts_per_tok": 2}, "model_type 'jamba'"),
                     ({"model_type": "ernie4_5_moe", "moe_num_experts": 64}, "model_type 'ernie4_5_moe'"),
                     ({"model_type": "deepseek_v3"}, "model_type 'deepseek_v3'")):
        with pytest.raises(ConfigError, match=f"{name}.*not modelled"):
            shape(**hf)
    assert shape(model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2,
                 moe_intermediate_size=32) == qwen3_moe
    with pytest.raises(ConfigError, match="needs 0 < experts_per_token <= experts"):
        shape(num_experts=8, moe_intermediate_size=32)  # no num_experts_per_tok
    with pytest.raises(ConfigError, match="give `experts` too"):
        load_model("Qwen3-1.7B-Base", overrides=["model.experts_per_token=2"])
    with pytest.raises(ConfigError, match="generation.expert_share must be in"):
        load_costs(None, ["generation.expert_step_s=0.01"])
    with pytest.raises(ConfigError, match="generation.expert_share must be in"):
        load_costs(None, ["generation.expert_step_s=0.01", "generation.expert_share=1.5"])


def test_the_command_takes_hardware_and_sweeps_a_tiny_grid(tmp_path, capsys):
    from jury.experiments.cli import main

    small = ["steps=4", "batch_groups=2", "generator.group_size=2", "model=/m/Qwen3-1.7B-Base",
             "costs.generation.lengths.kind=fixed", "costs.generation.lengths.tokens=50"]
    assert main(["simulate", "--hardware", "h100-sxm", "--out", str(tmp_path / "one"), *small]) == 0
    saved = json.loads((tmp_path / "one" / "simulate.json").read_text())
    assert saved["costs"]["sync"]["weight_bytes"] == 2 * QWEN3_1_7B
    capsys.readouterr()
    out = tmp_path / "sweep"
    assert main(["simulate", "--hardware", "h100-sxm", "--sweep", "--gpus", "4", "--staleness", "0,2",
                 "--out", str(out), *small]) == 0
    printed = capsys.readouterr().out
    rows = json.loads((out / "sweep.json").read_text())["rows"]
    # eighths of 4 GPUs in whole engines: 1, 2 and 3 generator GPUs, each at two bounds, and the baseline
    assert [(r["split"], r["max_staleness"]) for r in rows] == [
        ("1:3", 0), ("1:3", 2), ("2:2", 0), ("2:2", 2), ("3:1", 0), ("3:1", 2), ("colocated 4", 0)]
    assert all(r["tokens_per_s"] > 0 for r in rows)
    assert "recommended at max_staleness=0" in printed and "recommended at max_staleness=2" in printed
    assert (out / "sweep.png").stat().st_size > 0
    assert main(["simulate", "--hardware", "h100-sxm", "--sweep", "--gpus", "4", "--splits", "4", "--out", str(out)]) == 2
    assert "leaves no learner" in capsys.readouterr().err
    # a split of GPUs priced with a CPU machine's costs: refused
    assert main(["simulate", "--sweep", "--gpus", "4", "--out", str(out)]) == 2
    assert "--sweep splits GPUs between the roles: give --hardware" in capsys.readouterr().err
    assert main(["simulate", "--hardware", "b200", "--out", str(out)]) == 2
    assert "unknown GPU 'b200'" in capsys.readouterr().err
    assert main(["simulate", "model.params=1e9", "--out", str(out)]) == 2
    assert "need --hardware" in capsys.readouterr().err


def test_a_local_model_is_priced_by_the_shape_it_is_built_with_without_building_it():
    # the embedded default's `model: tiny` is a name, not a folder: its spec (4 layers of 128, 2 heads of
    # 64, an MLP of 384, an untied head over a vocabulary of 384) is what models/build.py builds; before,
    # `jury simulate --hardware h100-sxm` with the default config said model 'tiny' had no shape
    tiny = load_model("tiny")
    layer = 4 * 128 * 128 + 3 * 128 * 384          # q, k, v, o and the gated MLP
    assert tiny.total_params() == 4 * layer + 2 * 384 * 128
    assert tiny.kv_bytes_per_token() == 2 * 4 * 2 * 64 * 2
    assert load_model("tiny-chat") == tiny
    chain = load_model("tiny-chain")
    assert (chain.layers, chain.hidden, chain.intermediate) == (4, 128, 384)


def test_a_built_local_models_config_json_has_the_shape_it_is_priced_by():
    from jury.models.build import default_path

    built = default_path() / "config.json"
    if not built.exists():
        pytest.skip(f"the tiny model is not built here ({built}); scripts/install-cpu.sh builds it")
    folder = load_model(str(built.parent))
    # the trained tokenizer's vocabulary is the spec's or a few tokens short of it
    assert dataclasses.replace(load_model("tiny"), vocab=folder.vocab) == folder
    assert 0.9 * load_model("tiny").vocab <= folder.vocab <= load_model("tiny").vocab


@pytest.mark.parametrize("override, message", [
    ("efficiency.train_mfu=1.6", "train_mfu=1.6: a fraction of the card's peak, in \\(0, 1\\]"),
    ("efficiency.decode_bandwidth=0", "decode_bandwidth=0: a fraction"),
    ("efficiency.colocated_train=-0.5", "colocated_train=-0.5: a fraction"),
    ("efficiency.collective=fast", "collective='fast': a fraction"),
    ("efficiency.inference_mfu=true", "inference_mfu=True: a fraction"),
    ("efficiency.colocated_train=1.5", "colocated_train=1.5: a fraction of a dedicated learner's speed"),
    ("efficiency.optimizer_bytes_per_param=0", "optimizer_bytes_per_param=0: bytes, finite and > 0"),
    ("efficiency.optimizer_bytes_per_param=.inf", "optimizer_bytes_per_param=inf: bytes, finite"),
    ("efficiency.bucket_latency_s=-1", "bucket_latency_s=-1: seconds, finite and >= 0"),
    # an endless overhead priced the run faster than the default and printed nan without a word
    ("efficiency.decode_step_overhead_s=inf", "decode_step_overhead_s=inf: seconds, finite"),
    ("efficiency.collective=nan", "collective=nan: a fraction"),
])
def test_an_efficiency_no_card_reaches_is_refused_by_name(override, message):
    # an MFU of 1.6 would have priced a learner faster than the card's peak without a word
    with pytest.raises(ConfigError, match=f"hardware h100-sxm: efficiency.{message}"):
        load_hardware("h100-sxm", overrides=[override])
    assert load_hardware("h100-sxm", overrides=["efficiency.train_mfu=1"])["learner"].efficiency.train_mfu == 1


def test_a_cards_own_efficiencies_are_read_as_the_command_lines_are(tmp_path):
    # YAML 1.1 reads 5e-3 (no dot) as a string: in a card's block it was refused where the same value
    # on the command line was taken; and a bad value there says which card's it is
    table = tmp_path / "hardware.yaml"
    card = {"bf16_flops": 1e15, "hbm_bytes": 8e10, "hbm_bytes_per_s": 3e12, "nvlink_bytes_per_s": 4e11,
            "network_bytes_per_s": 5e10, "gpus_per_node": 8}
    table.write_text(json.dumps({"gpus": {"mine": {**card, "efficiency": {"bucket_latency_s": "5e-3"}},
                                          "bad": {**card, "efficiency": {"train_mfu": 3}}}, "efficiency": {}}))
    assert load_hardware("mine", table)["learner"].efficiency.bucket_latency_s == 0.005
    with pytest.raises(ConfigError, match=r"hardware bad: efficiency.train_mfu=3: a fraction"):
        load_hardware("bad", table)


def test_a_colocated_learner_trains_at_its_stated_fraction_and_the_sweeps_baseline_takes_it(qwen, tmp_path):
    from jury.experiments.cli import main

    cfg = load_config(None, [*PLAIN, "model=/m/Qwen3-1.7B-Base"])
    base = load_costs(None, ["generation.lengths.kind=fixed", "generation.lengths.tokens=500"])
    half = load_hardware("h100-sxm", overrides=["efficiency.colocated_train=0.5"])
    dedicated, colocated = hardware_costs(cfg, qwen, half, base), hardware_costs(cfg, qwen, half, base, True)
    # the whole step twice as long, as verl's ratio is of whole updates: compute, optimizer, ZeRO
    assert colocated.learner.token_s == pytest.approx(2 * dedicated.learner.token_s)
    assert colocated.learner.step_s == pytest.approx(2 * dedicated.learner.step_s) and dedicated.learner.step_s > 0
    assert colocated.learner.overhead_s == dedicated.learner.overhead_s  # the driver's, not the GPUs'
    assert dataclasses.replace(colocated, learner=dedicated.learner) == dedicated
    # by default as fast as a dedicated learner: the costs of before
    plain = load_hardware("h100-sxm")
    assert hardware_costs(cfg, qwen, plain, base, True) == hardware_costs(cfg, qwen, plain, base)

    small = ["steps=4", "batch_groups=2", "generator.group_size=2", "model=/m/Qwen3-1.7B-Base",
             "costs.generation.lengths.kind=fixed", "costs.generation.lengths.tokens=50"]
    rows = {}
    for factor in ("1", "0.25"):
        out = tmp_path / factor
        assert main(["simulate", "--hardware", "h100-sxm", "--sweep", "--gpus", "4", "--staleness", "0",
                     "--splits", "2", "--out", str(out), *small, f"efficiency.colocated_train={factor}"]) == 0
        rows[factor] = {r["split"]: r for r in json.loads((out / "sweep.json").read_text())["rows"]}
    # only the baseline slows: the split's learner has GPUs of its own
    assert rows["0.25"]["2:2"] == rows["1"]["2:2"]
    assert rows["0.25"]["colocated 4"]["tokens_per_s"] < rows["1"]["colocated 4"]["tokens_per_s"]


def test_the_commands_list_and_folder_arguments_are_refused_by_their_flag(tmp_path, capsys):
    from jury.experiments.cli import main

    for args, said in ((["--sweep", "--staleness", "a,b"], "--staleness 'a,b': whole numbers separated by commas"),
                       (["--sweep", "--staleness", "0,-1"], "--staleness '0,-1': no negative values"),
                       (["--sweep", "--splits", "2,x"], "--splits '2,x': whole numbers"),
                       (["--sweep", "--gpus", "4", "--splits", "0"], "0 generator GPUs of --gpus 4 leaves no generator"),
                       # without --sweep they were read by nothing, and the run said nothing of it
                       (["--staleness", "0,2"], "--staleness is read only with --sweep"),
                       (["--gpus", "8"], "--gpus is read only with --sweep"),
                       (["--calibration", str(tmp_path / "none")], "no bench.json there")):
        assert main(["simulate", "--hardware", "h100-sxm", "--out", str(tmp_path / "o"), *args]) == 2
        assert said in capsys.readouterr().err


def test_each_mini_batch_is_an_optimizer_step_and_its_traffic(qwen):
    """learner.minibatches=4 makes four AdamW steps a step (and, under ZeRO-1, four gradient
    reductions and parameter gathers): priced once before, whatever the mini-batches (outside audit)."""
    h100 = load_hardware("h100-sxm")["learner"]
    one = load_config(None, [*PLAIN, "learner.num_ranks=8", "learner.zero_stage=1"])
    four = load_config(None, [*PLAIN, "learner.num_ranks=8", "learner.zero_stage=1", "learner.minibatches=4"])
    assert learner_step_s(qwen, h100, four) == pytest.approx(4 * learner_step_s(qwen, h100, one))
    two_epochs = load_config(None, [*PLAIN, "learner.num_ranks=8", "learner.zero_stage=1", "learner.epochs=2"])
    assert learner_step_s(qwen, h100, two_epochs) == pytest.approx(2 * learner_step_s(qwen, h100, one))
    assert collective_bytes(1, 1e9, 8, 16, optimizer_steps=4) == pytest.approx(4 * collective_bytes(1, 1e9, 8, 16))
    assert collective_bytes(2, 1e9, 8, 16, optimizer_steps=4) == pytest.approx(20 * 7 / 8 * 2e9)


def test_the_monitors_forward_is_rank_zeros_share_of_a_pass():
    """The monitor scores its first policy over initial_kl_rows of rank 0's own rows, once a step, the
    other ranks waiting (learner/learner.py): a share of one forward over the batch, not divided by the
    ranks, and apart from the passes they share."""
    from jury.experiments.sim_costs import monitor_passes

    rows = ["batch_groups=8", "generator.group_size=8"]
    assert monitor_passes(load_config(None, rows)) == pytest.approx(64 / 64)            # on by default
    assert train_passes(load_config(None, rows)) == 3
    assert monitor_passes(load_config(None, [*rows, "monitor.initial_kl_rows=16"])) == pytest.approx(16 / 64)
    assert monitor_passes(load_config(None, [*rows, "monitor.initial_kl_rows=16", "learner.epochs=2"])) == \
        pytest.approx(16 / 64 / 2)
    # four ranks: rank 0 holds 16 of the 64 rows, and scores them all
    assert monitor_passes(load_config(None, [*rows, "learner.num_ranks=4"])) == pytest.approx(16 / 64)
    assert monitor_passes(load_config(None, [*rows, "monitor.enabled=false"])) == 0


def test_hardware_reads_a_cpu_config_as_its_gpu_run_and_refuses_a_gpu_config_it_cannot_price():
    from jury.experiments.sim_gpu import hardware_reading

    refused, notes = hardware_reading(load_config(None, []))  # the default: CPU, float32, gloo
    assert refused == [] and "reads this CPU config as its GPU run" in notes[0] and "weight_backend=gloo" in notes[0]
    gpu = ["generator.num_gpus=1", "learner.num_gpus=1", "weight_backend=nccl", "generator.dtype=bfloat16",
           "learner.dtype=bfloat16", "learner.zero_stage=1"]
    assert hardware_reading(load_config(None, gpu)) == ([], [])
    refused, _ = hardware_reading(load_config(None, [*gpu, "learner.dtype=float32", "learner.zero_stage=0"]))
    assert refused == ["learner.dtype=float32 (the GPU formulas price bfloat16)"]
    refused, _ = hardware_reading(load_config(None, [*gpu, "generator.num_gpus=0.5", "generator.gpu_memory_utilization=0.4",
                                                     "weight_backend=gloo"]))
    assert any("weight_backend=gloo" in r for r in refused) and any("generator.num_gpus=0.5" in r for r in refused)


def test_the_command_refuses_a_gpu_config_it_cannot_price(tmp_path, capsys):
    from jury.experiments.cli import main

    gpu = ["generator.num_gpus=1", "learner.num_gpus=1", "weight_backend=nccl", "generator.dtype=bfloat16"]
    assert main(["simulate", "--hardware", "h100-sxm", "--out", str(tmp_path / "o"), *gpu, "steps=3"]) == 2
    assert "learner.dtype=float32 (the GPU formulas price bfloat16)" in capsys.readouterr().err
    assert main(["simulate", "--hardware", "h100-sxm", "--out", str(tmp_path / "o"), "model.layers=-1"]) == 2
    assert "model.layers must be a whole number >= 1, got -1" in capsys.readouterr().err
    assert main(["simulate", "--hardware", "h100-sxm", "--sweep", "--gpus", "0", "--out", str(tmp_path / "s")]) == 2
    assert "--gpus 0: at least 2" in capsys.readouterr().err
