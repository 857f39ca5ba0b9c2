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
from jury.protocol.plan import Overlong, Sampling


@dataclass
class Batch:
    """The samples of one learner step, right-padded."""
    input_ids: torch.Tensor      # (N, L) int64, prompt + completion
    attention: torch.Tensor      # (N, L) int64
    completion: torch.Tensor     # (N, L-1) float32, 1 where position t predicts a completion token
    behav_logp: torch.Tensor     # (N, L-1) float32, generator log-probs aligned with `completion`
    advantages: torch.Tensor     # (N,) float32; (N, L-1) per token under advantage=gae (learner/critic.py)
    rewards: torch.Tensor        # (N,) float32, the reward scheme's (before the overlong penalty)
    num_groups: int
    # (N,) float32, 1 for a sample in the loss, 0 for one filtered out of it (learner.overlong_filter;
    # update.keep_loss_rows applies it after the rewards are scored); None: all ones
    in_loss: torch.Tensor | None = None
    # (N,) float32, DAPO's R_length added to `rewards` for the advantages (overlong_penalty); None: zeros
    penalty: torch.Tensor | None = None

    def __post_init__(self):
        if self.in_loss is None:
            self.in_loss = torch.ones_like(self.advantages)
        if self.penalty is None:
            self.penalty = torch.zeros_like(self.advantages)

    @property
    def num_tokens(self) -> int:
        return int(self.completion.sum().item())


def overlong_penalty(lengths: np.ndarray, overlong: Overlong | None) -> np.ndarray:
    """DAPO's soft overlong punishment (arXiv:2503.14476, eq. 13), times overlong.penalty (verl's
    penalty_factor), for completions of `lengths` tokens, with L_max = overlong.max_new_tokens and
    L_cache = overlong.buffer:

        R_length(y) = 0                                 |y| <= L_max - L_cache
                    = ((L_max - L_cache) - |y|) / L_cache   L_max - L_cache < |y| <= L_max
                    = -1                                |y| > L_max

    The three cases are one clipped line: -clip((|y| - (L_max - L_cache)) / L_cache, 0, 1)."""
    if overlong is None or not overlong.buffer:
        return np.zeros(len(lengths))
    expected = overlong.max_new_tokens - overlong.buffer
    excess = (np.asarray(lengths, dtype=np.float64) - expected) / overlong.buffer
    return -overlong.penalty * np.clip(excess, 0.0, 1.0)


def collate(groups: list[ScoredGroup], cfg: LearnerConfig, pad_id: int, overlong: Overlong | None = None) -> Batch | None:
    """Samples of all usable groups: not refused by the engine (no samples) and scored (no
    verifier error). None when no group is usable. `overlong` (plan.overlong): each sample's
    R_length is added to its reward before the advantages, and with overlong.filter a truncated
    sample (finish reason "length") is marked out of the loss (in_loss 0); its reward still counts
    in its group's statistics."""
    usable = [g for g in groups if g.group.samples and g.error is None]
    if not usable:
        return None
    penalties = [overlong_penalty([len(s.token_ids) for s in g.group.samples], overlong) for g in usable]
    if cfg.advantage == "gae":  # per token, from the critic's values on each rank (learner/critic.py)
        adv = torch.zeros(sum(len(g.group.samples) for g in usable))
    else:
        adv = _view_advantages(usable, cfg, penalties if overlong is not None and overlong.buffer else None)
    rewards = torch.from_numpy(np.concatenate([g.rewards for g in usable]).astype(np.float32))
    penalty = torch.from_numpy(np.concatenate(penalties).astype(np.float32))
    filtered = overlong is not None and overlong.filter
    in_loss = torch.tensor([0.0 if filtered and s.finish_reason == "length" else 1.0
                            for g in usable for s in g.group.samples])
    rows, behav = [], []
    for g in usable:
        prompts = (g.group.prompt_ids.astype(np.int64), g.group.rewrite_prompt_ids.astype(np.int64))
        for s in g.group.samples:
            rows.append((prompts[s.view], s.token_ids.astype(np.int64)))  # the prompt the sample answers
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
    return Batch(ids, attn, comp, blp, adv, rewards, len(usable), in_loss, penalty)


def overlong_stats(batch: Batch) -> dict[str, float]:
    """The step's overlong handling (learner/overlong_*): the share of samples penalised, their mean
    penalty over all samples, and the share filtered out of the loss."""
    n = max(1, len(batch.penalty))
    return {"overlong_penalised_frac": float((batch.penalty < 0).sum()) / n,
            "overlong_penalty_mean": float(batch.penalty.sum()) / n,
            "overlong_filtered_frac": float((batch.in_loss == 0).sum()) / n}


