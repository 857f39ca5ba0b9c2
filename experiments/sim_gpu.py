"""GPU stage costs for `jury simulate --hardware NAME`: roofline formulas over a hardware table
(configs/simulate/hardware.yaml) and a model's shape (its config.json, or configs/simulate/models.yaml).

    gpus = load_hardware("h100-sxm")                          # both roles on one card
    gpus = load_hardware("generator=l40s,learner=h100-sxm")   # each role on its own
    costs = hardware_costs(cfg, load_model(cfg.model), gpus, base)

Why our own formulas and not a library's (docs/simulate.md, "Cost libraries"): vidur predicts
inference only, from kernels profiled on the GPU it models (A100/H100 profiles, none for H200 or
L40S); GenZ models inference only; llm-analysis models training and inference with the same
roofline below but pins transformers < 5 and huggingface-hub < 0.15, which this project cannot
install beside its own, and has no H200 or L40S. The formulas are a few lines each:

    decode step (n sequences, mean context c)
        max( (weight bytes + n·c·KV bytes per token) / (tp · HBM bandwidth · decode_bandwidth) + overhead,
             n · (2·P + 4·L·d_attn·c) / (tp · peak · inference_mfu) )
        c = prompt + E[l²] / (2·E[l]) over the completion lengths l: the context of a running sequence
        averaged over every decode step, where a long completion runs for more steps than a short one
        (prompt + E[l]/2 would price a spread of lengths short: by a quarter for lengths uniform on 0..T)
    prefill of a group: (prompt · (2·P_body + 4·L·d_attn·prompt/2) + 2·H·V) / (tp · peak · inference_mfu)
        (the LM head on the last position only: until 2026-11-27 on every one, 18% of Qwen3-1.7B's
        FLOPs; once per group: the G samples share the prompt's KV through prefix caching), in the
        decode step that admits it, whose weight read it shares; of a mixture, plus the experts its
        prompt's tokens reach that the step's decode does not (Generation.prefill_experts_s)
    learner, per completion token: k · (2·P_body·(p + E[l]) + 2·H·V·E[l] + 2·L·d_attn·E[(p + l)²])
        / E[l] / (peak · train_mfu · s), s the shape's measured gain at the run's micro-batch
        (models.yaml's train_mfu_scale; 1 where none is measured), p the prompt: the layers on
        every position, the LM head on the completion's only (as grpo.token_logprobs runs it),
        causal attention over each whole row;
        k = 3 (forward and backward), +1 with gradient checkpointing, +1 with a KL reference (its
        forward runs in every micro-batch), +1/epochs for the once-per-batch forward (proximal
        log-probs, self-rewards); with a critic (advantage=gae) its 3 (4) + 1/epochs passes more, without
        the head (train_passes, critic_passes)
    learner, per step: the AdamW step (optimizer_bytes_per_param · P / ZeRO shards over HBM) plus ZeRO's
        collectives (bf16 gradients and parameters over NVLink within a node, the network across)
    weight sync: 2·P bytes / (slower end's network · collective) + one bucket_latency_s per bucket

P counts the parameters a token's matmuls touch (the layers and the LM head, not the embedding
lookup); weight bytes count all of them. Of a mixture of experts (ModelShape.experts), P counts the
experts a token is routed to (the active parameters) and a decode step reads the routed experts'
weights only as far as its n sequences reach them, 1 - (1 - k/E)^n of them under uniform routing;
the optimizer, ZeRO, the KV cache's room and the weight sync count every parameter. No overlap of
ZeRO's communication with compute is assumed (an upper bound on its time).
"""
from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

import yaml

from jury.experiments.sim_costs import Costs, Learner, Sharing, Sync, critic_passes, learner_passes, train_passes
from jury.models.registry import is_local, local_config
from jury.protocol.config import ConfigError, RunConfig

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "simulate"
ROLES = ("generator", "learner")


