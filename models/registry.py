"""The local models, by their `model:` name: the one place where "tiny" is resolved.

    resolve_model("tiny")          # its folder, built (minutes) or reused from the cache
    resolve_model("/models/qwen")  # a Hugging Face folder, checked, returned as is
    model_folder(name)             # the same for a local name; anything else as given (a hub name)
    model_positions(name_or_path)  # the longest sequence it takes (max_model_len's bound)
    local_config("tiny")           # the config.json keys of its shape, without building it (jury simulate)

Nothing can be downloaded here, so these are built on the machine (models/build.py):
`tiny` for the synthetic task, `tiny-chat` the same with a chat template, `tiny-chain`
for the long chain-of-thought task.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class LocalModel:
    build: Callable[[bool], Path]  # progress -> the model's folder
    spec: Callable[[], object]     # its spec: the shape it is built with (hidden, layers, heads, ..., max_positions)


def _tiny(progress: bool) -> Path:
    from jury.models.tiny import make_tiny_model

    return make_tiny_model(progress=progress)


def _tiny_chat(progress: bool) -> Path:
    from jury.models.tiny import make_tiny_chat_model

    return make_tiny_chat_model(progress=progress)


def _tiny_chain(progress: bool) -> Path:
    from jury.models.chain import make_tiny_chain_model

    return make_tiny_chain_model(progress=progress)


def _tiny_spec():
    from jury.models.tiny import TinyModelSpec

    return TinyModelSpec()


def _chain_spec():
    from jury.models.chain import ChainModelSpec

    return ChainModelSpec()


LOCAL_MODELS: dict[str, LocalModel] = {
    "tiny": LocalModel(_tiny, _tiny_spec),
    "tiny-chat": LocalModel(_tiny_chat, _tiny_spec),
    "tiny-chain": LocalModel(_tiny_chain, _chain_spec),
}


def is_local(model: str) -> bool:
    return model in LOCAL_MODELS


def build_local_model(name: str, progress: bool = True) -> Path:
    """Build (or reuse) the local model `name` in its cache folder."""
    if name not in LOCAL_MODELS:
        raise ValueError(f"no local model {name!r}; local models: {', '.join(LOCAL_MODELS)}")
    return LOCAL_MODELS[name].build(progress)


def resolve_model(model: str, progress: bool = True) -> str:
    """The folder of `model`: a local model built or reused, else a Hugging Face folder."""
    if is_local(model):
        return str(build_local_model(model, progress))
    if not (Path(model) / "config.json").exists():
        raise FileNotFoundError(f"model: {model} is not a Hugging Face model folder (no config.json)")
    return model


def model_folder(model: str, progress: bool = True) -> str:
    """A local model's folder (built or reused); any other model as given: a folder, or a hub
    name that vLLM resolves where it can download (the run plan's LLM roles)."""
    return str(build_local_model(model, progress)) if is_local(model) else model


def local_config(name: str) -> dict:
    """The config.json keys of local model `name`'s shape, from its spec, without building it: a Llama
    as models/build.py builds one (untied head, one KV head per head). The vocabulary is the spec's,
    which the trained tokenizer reaches or falls a few tokens short of."""
    if name not in LOCAL_MODELS:
        raise ValueError(f"no local model {name!r}; local models: {', '.join(LOCAL_MODELS)}")
    spec = LOCAL_MODELS[name].spec()
    return {"model_type": "llama", "num_hidden_layers": spec.layers, "hidden_size": spec.hidden,
            "num_attention_heads": spec.heads, "num_key_value_heads": spec.heads,
            "head_dim": spec.hidden // spec.heads, "intermediate_size": spec.intermediate,
            "vocab_size": spec.vocab, "tie_word_embeddings": False}


def model_positions(model: str) -> int | None:
    """The longest sequence `model` takes: a local model's spec, else its config.json's
    max_position_embeddings; None where that is not the bound (rope_scaling stretches it) or unknown."""
    if is_local(model):
        return LOCAL_MODELS[model].spec().max_positions
    try:
        config = json.loads((Path(model) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or config.get("rope_scaling"):
        return None
    positions = config.get("max_position_embeddings")
    return positions if isinstance(positions, int) and not isinstance(positions, bool) else None
