"""GRPO on hand-worked numbers: advantages, the clipped-ratio loss, collation, micro-batching."""
import math

import numpy as np
import pytest
import torch

from jury import kernels
from jury.protocol.plan import Sampling
from jury.protocol.config import LearnerConfig
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, ScoredGroup
from jury.learner.grpo import collate, micro_loss


def test_group_advantage_by_hand():
    # group 1: rewards 1,0,0,1 -> mean 0.5, biased std 0.5 -> +-1 (eps 1e-6 shaves 2e-6)
    # group 2: all equal -> exactly 0, never NaN
    adv = kernels.group_advantage(torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.3, 0.3, 0.3, 0.3]]), eps=1e-6)
    expect = 0.5 / (0.5 + 1e-6)
    torch.testing.assert_close(adv, torch.tensor([[expect, -expect, -expect, expect], [0.0, 0.0, 0.0, 0.0]]))


def test_clipped_loss_by_hand():
    # per token (A, r): (+1, 1.5) -> -min(1.5, 1.2) = -1.2   (clipped above)
    #                   (-1, 0.5) -> -min(-0.5, -0.8) = 0.8  (clipped below)
    #                   (+1, 0.9) -> -0.9                    (inside)
    #                   (-1, 1.1) -> 1.1                     (inside)
    # token mean = (-1.2 + 0.8 - 0.9 + 1.1) / 4 = -0.05
    r = torch.tensor([[1.5, 0.5, 0.9, 1.1]], dtype=torch.float64)
    old = torch.tensor([[-1.0, -2.0, -0.5, -3.0]], dtype=torch.float64)
    logp = (old + r.log()).requires_grad_(True)
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]], dtype=torch.float64)
    loss, stats = kernels.policy_loss(logp, old, adv, torch.ones_like(r), clip_low=0.2, clip_high=0.2)
    assert loss.item() == pytest.approx(-0.05, abs=1e-12)
    assert stats["clip_frac"].item() == pytest.approx(0.5)
    loss.backward()
    # clipped tokens get no gradient; inside, d/dlogp of -r A / 4 = -r A / 4
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, 0.0, -0.9 / 4, 1.1 / 4]], dtype=torch.float64))


def _scored(index, prompt, completions, rewards, logprobs=None):
    task = PromptTask(task_id=f"t{index}", index=index, prompt="p", label="1", source="s")
    samples = [Sample(np.array(c, np.int32), np.array(logprobs[i] if logprobs else [-1.0] * len(c), np.float32),
                      "", "stop") for i, c in enumerate(completions)]
    group = RolloutGroup(task, np.array(prompt, np.int32), samples, 0, 0, "g", 0.0)
    return ScoredGroup(group, [], np.array(rewards, np.float32), "gt", None, 0.0, None, 0, 0.0)


def test_collate_aligns_completion_positions():
    g = _scored(0, [1, 2, 3], [[7, 8], [9]], [1.0, 0.0], logprobs=[[-0.1, -0.2], [-0.3]])
    b = collate([g], LearnerConfig(advantage="grpo"), pad_id=0)
    assert b.input_ids.tolist() == [[1, 2, 3, 7, 8], [1, 2, 3, 9, 0]]
    # position t predicts token t+1: completion tokens at 3,4 are predicted from 2,3
    assert b.completion.tolist() == [[0, 0, 1, 1], [0, 0, 1, 0]]
    torch.testing.assert_close(b.behav_logp, torch.tensor([[0, 0, -0.1, -0.2], [0, 0, -0.3, 0]]))
    assert b.advantages.tolist() == pytest.approx([1.0, -1.0], abs=1e-5)


def test_refused_groups_are_left_out_and_an_all_refused_batch_is_none():
    empty = _scored(1, [1], [], [])
    assert collate([empty], LearnerConfig(), pad_id=0) is None
    b = collate([empty, _scored(0, [1], [[2], [3]], [1.0, 0.0])], LearnerConfig(), pad_id=0)
    assert b.num_groups == 1 and b.input_ids.shape[0] == 2


def test_groups_the_verifier_could_not_score_are_not_trained_as_reward_0():
    from dataclasses import replace

    unscored = replace(_scored(1, [1], [[4], [5], [6]], [0.0, 0.0, 0.0]), error="RuntimeError: pool died")
    assert collate([unscored], LearnerConfig(), pad_id=0) is None
    b = collate([unscored, _scored(0, [1], [[2], [3]], [1.0, 0.0])], LearnerConfig(), pad_id=0)
    assert b.num_groups == 1 and b.input_ids[:, 1].tolist() == [2, 3]  # only the scored group's samples


def test_a_batch_of_refused_groups_has_metrics_not_a_crash():
    from jury.learner.ledger import batch_result

    result = batch_result([_scored(0, [1], [], []), _scored(1, [1], [], [])], step=0, t_train=1.0, arrived={})
    assert math.isnan(result.metrics["reward/mean"]) and result.metrics["rollout/tokens"] == 0.0
    assert len(result.ledger) == 2


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32))


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm",
                                 "dr_grpo"])
