"""The learner's forwards build no KV cache: it would be thrown away, and on a qwen3 micro-batch
it costs about 1.6 GB (reference, proximal and check-sync passes run under no_grad, where nothing
else holds that memory back)."""
import torch


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    # use_cache defaults to true in a Hugging Face config, as in the tiny model's and Qwen3's
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    assert cfg.use_cache
    return LlamaForCausalLM(cfg).eval()


def test_token_logprobs_asks_the_model_for_no_cache():
    from jury.learner.grpo import token_logprobs

    model = _tiny_llama()
    outputs = []
    model.get_decoder().register_forward_hook(lambda module, args, out: outputs.append(out))
    ids = torch.randint(0, 64, (2, 9))
    comp = torch.zeros(2, 8)
    comp[:, 4:] = 1
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, torch.ones_like(ids), comp)
    assert logp.shape == (2, 8) and (logp[:, 4:] < 0).all()
    assert len(outputs) == 1 and outputs[0].past_key_values is None, outputs[0].past_key_values