@dataclass(frozen=True)
class Efficiency:
    """What fraction of a card's peaks the code reaches (hardware.yaml's `efficiency:` says whence each)."""

    train_mfu: float = 0.226
    decode_bandwidth: float = 0.6
    inference_mfu: float = 0.5
    collective: float = 0.8
    optimizer_bytes_per_param: float = 32
    decode_step_overhead_s: float = 0.002
    bucket_latency_s: float = 0.005
    # a trainer that shares its GPUs with the engines (the colocated synchronous baseline of --sweep)
    # takes 1/colocated_train of a dedicated learner's time for the same step (its compute, optimizer
    # and ZeRO traffic); 1: as fast (unmeasured on ours)
    colocated_train: float = 1.0

    FRACTIONS = ("train_mfu", "decode_bandwidth", "inference_mfu", "collective")

    def __post_init__(self):
        bounds = {**{k: ("a fraction of the card's peak, in (0, 1]", lambda v: 0 < v <= 1) for k in self.FRACTIONS},
                  "colocated_train": ("a fraction of a dedicated learner's speed, in (0, 1]", lambda v: 0 < v <= 1),
                  "optimizer_bytes_per_param": ("bytes, finite and > 0", lambda v: v > 0),
                  "decode_step_overhead_s": ("seconds, finite and >= 0", lambda v: v >= 0),
                  "bucket_latency_s": ("seconds, finite and >= 0", lambda v: v >= 0)}
        for key, (what, ok) in bounds.items():  # above 1 is no card's peak; 0 would price nothing
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
                raise ConfigError(f"efficiency.{key}={v!r}: {what}")


@dataclass(frozen=True)
class Gpu:
    name: str
    bf16_flops: float
    hbm_bytes: float
    hbm_bytes_per_s: float
    nvlink_bytes_per_s: float
    network_bytes_per_s: float
    gpus_per_node: int
    efficiency: Efficiency = Efficiency()


@dataclass(frozen=True)
class ModelShape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = True
    params: float = 0.0   # > 0: overrides the count from the shape (weight bytes and FLOPs scale with it)
    # (micro-batch rows, factor) pairs: this shape's learner reaches the card's train_mfu times the
    # factor (models.yaml says where each was measured); between two micro-batches the factor is
    # interpolated in log2(rows), outside them the nearest is kept; none: 1
    train_mfu_scale: tuple = ()
    # a mixture of experts (Qwen2/3-MoE, Mixtral): every layer's MLP is `experts` routed experts of
    # `expert_intermediate` each, a token routed to `experts_per_token` of them, plus a router (hidden x
    # experts) and an optional shared expert of `shared_intermediate` every token passes; `intermediate`
    # is then unused. 0 experts: a dense gated MLP of `intermediate`.
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0
    shared_intermediate: int = 0

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1:
                raise ConfigError(f"model.{name} must be a whole number >= 1, got {value!r}")
        for name in ("params", "experts", "experts_per_token", "expert_intermediate", "shared_intermediate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ConfigError(f"model.{name} must be a number >= 0, got {value!r}")
        if self.experts and not (0 < self.experts_per_token <= self.experts and self.expert_intermediate > 0):
            raise ConfigError(f"a mixture of {self.experts} experts needs 0 < experts_per_token <= experts and "
                              f"expert_intermediate > 0 (got {self.experts_per_token}, {self.expert_intermediate})")
        if not self.experts and (self.experts_per_token or self.expert_intermediate or self.shared_intermediate):
            raise ConfigError("experts_per_token, expert_intermediate and shared_intermediate describe a mixture "
                              "of experts: give `experts` too")

    def train_scale(self, micro_batch: int) -> float:
        points = self.train_mfu_scale
        if not points:
            return 1.0
        if micro_batch <= points[0][0]:
            return points[0][1]
        for (r0, f0), (r1, f1) in zip(points, points[1:]):
            if micro_batch <= r1:
                w = math.log2(micro_batch / r0) / math.log2(r1 / r0)
                return f0 + w * (f1 - f0)
        return points[-1][1]

    @property
    def attn_dim(self) -> int:
        return self.heads * self.head_dim

    def _layer_params(self, routed: int | None = None) -> int:
        """A layer's parameters; of a mixture, with `routed` of its experts (all by default: the
        weights; experts_per_token: what one token's matmuls touch)."""
        kv = self.kv_heads * self.head_dim
        attn = self.hidden * self.attn_dim * 2 + self.hidden * kv * 2  # q and o, k and v
        if not self.experts:
            return attn + 3 * self.hidden * self.intermediate          # gated MLP: gate, up, down
        routed = self.experts if routed is None else routed
        mlp = 3 * self.hidden * (routed * self.expert_intermediate + self.shared_intermediate)
        return attn + mlp + self.hidden * self.experts                 # and the router's logits

    def _scaled(self, count: float) -> float:
        """A count from the shape, scaled as `params` scales the whole (1 without it)."""
        return count * self.total_params() / self._shape_params() if self.params else count

    def total_params(self) -> float:
        if self.params:
            return self.params
        embed = self.vocab * self.hidden
        return self.layers * self._layer_params() + embed * (1 if self.tied_embeddings else 2)

    def routed_params(self) -> float:
        """A mixture's routed experts, all layers: weights a decode step reads only for the experts
        some running sequence is routed to (0 for a dense model)."""
        return self._scaled(self.layers * 3 * self.hidden * self.experts * self.expert_intermediate)

    def experts_read(self, running: int) -> float:
        """The share of a layer's routed experts that `running` sequences' tokens are routed to, in
        expectation under uniform routing: each token takes experts_per_token of `experts` distinct
        ones, so an expert is missed by all with probability (1 - k/E)^running."""
        if not self.experts:
            return 0.0
        return 1.0 - (1.0 - self.experts_per_token / self.experts) ** running

    def weight_bytes_read(self, running: int) -> float:
        """bf16 bytes of weights one decode step reads: all but the routed experts, and those a
        step's tokens are routed to."""
        return 2 * (self.total_params() - self.routed_params() * (1.0 - self.experts_read(running)))

    def head_params(self) -> float:
        """The LM head's parameters (hidden x vocabulary), shared with the embedding when tied; scaled
        with `params` as matmul_params is, so that the layers' share stays the shape's."""
        return self._scaled(self.vocab * self.hidden)

    def matmul_params(self) -> float:
        """Parameters a token's matmuls touch: every layer and the LM head (2 FLOPs each per token);
        of a mixture, the experts the token is routed to (the active parameters)."""
        routed = self.experts_per_token if self.experts else None
        return self._scaled(self.layers * self._layer_params(routed) + self.vocab * self.hidden)

    def _shape_params(self) -> float:
        return dataclasses.replace(self, params=0.0).total_params()

    def kv_bytes_per_token(self) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2  # K and V, bf16

    def forward_flops(self, context: float) -> float:
        """One token's forward with `context` keys before it: the matmuls plus attention (QK and AV)."""
        return 2 * self.matmul_params() + 4 * self.layers * self.attn_dim * context

    def prefill_flops(self, prompt: int) -> float:
        """A prompt's forward: every position through the layers, causal attention (prompt/2 keys a
        position on average), and the LM head on the last position only, whose logits give the first
        token (vLLM computes no others; benchmarks/decode_roofline.py's prefill neither)."""
        return prompt * (self.forward_flops(prompt / 2) - 2 * self.head_params()) + 2 * self.head_params()


# ── the tables ──

def _build(cls, data: dict, where: str):
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]} (known: {', '.join(sorted(names))})")
    return cls(**data)


