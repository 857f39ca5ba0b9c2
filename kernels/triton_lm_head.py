"""Layer 3 in Triton: chosen-token log-prob, entropy and log-sum-exp straight from the LM head.

Forward: one GEMM kernel whose programs each own BLOCK_M rows x one vocabulary chunk.
They stream the chunk tile by tile (tl.dot, bf16 in, fp32 accumulate) and keep an
online log-sum-exp, the running sum of p*z for the entropy, and the target logit;
a few (N, chunks) partials are merged on the host. Logits never reach memory.

Backward, per vocabulary chunk of width C: a second GEMM kernel recomputes the logits
tile by tile and writes dL/dz = g_logp * onehot + p * (c0 - g_ent * z) for all N rows
as an (N, C) slice in the input dtype; two cuBLAS GEMMs then give that chunk's share
of dH (summed in fp32 across chunks) and its complete rows of dW (one GEMM over all N
rows, so dW is accumulated in fp32 inside cuBLAS and rounded once).
FLOPs: forward 2NHV, backward 6NHV (recompute, dH, dW).
"""

import os

import torch
import triton
import triton.language as tl

from . import reference


def _gemm_configs():
    # The interpreter runs every config, so it gets a single small one; it also needs
    # blocks of at least 16 for tl.dot.
    if os.environ.get("TRITON_INTERPRET") == "1":
        return [triton.Config({"BLOCK_M": 16, "BLOCK_V": 32, "BLOCK_K": 16})]
    # On an H200 (bf16, H = 4096, 16k rows, Qwen's vocabulary) the 256x128 tile ran the forward at
    # 444 TFLOP/s against 391-398 for the 128-row ones (docs/results.md); it needs 147 KB of shared
    # memory in bf16, more than an L40S has, where the autotuner skips it.
    return [
        triton.Config({"BLOCK_M": 256, "BLOCK_V": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_V": 256, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_V": 128, "BLOCK_K": 64}, num_warps=8, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_V": 128, "BLOCK_K": 64}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_V": 256, "BLOCK_K": 64}, num_warps=4, num_stages=4),
    ]