def test_micro_batches_add_up_to_the_whole_batch(agg):
    model = _tiny_llama()
    rng = np.random.default_rng(0)
    groups = [_scored(i, [1, 2], [list(rng.integers(3, 30, size=n)) for n in (1, 3, 2, 4)],
                      list(rng.random(4))) for i in range(2)]
    cfg = LearnerConfig(loss_agg=agg)
    b = collate(groups, cfg, pad_id=0)
    kw = dict(total_tokens=b.num_tokens, total_seqs=8, sampling=Sampling(1.0, 1.0, 4))
    whole, _ = micro_loss(model, b, slice(0, 8), cfg, **kw)
    whole.backward()
    g_whole = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    parts = [micro_loss(model, b, slice(s, s + 3), cfg, **kw)[0] for s in (0, 3, 6)]
    sum(parts).backward()
    assert sum(p.item() for p in parts) == pytest.approx(whole.item(), rel=1e-5, abs=1e-7)
    for a, c in zip(g_whole, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-6)
    assert math.isfinite(whole.item())

    # length-sorted micro-batches, each cut to its own longest row: the same loss and gradient
    from jury.learner.grpo import length_sorted_chunks

    chunks = length_sorted_chunks(b, 3)
    assert sorted(torch.cat(chunks).tolist()) == list(range(8))
    lengths = b.attention.sum(1)
    assert int(lengths[chunks[0]].max()) < b.input_ids.shape[1]  # the short rows' chunk is cut
    model.zero_grad()
    parts = [micro_loss(model, b, idx, cfg, **kw)[0] for idx in chunks]
    sum(parts).backward()
    assert sum(p.item() for p in parts) == pytest.approx(whole.item(), rel=1e-5, abs=1e-7)
    for a, c in zip(g_whole, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("correction, bounds, stat", [("tis_seq", dict(is_cap=1.2), "tis_frac"),
                                               ("mask_seq", dict(mask_low=0.8, mask_high=1.25), "mask_frac"),
                                               ("mask_seq_product", dict(mask_low=0.8, mask_high=1.25), "mask_frac")])
def test_sequence_level_weights_add_up_over_micro_batches(correction, bounds, stat):
    # a sequence's weight needs all of its tokens: rows are whole sequences, so however the rows are
    # cut into micro-batches the loss and the gradient are the whole batch's
    model = _tiny_llama()
    rng = np.random.default_rng(1)
    groups = [_scored(i, [1, 2], [list(rng.integers(3, 30, size=n)) for n in (1, 3, 2, 4)],
                      list(rng.random(4))) for i in range(2)]
    cfg = LearnerConfig(correction=correction, **bounds)
    b = collate(groups, cfg, pad_id=0)
    prox = b.behav_logp + 0.3 * torch.randn(b.behav_logp.shape, generator=torch.Generator().manual_seed(0))
    kw = dict(total_tokens=b.num_tokens, total_seqs=8, sampling=Sampling(1.0, 1.0, 4), proximal=prox * b.completion)
    whole, stats = micro_loss(model, b, slice(0, 8), cfg, **kw)
    assert 0 < stats[stat].item() < 1, stats  # some sequences corrected, not all
    whole.backward()
    g_whole = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    from jury.learner.grpo import length_sorted_chunks

    parts = [micro_loss(model, b, idx, cfg, **kw)[0] for idx in length_sorted_chunks(b, 3)]
    sum(parts).backward()
    assert sum(p.item() for p in parts) == pytest.approx(whole.item(), rel=1e-5, abs=1e-7)
    for a, c in zip(g_whole, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-6)


def test_groups_of_different_sizes_are_normalised_each_within_itself():
    a = _scored(0, [1], [[2], [3]], [1.0, 0.0])
    b = _scored(1, [1], [[2], [3], [4]], [2.0, 2.0, 5.0])  # mean 3, biased std sqrt(2)
    adv = collate([a, b], LearnerConfig(advantage="grpo"), pad_id=0).advantages
    s = 2 ** 0.5
    assert adv.tolist() == pytest.approx([1.0, -1.0, -1 / s, -1 / s, 2 / s], abs=1e-5)


def test_a_group_of_two_views_is_normalised_within_each_view_and_each_sample_gets_its_own_prompt():
    """CoReward: G = 2 samples of the prompt [1, 2] and 2 of its rewrite [5, 6, 7], interleaved on
    purpose. View 0 rewards 1, 0 -> GRPO +-1; view 1 rewards 1, 1 -> flat, exactly 0 (normalised
    together, the four would be mean 0.75: +0.577, -1.732, +0.577, +0.577)."""
    from dataclasses import replace

    g = _scored(0, [1, 2], [[3], [4], [8], [9]], [1.0, 1.0, 0.0, 1.0])
    for s, v in zip(g.group.samples, [0, 1, 0, 1]):
        s.view = v
    g = replace(g, group=replace(g.group, rewrite_prompt_ids=np.array([5, 6, 7], np.int32)))
    b = collate([g], LearnerConfig(advantage="grpo"), pad_id=0)
    assert b.advantages.tolist() == pytest.approx([1.0, 0.0, -1.0, 0.0], abs=1e-5)
    assert b.input_ids.tolist() == [[1, 2, 3, 0], [5, 6, 7, 4], [1, 2, 8, 0], [5, 6, 7, 9]]
    assert b.completion.tolist() == [[0, 1, 0], [0, 0, 1], [0, 1, 0], [0, 0, 1]]
    one = collate([_scored(0, [1, 2], [[3], [4], [8], [9]], [1.0, 1.0, 0.0, 1.0])], LearnerConfig(advantage="grpo"),
                  pad_id=0)
    assert one.advantages.tolist() == pytest.approx([1 / 3 ** 0.5, 1 / 3 ** 0.5, -(3 ** 0.5), 1 / 3 ** 0.5], abs=1e-5)
