"""Every Triton kernel against its PyTorch reference, on odd shapes, per dtype.

On the CPU the kernels run in the Triton interpreter, which must be chosen before
triton is first imported (its own library functions are decorated then), and other
test modules may import triton earlier. So a plain run executes the CPU cases in a
fresh `TRITON_INTERPRET=1` pytest process (test_cpu_cases_in_the_interpreter), and
runs the CUDA cases, marked gpu, in-process with compiled kernels.
Inputs are fresh each run; a failure prints the seed (JURY_TEST_SEED=<seed> replays it).
"""

import importlib
import math
import os
import random
import subprocess
import sys

import pytest
import torch

from jury import kernels
from jury.kernels import reference as ref

triton = pytest.importorskip("triton")

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
# Relative-RMS error bounds. bf16 outputs carry one rounding (2^-9 relative) on each
# side, and the LM-head backward also rounds dL/dz and partial dH sums to bf16.
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 2e-2}
CUDA_ONLY = [pytest.mark.gpu, pytest.mark.skipif(
    INTERPRETING or not torch.cuda.is_available(), reason="needs a CUDA GPU, compiled kernels")]
DEVICES = ["cpu"] if INTERPRETING else [pytest.param("cuda", marks=CUDA_ONLY)]


@pytest.mark.skipif(INTERPRETING, reason="this is the interpreter run")
def test_cpu_cases_in_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
        env=env, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]


def triton_impl(name):
    return importlib.import_module(f"jury.kernels.{name}")


@pytest.fixture
def seed():
    value = int(os.environ.get("JURY_TEST_SEED", random.randrange(2**31)))
    torch.manual_seed(value)
    return value


def assert_rrms(actual, expected, tol, what, seed, floor=0.0):
    """RMS(actual - expected) <= tol * max(RMS(expected), floor).

    floor=1 suits losses: weighted means of O(1) terms that may cancel to near 0.
    """
    actual, expected = actual.double().cpu(), expected.double().cpu()
    assert actual.shape == expected.shape, f"{what}: {actual.shape} vs {expected.shape}"
    assert torch.isfinite(actual).all(), f"{what}: non-finite values (seed={seed})"
    err = (actual - expected).square().mean().sqrt().item()
    scale = max(expected.square().mean().sqrt().item(), floor)
    assert err <= tol * scale, (
        f"{what}: RMS error {err:.3g} > {tol} x {scale:.3g} (seed={seed})")


# ---------------------------------------------------------------- layer 1

def rewards_with_edge_groups(num_groups, g, dtype, device):
    """Random 0/1/2 rewards; group 0 is all equal and group 1 constant-valued too."""
    rewards = torch.randint(0, 3, (num_groups, g)).to(dtype)
    rewards[0] = 1.0
    rewards[1] = rewards[1, 0]
    return rewards.to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode, unbiased", [("grpo", False), ("grpo", True),
                                            ("drgrpo", False), ("rloo", False)])
def test_group_advantage(device, dtype, mode, unbiased, seed):
    impl = triton_impl("triton_advantage")
    shape = (7, 5, 37) if device == "cpu" else (301, 16, 1999)
    rewards = rewards_with_edge_groups(*shape[:2], dtype, device)
    mask = torch.rand(shape, device=device) > 0.3
    mask[2] = False
    for m in (None, mask):
        got = impl.group_advantage(rewards, mode=mode, unbiased_std=unbiased, mask=m)
        want = ref.group_advantage(rewards, mode=mode, unbiased_std=unbiased, mask=m)
        assert_rrms(got, want, TOLERANCE[torch.float32], f"advantage mask={m is not None}", seed)
        assert not got[:2].any(), f"all-equal groups must give exactly 0 (seed={seed})"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["grpo", "drgrpo", "rloo"])
def test_group_advantage_singleton_groups(device, mode):
    impl = triton_impl("triton_advantage")
    rewards = torch.tensor([[0.3], [7.0], [-1.0]], device=device)
    mask = torch.ones(3, 1, 5, dtype=torch.bool, device=device)
    for m in (None, mask):
        got = impl.group_advantage(rewards, mode=mode, unbiased_std=True, mask=m)
        assert torch.equal(got, torch.zeros_like(got)), got


# ---------------------------------------------------------------- layer 2