@triton.jit
def _logits_tile(h_ptr, w_ptr, rows, cols, N, V_END, H, stride_h, stride_w,
                 DOT_FP32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_V: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    """z[rows, cols] = h[rows] @ w[cols].T in fp32; rows >= N or cols >= V_END read as 0."""
    ks = tl.arange(0, BLOCK_K)
    h_ptrs = h_ptr + rows[:, None].to(tl.int64) * stride_h + ks[None, :]
    w_ptrs = w_ptr + cols[:, None].to(tl.int64) * stride_w + ks[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_V), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        in_k = (k0 + ks) < H
        a = tl.load(h_ptrs, mask=(rows[:, None] < N) & in_k[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=(cols[:, None] < V_END) & in_k[None, :], other=0.0)
        if DOT_FP32:
            # fp32 inputs must not silently drop to tf32, and the interpreter cannot
            # multiply bf16: both take the exact fp32 product.
            acc = tl.dot(a.to(tl.float32), tl.trans(b.to(tl.float32)), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, tl.trans(b), acc)
        h_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    return acc


@triton.autotune(configs=_gemm_configs(), key=["H", "CHUNK_V", "DOT_FP32"])
@triton.jit
def _forward_kernel(h_ptr, w_ptr, tgt_ptr, max_ptr, sum_ptr, pz_ptr, zt_ptr,
                    N, V, H, stride_h, stride_w, NUM_CHUNKS, CHUNK_V,
                    WITH_ENTROPY: tl.constexpr, DOT_FP32: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_K: tl.constexpr):
    # Chunks of the same rows are adjacent program ids, so the rows being worked on at
    # once stay few enough to live in L2 while the vocabulary streams past.
    pid = tl.program_id(0)
    pid_m = pid // NUM_CHUNKS
    chunk = pid % NUM_CHUNKS
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    tgt = tl.load(tgt_ptr + rows, mask=rows < N, other=-1)
    v_start = chunk * CHUNK_V
    v_end = tl.minimum(v_start + CHUNK_V, V)

    run_max = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BLOCK_M,), tl.float32)
    run_pz = tl.zeros((BLOCK_M,), tl.float32)
    z_tgt = tl.zeros((BLOCK_M,), tl.float32)
    for v0 in range(v_start, v_end, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        z = _logits_tile(h_ptr, w_ptr, rows, cols, N, v_end, H, stride_h, stride_w,
                         DOT_FP32, BLOCK_M, BLOCK_V, BLOCK_K)
        # Columns past the chunk read as z = 0; -inf makes their p exactly 0.
        z_in = tl.where(cols[None, :] < v_end, z, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(z_in, axis=1))
        alpha = tl.exp(run_max - new_max)
        p = tl.exp(z_in - new_max[:, None])
        run_sum = run_sum * alpha + tl.sum(p, axis=1)
        if WITH_ENTROPY:
            run_pz = run_pz * alpha + tl.sum(p * z, axis=1)
        z_tgt += tl.sum(tl.where(cols[None, :] == tgt[:, None], z, 0.0), axis=1)
        run_max = new_max

    part = rows.to(tl.int64) * NUM_CHUNKS + chunk
    tl.store(max_ptr + part, run_max, mask=rows < N)
    tl.store(sum_ptr + part, run_sum, mask=rows < N)
    tl.store(pz_ptr + part, run_pz, mask=rows < N)
    tl.store(zt_ptr + rows, z_tgt, mask=(rows < N) & (tgt >= v_start) & (tgt < v_end))


@triton.autotune(configs=_gemm_configs(), key=["H", "WIDTH", "DOT_FP32"])
@triton.jit
def _dlogits_kernel(h_ptr, w_ptr, tgt_ptr, lse_ptr, c0_ptr, glogp_ptr, gent_ptr, dz_ptr,
                    N, H, V_START, WIDTH, stride_h, stride_w, stride_dz,
                    DOT_FP32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_V: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped tile order (as in a standard GEMM) so that consecutive programs share
    # both h rows and w rows in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(N, BLOCK_M)
    tiles_v = tl.cdiv(WIDTH, BLOCK_V)
    group = pid // (GROUP_M * tiles_v)
    first_m = group * GROUP_M
    size_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_v)) % size_m
    pid_v = (pid % (GROUP_M * tiles_v)) // size_m

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    local = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)
    cols = V_START + local
    z = _logits_tile(h_ptr, w_ptr, rows, cols, N, V_START + WIDTH, H, stride_h, stride_w,
                     DOT_FP32, BLOCK_M, BLOCK_V, BLOCK_K)
    in_n = rows < N
    lse = tl.load(lse_ptr + rows, mask=in_n, other=0.0)
    c0 = tl.load(c0_ptr + rows, mask=in_n, other=0.0)
    g_logp = tl.load(glogp_ptr + rows, mask=in_n, other=0.0)
    g_ent = tl.load(gent_ptr + rows, mask=in_n, other=0.0)
    tgt = tl.load(tgt_ptr + rows, mask=in_n, other=-1)

    p = tl.exp(z - lse[:, None])
    dz = p * (c0[:, None] - g_ent[:, None] * z)
    dz += tl.where(cols[None, :] == tgt[:, None], g_logp[:, None], 0.0)
    out = dz_ptr + rows[:, None].to(tl.int64) * stride_dz + local[None, :]
    tl.store(out, dz, mask=in_n[:, None] & (local[None, :] < WIDTH))


def _dot_fp32(hidden):
    # CPU tensors only reach Triton under the interpreter, which cannot multiply bf16.
    return hidden.dtype == torch.float32 or not hidden.is_cuda