def _overridden(data: dict, overrides: list[str], prefix: str) -> dict:
    data = dict(data)
    for o in overrides:
        key, _, value = o.partition("=")
        if key.startswith(prefix):
            data[key.removeprefix(prefix)] = _number_or_value(yaml.safe_load(value))
    return data


def _number_or_value(value):
    """YAML 1.1 reads 5e9 (no dot) as a string; every field these overrides reach that is a string of
    digits is a number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    return value


def load_hardware(spec: str, path: Path | None = None, overrides: list[str] = ()) -> dict[str, Gpu]:
    """`NAME` (both roles) or `generator=NAME,learner=NAME` -> role -> Gpu; an unknown name is refused
    with the names known. `efficiency.KEY=VALUE` overrides change every card's factor."""
    table = yaml.safe_load((path or CONFIGS / "hardware.yaml").read_text())
    gpus, base_eff = table["gpus"], table.get("efficiency", {})
    parts = dict(p.split("=", 1) if "=" in p else ("", p) for p in spec.split(","))
    if "" in parts:
        if len(parts) > 1:
            raise ConfigError(f"--hardware {spec!r}: one NAME, or role=NAME for each of {', '.join(ROLES)}")
        parts = {role: parts[""] for role in ROLES}
    bad_roles = sorted(set(parts) - set(ROLES))
    if bad_roles or set(parts) != set(ROLES):
        raise ConfigError(f"--hardware {spec!r}: roles must be {' and '.join(ROLES)}, got {', '.join(sorted(parts))}")
    out = {}
    for role, name in parts.items():
        if name not in gpus:
            raise ConfigError(f"--hardware: unknown GPU {name!r} (known: {', '.join(sorted(gpus))})")
        entry = dict(gpus[name])
        eff = {k: _number_or_value(v) for k, v in {**base_eff, **entry.pop("efficiency", {})}.items()}
        eff = _overridden(eff, overrides, "efficiency.")
        try:
            efficiency = _build(Efficiency, eff, "efficiency")
        except ConfigError as e:  # a bad value, from the table or the command line: say which card's
            raise ConfigError(f"hardware {name}: {e}") from None
        out[role] = _build(Gpu, {**entry, "name": name, "efficiency": efficiency}, f"hardware {name}")
    return out


