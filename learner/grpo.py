"""GRPO on a batch of scored groups: collation, advantages, the clipped-ratio loss.

Pure functions over tensors and messages; the DeepSpeed engine lives in
`learner.py`. Every numeric step goes through the `jury.kernels` dispatcher.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from jury import kernels
from jury.protocol.config import LearnerConfig
from jury.protocol.messages import ScoredGroup
from jury.protocol.plan import Sampling


@dataclass
class Batch:
    """The samples of one learner step, right-padded."""
    input_ids: torch.Tensor      # (N, L) int64, prompt + completion
    attention: torch.Tensor      # (N, L) int64
    completion: torch.Tensor     # (N, L-1) float32, 1 where position t predicts a completion token
    behav_logp: torch.Tensor     # (N, L-1) float32, generator log-probs aligned with `completion`
    advantages: torch.Tensor     # (N,) float32
    rewards: torch.Tensor        # (N,) float32
    num_groups: int

    @property
    def num_tokens(self) -> int:
        return int(self.completion.sum().item())


def collate(groups: list[ScoredGroup], cfg: LearnerConfig, pad_id: int) -> Batch | None:
    """Samples of all usable groups: not refused by the engine (no samples) and scored (no
    verifier error). None when no group is usable."""
    usable = [g for g in groups if g.group.samples and g.error is None]
    if not usable:
        return None
    adv = _advantages([g.rewards for g in usable], cfg)
    rewards = torch.from_numpy(np.concatenate([g.rewards for g in usable]).astype(np.float32))
    rows, behav = [], []
    for g in usable:
        prompt = g.group.prompt_ids.astype(np.int64)
        for s in g.group.samples:
            rows.append((prompt, s.token_ids.astype(np.int64)))
            behav.append(s.logprobs.astype(np.float32))
    width = max(len(p) + len(c) for p, c in rows)
    n = len(rows)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    attn = torch.zeros((n, width), dtype=torch.long)
    comp = torch.zeros((n, width - 1), dtype=torch.float32)
    blp = torch.zeros((n, width - 1), dtype=torch.float32)
    for i, ((p, c), lp) in enumerate(zip(rows, behav)):
        ids[i, : len(p) + len(c)] = torch.from_numpy(np.concatenate([p, c]))
        attn[i, : len(p) + len(c)] = 1
        # position t predicts token t+1: completion token j sits at len(p)+j, predicted at len(p)+j-1
        comp[i, len(p) - 1: len(p) - 1 + len(c)] = 1
        blp[i, len(p) - 1: len(p) - 1 + len(c)] = torch.from_numpy(lp)
    return Batch(ids, attn, comp, blp, adv, rewards, len(usable))


def _advantages(rewards: list[np.ndarray], cfg: LearnerConfig) -> torch.Tensor:
    """Per-sample advantages, groups of equal size normalised together in one kernel call."""
    out: list[torch.Tensor | None] = [None] * len(rewards)
    for size in sorted({len(r) for r in rewards}):
        which = [i for i, r in enumerate(rewards) if len(r) == size]
        block = torch.tensor(np.stack([rewards[i] for i in which]), dtype=torch.float32)  # (groups, G)
        adv = kernels.group_advantage(block, mode=cfg.advantage, eps=cfg.adv_eps)
        for row, i in zip(adv, which):
            out[i] = row
    return torch.cat(out)


class FusedHead(torch.nn.Linear):
    """The model's LM head (the same Linear, the same weight) that, given targets, returns the
    fused kernel's chosen-token log-probs and entropies instead of logits.

    Calling the head *module* rather than reading its weight matters under ZeRO-3: the
    weight is partitioned, and DeepSpeed gathers it around a module's forward (and again
    for its backward). `use_fused_head` turns a model's head into one in place."""

    def forward(self, hidden, targets=None):
        if targets is None:
            return super().forward(hidden)
        logp, entropy, _ = kernels.lm_head_logprobs(hidden, self.weight, targets)
        return logp, entropy


def use_fused_head(model):
    head = model.get_output_embeddings()
    if type(head) is not torch.nn.Linear:
        raise TypeError(f"the fused LM head needs a plain nn.Linear head, this model has {type(head).__name__}")
    head.__class__ = FusedHead
    return model


