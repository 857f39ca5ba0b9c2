"""The run plan: the config resolved once into what the roles are handed.

    plan = make_plan(cfg, resolve=resolve_model, positions=model_positions)   # the driver
    plan = make_plan(cfg)              # a tool that never starts Ray: model names stay names

    plan.window          batches the feeder may admit past the generators' version (the learner
                         refuses indices beyond it): max_staleness + 1, or the largest forced k + 1
    plan.slots           the admission indices of each batch: B base slots, then R refill slots
                         (dynamic_sampling under batch admission: R = max_refills; else 0,
                         batch s = [s·B, (s+1)·B))
    plan.forced          forced staleness as k -> probability ({} = not forced)
    plan.admission       how a batch is formed: a fixed range of indices, or the first B scored
                         (continuous), what happens to a group past max_staleness then, and
                         the refills a step may take (dynamic sampling under continuous admission)
    plan.faults          the fault injections, typed (role, index, action, step)
    plan.sampling        how the generators sample: what the learner needs to score it
    plan.learner_reward  the self-reward the learner scores in its forward (or None)
    plan.overlong        DAPO's overlong shaping and filtering the learner applies (or None: neither)
    plan.policy_model    the policy's model folder
    plan.servers         one ServerSpec per LLM server (one per distinct model), each sized for
                         the roles it serves; plan.server_of(role) names a role's
    plan.engines_after_learner  roles may share a GPU: vLLM engines start only once the learner
                         has reported ready (see shares_a_gpu)

Every value derived from the config is derived here, once, and handed on under the same
name. Imports only the standard library and the config: nothing heavy, so the simulator and
the experiment tools build the same plan the driver does.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Literal

from jury.protocol.config import Fault, RunConfig, parse_faults

log = logging.getLogger(__name__)

LLMRole = Literal["tinyv", "formalizer", "checker", "prover", "derl", "judge", "teacher", "rewriter"]


@dataclass(frozen=True)
class Sampling:
    """How the generators sample a completion: the learner scores each token under the same
    distribution (logits / temperature)."""

    temperature: float
    top_p: float
    max_new_tokens: int


@dataclass(frozen=True)
class LearnerReward:
    """A reward the learner scores in its forward, where the full distribution is (learner/self_rewards.py)."""

    scheme: Literal["self_certainty", "entropy"]
    span: Literal["response", "answer"]  # the tokens it averages over (verifier.self_reward_span)


@dataclass(frozen=True)
class Slots:
    """The admission-index layout: batch s owns [s·S, (s+1)·S), S = B + R, its B base slots first
    (admitted under the staleness budget, batch by batch), then R refill slots (admitted only when
    the learner, waiting on batch s, asks for them: learner/dynamic.py). R = 0: today's layout."""

    batch_groups: int  # B
    refills: int       # R, refill slots per batch (max_refills under dynamic_sampling, else 0)

    @property
    def per_batch(self) -> int:
        return self.batch_groups + self.refills

    def batch_of(self, index: int) -> int:
        return index // self.per_batch

    def base_index(self, k: int) -> int:
        """The index of the k-th base task (k = s·B + j, in the order the feeder admits them)."""
        return (k // self.batch_groups) * self.per_batch + k % self.batch_groups

    def base(self, step: int) -> range:
        return range(step * self.per_batch, step * self.per_batch + self.batch_groups)

    def refill_index(self, step: int, r: int) -> int:
        if not 0 <= r < self.refills:
            raise ValueError(f"refill {r} of step {step}: there are {self.refills} refill slots per batch")
        return step * self.per_batch + self.batch_groups + r

    def is_refill(self, index: int) -> bool:
        return index % self.per_batch >= self.batch_groups


@dataclass(frozen=True)
class Admission:
    """How the learner forms a batch (admission: batch | continuous). Under continuous admission
    batch s is the first B groups scored among those the learner holds; a group whose policy is
    more than max_staleness versions behind step s is dropped (drop_stale) or trained anyway.
    With dynamic sampling (refills > 0) batch s is the first B groups scored *with signal*: a flat
    group is judged and filtered, and each of the first `refills` a step filters frees its place in
    the budget for a new task (learner/dynamic.py, ScoredFill). Indices stay consecutive (plan.slots
    has no refill slots then)."""

    continuous: bool
    max_staleness: int
    drop_stale: bool
    refills: int = 0  # max_refills under dynamic sampling with continuous admission, else 0


@dataclass(frozen=True)
class Overlong:
    """DAPO's overlong handling (learner.overlong_*; README, "Overlong handling"), applied by the
    learner to every reward scheme. The recorded groups carry each sample's tokens and finish
    reason, so `jury replay`, which rebuilds this plan from the run's config, applies the same."""

    max_new_tokens: int   # L_max: the generators' limit (generator.max_new_tokens)
    buffer: int           # L_cache (learner.overlong_buffer); 0: no length penalty
    penalty: float        # the penalty at L_max (learner.overlong_penalty)
    filter: bool          # truncated samples leave the loss (learner.overlong_filter)


@dataclass(frozen=True)
class ServerSpec:
    """One LLM server for the verifier roles (actors/llm_server.py): a vLLM engine in a Ray actor,
    or an OpenAI-compatible endpoint (`url`, from verifier.llm_endpoints) that is only asked."""

    model: str                # its folder (a name, in a plan built without resolving models); with
                              # a url: the model as configured, the name the endpoint is asked for
    max_model_len: int        # the longest prompt + completion it takes
    num_gpus: float           # Ray GPUs of its actor (0 on the CPU)
    gpu_memory_utilization: float  # vLLM's share of each of its GPUs
    roles: tuple[str, ...]    # the LLM roles it serves
    url: str = ""             # an OpenAI-compatible endpoint to ask instead of a local engine ("" = local)


@dataclass(frozen=True)
class RunPlan:
    window: int
    forced: dict[int, float]
    faults: tuple[Fault, ...]
    sampling: Sampling
    policy_model: str
    slots: Slots
    servers: tuple[ServerSpec, ...] = ()
    role_models: dict[str, str] = field(default_factory=dict)  # LLM role -> its server's model
    learner_reward: LearnerReward | None = None  # self_certainty / entropy: scored by the learner
    engines_after_learner: bool = False
    overlong: Overlong | None = None
    admission: Admission = Admission(False, 1, True)

    def server_of(self, role: LLMRole) -> ServerSpec:
        model = self.role_models[role]
        return next(s for s in self.servers if s.model == model)


def parse_staleness(weights: dict[int, float]) -> dict[int, float]:
    """{0: 1, 4: 3} -> {0: 0.25, 4: 0.75} (k -> probability); {} -> {} (not forced)."""
    total = sum(weights.values())
    return {k: w / total for k, w in sorted(weights.items())}


def llm_roles(cfg: RunConfig) -> dict[str, tuple[str, int]]:
    """The LLM roles this run asks: role -> (model as configured, the most tokens it generates)."""
    roles: dict[str, tuple[str, int]] = {}
    if cfg.verifier.reward == "tinyv":
        roles["tinyv"] = (cfg.verifier.tinyv_model, cfg.verifier.tinyv_max_tokens)
    if cfg.verifier.gate == "lean":
        lean = cfg.lean
        roles.update(formalizer=(lean.formalizer_model, lean.formalizer_max_tokens),
                     checker=(lean.checker_model, lean.checker_max_tokens),
                     prover=(lean.prover_model, lean.prover_max_tokens))
    if cfg.derl.enabled:  # the planner and the judge share derl.model
        roles["derl"] = (cfg.derl.model, max(cfg.derl.plan_max_tokens, cfg.derl.judge_max_tokens))
    v = cfg.verifier
    if v.reward == "llm_judge":
        roles["judge"] = (v.judge_model, v.judge_max_tokens)
    if v.reward == "llm_kd":
        roles["teacher"] = (v.teacher_model, v.teacher_max_tokens)
    if v.reward == "coreward" and v.rewrites == "llm":  # asked on the driver, at admission
        roles["rewriter"] = (v.rewrite_model, v.rewrite_max_tokens)
    return roles


def shares_a_gpu(cfg: RunConfig, servers=()) -> bool:
    """Whether a role has a fraction of a GPU, so that Ray may put two roles on one. vLLM sizes its
    KV cache from the memory it finds free while it profiles: started beside a learner that is still
    loading, it counts memory DeepSpeed is about to take (or the learner then runs out)."""
    g = cfg.generator
    fractions = [cfg.learner.num_gpus, 0.0 if g.tensor_parallel_size > 1 else g.num_gpus,
                 *(s.num_gpus for s in servers)]
    return any(0 < n < 1 for n in fractions)


def make_plan(cfg: RunConfig, *, resolve: Callable[[str], str] = str,
              positions: Callable[[str], int | None] = lambda model: None) -> RunPlan:
    """`resolve`: a model as configured (a local model's name, or a folder) -> its folder;
    `positions`: a model -> the longest sequence it takes (None: unknown)."""
    forced = parse_staleness(cfg.forced_staleness)
    # dynamic sampling's refills: slots of a fixed batch of indices, or (continuous admission) places
    # that filtered groups free in the budget
    continuous = cfg.admission == "continuous"
    refill_slots = cfg.dynamic_sampling and not continuous
    window = (max(forced) if forced else cfg.max_staleness) + 1
    g = cfg.generator
    endpoints = cfg.verifier.llm_endpoints  # models asked over HTTP: nothing to resolve or start here
    roles = {role: (model if model in endpoints else resolve(model), tokens)
             for role, (model, tokens) in llm_roles(cfg).items()}
    servers = []
    for model in dict.fromkeys(m for m, _ in roles.values()):  # one server per model, in role order
        served = tuple(r for r, (m, _) in roles.items() if m == model)
        wanted = cfg.verifier.llm_prompt_tokens + max(roles[r][1] for r in served)
        if model in endpoints:
            servers.append(ServerSpec(model, wanted, 0.0, 0.0, served, url=endpoints[model]))
            continue
        limit = positions(model)
        if limit is not None and wanted > limit:
            log.warning("LLM server for %s (%s): verifier.llm_prompt_tokens + the roles' max tokens is %d, "
                        "more than the model's %d positions; it is capped there, and a prompt and answer "
                        "longer than that are cut", model, ", ".join(served), wanted, limit)
            wanted = limit
        servers.append(ServerSpec(model, wanted, cfg.verifier.llm_num_gpus, cfg.verifier.llm_gpu_memory_utilization,
                                  served))
    return RunPlan(window=window, forced=forced,
                   faults=tuple(parse_faults(cfg.faults, cfg.num_generators, cfg.num_verifiers, cfg.learner.num_ranks)),
                   sampling=Sampling(g.temperature, g.top_p, g.max_new_tokens), policy_model=resolve(cfg.model),
                   slots=Slots(cfg.batch_groups, cfg.max_refills if refill_slots else 0),
                   servers=tuple(servers), role_models={r: m for r, (m, _) in roles.items()},
                   learner_reward=LearnerReward(cfg.verifier.reward, cfg.verifier.self_reward_span)
                   if cfg.verifier.reward in ("self_certainty", "entropy") else None,
                   engines_after_learner=shares_a_gpu(cfg, servers), overlong=overlong_of(cfg),
                   admission=Admission(continuous, cfg.max_staleness, cfg.over_budget == "drop",
                                       cfg.max_refills if cfg.dynamic_sampling and continuous else 0))


def overlong_of(cfg: RunConfig) -> Overlong | None:
    lc = cfg.learner
    if not lc.overlong_buffer and not lc.overlong_filter:
        return None
    return Overlong(cfg.generator.max_new_tokens, lc.overlong_buffer, lc.overlong_penalty, lc.overlong_filter)
