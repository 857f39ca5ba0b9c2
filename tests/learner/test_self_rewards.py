"""Self-certainty and entropy rewards, scored by the learner over the full distribution, against
the sources' own formulas (learner/self_rewards.py).

Intuitor: sunblaze-ucb/Intuitor @ 3f0cdd7b8b5e2377d5388806edc45ba5b8b7e12e,
  verl-intuitor/verl/utils/torch_functional.py self_certainty_from_logits (lines 151-154):
  LSE(z) - mean_j z_j per token, z the logits / the rollout temperature (dp_actor.py 197, 303), at
  the position that predicted the token ([:, -T-1:-1], dp_actor.py 278, 304); the score is the
  masked mean over the response tokens, EOS included (ray_trainer.py 274-297). Its code drops the
  paper's constant -log V (KL(U || p) = LSE - mean z - log V); jury-rl keeps it.
RENT: satrams/rent-rl @ 5d4d38a7ea91fc23636f10d63084fe4f910423b5, entropy_from_logits
  (verl/utils/torch_functional.py 110-114): H = LSE(z) - sum_j softmax(z)_j z_j; the reward is
  -mean over the response tokens (ray_trainer.py 1004-1057).
"""
import math

import numpy as np
import pytest
import torch

from jury.learner.grpo import token_logprobs, use_fused_head
from jury.learner.self_rewards import Scoring, answer_tokens, rewards_from_scores, row_scores


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
                                         tie_word_embeddings=False))
    return use_fused_head(model.double().eval())


def batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 40, (4, 12), generator=g)
    prompt = [3, 5, 2, 4]
    length = [9, 4, 7, 1]  # completion tokens per row, after its prompt
    attn = torch.zeros_like(ids)
    comp = torch.zeros(4, 11, dtype=torch.float64)
    for i, (p, c) in enumerate(zip(prompt, length)):
        attn[i, : p + c] = 1
        comp[i, p - 1: p - 1 + c] = 1
    return ids, attn, comp


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_per_token_certainty_and_entropy_are_intuitors_and_rents(temperature):
    model = tiny_llama()
    ids, attn, comp = batch(0)
    with torch.no_grad():
        _, entropy, certainty = token_logprobs(model, ids, attn, comp, temperature, certainty=True)
        z = model(input_ids=ids, attention_mask=attn).logits[:, :-1].double() / temperature  # predicts t+1
    lse = torch.logsumexp(z, -1)
    intuitor = lse - z.mean(-1)                          # their code
    kl_uniform = intuitor - math.log(z.shape[-1])        # the paper's KL(U || p)
    rent = lse - (torch.softmax(z, -1) * z).sum(-1)
    on = comp != 0
    torch.testing.assert_close(certainty[on], kl_uniform[on], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(entropy[on], rent[on], rtol=1e-6, atol=1e-6)
    # the row scores: means over each row's response tokens; KL(U || p) and Intuitor's value differ
    # by log V in every row, so they rank (and normalise) alike
    ours = row_scores(certainty.double(), comp)
    theirs = (intuitor * comp).sum(1) / comp.sum(1)
    torch.testing.assert_close(ours + math.log(z.shape[-1]), theirs, rtol=1e-6, atol=1e-6)
    assert (certainty[on] >= -1e-9).all()  # a KL is never negative


def test_a_row_is_scored_over_its_span_only():
    per_token = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    span = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 0]], dtype=torch.float32)
    assert row_scores(per_token, span).tolist() == [3.5, 0.0]


def test_no_answer_never_earns_more_than_an_answer():
    # group 0: scored rows 0-3, row 2 unparsable with the best score: it gets the group's lowest
    # parsed score instead; group 1 (the verifier's rewards) is untouched; group 2 has no answer at all
    scoring = Scoring(scored=torch.tensor([True, True, True, True, False, False, True, True]),
                      group=torch.tensor([0, 0, 0, 0, 1, 1, 2, 2]),
                      parsed=torch.tensor([True, True, False, True, True, False, False, False]),
                      span=torch.zeros(0))
    scores = torch.tensor([0.4, 0.2, 0.9, 0.3, 0.0, 0.0, 0.7, 0.1], dtype=torch.float64)
    verifier = torch.tensor([0, 0, 0, 0, 1.0, 0.0, 0, 0])
    rewards = rewards_from_scores(scores, scoring, verifier)
    assert rewards.tolist() == pytest.approx([0.4, 0.2, 0.2, 0.3, 1.0, 0.0, 0.0, 0.0])


def test_the_answer_span_is_the_tokens_that_spell_the_answer(tiny_tokenizer):
    tok = tiny_tokenizer
    text = "0021+20=0041\n\\boxed{0041}"
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    first, end = answer_tokens(tok, ids, text, "0041")
    assert tok.decode(ids[first:end]) == "0041"
    assert tok.decode(ids[end:], skip_special_tokens=True) == "}"
    assert answer_tokens(tok, ids, text, "0077") is None              # not written there
    assert answer_tokens(tok, ids[:-3], text, "0041") is None         # the tokens are not the text


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from jury.models.tiny import TinyModelSpec, build_tokenizer
    import random

    return build_tokenizer(TinyModelSpec(), random.Random(0))


def test_the_verl_variant_and_the_trl_variant_differ_by_one_position():
    """Noted, not copied: open-r1-intuitor's _get_per_token_self_certainty takes the logits *at*
    the completion positions (p(.|x, y_<=t)); the verl variant, and jury-rl, the ones that predicted
    each token (p(.|x, y_<t)), the paper's definition. The two differ on any model."""
    model = tiny_llama()
    ids, attn, comp = batch(1)
    with torch.no_grad():
        _, _, certainty = token_logprobs(model, ids, attn, comp, 1.0, certainty=True)
        z = model(input_ids=ids, attention_mask=attn).logits.double()
    shifted = torch.logsumexp(z[:, 1:], -1) - z[:, 1:].mean(-1) - math.log(z.shape[-1])
    on = comp != 0
    assert not torch.allclose(certainty[on], shifted[on])
    assert np.isfinite(certainty[on].numpy()).all()