def _view_advantages(groups: list[ScoredGroup], cfg: LearnerConfig,
                     penalties: list[np.ndarray] | None = None) -> torch.Tensor:
    """Per-sample advantages in sample order, each group normalised within each of its views.

    A CoReward group holds G samples of the prompt and G of its rewrite (Sample.view); as in
    Co-rewarding-I (tmlr-group/Co-rewarding@6c60ea45, Co-rewarding-I/verl/trainer/ppo/ray_trainer.py,
    compute_advantage_contrastive, CO_REWARD branch: one GRPO call per view), each view is
    normalised as a group of its own. Every other group has one view. `penalties`: per group, the
    overlong penalty added to each sample's reward first."""
    parts, where = [], []
    for i, g in enumerate(groups):
        views = np.array([s.view for s in g.group.samples])
        rewards = g.rewards if penalties is None else g.rewards + penalties[i]
        for v in np.unique(views):
            idx = np.flatnonzero(views == v)
            parts.append(rewards[idx])
            where.append((i, idx))
    flat = _advantages(parts, cfg).split([len(p) for p in parts])
    out = [torch.zeros(len(g.rewards), dtype=torch.float32) for g in groups]
    for (i, idx), adv in zip(where, flat):
        out[i][torch.from_numpy(idx)] = adv.to(torch.float32)
    return torch.cat(out)


def _advantages(rewards: list[np.ndarray], cfg: LearnerConfig) -> torch.Tensor:
    """Per-sample advantages, groups of equal size normalised together in one kernel call."""
    out: list[torch.Tensor | None] = [None] * len(rewards)
    for size in sorted({len(r) for r in rewards}):
        which = [i for i, r in enumerate(rewards) if len(r) == size]
        block = torch.tensor(np.stack([rewards[i] for i in which]), dtype=torch.float32)  # (groups, G)
        adv = kernels.group_advantage(block, mode=cfg.advantage, eps=cfg.adv_eps,
                                      unbiased_std=cfg.adv_std == "unbiased")
        for row, i in zip(adv, which):
            out[i] = row
    return torch.cat(out)


class FusedHead(torch.nn.Linear):
    """The model's LM head (the same Linear, the same weight) that, given targets, returns the
    fused kernel's chosen-token log-probs and entropies instead of logits.

    Calling the head *module* rather than reading its weight matters under ZeRO-3: the
    weight is partitioned, and DeepSpeed gathers it around a module's forward (and again
    for its backward). `use_fused_head` turns a model's head into one in place."""

    def forward(self, hidden, targets=None, certainty=False):
        if targets is None:
            return super().forward(hidden)
        return head_outputs(hidden, self.weight, targets, certainty)


def head_outputs(hidden, weight, targets, certainty: bool):
    """(log-prob, entropy) per row, and with `certainty` the self-certainty KL(U || p) =
    LSE(z) - mean_j z_j - log V (Intuitor's): the mean logit is hidden @ mean_j W_j, one matvec."""
    logp, entropy, lse = kernels.lm_head_logprobs(hidden, weight, targets)
    if not certainty:
        return logp, entropy
    mean_z = (hidden.float() @ weight.float().mean(0)).to(lse.dtype)
    return logp, entropy, lse - mean_z - float(np.log(weight.shape[0]))


# what some families' ForCausalLM does to the head's product before the softmax (transformers'
# modeling files): Gemma 2/3 soft-cap it, Cohere scales it, Granite divides it
_LOGIT_TRANSFORMS = (("final_logit_softcapping", None), ("logit_scale", 1.0), ("logits_scaling", 1.0))


def use_fused_head(model, probe_tokens: int = 6):
    """Turn the model's head into a FusedHead, once its logits are shown to be hidden @ W^T: the
    learner's log-probs come from that product alone (the fused kernel, and the unfused paths,
    which divide the hidden state by the temperature). A head with a bias, a soft-cap or a logit
    scale would be trained on other log-probs than the model's, silently; it is refused by name,
    and any other departure by comparing the model's own forward on `probe_tokens` tokens."""
    head = model.get_output_embeddings()
    if type(head) is not torch.nn.Linear:
        raise TypeError(f"the fused LM head needs a plain nn.Linear head, this model has {type(head).__name__}")
    configs = [model.config, getattr(model.config, "text_config", None)]
    found = ["an LM head with a bias"] if head.bias is not None else []
    found += [f"{name}={getattr(c, name)}" for c in configs if c is not None for name, plain in _LOGIT_TRANSFORMS
              if getattr(c, name, plain) not in (plain, None)]
    if found:
        raise TypeError(f"{type(model).__name__}'s logits are not its hidden state times the head's weight ("
                        f"{', '.join(found)}): the learner's log-probs would not be the model's. Not supported")
    head.__class__ = FusedHead
    if probe_tokens > 1:
        _probe_head(model, probe_tokens)
    return model


