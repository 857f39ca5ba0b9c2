"""Log-probs under the nucleus a generator sampled from (generator.top_p < 1): an unfused path.

vLLM samples a nucleus token from the logits / temperature with the tokens outside the top-p
mass removed, and its log-probs (logprobs_mode processed_logprobs) are renormalised over what is
left. The learner scores the same way, with vLLM's own rule (vllm/v1/sample/ops/topk_topp_sampler.py,
apply_top_k_top_p_pytorch): sort the logits ascending, softmax, and drop the tokens whose
cumulative probability from the bottom is at most 1 - p, always keeping the largest. The log-prob
of a token is then z_t - LSE over the nucleus; which tokens are in it is taken as fixed (no
gradient through the cut), as every sampler's nucleus is.

A sampled token can be outside the learner's nucleus only when the learner's policy has moved
since (staleness > 0): its probability under the truncated policy is 0. It is scored under the
whole distribution instead, so that the ratio stays finite (a 0 would make the KL to a reference
infinite); `nucleus_outputs.outside` counts them (their share of the tokens: learner/nucleus_outside).

The full logits of a chunk of rows exist at once (chunk_rows x V), recomputed in the backward
(torch checkpoint), so memory stays bounded on a large vocabulary.
"""
from __future__ import annotations

import math

import torch
from torch.utils.checkpoint import checkpoint

CHUNK_ROWS = 1024


def nucleus_mask(z: torch.Tensor, top_p: float) -> torch.Tensor:
    """(N, V) bool: the tokens vLLM keeps at top_p, for logits z (already divided by the temperature)."""
    z_sort, order = z.sort(dim=-1, descending=False)
    mass = z_sort.softmax(dim=-1).cumsum(dim=-1)
    drop = mass <= 1 - top_p
    drop[:, -1] = False  # at least one
    return torch.zeros_like(drop).scatter_(-1, order, ~drop)


def _chunk(head, hidden, targets, top_p: float, certainty: bool):
    # the head module itself (ZeRO-3 gathers its weight around its forward): the logits / temperature,
    # since hidden was divided by it; (n, V)
    z = head(hidden)
    z = z if z.dtype == torch.float64 else z.float()  # bf16 logits would cost ~1e-2 in log-prob
    keep = nucleus_mask(z.detach(), top_p)
    inside = keep.gather(1, targets.unsqueeze(1)).squeeze(1)
    lse_nucleus = torch.logsumexp(z.masked_fill(~keep, -math.inf), dim=-1)
    lse_all = torch.logsumexp(z, dim=-1)
    picked = z.gather(1, targets.unsqueeze(1)).squeeze(1)
    logp = picked - torch.where(inside, lse_nucleus, lse_all)
    # the entropy of the whole distribution, as the fused path gives it: RENT's reward and verl's
    # entropy are over every token (not the nucleus, whose entropy is lower)
    entropy = lse_all - (torch.softmax(z, dim=-1) * z).sum(-1)
    outs = [logp, entropy, inside.float()]
    if certainty:  # KL(U || p) is over the whole vocabulary, as Intuitor defines it
        outs.append(lse_all - z.mean(-1) - math.log(z.shape[-1]))
    return tuple(outs)


def nucleus_outputs(head, hidden: torch.Tensor, targets: torch.Tensor, top_p: float, certainty: bool = False):
    """(log-prob, entropy[, self-certainty]) per row (N,): the log-prob under the nucleus, the entropy
    and self-certainty over the whole distribution (as at top_p 1); `head` is the model's LM head
    module (called, so that ZeRO-3 gathers its weight). Rows outside their nucleus are counted in
    `nucleus_outputs.outside` (a tensor; grpo.micro_loss makes it learner/nucleus_outside)."""
    outs: list[list[torch.Tensor]] = []
    for start in range(0, hidden.shape[0], CHUNK_ROWS):
        h, t = hidden[start:start + CHUNK_ROWS], targets[start:start + CHUNK_ROWS]
        if torch.is_grad_enabled():  # the chunk's logits are recomputed in the backward, not kept
            outs.append(checkpoint(_chunk, head, h, t, top_p, certainty, use_reentrant=False))
        else:
            outs.append(_chunk(head, h, t, top_p, certainty))
    cols = [torch.cat(col) if outs else hidden.new_zeros(0) for col in zip(*outs)]
    logp, entropy, inside = cols[0], cols[1], cols[2]
    nucleus_outputs.outside = (inside == 0).sum()
    return (logp, entropy, cols[3]) if certainty else (logp, entropy)
