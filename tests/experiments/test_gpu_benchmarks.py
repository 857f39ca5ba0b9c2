"""The one-GPU benchmarks (scripts/gpu-measure.sh) run on the CPU at tiny sizes, so that they still
run when a GPU is lent: a GPU session has minutes, and a benchmark that broke since its last run
costs them all."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(args, tmp_path):
    env = {**os.environ, "DS_ACCELERATOR": "cpu"}
    out = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def test_kernel_benchmark_times_the_head_apart_from_the_loss(tmp_path):
    run([str(ROOT / "benchmarks/kernels.py"), "--tiny", "--layers", "3,head", "--impls", "eager,ours",
         "--iters", "1", "--warmup", "1", "--json", "k.json"], tmp_path)
    rows = json.loads((tmp_path / "k.json").read_text())["rows"]
    assert not [r for r in rows if "error" in r], rows
    head = {(r["impl"], r["phase"]) for r in rows if r["layer"] == "head"}
    assert head == {("matmul", "forward"), ("matmul", "backward"),
                    *((impl, phase) for impl in ("eager", "ours") for phase in ("forward", "backward", "fwd+bwd"))}
    assert {r["impl"] for r in rows if r["layer"] == 3} == {"eager", "ours"}


def test_learner_step_benchmark_compares_bf16_gradient_with_fp32(tmp_path):
    """ZeRO-1 with fp32 accumulation, DeepSpeed on the CPU: on the two-layer model the bf16 step's
    gradient is within a few percent of the fp32 model's (0.008 when written)."""
    line = run([str(ROOT / "benchmarks/learner_gpu.py"), "--tiny", "--json", "l.json"], tmp_path)
    result = json.loads((tmp_path / "l.json").read_text())
    assert json.loads(line.strip().splitlines()[-1]) == result
    grad = result["gradient"]
    assert grad["params_without_grad"] == [] and grad["micro_batches"] == 8
    assert grad["rel_l2_error"] < 0.05 and grad["cosine"] > 0.99, grad
    # the plain-torch bf16 gradient: as far from fp32 as DeepSpeed's, and near DeepSpeed's own
    plain, between = grad["plain_torch_bf16_vs_fp32"], grad["deepspeed_vs_plain_torch_bf16"]
    assert 0 < plain["rel_l2_error"] < 0.05 and between["rel_l2_error"] < plain["rel_l2_error"], grad
    assert result["step"]["completion_tokens_per_s"] > 0 and result["setting"].startswith("ZeRO-1")


def test_learner_benchmarks_model_flops_count_each_position_by_hand():
    """The MFU's numerator, counted position by position: every layer's matmuls (2 FLOPs a parameter),
    the head on completion positions only, and at position t attention over t keys: QK^T and AV,
    2·t·heads·head_dim FLOPs each a layer; the backward twice the forward. Until 2026-11-27 the
    benchmark counted attention half (L²/2 a row where the sum of 4·t over t is 2·L(L + 1))."""
    import types

    import torch
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from learner_gpu import model_flops
    spec = dict(num_hidden_layers=3, num_attention_heads=4, head_dim=8, hidden_size=32, vocab_size=50)
    body = 12_345  # parameters less the embedding: any number
    # two rows: 5 positions (2 of them completion) and 3 of 7 (all 3 completion), left-aligned, padded
    attention = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]])
    completion = torch.tensor([[0, 0, 0, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]])
    batch = types.SimpleNamespace(attention=attention, completion=completion)
    forward = 0
    for row in range(2):
        for t in range(1, int(attention[row].sum()) + 1):
            forward += 2 * body
            forward += spec["num_hidden_layers"] * 2 * (2 * t * spec["num_attention_heads"] * spec["head_dim"])
    forward += 2 * spec["hidden_size"] * spec["vocab_size"] * int(completion.sum())
    assert model_flops(spec, body, batch) == pytest.approx(3 * forward)


