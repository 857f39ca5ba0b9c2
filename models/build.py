"""What every local model is built from: the cache folder, a BPE tokenizer, a Llama.

Nothing can be downloaded here, so the local models (models/registry.py) are built on the
machine: a tokenizer trained on the task's own text and a small Llama whose head_dim is 64
(vLLM's CPU attention refuses smaller heads).
"""
from __future__ import annotations

import os
from pathlib import Path


def default_path() -> Path:
    root = os.environ.get("JURY_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "jury-rl"))
    return Path(root) / "tiny-model"


def train_tokenizer(corpus: list[str], vocab: int, split_digits: bool = False):
    """A byte-level BPE tokenizer trained on `corpus`, with <pad>, <s> (prepended) and </s>.
    `split_digits`: every digit its own token (the BPE never merges numbers)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if split_digits:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # any text stays encodable
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )


def build_model(spec, tokenizer):
    """A Llama of `spec`'s shape (hidden, layers, heads, intermediate, max_positions, seed) for `tokenizer`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(spec.seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden,
        intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        max_position_embeddings=spec.max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    return LlamaForCausalLM(config)
