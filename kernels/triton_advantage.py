"""Layer 1 in Triton: group-normalised advantages, optionally written out per token.

Each program reads one group's rewards (a few values), so the cost is the per-token
write; the grid also splits the token axis so that few large groups still fill the GPU.
"""

import torch
import triton
import triton.language as tl

from .reference import ADVANTAGE_MODES, check_advantage_args

_MODE_CODES = {mode: code for code, mode in enumerate(ADVANTAGE_MODES)}


@triton.jit
def _group_advantage_kernel(rew_ptr, mask_ptr, out_ptr, G, T, eps, var_div, loo_div,
                            MODE: tl.constexpr, PER_TOKEN: tl.constexpr,
                            BLOCK_G: tl.constexpr, BLOCK_T: tl.constexpr):
    group = tl.program_id(0).to(tl.int64)
    gi = tl.arange(0, BLOCK_G)
    in_group = gi < G
    r = tl.load(rew_ptr + group * G + gi, mask=in_group, other=0.0).to(tl.float32)
    total = tl.sum(r, axis=0)
    centred = tl.where(in_group, r - total / G, 0.0)
    if MODE == 0:  # grpo
        std = tl.sqrt(tl.sum(centred * centred, axis=0) / var_div)
        adv = centred / (std + eps)
    elif MODE == 1:  # drgrpo
        adv = centred
    else:  # rloo
        adv = r - (total - r) / loo_div
    # All-equal groups (singletons too) carry no signal: exactly 0, as in the reference.
    r_max = tl.max(tl.where(in_group, r, float("-inf")), axis=0)
    r_min = tl.min(tl.where(in_group, r, float("inf")), axis=0)
    adv = tl.where(r_max == r_min, 0.0, adv)

    if PER_TOKEN:
        t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
        offs = (group * G + gi[:, None]) * T + t[None, :]
        inside = in_group[:, None] & (t[None, :] < T)
        m = tl.load(mask_ptr + offs, mask=inside, other=0).to(tl.float32)
        tl.store(out_ptr + offs, adv[:, None] * m, mask=inside)
    else:
        tl.store(out_ptr + group * G + gi, adv, mask=in_group)


def group_advantage(rewards, *, mode="grpo", eps=1e-6, unbiased_std=False, mask=None,
                    block_t=None):
    """Triton twin of reference.group_advantage (same arguments and results).

    block_t: tokens per program under a mask (default: tiles of about 8k values).
    """
    check_advantage_args(rewards, mode, mask)
    num_groups, g = rewards.shape
    block_g = triton.next_power_of_2(g)
    shape = rewards.shape if mask is None else mask.shape
    out_dtype = torch.float64 if rewards.dtype == torch.float64 else torch.float32
    out = torch.empty(shape, dtype=out_dtype, device=rewards.device)
    if out.numel() == 0:
        return out
    t = 1 if mask is None else shape[2]
    block_t = block_t or min(max(16, 8192 // block_g), triton.next_power_of_2(t))
    if mask is None:
        mask = rewards  # never read: PER_TOKEN is off
    elif mask.dtype == torch.bool:
        mask = mask.contiguous().view(torch.uint8)  # Triton has no bool pointers
    _group_advantage_kernel[(num_groups, triton.cdiv(t, block_t))](
        rewards.contiguous(), mask.contiguous(), out, g, t, eps,
        float(max(g - 1 if unbiased_std else g, 1)), float(max(g - 1, 1)),
        MODE=_MODE_CODES[mode], PER_TOKEN=out.dim() == 3, BLOCK_G=block_g, BLOCK_T=block_t,
    )
    return out