def load_model(model: str, path: Path | None = None, overrides: list[str] = ()) -> ModelShape:
    """The shape of the config's `model`: a local model's (`tiny`: its spec, built or not), its
    folder's config.json where it exists here, else the entry of models.yaml named as the path's last
    part; `model.KEY=VALUE` overrides any field (with all of them given, any model: `model.layers=...
    model.hidden=...`)."""
    folder = Path(model)
    data: dict = {}
    if is_local(model):
        data = _hf_shape(local_config(model), f"local model {model}")
    elif (folder / "config.json").exists():
        data = _hf_shape(json.loads((folder / "config.json").read_text()), folder / "config.json")
    known = yaml.safe_load((path or CONFIGS / "models.yaml").read_text())["models"]
    entry = dict(known.get(folder.name, {}))
    if data:  # the shape from config.json; what was measured of it from models.yaml
        data["train_mfu_scale"] = entry.get("train_mfu_scale", {})
    else:
        data = entry
    data = _overridden(data, overrides, "model.")
    data["train_mfu_scale"] = _scale_points(data.get("train_mfu_scale") or {}, model)
    missing = [f.name for f in dataclasses.fields(ModelShape)
               if f.default is dataclasses.MISSING and f.name not in data]
    if missing:
        raise ConfigError(f"model {model!r}: no config.json here and not in configs/simulate/models.yaml; "
                          f"give its shape as model.KEY=VALUE (missing: {', '.join(missing)})")
    return _build(ModelShape, data, f"model {model}")


# config.json model_types whose layers the shape prices (attention, a gated MLP or a mixture in every
# layer); another is refused by its name: an unknown architecture (Jamba's Mamba layers, Ernie's
# experts under other keys) would be priced as a dense model without a word
MODELLED_TYPES = ("llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mixtral", "gemma", "olmo2",
                  "granite")
# config.json keys of architectures whose cost the shape does not model: refused by name, not priced
# as the dense or uniform mixture they are not
UNMODELLED = {
    "kv_lora_rank": "multi-head latent attention (DeepSeek-V2/V3): its KV cache is not K and V per head",
    "q_lora_rank": "multi-head latent attention (DeepSeek-V2/V3)",
    "first_k_dense_replace": "dense MLPs in the first layers of a mixture",
    "sliding_window": "sliding-window attention (its KV cache stops growing)",
    "linear_num_value_heads": "linear attention layers (Qwen3-Next)",
}

ANYWAY = (" (to price it as a model without it, name the model by a path with no config.json here and give "
          "its shape as model.KEY=VALUE)")


def _hf_shape(hf: dict, where: Path) -> dict:
    """A Hugging Face config.json's shape: a Llama-like dense model, or a mixture of experts in every
    layer (Qwen2-MoE and Qwen3-MoE: num_experts, moe_intermediate_size, shared_expert_intermediate_size;
    Mixtral: num_local_experts, each expert of intermediate_size)."""
    kind = hf.get("model_type")
    if kind is not None and kind not in MODELLED_TYPES:
        raise ConfigError(f"{where}: model_type {kind!r} is not modelled (known: {', '.join(MODELLED_TYPES)}){ANYWAY}")
    for key, what in UNMODELLED.items():
        if hf.get(key) and not (key == "sliding_window" and not hf.get("use_sliding_window", True)):
            raise ConfigError(f"{where}: {key}={hf[key]!r}: {what} is not modelled{ANYWAY}")
    if hf.get("decoder_sparse_step", 1) != 1 or hf.get("mlp_only_layers"):
        raise ConfigError(f"{where}: decoder_sparse_step={hf.get('decoder_sparse_step', 1)}, mlp_only_layers="
                          f"{hf.get('mlp_only_layers')}: a mixture in only some layers is not modelled{ANYWAY}")
    data = {"layers": hf["num_hidden_layers"], "hidden": hf["hidden_size"], "heads": hf["num_attention_heads"],
            "kv_heads": hf.get("num_key_value_heads") or hf["num_attention_heads"],
            "head_dim": hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
            "intermediate": hf["intermediate_size"], "vocab": hf["vocab_size"],
            "tied_embeddings": bool(hf.get("tie_word_embeddings", False))}
    experts = hf.get("num_experts") or hf.get("num_local_experts") or 0
    if experts:
        data.update(experts=experts, experts_per_token=hf.get("num_experts_per_tok", 0),
                    expert_intermediate=hf.get("moe_intermediate_size") or hf["intermediate_size"],
                    shared_intermediate=hf.get("shared_expert_intermediate_size") or 0)
    return data


