"""Loading the run's config: a YAML file, then `key=value` overrides, into `RunConfig`.

    cfg = load_config("configs/chain.yaml", ["learner.lr=1e-4", "steps=50"])
    cfg = load_run_config("runs/x")     # a run folder's config.yaml, migrated from its version
    text = dump_config(cfg)             # what a run folder records (with CONFIG_VERSION)

Overrides are dotted paths, values parsed as YAML. Every key and value is checked (the
dataclasses of config.py check their own ranges): a bad one is refused with its field's
name, never half-applied. Standard library and PyYAML only.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Literal

import yaml

from jury.protocol.config import ConfigError, RunConfig

# The version of the settings' meanings. A run folder records it (dump_config); a config.yaml
# without it was written before versions existed (1). load_run_config and load_config migrate an
# older file to the settings that reproduce what it ran, or refuse it saying why: never silently
# under a new meaning. A user's own config file without a version is read as current.
CONFIG_VERSION = 3


def load_config(path: str | None = None, overrides: list[str] = ()) -> RunConfig:
    """YAML file (optional) then `a.b=value` overrides; refuses unknown keys and bad values."""
    data = read_yaml(path) if path else {}
    version = data.pop("config_version", CONFIG_VERSION)
    return _from_data(data, overrides, version, path or "config")


def load_run_config(run_dir: str, overrides: list[str] = ()) -> RunConfig:
    """A run folder's config.yaml (what `--resume` and `jury replay` read), migrated from the
    version it was written at (none: before versions, 1)."""
    path = f"{run_dir}/config.yaml"
    data = read_yaml(path)
    _migrate_unparsable(data)
    return _from_data(data, overrides, data.pop("config_version", 1), path)


def _migrate_unparsable(data: dict):
    """A run folder records every field, so one without verifier.unparsable was written before
    the setting existed, when ResZero left unparsable samples in its residual set: keep that
    (`residual`) for --resume and replay. Keyed on the field's absence, not a version: the
    rule is new, no earlier meaning of a field changed."""
    verifier = data.get("verifier")
    if isinstance(verifier, dict) and "unparsable" not in verifier:
        verifier["unparsable"] = "residual"


def dump_config(cfg: RunConfig) -> str:
    """The config as a run folder records it: YAML, its version first."""
    return yaml.safe_dump({"config_version": CONFIG_VERSION, **to_dict(cfg)}, sort_keys=False)


def read_yaml(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        try:
            loaded = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path} is not valid YAML: {e}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return loaded or {}


def _from_data(data: dict, overrides: list[str], version, where: str) -> RunConfig:
    if type(version) is not int or not 1 <= version <= CONFIG_VERSION:
        raise ConfigError(f"{where}: config_version {version!r} is not one this jury-rl reads "
                          f"(1 to {CONFIG_VERSION}); a newer jury-rl wrote it?")
    for v in range(version, CONFIG_VERSION):
        MIGRATIONS[v](data, where)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not key=value")
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p} is not a section")
        node[leaf] = _override_value(item, raw)
    _migrate_tis_cap(data)
    _refuse_removed(data)
    return _build(RunConfig, data, "")


def _v1_to_v2(data: dict, where: str):
    """verifier.tinyv_max_model_len sized every LLM server; now each server is sized by
    verifier.llm_prompt_tokens + its role's max tokens. It never changed what was trained."""
    verifier = data.get("verifier")
    if isinstance(verifier, dict):
        verifier.pop("tinyv_max_model_len", None)