POLICY_CASES = {
    "plain": dict(),
    "dapo-seq": dict(clip_high=0.28, agg="seq-mean-token-mean"),
    "dual-tis-kl": dict(dual_clip=1.5, tis_cap=1.1, kl_coef=0.3, agg="dr_grpo", agg_const=300.0),
    "behav-uncapped": dict(clip_low=0.1, clip_high=0.1),
    # off-policy corrections: the bands and caps cut through the spread of the ratios
    # (per token exp(N(0, 0.2)); a row of ~28 tokens: product exp(N(0, ~1)), geometric mean
    # exp(N(0, ~0.04)))
    "tis-seq": dict(is_level="sequence", tis_cap=1.5),
    "mask-token": dict(mask_band=(0.85, 1.2)),
    "mask-geometric": dict(is_level="geometric", mask_band=(0.97, 1.03), agg="seq-mean-token-mean"),
    "mask-and-cap-seq": dict(is_level="sequence", mask_band=(0.3, 4.0), tis_cap=1.2),
    # verl's low_var_kl: the reference's log-ratios spread past 2.5, where the estimate clamps at 10
    "low-var-kl": dict(kl_coef=0.3, kl_estimator="low_var_kl", agg="seq-mean-token-sum"),
    "seq-sum-norm": dict(agg="seq-mean-token-sum-norm", agg_const=40.0, dual_clip=3.0),
}
BEHAV_CASES = {"dual-tis-kl", "behav-uncapped", "tis-seq", "mask-token", "mask-geometric",
               "mask-and-cap-seq"}


def policy_inputs(b, t, case, dtype, device):
    """Ratios spread over the clip and dual-clip bounds, NaN padding, one empty row."""
    old = -3 * torch.rand(b, t)
    logp = old + 0.3 * torch.randn(b, t)
    logp[:, ::5] = old[:, ::5]  # ratio exactly 1
    adv = torch.randn(b, t) if case != "plain" else torch.randn(b)
    mask = torch.rand(b, t) > 0.25
    mask[1] = False
    logp = logp.masked_fill(~mask, float("nan"))
    extra = {}
    if case in BEHAV_CASES:
        extra["behav_logp"] = (old + 0.2 * torch.randn(b, t)).to(dtype).to(device)
    if case == "dual-tis-kl":
        extra["ref_logp"] = (old + 0.2 * torch.randn(b, t)).to(dtype).to(device)
    if case == "low-var-kl":
        extra["ref_logp"] = (old + 2.5 * torch.randn(b, t)).to(dtype).to(device)
    move = lambda x: x.to(device)
    return (move(logp.to(dtype)).requires_grad_(), move(old.to(dtype)), move(adv),
            move(mask), extra)