def _scale_points(scale, model: str) -> tuple:
    """models.yaml's `train_mfu_scale: {rows: factor, ...}` as sorted pairs; anything else refused."""
    if not isinstance(scale, dict) or not all(
            isinstance(k, int) and not isinstance(k, bool) and k > 0 and isinstance(v, (int, float))
            and not isinstance(v, bool) and v > 0 for k, v in scale.items()):
        raise ConfigError(f"model {model!r}: train_mfu_scale must map micro-batch rows (whole numbers > 0) "
                          f"to factors > 0, e.g. {{8: 1.0, 16: 1.1}}; got {scale!r}")
    return tuple(sorted((k, float(v)) for k, v in scale.items()))


def train_efficiency(m: ModelShape, gpu: Gpu, micro_batch: int) -> float:
    """The learner's model FLOP/s over the card's dense bf16 peak: the card's train_mfu, measured on
    Qwen3-1.7B's shape, times what this shape was measured to gain at this micro-batch."""
    return gpu.efficiency.train_mfu * m.train_scale(micro_batch)


# ── the formulas ──

def decode_step_s(m: ModelShape, gpu: Gpu, tp: int, running: int, context: float) -> float:
    """One decode step of an engine over `tp` GPUs with `running` sequences at mean context `context`."""
    e = gpu.efficiency
    memory = (m.weight_bytes_read(running) + running * context * m.kv_bytes_per_token()) / (
        tp * gpu.hbm_bytes_per_s * e.decode_bandwidth)
    compute = running * m.forward_flops(context) / (tp * gpu.bf16_flops * e.inference_mfu)
    return max(memory + e.decode_step_overhead_s, compute)


def prefill_s(m: ModelShape, gpu: Gpu, tp: int, prompt_tokens: int) -> float:
    return m.prefill_flops(prompt_tokens) / (tp * gpu.bf16_flops * gpu.efficiency.inference_mfu)


def train_flops_per_token(m: ModelShape, cfg: RunConfig, prompt: float, mean: float, mean_square: float) -> float:
    """FLOPs per completion token per epoch, for rows of a `prompt` and completions whose lengths have
    this mean and mean square: the layers over every position, causal attention over each row
    (2·L·d_attn·length² a forward), the LM head over the completion's positions, times
    train_passes; with a critic, its passes of the same layers and attention (its head is one label)."""
    body = m.matmul_params() - m.head_params()
    row_square = prompt * prompt + 2 * prompt * mean + mean_square  # E[(p + l)²]
    layers = 2 * body * (prompt + mean) + 2 * m.layers * m.attn_dim * row_square
    policy = train_passes(cfg) * (layers + 2 * m.head_params() * mean)
    return (policy + critic_passes(cfg) * layers) / mean


def collective_bytes(zero_stage: int, params: float, ranks: int, micro_batches: int, optimizer_steps: int = 1) -> float:
    """Bytes each rank sends per learner step in ZeRO's collectives (bf16, ring algorithms: a
    reduce-scatter or all-gather of S bytes moves (r-1)/r·S per rank). ZeRO-0 and 1: the gradient's
    all-reduce (or reduce-scatter and the parameters' all-gather) once per optimizer step; ZeRO-2
    reduces each micro-batch's gradients and gathers the parameters after each optimizer step; ZeRO-3
    also gathers the parameters for each micro-batch's forward and backward. `optimizer_steps`: a
    step's mini-batches times its epochs."""
    if ranks <= 1:
        return 0.0
    share = (ranks - 1) / ranks * 2 * params
    if zero_stage <= 1:
        return 2 * share * optimizer_steps
    if zero_stage == 2:
        return (micro_batches + optimizer_steps) * share
    return 3 * micro_batches * share


