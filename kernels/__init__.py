"""Fused RL-loss kernels: Triton on CUDA tensors, the PyTorch reference elsewhere.

The learner calls only the four functions below, in this order per step:

    adv = group_advantage(rewards, mode="grpo", mask=completion_mask)     # layer 1
    logp, ent, _ = lm_head_logprobs(hidden[rows], head.weight, targets)   # layer 3
    loss, stats = policy_loss(logp_bt, old_logp, adv, completion_mask)    # layer 2
    loss.backward()    # layer 2 hands dL/dlogp to layer 3's backward

Only completion rows should enter lm_head_logprobs: the caller selects them.
JURY_KERNELS=reference|triton overrides the per-tensor choice. This package imports
only torch; triton is imported the first time a CUDA tensor reaches a dispatcher.
"""

import importlib
import os

import torch

from . import reference

__all__ = ["backend", "group_advantage", "lm_head_logprobs", "policy_loss"]

_BACKENDS = ("reference", "triton")
_TRITON_MODULES = {
    "group_advantage": "triton_advantage",
    "policy_loss": "triton_policy_loss",
    "lm_head_logprobs": "triton_lm_head",
}


def _triton_importable() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def backend(tensor: torch.Tensor | None = None) -> str:
    """'triton' or 'reference': the implementation a dispatcher uses for `tensor`.

    Without a tensor, answers for tensors on the default device of this machine
    (CUDA if available). JURY_KERNELS=reference|triton forces one everywhere.
    """
    forced = os.environ.get("JURY_KERNELS", "")
    if forced:
        if forced not in _BACKENDS:
            raise ValueError(f"JURY_KERNELS={forced!r}; expected one of {_BACKENDS}")
        return forced
    on_cuda = tensor.is_cuda if tensor is not None else torch.cuda.is_available()
    return "triton" if on_cuda and _triton_importable() else "reference"


def _implementation(name: str, tensor: torch.Tensor):
    if backend(tensor) == "reference":
        return getattr(reference, name)
    module = importlib.import_module(f".{_TRITON_MODULES[name]}", __name__)
    return getattr(module, name)


def group_advantage(rewards, *, mode="grpo", eps=1e-6, unbiased_std=False, mask=None):
    """Group-normalised advantages from rewards (num_groups, G).

    mode: "grpo" (r - mean) / (std + eps); "drgrpo" r - mean; "rloo" r - mean of the
    other G-1. Groups whose rewards are all equal (singletons included) get exactly 0.
    With mask (num_groups, G, T) the advantage is written per token, 0 where mask == 0.
    Returns float32 (float64 for float64 rewards).
    """
    impl = _implementation("group_advantage", rewards)
    return impl(rewards, mode=mode, eps=eps, unbiased_std=unbiased_std, mask=mask)


def policy_loss(logp, old_logp, advantages, mask, *, behav_logp=None, ref_logp=None,
                clip_low=0.2, clip_high=0.2, dual_clip=None, kl_coef=0.0, kl_estimator="k3", tis_cap=None,
                is_level="token", mask_band=None, agg="token-mean", agg_const=None):
    """Clipped-ratio policy loss over per-token tensors (B, T); returns (loss, stats).

    ratio r = exp(logp - old_logp); per token (A = advantage, (B,) or (B, T)):
      pg  = -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)
      pg  = min(pg, -dual_clip A) where A < 0                  (if dual_clip)
      pg *= f(w)                                               (if behav_logp)
      l   = pg + kl_coef * k3,  k3 = exp(ref - logp) - (ref - logp) - 1
            kl_estimator "low_var_kl" (verl's): ref - logp clamped to +-20, k3 to <= 10
    loss = sum over tokens with mask != 0 of l * s_b, s_b set by agg (named after its source):
      "token-mean" 1/tokens (verl; TRL dapo), "seq-mean-token-mean" 1/(len_b * sequences) (verl;
      TRL grpo), "seq-mean-token-sum" 1/sequences (verl), "seq-mean-token-sum-norm" 1/agg_const
      (verl's Dr.GRPO, agg_const = the response length), "dr_grpo" 1/agg_const (TRL's, agg_const
      = max length * sequences); for the first three, agg_const (if given) is the tokens /
      sequences to divide by (a whole mini-batch's, when this call holds one micro-batch of it).

    Importance weight, with behav_logp: w is the ratio pi_old / pi_behav of the policy the
    ratio r is taken against to the one that sampled, taken per is_level:
      "token"      w_t = exp(old_t - behav_t)
      "sequence"   w_b = exp(sum_t (old_t - behav_t))          on every token of row b
      "geometric"  w_b = exp(mean_t (old_t - behav_t))         on every token of row b
    f(w) = 0 where w is outside mask_band = (low, high) (masked), else min(w, tis_cap)
    (truncated where w > tis_cap); either may be None. A value exactly on a bound is kept.
    A ratio exactly on a clip bound is not clipped. Padding may hold any value.
    Differentiable w.r.t. logp only. stats (0-d, detached): pg_loss, clip_frac,
    dual_clip_frac, approx_kl (k3 vs ref if given, else vs old), tis_frac (share of tokens
    truncated), mask_frac (share masked), is_weight_mean and is_weight_sq_mean (of f(w) over
    tokens: the normalised effective sample size is is_weight_mean^2 / is_weight_sq_mean),
    behav_kl (k3 estimate of KL(pi_behav || pi_old) per token: w_t - log w_t - 1, from each
    token's own ratio), ratio_mean, tokens.
    """
    impl = _implementation("policy_loss", logp)
    return impl(logp, old_logp, advantages, mask, behav_logp=behav_logp, ref_logp=ref_logp,
                clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip, kl_coef=kl_coef,
                kl_estimator=kl_estimator, tis_cap=tis_cap, is_level=is_level, mask_band=mask_band, agg=agg,
                agg_const=agg_const)


def lm_head_logprobs(hidden, weight, targets, *, chunk_rows=1024, chunk_vocab=8192,
                     with_entropy=True):
    """(logp, entropy, lse), each (N,) float32, of logits = hidden (N, H) @ weight (V, H).T.

    logp = z[target] - lse, entropy = lse - sum(softmax(z) * z); full logits never exist.
    Backward takes dL/dlogp, dL/dentropy (and dL/dlse) and gives dL/dhidden, dL/dweight,
    dW accumulated in float32. Memory: the reference holds chunk_rows x chunk_vocab
    logits at a time; Triton holds an N x chunk_vocab gradient slice in the backward.
    """
    impl = _implementation("lm_head_logprobs", hidden)
    return impl(hidden, weight, targets, chunk_rows=chunk_rows, chunk_vocab=chunk_vocab,
                with_entropy=with_entropy)
