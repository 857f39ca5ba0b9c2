"""The learner's log-probs are the model's: families whose logits are more than hidden @ W^T are
refused at load, by name, not trained on other log-probs (outside audit: a Phi head's bias was
dropped, and the ratio to vLLM's log-probs started near e^5)."""
import pytest
import torch
from transformers import (CohereConfig, CohereForCausalLM, Gemma2Config, Gemma2ForCausalLM, GraniteConfig,
                          GraniteForCausalLM, LlamaConfig, LlamaForCausalLM, PhiConfig, PhiForCausalLM)

from jury.learner.grpo import FusedHead, _probe_head, token_logprobs, use_fused_head

SMALL = dict(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=4, eos_token_id=2, bos_token_id=1, pad_token_id=0)


def _biased(model):
    torch.nn.init.normal_(model.get_output_embeddings().bias)  # Phi's starts at 0; a trained one does not
    return model


@pytest.mark.parametrize("model, named", [
    (lambda: _biased(PhiForCausalLM(PhiConfig(**SMALL))), "an LM head with a bias"),
    # a cap small enough to bend this tiny model's logits (Gemma 2's own is 30, for logits of 30 and more)
    (lambda: Gemma2ForCausalLM(Gemma2Config(**SMALL, head_dim=8, final_logit_softcapping=0.05)),
     "final_logit_softcapping=0.05"),
    (lambda: CohereForCausalLM(CohereConfig(**SMALL)), "logit_scale=0.0625"),
    (lambda: GraniteForCausalLM(GraniteConfig(**SMALL, logits_scaling=8.0)), "logits_scaling=8.0"),
])
def test_a_head_that_transforms_its_logits_is_refused_by_name(model, named):
    torch.manual_seed(0)
    m = model()
    # what the refusal prevents: the learner's log-probs are not the model's
    m.get_output_embeddings().__class__ = FusedHead
    ids = torch.tensor([[5, 17, 42, 99, 7, 250]])
    ones = torch.ones_like(ids)
    with torch.no_grad():
        want = torch.log_softmax(m(input_ids=ids, use_cache=False).logits[:, :-1].float(), -1)
        want = want.gather(-1, ids[:, 1:, None])[..., 0]
        got = token_logprobs(m, ids, ones, ones[:, 1:])[0]
    assert (got - want).abs().max() > 0.01
    m.get_output_embeddings().__class__ = torch.nn.Linear
    with pytest.raises(TypeError, match=named.replace("(", r"\(")):
        use_fused_head(m)


def test_a_plain_head_passes_and_the_probe_catches_what_no_setting_names():
    torch.manual_seed(0)
    m = use_fused_head(LlamaForCausalLM(LlamaConfig(**SMALL)))
    assert isinstance(m.get_output_embeddings(), FusedHead)
    forward = m.forward

    def scaled(*args, **kwargs):  # a family that scales its logits in its own forward
        out = forward(*args, **kwargs)
        out.logits = out.logits * 2
        return out

    m.forward = scaled
    with pytest.raises(TypeError, match="differ from the model's own"):
        _probe_head(m, 6)