def learner_step_s(m: ModelShape, gpu: Gpu, cfg: RunConfig) -> float:
    """The per-step part: AdamW over this rank's share of the parameters once per optimizer step (a
    step's learner.minibatches times its epochs), then ZeRO's collectives; twice with a critic
    (advantage=gae: a second engine of the policy's shape, stage and micro-batches)."""
    lc, e = cfg.learner, gpu.efficiency
    shards = lc.num_ranks if lc.zero_stage >= 1 else 1
    optimizer_steps = lc.minibatches * lc.epochs
    optimizer = e.optimizer_bytes_per_param * m.total_params() / shards / (gpu.hbm_bytes_per_s * e.decode_bandwidth)
    rows = cfg.batch_groups * cfg.generator.group_size
    # each mini-batch's rows in micro-batches over the ranks, in every epoch
    micro = lc.epochs * lc.minibatches * math.ceil(rows / lc.minibatches / (lc.num_ranks * lc.micro_batch))
    link = gpu.nvlink_bytes_per_s if lc.num_ranks <= gpu.gpus_per_node else gpu.network_bytes_per_s
    engines = 2 if critic_passes(cfg) else 1
    return engines * (optimizer * optimizer_steps + collective_bytes(lc.zero_stage, m.total_params(), lc.num_ranks,
                                                                     micro, optimizer_steps) / (link * e.collective))


def sync_costs(m: ModelShape, gpus: dict[str, Gpu], base: Sync) -> Sync:
    """Rank 0 broadcasts the bf16 weights to the engines on other nodes: the slower end's network."""
    bw = min(g.network_bytes_per_s for g in gpus.values()) * gpus["learner"].efficiency.collective
    return Sync(fixed_s=base.fixed_s, weight_bytes=2 * m.total_params(), bandwidth_bytes_per_s=bw,
                bucket_latency_s=gpus["learner"].efficiency.bucket_latency_s)


def length_draws(costs: Costs, max_new_tokens: int) -> list[int]:
    """The completion lengths as the simulator draws them (a fixed sample: a pure function; a trace's
    own samples, each task's group being its own)."""
    lengths = costs.generation.lengths
    if lengths.kind == "trace":
        return [min(max_new_tokens, max(1, n)) for group in lengths.groups for n in group]
    return lengths.draw(random.Random(0), 4000, max_new_tokens)


def mean_length(costs: Costs, max_new_tokens: int) -> float:
    draws = length_draws(costs, max_new_tokens)
    return sum(draws) / len(draws)


def length_moments(costs: Costs, max_new_tokens: int) -> tuple[float, float]:
    """E[l] and E[l²] of the drawn completion lengths."""
    draws = length_draws(costs, max_new_tokens)
    return sum(draws) / len(draws), sum(n * n for n in draws) / len(draws)


def hardware_reading(cfg: RunConfig) -> tuple[list[str], list[str]]:
    """How --hardware reads a config: (settings it refuses by name, notes on what it assumes). The
    formulas price a GPU run in bf16 whose weights move over NCCL, one engine on each
    tensor_parallel_size GPUs. A CPU config (no GPU asked for) is read as that run, said in a note;
    a GPU config that asks for something else is refused: float32, gloo, engines sharing a GPU."""
    g, lc = cfg.generator, cfg.learner
    if not (g.num_gpus or lc.num_gpus):
        other = [f"{k}={v}" for k, v in (("generator.dtype", g.dtype), ("learner.dtype", lc.dtype),
                                         ("weight_backend", cfg.weight_backend)) if v not in ("bfloat16", "nccl")]
        note = "--hardware reads this CPU config as its GPU run: bf16 weights and FLOPs, weights synced over NCCL, " \
               f"one engine on each {g.tensor_parallel_size} GPU(s)"
        return [], [note + (f" (it says {', '.join(other)})" if other else "")]
    refused = [f"{k}={v} (the GPU formulas price bfloat16)" for k, v in (("generator.dtype", g.dtype),
                                                                        ("learner.dtype", lc.dtype)) if v != "bfloat16"]
    if cfg.weight_backend != "nccl":
        refused.append(f"weight_backend={cfg.weight_backend} (the weight sync is priced over NCCL)")
    if 0 < g.num_gpus < 1:
        refused.append(f"generator.num_gpus={g.num_gpus} (engines sharing a GPU; --sweep prices the colocated "
                       "learner on the engines' GPUs)")
    return refused, []