def _probe_head(model, n: int) -> None:
    """The learner's log-probs against the model's own logits on n tokens (no grad, the weights'
    dtype): a family that transforms its logits some other way is refused here, at load."""
    vocab = model.get_output_embeddings().weight.shape[0]
    ids = (torch.arange(n, dtype=torch.long) * 7919 + 11).remainder(vocab).unsqueeze(0)
    ids = ids.to(model.get_output_embeddings().weight.device)
    ones = torch.ones_like(ids)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=ones, use_cache=False).logits[:, :-1].float()
            want = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
            got = token_logprobs(model, ids, ones, ones[:, 1:])[0].float()
    finally:
        model.train(was_training)
    gap = float((got - want).abs().max())
    # the two sides differ by the dtype's rounding of the logits (bf16: a few hundredths)
    if not gap <= (0.01 if logits.dtype == torch.float32 and model.dtype == torch.float32 else 0.25):
        raise TypeError(f"{type(model).__name__}'s log-probs through the learner's LM head differ from the model's own "
                        f"by {gap:.3g} nats on a {n}-token probe: its logits are not hidden @ W^T. Not supported")


def token_logprobs(model, input_ids, attention, completion, temperature: float = 1.0, certainty: bool = False,
                   top_p: float = 1.0):
    """Log-probs (N, L-1) of the next token at completion positions, and the entropy of the
    distribution that predicted it, through the fused LM-head kernel; with `certainty` also the
    self-certainty KL(U || p) there (learner/self_rewards.py). All under logits / temperature;
    with top_p < 1, under the nucleus vLLM sampled from (learner/nucleus.py, unfused).

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
    if top_p < 1.0:
        from jury.learner.nucleus import nucleus_outputs

        outs = nucleus_outputs(head, h, targets, top_p, certainty)
    else:
        outs = head(h, targets=targets, certainty=certainty) if isinstance(head, FusedHead) else \
            head_outputs(h, head.weight, targets, certainty)
    return tuple(torch.zeros(completion.shape, dtype=o.dtype, device=o.device).masked_scatter(rows, o) for o in outs)


def length_sorted_chunks(batch: Batch, size: int) -> list[torch.Tensor]:
    """Row indices in micro-batches of `size`, rows of similar length together: each micro-batch
    is then cut to its own longest row (see micro_loss), so little compute goes to padding."""
    order = torch.argsort(batch.attention.sum(1), stable=True)
    return list(order.split(size))


# learner.correction -> the level its weight w = π_prox / π_behav is taken at (a token's ratio, the
# sequence's product, or its geometric mean: kernels.reference.row_log_ratio) and what its bound
# does there (protocol/config.py's CORRECTION_SOURCES names each one's source and default bound):
#   truncate  w -> min(w, C)                        (kernels.policy_loss's tis_cap)
#   mask      w -> 0 outside the band, w inside it   (mask_band; AReaL's decoupled: the band (0, C])
#   reject    the token (or sequence) leaves the loss and its denominator; kept ones weigh 1 (verl's
#             rollout_rs: rejection_mask, applied to the mask before the denominators are counted)
CORRECTIONS = {
    "decoupled": ("token", "mask"),
    "tis_token": ("token", "truncate"),
    "tis_seq": ("sequence", "truncate"),
    "mask_token": ("token", "mask"),
    "mask_seq": ("geometric", "mask"),
    "mask_seq_product": ("sequence", "mask"),
    "reject_token": ("token", "reject"),
    "reject_seq_sum": ("sequence", "reject"),
    "reject_seq_mean": ("geometric", "reject"),
}


def importance_args(cfg: LearnerConfig) -> dict:
    """kernels.policy_loss's is_level, tis_cap and mask_band for cfg.correction: none (the ratio
    against the recomputed π_old alone, recompute_old) and the rejections apply no weight."""
    if cfg.correction == "none" or CORRECTIONS[cfg.correction][1] == "reject":
        return {}
    level, action = CORRECTIONS[cfg.correction]
    band = (0.0, cfg.cap) if cfg.correction == "decoupled" else cfg.band
    return {"is_level": level, "tis_cap": cfg.cap if action == "truncate" else None,
            "mask_band": band if action == "mask" else None}


def rejection_mask(proximal: torch.Tensor, behav: torch.Tensor, completion: torch.Tensor,
                   cfg: LearnerConfig) -> torch.Tensor:
    """verl's rollout rejection (correction reject_token, reject_seq_sum, reject_seq_mean): 1 where a
    completion token is kept, 0 where it (or its sequence) is rejected, a w outside the band; the
    learner multiplies `completion` by it before counting the loss's denominators."""
    level, _ = CORRECTIONS[cfg.correction]
    low, high = cfg.band
    valid = completion != 0
    log_w = torch.where(valid, proximal.double() - behav.double(), 0.0)
    if level != "token":
        log_w = kernels.reference.row_log_ratio(proximal.double(), behav.double(), completion, level)
        log_w = log_w.unsqueeze(1).expand_as(completion)
    w = torch.exp(log_w)
    return (valid & (w >= low) & (w <= high)).to(completion.dtype)