def check_policy(impl, inputs, kwargs, dtype, seed, what):
    logp, old, adv, mask, extra = inputs
    got_loss, got_stats = impl.policy_loss(logp, old, adv, mask, **extra, **kwargs)
    want_loss, want_stats = ref.policy_loss(logp, old, adv, mask, **extra, **kwargs)
    (got_grad,) = torch.autograd.grad(got_loss, logp)
    (want_grad,) = torch.autograd.grad(want_loss, logp)
    tol = TOLERANCE[dtype]
    assert_rrms(got_loss, want_loss, TOLERANCE[torch.float32], f"{what} loss", seed, floor=1.0)
    assert_rrms(got_grad, want_grad, tol, f"{what} dL/dlogp", seed)
    assert got_grad.dtype == logp.dtype, got_grad.dtype
    assert set(got_stats) == set(want_stats), (set(got_stats), set(want_stats))
    for name in want_stats:
        assert_rrms(got_stats[name], want_stats[name], TOLERANCE[torch.float32],
                    f"{what} {name}", seed, floor=1.0 if name == "pg_loss" else 0.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", list(POLICY_CASES))
def test_policy_loss(device, dtype, case, seed):
    impl = triton_impl("triton_policy_loss")
    b, t = (5, 37) if device == "cpu" else (64, 1531)
    inputs = policy_inputs(b, t, case, dtype, device)
    check_policy(impl, inputs, POLICY_CASES[case], dtype, seed, case)


@pytest.mark.parametrize("device", DEVICES)
def test_policy_loss_ratio_on_bound(device, seed):
    # clip 0: every token with logp == old sits exactly on both bounds, unclipped.
    impl = triton_impl("triton_policy_loss")
    logp, old, adv, mask, _ = policy_inputs(4, 23, "dapo-seq", torch.float32, device)
    with torch.no_grad():
        logp.copy_(torch.where(mask, old, logp))
    kwargs = dict(clip_low=0.0, clip_high=0.0)
    check_policy(impl, (logp, old, adv, mask, {}), kwargs, torch.float32, seed, "on-bound")
    _, stats = impl.policy_loss(logp, old, adv, mask, **kwargs)
    assert stats["clip_frac"].item() == 0, stats


@pytest.mark.parametrize("device", DEVICES)
def test_policy_loss_old_log_prob_of_minus_inf(device, seed):
    # tokens the old policy gave -inf or -100: the log-ratio clamped to +-20 in both backends, a
    # finite loss and a zero gradient there, at any advantage's sign (and 0), with and without dual clip
    impl = triton_impl("triton_policy_loss")
    logp, old, adv, mask, _ = policy_inputs(5, 37, "dapo-seq", torch.float32, device)
    old = old.clone()
    old[:, ::3] = -math.inf
    old[:, 1::7] = -100.0
    adv = adv.clone()
    adv[0] = 0.0
    for kwargs in ({}, dict(dual_clip=3.0)):
        check_policy(impl, (logp, old, adv, mask, {}), kwargs, torch.float32, seed, f"old -inf {kwargs}")


@pytest.mark.parametrize("device", DEVICES)
def test_policy_loss_sequence_ratio_overflow(device, seed):
    # Rows whose product of ratios overflows float32 (old - behav = 30 on ~28 tokens: e^840):
    # capped to tis_cap or masked, never inf or NaN in the loss, the gradient or the stats.
    impl = triton_impl("triton_policy_loss")
    logp, old, adv, mask, _ = policy_inputs(5, 37, "dapo-seq", torch.float32, device)
    behav = old - 30.0
    behav[3] = old[3] + 0.01  # one ordinary row beside them
    for kwargs in (dict(is_level="sequence", tis_cap=2.0),
                   dict(is_level="sequence", mask_band=(0.5, 2.0))):
        check_policy(impl, (logp, old, adv, mask, dict(behav_logp=behav)), kwargs, torch.float32,
                     seed, f"overflow {kwargs}")


# ---------------------------------------------------------------- layer 3

def lm_head_inputs(n, h, v, dtype, device):
    hidden = torch.randn(n, h).to(dtype).to(device).requires_grad_()
    weight = (torch.randn(v, h) / h**0.25).to(dtype).to(device).requires_grad_()
    targets = torch.randint(0, v, (n,))
    targets[0], targets[-1] = v - 1, 0
    return hidden, weight, targets.to(device)


def lm_head_with_grads(fn, hidden, weight, targets, upstream, **kwargs):
    outputs = fn(hidden, weight, targets, **kwargs)
    total = sum((out * g).sum() for out, g in zip(outputs, upstream, strict=True) if g is not None)
    return outputs, torch.autograd.grad(total, (hidden, weight))


# (N, H, V, chunk_vocab) per device: vocabularies no block divides, chunks of several
# vocab tiles with a ragged last one, H over several K blocks, and a V below one tile.
LM_HEAD_SHAPES = {
    "cpu": [(37, 40, 203, 64), (20, 16, 29, 256)],
    "cuda": [(1000, 512, 32003, 2048), (333, 4096, 50021, 8192)],
}
# Reference chunks: small on the CPU to cross chunk edges, larger on the GPU for speed.
REF_CHUNKS = {"cpu": dict(chunk_rows=16, chunk_vocab=50),
              "cuda": dict(chunk_rows=256, chunk_vocab=4096)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_entropy", [True, False])
@pytest.mark.parametrize("shape", [0, 1])
def test_lm_head_logprobs(device, dtype, with_entropy, shape, seed):
    impl = triton_impl("triton_lm_head")
    n, h, v, chunk_vocab = LM_HEAD_SHAPES[device][shape]
    hidden, weight, targets = lm_head_inputs(n, h, v, dtype, device)
    upstream = [torch.randn(n, device=device), torch.randn(n, device=device) if with_entropy
                else None, torch.randn(n, device=device)]
    got, got_grads = lm_head_with_grads(impl.lm_head_logprobs, hidden, weight, targets,
                                        upstream, chunk_vocab=chunk_vocab,
                                        with_entropy=with_entropy)
    want, want_grads = lm_head_with_grads(ref.lm_head_logprobs, hidden, weight, targets,
                                          upstream, with_entropy=with_entropy,
                                          **REF_CHUNKS[device])
    for name, a, b in zip(("logp", "entropy", "lse"), got, want, strict=True):
        assert_rrms(a, b, TOLERANCE[torch.float32], f"{name}", seed)
    for name, a, b in zip(("dL/dhidden", "dL/dweight"), got_grads, want_grads, strict=True):
        assert a.dtype == dtype, (name, a.dtype)
        assert_rrms(a, b, TOLERANCE[dtype], name, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_lm_head_rows_fewer_than_a_block(device, seed):
    impl = triton_impl("triton_lm_head")
    hidden, weight, targets = lm_head_inputs(3, 17, 45, torch.float32, device)
    upstream = [torch.randn(3, device=device) for _ in range(3)]
    got, got_grads = lm_head_with_grads(impl.lm_head_logprobs, hidden, weight, targets,
                                        upstream, chunk_vocab=45)
    want, want_grads = lm_head_with_grads(ref.lm_head_logprobs, hidden, weight, targets, upstream)
    for a, b in zip(got + got_grads, want + want_grads, strict=True):
        assert_rrms(a, b, TOLERANCE[torch.float32], "tiny", seed)


# ---------------------------------------------------------------- GPU only

@pytest.mark.parametrize("device", [pytest.param("cuda", marks=CUDA_ONLY)])
def test_lm_head_memory_stays_far_below_the_logits(device):
    # fwd+bwd may hold one (N, chunk_vocab) bf16 slice of dL/dz, dH in fp32 and dW
    # (about 0.25 GB here), but nothing of order N x V: bound it at 1/4 of fp32 logits.
    n, h, v = 8192, 1024, 65536
    hidden, weight, targets = lm_head_inputs(n, h, v, torch.bfloat16, device)
    lm_head = triton_impl("triton_lm_head").lm_head_logprobs

    def step():
        logp, entropy, _ = lm_head(hidden, weight, targets, chunk_vocab=4096)
        (logp.sum() + entropy.sum()).backward()
        hidden.grad = weight.grad = None

    step()  # autotuning allocates scratch memory of its own
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    logits_bytes = n * v * 4
    assert peak < logits_bytes / 4, f"peak {peak / 1e9:.2f} GB vs fp32 logits {logits_bytes / 1e9:.2f} GB"


# The autotuner keeps one config per key: each of the others would otherwise never run here.
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=CUDA_ONLY)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("config", range(5))
def test_every_lm_head_autotune_config(device, dtype, config, seed, monkeypatch):
    """Each config alone, at Qwen's real vocabulary (151,936: the last 8192-wide chunk is 4480 wide,
    no multiple of BLOCK_V = 256) and a row count no BLOCK_M divides."""
    impl = triton_impl("triton_lm_head")
    configs = impl._gemm_configs()
    assert len(configs) == 5, "update this test's range to the configs"
    for kernel in (impl._forward_kernel, impl._dlogits_kernel):
        monkeypatch.setattr(kernel, "configs", [configs[config]])
        monkeypatch.setattr(kernel, "cache", {})
    n, h, v = 1031, 2048, 151936
    hidden, weight, targets = lm_head_inputs(n, h, v, dtype, device)
    upstream = [torch.randn(n, device=device) for _ in range(3)]
    try:
        got, got_grads = lm_head_with_grads(impl.lm_head_logprobs, hidden, weight, targets, upstream,
                                            chunk_vocab=8192)
    except triton.runtime.errors.OutOfResources as exc:
        # fp32 tiles are twice the bytes: the autotuner drops a config that does not fit, as here
        assert dtype == torch.float32, f"bf16 config {configs[config]} does not fit: {exc}"
        pytest.skip(f"fp32 {configs[config]} needs more shared memory than this device has: {exc}")
    want, want_grads = lm_head_with_grads(ref.lm_head_logprobs, hidden, weight, targets, upstream,
                                          **REF_CHUNKS[device])
    for name, a, b in zip(("logp", "entropy", "lse"), got, want, strict=True):
        assert_rrms(a, b, TOLERANCE[torch.float32], f"{name} ({configs[config]})", seed)
    for name, a, b in zip(("dL/dhidden", "dL/dweight"), got_grads, want_grads, strict=True):
        assert_rrms(a, b, TOLERANCE[dtype], f"{name} ({configs[config]})", seed)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=CUDA_ONLY)])