def _v2_to_v3(data: dict, where: str):
    """Every method computes what its source computes (issue 25): `decoupled` was token TIS
    (min(w, is_cap)) and is now AReaL's decoupled PPO (w > C masked), so an old decoupled run is
    tis_token with its cap; the aggregations took their sources' names (seq-mean is verl's
    seq-mean-token-mean, drgrpo TRL's dr_grpo). Bounds were written out for every correction
    (is_cap, mask_low, mask_high); each correction now takes only its own kind, so the others go."""
    learner = data.get("learner")
    if not isinstance(learner, dict):
        return
    if learner.get("correction") == "decoupled":
        learner["correction"] = "tis_token"
    learner["loss_agg"] = {"seq-mean": "seq-mean-token-mean", "drgrpo": "dr_grpo"}.get(
        learner.get("loss_agg"), learner.get("loss_agg", "token-mean"))
    kind = {"tis_token": "cap", "tis_seq": "cap", "mask_token": "band", "mask_seq": "band"}.get(
        learner.get("correction", "none"))
    for key in (("is_cap",) if kind != "cap" else ()) + (("mask_low", "mask_high") if kind != "band" else ()):
        learner.pop(key, None)


MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3}  # from version v to v + 1


def _refuse_removed(data: dict):
    """Keys that settings of this version no longer have, named with what replaced them."""
    verifier = data.get("verifier")
    if isinstance(verifier, dict) and "tinyv_max_model_len" in verifier:
        raise ConfigError("verifier.tinyv_max_model_len is gone: every LLM server (TinyV, the Lean gate's roles, "
                          "DeRL's) is sized by verifier.llm_prompt_tokens + that role's max tokens")


def _override_value(item: str, raw: str):
    """An override's value, parsed as YAML; refused where YAML would quietly drop part of it."""
    if not raw:
        return ""
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"override {item!r}: the value is not valid YAML ({getattr(e, 'problem', None) or e}); quote it") from None
    if "#" in raw and not ("#" in str(value)):  # `a #b` is a comment in YAML: the value would be "a"
        raise ConfigError(f"override {item!r}: YAML reads ' #...' as a comment and would drop it; "
                          f"quote the value: {item.partition('=')[0]}=\"{raw}\"")
    return value


def _migrate_tis_cap(data: dict):
    """learner.tis_cap (before learner.correction) in an old config file or run folder (--resume):
    0 meant no correction, X > 0 the behaviour weight truncated at X: correction=tis_token is_cap=X."""
    learner = data.get("learner")
    if not isinstance(learner, dict) or "tis_cap" not in learner:
        return
    cap = learner.pop("tis_cap")
    if isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap == 0:
        return
    if "correction" in learner or "is_cap" in learner:
        raise ConfigError("learner.tis_cap is the old spelling of learner.correction=tis_token with learner.is_cap; "
                          "give one or the other")
    learner.update(correction="tis_token", is_cap=cap)


def _build(cls, data: dict, prefix: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown config key {prefix}{unknown[0]} (known: {', '.join(sorted(fields))})")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _value(hints[name], value, prefix + name)
    try:
        return cls(**kwargs)
    except (ConfigError, ValueError) as e:  # a section's own checks raise ValueError
        raise ConfigError(f"{prefix}{e}" if prefix else str(e)) from None


def _value(hint, value, name):
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
        # an optional value (learner.is_cap: float | None): YAML's null, or the other arm
        return None if value is None else _value(next(a for a in args if a is not type(None)), value, name)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, name + ".")
    if typing.get_args(hint) == (int, float):  # forced_staleness: k, or {k: weight}
        if type(value) is int:
            value = {value: 1.0}
        if not isinstance(value, dict) or not all(
                type(k) is int and isinstance(w, (int, float)) and not isinstance(w, bool) for k, w in value.items()):
            raise ConfigError(f"{name} must be k or {{k: weight}} with integer k, got {value!r}")
        return {k: float(w) for k, w in value.items()}
    if typing.get_origin(hint) is dict and typing.get_args(hint)[1] is str:  # verifier.llm_endpoints
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ConfigError(f"{name} must map names to text, got {value!r}")
        return dict(value)
    if typing.get_origin(hint) is dict:  # custom resources: names to amounts
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                for k, v in value.items()):
            raise ConfigError(f"{name} must map names to amounts >= 0, got {value!r}")
        return {k: float(v) for k, v in value.items()}
    if typing.get_origin(hint) is tuple:  # derl.ratio (int, int), derl.forbidden_tactics (str, ...)
        args = typing.get_args(hint)
        if isinstance(value, str) and args[-1] is Ellipsis:  # tracking=wandb: a list of one; tracking= none
            value = [value] if value else []
        if not isinstance(value, list):
            raise ConfigError(f"{name} must be a list, got {value!r}")
        arms = (args[0],) * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(value) != len(arms):
            raise ConfigError(f"{name} must be a list of {len(arms)} values, got {value!r}")
        return tuple(_value(arm, v, f"{name}[{i}]") for i, (arm, v) in enumerate(zip(arms, value)))
    if typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ConfigError(f"{name} must be one of {list(choices)}, got {value!r}")
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):  # YAML 1.1 reads "1e-5" as a string
        try:
            value = float(value)
        except ValueError:
            pass
    if hint is float and isinstance(value, float) and not math.isfinite(value):
        # inf and nan pass `x > 0`-style checks (or fail them silently) and break later: a timeout
        # of inf overflows Ray's and multiprocessing's waits, an lr of inf makes the weights NaN
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if hint in (int, float, str, bool) and type(value) is hint:
        return value
    raise ConfigError(f"{name} must be {hint.__name__}, got {value!r}")