def token_logprobs(model, input_ids, attention, completion, temperature: float = 1.0):
    """Log-probs (N, L-1) of the next token at completion positions, through the fused LM-head kernel.

    Only completion rows enter the LM-head product; other positions are 0.
    """
    body = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    # use_cache=False: the config's default (true) would build a KV cache nobody reads (~1.6 GB per
    # qwen3 micro-batch in the no-grad reference, proximal and check-sync passes)
    hidden = body(input_ids=input_ids, attention_mask=attention,
                  use_cache=False).last_hidden_state[:, :-1]  # (N, L-1, H)
    rows = completion.bool()
    h = hidden[rows]
    if temperature != 1.0:
        h = h / temperature  # logits / T = (h / T) W^T
    targets = input_ids[:, 1:][rows]
    head = model.get_output_embeddings()
    if isinstance(head, FusedHead):
        logp, entropy = head(h, targets=targets)
    else:
        logp, entropy, _ = kernels.lm_head_logprobs(h, head.weight, targets)
    out = torch.zeros(completion.shape, dtype=logp.dtype, device=logp.device)
    out = out.masked_scatter(rows, logp)
    ent = torch.zeros(completion.shape, dtype=entropy.dtype, device=entropy.device).masked_scatter(rows, entropy)
    return out, ent


def length_sorted_chunks(batch: Batch, size: int) -> list[torch.Tensor]:
    """Row indices in micro-batches of `size`, rows of similar length together: each micro-batch
    is then cut to its own longest row (see micro_loss), so little compute goes to padding."""
    order = torch.argsort(batch.attention.sum(1), stable=True)
    return list(order.split(size))


# learner.correction -> the importance weight of w = π_prox / π_behav that kernels.policy_loss
# applies: the level w is taken at, and what bounds it (is_cap truncates, the band masks)
CORRECTIONS = {
    "decoupled": ("token", "cap"),   # AReaL's decoupled PPO with a truncated weight: token TIS
    "tis_token": ("token", "cap"),
    "tis_seq": ("sequence", "cap"),
    "mask_token": ("token", "band"),
    "mask_seq": ("geometric", "band"),
}


def importance_args(cfg: LearnerConfig) -> dict:
    """kernels.policy_loss's is_level, tis_cap and mask_band for cfg.correction (not none)."""
    level, bound = CORRECTIONS[cfg.correction]
    return {"is_level": level, "tis_cap": cfg.is_cap if bound == "cap" else None,
            "mask_band": (cfg.mask_low, cfg.mask_high) if bound == "band" else None}


def micro_loss(model, batch: Batch, idx, cfg: LearnerConfig, *, ref_model=None,
               total_tokens: float, total_seqs: float, sampling: Sampling, proximal: torch.Tensor | None = None):
    """Loss of the samples `idx` (a slice or row indices), scaled so the micro-batch losses add up
    to the batch loss. Rows are right-padded, so the columns past the micro-batch's longest row
    are padding only and are cut off: causal attention never looks right, the result is the same.
    `proximal` (any cfg.correction but none): the proximal policy's log-probs of the batch's rows,
    aligned with `completion` (the learner computes them before the batch's first update). Rows are
    whole sequences, so a sequence-level weight sees all of its row's tokens in one micro-batch.
    `total_tokens`, `total_seqs`: the whole mini-batch's (over every micro-batch and rank), the
    denominators of cfg.loss_agg, so that the micro-batch losses add up to the mini-batch's."""
    attn = batch.attention[idx]
    width = int(attn.sum(1).max())
    ids, attn, comp = batch.input_ids[idx][:, :width], attn[:, :width], batch.completion[idx][:, : width - 1]
    logp, entropy = token_logprobs(model, ids, attn, comp, sampling.temperature)
    behav = batch.behav_logp[idx][:, : width - 1]
    ref = None
    if ref_model is not None:
        with torch.no_grad():
            ref, _ = token_logprobs(ref_model, ids, attn, comp, sampling.temperature)
    if cfg.recompute_proximal:  # ratio against the proximal policy; the behaviour's gap gets an importance weight
        if proximal is None:
            raise ValueError(f"learner.correction={cfg.correction} needs the proximal log-probs")
        old, behav_arg, weighting = proximal[idx][:, : width - 1], behav, importance_args(cfg)
    else:                       # none: the ratio is taken against the behaviour policy that sampled
        old, behav_arg, weighting = behav, None, {}
    denominator = {"token-mean": total_tokens, "seq-mean": total_seqs,
                   "drgrpo": sampling.max_new_tokens * total_seqs}[cfg.loss_agg]
    loss, stats = kernels.policy_loss(
        logp, old, batch.advantages[idx], comp, behav_logp=behav_arg, ref_logp=ref,
        clip_low=cfg.clip_low, clip_high=cfg.clip_high, kl_coef=cfg.kl_coef, **weighting,
        agg=cfg.loss_agg, agg_const=float(denominator))
    tokens = comp.sum().clamp(min=1)
    stats = dict(stats, entropy=((entropy * comp).sum() / tokens).detach())
    return loss, stats