def test_dispatcher_sends_cuda_tensors_to_triton(device, monkeypatch):
    monkeypatch.delenv("JURY_KERNELS", raising=False)
    assert kernels.backend(torch.zeros(1, device=device)) == "triton"


# ---------------------------------------------------------------- compiled for GPUs

HOPPER, ADA = 90, 89  # H100/H200 (learner nodes); L40S (cluster.yaml's generator nodes)
# The most shared memory one program may use (CUDA's opt-in limit per block): 227 KB on sm_90,
# 99 KB on sm_89. Triton's autotuner drops a config past it at launch (OutOfResources).
SHARED_LIMIT = {HOPPER: 227 * 1024, ADA: 99 * 1024}


def compile_for(kernel, types, constexprs, arch=HOPPER, num_warps=4, num_stages=3):
    """Compile a kernel for sm_<arch> without a GPU, as the JIT would launch it: integers and
    pointers hinted 16-divisible, which real strides and sizes are. Skips, naming what is missing,
    where this Triton cannot build for that target (its bundled ptxas, a CUDA toolchain)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = kernel.fn if isinstance(kernel, triton.runtime.Autotuner) else kernel
    signature = {name: "constexpr" if name in constexprs else types.get(name, "i32")
                 for name in fn.arg_names}
    hinted = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(fn.arg_names)
              if signature[name] == "i32" or signature[name].startswith("*")}
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=hinted)
    try:
        return triton.compile(source, target=GPUTarget("cuda", arch, 32),
                              options=dict(num_warps=num_warps, num_stages=num_stages))
    except (RuntimeError, FileNotFoundError, PermissionError) as e:
        if "ptxas" in str(e) or "cuda" in str(e).lower():
            pytest.skip(f"cannot compile for sm_{arch} here (needs ptxas / a CUDA toolchain): {e}")
        raise


def compile_for_hopper(kernel, types, constexprs, num_warps=4, num_stages=3):
    return compile_for(kernel, types, constexprs, HOPPER, num_warps, num_stages)


LM_HEAD_TYPES = {**{name: "*fp32" for name in ("max_ptr", "sum_ptr", "pz_ptr", "zt_ptr", "lse_ptr",
                                               "c0_ptr", "glogp_ptr", "gent_ptr")},
                 "h_ptr": "*bf16", "w_ptr": "*bf16", "dz_ptr": "*bf16", "tgt_ptr": "*i64"}
ELEMENTWISE_TYPES = {**{name: "fp32" for name in ("clip_low", "clip_high", "dual_clip", "tis_cap", "mask_low",
                                                  "mask_high", "kl_coef", "eps", "var_div", "loo_div")},
                     **{name: "*fp32" for name in ("logp_ptr", "old_ptr", "adv_ptr", "behav_ptr", "ref_ptr",
                                                   "row_ptr", "scale_ptr", "grad_ptr", "sums_ptr", "rew_ptr",
                                                   "out_ptr")},
                     "mask_ptr": "*u8"}
POLICY_FLAGS = dict(HAS_DUAL=True, HAS_BEHAV=True, ROW_IS=True, HAS_CAP=True, HAS_BAND=True, HAS_REF=True)


def lm_head_kernels(lm):
    return ((lm._forward_kernel, dict(WITH_ENTROPY=True)), (lm._dlogits_kernel, dict(GROUP_M=8)))


@pytest.mark.skipif(INTERPRETING, reason="compiles real kernels")
def test_lm_head_kernels_compile_to_pipelined_tensor_core_code():
    lm = triton_impl("triton_lm_head")
    config = lm._gemm_configs()[0]
    block = dict(config.kwargs, DOT_FP32=False)
    stage_bytes = (block["BLOCK_M"] + block["BLOCK_V"]) * block["BLOCK_K"] * 2
    for kernel, extra in lm_head_kernels(lm):
        compiled = compile_for_hopper(kernel, LM_HEAD_TYPES, {**block, **extra},
                                      config.num_warps, config.num_stages)
        ptx, name = compiled.asm["ptx"], compiled.name
        assert "wgmma.mma_async" in ptx, f"{name}: no Hopper tensor-core MMA"
        assert "ld.local" not in ptx, f"{name}: registers spill to local memory"
        assert compiled.metadata.shared >= 2 * stage_bytes, f"{name}: loads are not pipelined"


@pytest.mark.skipif(INTERPRETING, reason="compiles real kernels")
def test_elementwise_kernels_compile():
    policy = triton_impl("triton_policy_loss")
    compile_for_hopper(policy._policy_loss_kernel, ELEMENTWISE_TYPES,
                       dict(POLICY_FLAGS, NUM_SUMS=len(ref.SUM_COLUMNS), BLOCK_T=2048))
    advantage = triton_impl("triton_advantage")
    for mode in range(len(ref.ADVANTAGE_MODES)):
        compile_for_hopper(advantage._group_advantage_kernel, ELEMENTWISE_TYPES,
                           dict(MODE=mode, PER_TOKEN=True, BLOCK_G=16, BLOCK_T=512))


@pytest.mark.skipif(INTERPRETING, reason="compiles real kernels")
def test_an_lm_head_autotune_config_fits_ada_shared_memory():
    """On an sm_89 GPU (L40S, 99 KB per program) at least one autotune config of each LM-head
    kernel must fit, or the autotuner has nothing to launch. The shared memory is what Triton's
    own compile for sm_89 reports, the number its launcher checks."""
    lm = triton_impl("triton_lm_head")
    for kernel, extra in lm_head_kernels(lm):
        used = {}
        for config in lm._gemm_configs():
            compiled = compile_for(kernel, LM_HEAD_TYPES, dict(config.kwargs, DOT_FP32=False, **extra), ADA,
                                   config.num_warps, config.num_stages)
            used[f"{config.kwargs} stages={config.num_stages}"] = compiled.metadata.shared
        assert min(used.values()) <= SHARED_LIMIT[ADA], f"{kernel.fn.__name__}: no config fits sm_89: {used}"


# The integer arguments each kernel multiplies a row (or group) index by: a product of two int32
# values overflows past 2**31 elements (e.g. 65,536 rows x a 32,768-wide stride), so each product
# must be taken in int64 (`.to(tl.int64)` on the index), which the compiled IR shows.
ROW_MULTIPLIERS = {
    "_forward_kernel": ("stride_h", "stride_w", "NUM_CHUNKS"),
    "_dlogits_kernel": ("stride_h", "stride_w", "stride_dz"),
    "_policy_loss_kernel": ("T", "adv_stride_b"),
    "_group_advantage_kernel": ("G", "T"),
}


def _int32_products(ttir: str, multipliers) -> list[str]:
    """Lines of Triton IR that multiply by one of `multipliers` (kernel arguments), or by a tensor
    splat from one, in int32. Column products (`cols * stride_t`, bounded by a row's length) may
    stay int32."""
    import re

    names = {f"%{m}" for m in multipliers}
    for line in ttir.splitlines():  # %x = tt.splat %stride_h : i32 -> tensor<...xi32>
        found = re.match(r"\s*(%\S+) = tt\.splat (%\S+) : i32 ->", line)
        if found and found.group(2) in names:
            names.add(found.group(1))
    bad = []
    for line in ttir.splitlines():
        found = re.match(r"\s*%\S+ = arith\.muli (%\S+), (%\S+) : (\S+)", line)
        if found and {found.group(1), found.group(2)} & names and found.group(3).endswith(("i32", "xi32>")):
            bad.append(line.strip())
    return bad


@pytest.mark.skipif(INTERPRETING, reason="compiles real kernels")
def test_row_offsets_are_computed_in_int64():
    lm = triton_impl("triton_lm_head")
    config = lm._gemm_configs()[0]
    compiled = [compile_for_hopper(k, LM_HEAD_TYPES, dict(config.kwargs, DOT_FP32=False, **extra),
                                   config.num_warps, config.num_stages) for k, extra in lm_head_kernels(lm)]
    compiled.append(compile_for_hopper(triton_impl("triton_policy_loss")._policy_loss_kernel, ELEMENTWISE_TYPES,
                                       dict(POLICY_FLAGS, NUM_SUMS=len(ref.SUM_COLUMNS), BLOCK_T=2048)))
    compiled.append(compile_for_hopper(triton_impl("triton_advantage")._group_advantage_kernel, ELEMENTWISE_TYPES,
                                       dict(MODE=0, PER_TOKEN=True, BLOCK_G=16, BLOCK_T=512)))
    for c in compiled:
        ttir, multipliers = c.asm["ttir"], ROW_MULTIPLIERS[c.name]
        for m in multipliers:  # each is widened before it scales an index
            assert f"arith.extsi %{m} : i32 to i64" in ttir, f"{c.name}: {m} is never widened to int64"
        assert not _int32_products(ttir, multipliers), f"{c.name}: int32 offsets: {_int32_products(ttir, multipliers)}"