def _forward(hidden, weight, targets, chunk_vocab, with_entropy):
    """(logp, lse, sum p*z) per row from the fused kernel plus a host merge of partials."""
    n, h = hidden.shape
    v = weight.shape[0]
    num_chunks = triton.cdiv(v, chunk_vocab)
    part = torch.empty(3, n, num_chunks, dtype=torch.float32, device=hidden.device)
    # Checking target ids would cost a device sync; a target outside [0, V) is never
    # written and so comes out as a NaN log-prob rather than a plausible number.
    z_tgt = torch.full((n,), float("nan"), dtype=torch.float32, device=hidden.device)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_M"]) * num_chunks,)
    _forward_kernel[grid](
        hidden, weight, targets, part[0], part[1], part[2], z_tgt,
        n, v, h, hidden.stride(0), weight.stride(0), num_chunks, chunk_vocab,
        WITH_ENTROPY=with_entropy, DOT_FP32=_dot_fp32(hidden),
    )
    run_max, run_sum, run_pz = part
    top = run_max.amax(dim=1, keepdim=True)
    rescale = torch.exp(run_max - top)
    total = (run_sum * rescale).sum(dim=1)
    lse = top.squeeze(1) + torch.log(total)
    mean_z = (run_pz * rescale).sum(dim=1) / total
    return z_tgt - lse, lse, mean_z


def _backward(hidden, weight, targets, lse, c0, g_logp, g_ent, chunk_vocab, need_dh, need_dw):
    """dL/dhidden and dL/dweight, one vocabulary chunk of dL/dz at a time."""
    n, h = hidden.shape
    v = weight.shape[0]
    dz = torch.empty(n, min(chunk_vocab, v), dtype=hidden.dtype, device=hidden.device)
    dh = torch.zeros(n, h, dtype=torch.float32, device=hidden.device) if need_dh else None
    dw = torch.empty_like(weight) if need_dw else None
    for v0 in range(0, v, chunk_vocab):
        width = min(chunk_vocab, v - v0)
        grid = lambda meta, width=width: (
            triton.cdiv(n, meta["BLOCK_M"]) * triton.cdiv(width, meta["BLOCK_V"]),)
        _dlogits_kernel[grid](
            hidden, weight, targets, lse, c0, g_logp, g_ent, dz,
            n, h, v0, width, hidden.stride(0), weight.stride(0), dz.stride(0),
            DOT_FP32=_dot_fp32(hidden), GROUP_M=8,
        )
        dz_chunk = dz[:, :width]
        if need_dh:
            dh += dz_chunk @ weight[v0:v0 + width]
        if need_dw:
            torch.mm(dz_chunk.T, hidden, out=dw[v0:v0 + width])
    return (dh.to(hidden.dtype) if need_dh else None), dw


class _LMHeadLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk_vocab, with_entropy):
        logp, lse, mean_z = _forward(hidden, weight, targets, chunk_vocab, with_entropy)
        entropy = lse - mean_z if with_entropy else torch.zeros_like(lse)
        if not with_entropy:
            ctx.mark_non_differentiable(entropy)
        ctx.save_for_backward(hidden, weight, targets, lse, mean_z)
        ctx.chunk_vocab = chunk_vocab
        return logp, entropy, lse

    @staticmethod
    def backward(ctx, g_logp, g_ent, g_lse):
        hidden, weight, targets, lse, mean_z = ctx.saved_tensors
        need_dh, need_dw = ctx.needs_input_grad[:2]
        g_logp, g_ent = g_logp.float().contiguous(), g_ent.float().contiguous()
        c0 = (g_lse.float() - g_logp + g_ent * mean_z).contiguous()
        dh, dw = _backward(hidden, weight, targets, lse, c0, g_logp, g_ent, ctx.chunk_vocab,
                           need_dh, need_dw)
        return dh, dw, None, None, None


def lm_head_logprobs(hidden, weight, targets, *, chunk_rows=1024, chunk_vocab=8192,
                     with_entropy=True):
    """Triton twin of reference.lm_head_logprobs (same arguments and results).

    chunk_rows is accepted for the common signature but unused: the forward holds no
    logits, and the backward holds an (N, chunk_vocab) slice of dL/dz.
    """
    reference.check_lm_head_args(hidden, weight, targets)
    if hidden.shape[0] == 0:  # no grid of zero programs; the reference handles it
        return reference.lm_head_logprobs(hidden, weight, targets, with_entropy=with_entropy)
    hidden, weight, targets = hidden.contiguous(), weight.contiguous(), targets.contiguous()
    return _LMHeadLogprobs.apply(hidden, weight, targets, chunk_vocab, with_entropy)