def test_learner_benchmark_counts_another_shapes_layers_as_jury_simulate_does():
    """`--model Qwen2.5-32B --layers 2`: the decoder built from models.yaml's shape, cut to two layers,
    has the body jury simulate prices (its matmul parameters less the head) to within the norms
    (the head untied, so neither table is in the body), and a bad shape or count is refused by name."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from jury.experiments.sim_gpu import load_model
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from learner_gpu import body_params, model_spec
    spec = model_spec("Qwen2.5-32B", 2)
    assert (spec["num_hidden_layers"], spec["hidden_size"], spec["tie_word_embeddings"]) == (2, 5120, False)
    with torch.device("meta"):
        params = sum(p.numel() for p in Qwen3ForCausalLM(Qwen3Config(**spec)).parameters())
    shape = load_model("Qwen2.5-32B")
    two = type(shape)(**{**shape.__dict__, "layers": 2})
    want = two.matmul_params() - two.head_params()
    norms = 2 * (2 * 5120 + 2 * 128) + 5120  # per layer two RMSNorms and Qwen3's q/k norms; the final norm
    assert body_params(params, spec) == want + norms
    with pytest.raises(SystemExit, match="has 64"):
        model_spec("Qwen2.5-32B", 65)
    with pytest.raises(SystemExit, match="'Nope'"):
        model_spec("Nope", 0)


def test_learner_benchmarks_model_flops_against_verls_counter():
    """MFUs from different codebases count different FLOPs. verl's counter for qwen2/qwen3
    (volcengine/verl, verl/utils/flops_counter.py, _estimate_qwen2_flops, commit 02cf355), restated:
    6 x (layers' matmul parameters + 2 x vocabulary x hidden) x all tokens + 12 x sum of seqlen² x
    head_dim x heads x layers. Against ours it adds the embedding lookup as a matmul, the LM head on
    prompt positions, and attention without the causal half. On learner_gpu.py's default batch
    verl's count is 1.245x ours: its MFU for the same step would read that much higher."""
    import types

    import torch
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from learner_gpu import model_flops
    spec = dict(num_hidden_layers=28, num_attention_heads=16, head_dim=128, hidden_size=2048, vocab_size=151_936)
    body = 1_409_286_144  # Qwen3-1.7B's layers (tests/experiments/test_sim_gpu.py works it by hand)
    lengths = torch.linspace(1, 1024, 64).round().long()  # learner_gpu.py's default batch
    width = 128 + int(lengths.max())
    attention = (torch.arange(width) < 128 + lengths[:, None]).long()
    completion = ((torch.arange(width) >= 128) & (attention > 0)).long()
    batch = types.SimpleNamespace(attention=attention, completion=completion)
    rows = (128 + lengths).double()
    hv, d_attn = 2048 * 151_936, 16 * 128
    verl = 6 * (body + 2 * hv) * float(rows.sum()) + 12 * float((rows**2).sum()) * d_attn * 28
    ours = model_flops(spec, body, batch)
    embedding, head_on_prompts = 6 * hv * float(rows.sum()), 6 * hv * 128 * 64
    full_attention_excess = 6 * d_attn * 28 * float((rows**2 - rows).sum())  # 12·s² against 6·s·(s + 1)
    assert verl - embedding - head_on_prompts - full_attention_excess == pytest.approx(ours, rel=1e-12)
    assert verl / ours == pytest.approx(1.245, abs=5e-4)


def test_learner_shapes_benchmark_times_each_cut_under_each_kernel(tmp_path):
    """Every case and kernel asked for is timed, or carries the kernel's refusal; an unknown kernel is
    refused before anything runs."""
    run([str(ROOT / "benchmarks/learner_shapes.py"), "--tiny", "--cases", "8x1024:1,4;4x512:2",
         "--backends", "default,math", "--reps", "1", "--json", "s.json"], tmp_path)
    rows = json.loads((tmp_path / "s.json").read_text())["rows"]
    assert [(r["rows"], r["micro_batch"], r["backend"]) for r in rows] == [
        (8, 1, "default"), (8, 1, "math"), (8, 4, "default"), (8, 4, "math"), (4, 2, "default"), (4, 2, "math")]
    assert all(r["positions_per_s"] > 0 and len(r["times_s"]) == 2 for r in rows), rows
    assert rows[0]["positions"] == rows[2]["positions"]  # one batch, cut two ways
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/learner_shapes.py"), "--tiny", "--backends", "fast"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2 and "--backends: unknown fast" in out.stderr
    for bad in ("16x:2", "16x4096", "0x4096:2", "16x4096:0,2"):
        out = subprocess.run([sys.executable, str(ROOT / "benchmarks/learner_shapes.py"), "--tiny", "--cases", bad],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 2 and "each ROWSxMAX_NEW:MICRO_BATCHES" in out.stderr, (bad, out.stderr[-500:])


def test_decode_roofline_benchmark_prices_each_step_as_jury_simulate_does(tmp_path):
    """Every decode row carries jury simulate's own price of that step (sim_gpu.decode_step_s, the
    engine overhead set to 0) beside the measured time, and the bytes a step moves are the decoder's
    weights plus n·c KV entries."""
    import dataclasses

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from decode_roofline import TINY
    from jury.experiments.sim_gpu import ModelShape, decode_step_s, load_hardware

    run([str(ROOT / "benchmarks/decode_roofline.py"), "--tiny", "--iters", "1", "--batches", "1,4",
         "--contexts", "8", "--prompt", "8,16", "--prefill-rows", "2", "--json", "d.json"], tmp_path)
    result = json.loads((tmp_path / "d.json").read_text())
    decode = [r for r in result["rows"] if r["phase"] == "decode"]
    assert [(r["n"], r["context"]) for r in decode] == [(1, 8), (4, 8)]
    assert [(r["n"], r["context"]) for r in result["rows"] if r["phase"] == "prefill"] == [(2, 8), (2, 16)]
    m = ModelShape(**TINY)
    h100 = load_hardware("h100-sxm")["generator"]
    h100 = dataclasses.replace(h100, efficiency=dataclasses.replace(h100.efficiency, decode_step_overhead_s=0.0))
    # the decoder holds the model's weights and its norms' (2 per layer, 2 per head dim, 1 final), bf16
    norms = m.layers * (2 * m.hidden + 2 * m.head_dim) + m.hidden
    assert result["weight_bytes"] == 2 * (m.total_params() + norms)
    for r in decode:
        assert r["bytes"] == result["weight_bytes"] + r["n"] * r["context"] * result["kv_bytes_per_token"]
        assert r["predicted_s"] == pytest.approx(decode_step_s(m, h100, 1, r["n"], r["context"]))
        assert r["measured_s"] > 0


def test_weight_sync_benchmark_times_the_learners_sender_and_recovers_after_an_abort(tmp_path):
    """The learner's WeightSender with one receiving process over gloo: every timed sync of every
    bucket size reaches the receiver, the per-bucket fit has a positive latency, and after the group
    is aborted a new sender, store and group carry one more whole sync (as cluster/pipeline.py's
    recovery does)."""
    run([str(ROOT / "benchmarks/weight_sync_gpu.py"), "--tiny", "--backend", "gloo", "--receivers", "1",
         "--bucket-mb", "0.01,0.05,1", "--repeats", "2", "--json", "w.json"], tmp_path)
    result = json.loads((tmp_path / "w.json").read_text())
    assert result["received_by"] == [1]
    assert [r["bucket_mb"] for r in result["table"]] == [0.01, 0.05, 1]
    buckets = [r["buckets"] for r in result["table"]]
    assert buckets[0] > buckets[1] > buckets[2] == 1, buckets
    assert len(result["rows"]) == 6 and all(r["bytes"] == result["bytes"] for r in result["rows"])
    assert result["recovered_after_abort"]["bytes"] == result["bytes"]
    assert result["fit"]["bucket_latency_s"] > 0