def to_dict(cfg) -> dict:
    """The config as plain YAML-safe data (tuples become lists)."""
    return _plain(dataclasses.asdict(cfg))


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# What may change when a run is resumed: how long it runs, how it learns from here on (the
# learning-rate schedule, clipping), where and how often it writes, what it logs and evaluates,
# timeouts, faults, and the resources of its processes. Anything else (the model, the data and
# prompts, the seed, batches and groups, staleness, sampling, rewards and verification, the loss
# and its method, the learner's layout) would make the resumed run another run than the one its
# folder records: refused, naming the setting, its old value and its new one.
RESUMABLE = (
    "steps", "checkpoint_every", "checkpoint_dir", "progress", "tracking", "max_restarts", "resend_after_s",
    "sync_timeout_s", "group_timeout_s", "check_resources", "faults", "record_groups", "run_dir", "curve",
    "num_generators", "num_verifiers",
    "learner.lr", "learner.lr_schedule", "learner.warmup_steps", "learner.min_lr_ratio", "learner.weight_decay",
    "learner.grad_clip", "learner.critic_lr", "learner.critic_weight_decay", "learner.micro_batch", "learner.gradient_checkpointing", "learner.threads",
    "learner.num_cpus", "learner.num_gpus", "learner.resources", "learner.max_nonfinite_steps",
    "generator.max_num_seqs", "generator.max_tasks_in_flight", "generator.kv_cache_gib", "generator.enforce_eager",
    "generator.gpu_memory_utilization", "generator.num_cpus", "generator.num_gpus", "generator.resources",
    "verifier.pool_workers", "verifier.check_timeout_s", "verifier.cache_size", "verifier.num_cpus",
    "verifier.resources", "verifier.llm_num_gpus", "verifier.llm_gpu_memory_utilization",
    "eval.", "wandb.", "monitor.",
)


def resume_changes(recorded: RunConfig, new: RunConfig) -> dict[str, tuple]:
    """The settings a resumed run changes (field -> (old, new)); ConfigError for one that may not
    change (RESUMABLE), naming it with its old and new values."""
    old, now = _flat(to_dict(recorded)), _flat(to_dict(new))
    changes = {k: (old.get(k), now.get(k)) for k in sorted(set(old) | set(now)) if old.get(k) != now.get(k)}
    refused = [k for k in changes if not any(k == r or (r.endswith(".") and k.startswith(r)) for r in RESUMABLE)]
    if refused:
        listing = "; ".join(f"{k}: {changes[k][0]!r} -> {changes[k][1]!r}" for k in refused)
        raise ConfigError(f"--resume cannot change {listing} (the run's folder records the old value; a changed "
                          f"one would make another run: start a new one). Settings that may change: how long "
                          f"it runs, the learning rate and its schedule, logging, evaluation, timeouts, resources")
    return changes


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v and k not in ("forced_staleness",) and not k.endswith("resources"):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out