def aggregation_denominator(agg: str, tokens: float, seqs: float, max_new_tokens: int) -> float:
    """What cfg.loss_agg divides a mini-batch's summed token losses by (kernels.reference's
    aggregation_row_scale): its tokens, its sequences, the response length (verl's Dr.GRPO: the
    padded length it was generated to), or that times the sequences (TRL's Dr.GRPO)."""
    return float({"token-mean": tokens, "seq-mean-token-mean": seqs, "seq-mean-token-sum": seqs,
                  "seq-mean-token-sum-norm": max_new_tokens, "dr_grpo": max_new_tokens * seqs}[agg])


def policy_loss(cfg: LearnerConfig, logp, behav, proximal, advantages, completion, ref, denominator: float):
    """The loss cfg asks for, from per-token log-probs (B, T): π_θ (`logp`, with gradient), π_behav
    (`behav`, the generator's), π_prox (`proximal`: recomputed before the update, or None), π_ref
    (`ref` or None). The ratio is taken against π_prox when recomputed (every correction,
    recompute_old), else against π_behav; the correction's weight of w = π_prox / π_behav, the dual
    clip, the KL estimator and the aggregation reach the kernel under the names the config uses.
    A rejection (reject_*) has already taken its tokens out of `completion` (rejection_mask)."""
    old, weighting = (proximal, importance_args(cfg)) if cfg.recompute_proximal else (behav, {})
    return kernels.policy_loss(
        logp, old, advantages, completion, behav_logp=behav if weighting else None, ref_logp=ref,
        clip_low=cfg.clip_low, clip_high=cfg.clip_high, dual_clip=cfg.dual_clip, kl_coef=cfg.kl_coef,
        kl_estimator=cfg.kl_estimator, **weighting, agg=cfg.loss_agg, agg_const=denominator)


def _cut(advantages: torch.Tensor, width: int) -> torch.Tensor:
    """A micro-batch's advantages to its width: per-token ones (gae) lose the padding columns."""
    return advantages[:, : width - 1] if advantages.dim() == 2 else advantages


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
    logp, entropy = token_logprobs(model, ids, attn, comp, sampling.temperature, top_p=sampling.top_p)
    outside = None
    if sampling.top_p < 1.0:  # the policy's count, before the reference's forward sets it again
        from jury.learner.nucleus import nucleus_outputs

        outside = nucleus_outputs.outside
    ref = None
    if ref_model is not None:
        with torch.no_grad():
            ref, _ = token_logprobs(ref_model, ids, attn, comp, sampling.temperature, top_p=sampling.top_p)
    if cfg.recompute_proximal and proximal is None:
        raise ValueError(f"learner.correction={cfg.correction} (recompute_old={cfg.recompute_old}) needs "
                         "the proximal log-probs")
    loss, stats = policy_loss(cfg, logp, batch.behav_logp[idx][:, : width - 1],
                              None if proximal is None else proximal[idx][:, : width - 1],
                              _cut(batch.advantages[idx], width), comp, ref,
                              aggregation_denominator(cfg.loss_agg, total_tokens, total_seqs, sampling.max_new_tokens))
    tokens = comp.sum().clamp(min=1)
    stats = dict(stats, entropy=((entropy * comp).sum() / tokens).detach())
    if outside is not None:  # the share of tokens outside the learner's nucleus (a policy that moved)
        stats["nucleus_outside"] = (outside / tokens).detach()
    return loss, stats