def hardware_costs(cfg: RunConfig, m: ModelShape, gpus: dict[str, Gpu], base: Costs,
                   colocated: bool = False) -> Costs:
    """Generation, learner and sync costs from the formulas; lengths and verifier from `base`.
    `colocated`: the learner trains on the engines' GPUs, its step (compute, optimizer and ZeRO
    traffic) 1/efficiency.colocated_train as long.

    The simulator's decode step is step_s + seq_s·n, or flop_seq_s·n where that is larger: the
    memory and compute sides of decode_step_s above at the run's decode context (the module's c)."""
    gen, lrn = gpus["generator"], gpus["learner"]
    tp, prompt = cfg.generator.tensor_parallel_size, base.generation.prompt_tokens
    length, square = length_moments(base, cfg.generator.max_new_tokens)
    context = prompt + square / (2 * length)  # a running sequence's KV length, over every decode step
    bw = tp * gen.hbm_bytes_per_s * gen.efficiency.decode_bandwidth
    routed = 2 * m.routed_params()  # a mixture's experts: read as far as the step's tokens reach them
    generation = dataclasses.replace(
        base.generation,
        step_s=(2 * m.total_params() - routed) / bw + gen.efficiency.decode_step_overhead_s,
        expert_step_s=routed / bw, expert_share=m.experts_per_token / m.experts if m.experts else 0.0,
        seq_s=context * m.kv_bytes_per_token() / bw,
        flop_seq_s=m.forward_flops(context) / (tp * gen.bf16_flops * gen.efficiency.inference_mfu),
        prefill_s=prefill_s(m, gen, tp, prompt))
    per_token = train_flops_per_token(m, cfg, prompt, length, square)
    slower = 1 / lrn.efficiency.colocated_train if colocated else 1.0  # the whole step: compute, optimizer, ZeRO
    learner = Learner(step_s=learner_step_s(m, lrn, cfg) * slower,
                      token_s=per_token / (lrn.bf16_flops * train_efficiency(m, lrn, cfg.learner.micro_batch)) * slower,
                      overhead_s=base.learner.overhead_s,  # the driver's, not the GPUs': as given
                      passes=learner_passes(cfg))  # per_token counts this config's own passes
    # each role on its own GPUs: neither slows the other (Sharing's zeros), whatever a calibration said;
    # of a calibration only the lengths are left, which are its task's
    kept = tuple((k, v) for k, v in base.calibrated_at if k in ("dataset", "generator.max_new_tokens"))
    return dataclasses.replace(base, generation=generation, learner=learner, sync=sync_costs(m, gpus, base.sync),
                               sharing=Sharing(), source="hardware", calibrated_at=kept)


def kv_limited_seqs(cfg: RunConfig, m: ModelShape, gpu: Gpu, base: Costs) -> int:
    """Sequences an engine's KV cache holds at the run's mean length (the share of each GPU vLLM takes,
    generator.gpu_memory_utilization, less the weights): past it vLLM preempts, so the simulator runs
    no more at once."""
    tp = cfg.generator.tensor_parallel_size
    free = tp * gpu.hbm_bytes * cfg.generator.gpu_memory_utilization - 2 * m.total_params()
    per_seq = (base.generation.prompt_tokens + mean_length(base, cfg.generator.max_new_tokens)) * m.kv_bytes_per_token()
    if free <= per_seq:
        raise ConfigError(f"the model's weights ({2 * m.total_params() / 1e9:.1f} GB) leave no room for one "
                          f"sequence's KV cache in {cfg.generator.gpu_memory_utilization:g} of {tp} x {gpu.name}: "
                          "raise generator.tensor_parallel_size (or generator.gpu_memory_utilization)")
    return int(free // per_seq)


def with_kv_limit(cfg: RunConfig, m: ModelShape, gpus: dict[str, Gpu], base: Costs) -> RunConfig:
    limit = kv_limited_seqs(cfg, m, gpus["generator"], base)
    if limit >= cfg.generator.max_num_seqs:
        return cfg
    return dataclasses.replace(cfg, generator=dataclasses.replace(cfg.generator, max_num_seqs=limit))
