"""The learner: a DeepSpeed engine over the Hugging Face model, fed by ScoredGroups, as one
rank of `learner.num_ranks` (data parallel, ZeRO 0-3; the wiring makes the ranks and calls
each method on every rank, or on rank 0 where it says so).

    step s (every rank):
        rank 0:  groups = wait for batch s = admission indices [s·B, (s+1)·B)   (inbox.py)
                 (dynamic sampling: its groups with signal, refills asked of the driver: dynamic.py;
                 continuous admission: the first B groups scored, with signal under dynamic sampling)
                 batch = collate(groups)                 # advantages over whole groups (+ overlong penalty)
                 plan rows per (mini-batch, rank) by tokens; send each rank its rows (shard.py)
        others:  receive this rank's rows
        all:     advantage=gae: the critic's values of its rows, GAE, whitened over the batch (critic.py)
                 PPO epochs x mini-batches, micro-batches in each (update.py); then the critic's
                 version = s + 1
        rank 0:  the StepResult: metrics (summed over ranks), ledger rows, first correct samples

Groups arrive out of order (several generators, several verifiers); rank 0 keeps them by
admission index and always trains batch s on exactly its B groups. With the feeder's
admission rule this bounds staleness exactly, and with max_staleness 0 it makes a run the
same as a plain synchronous loop.
"""
from __future__ import annotations

import copy
import logging
import os
import socket
import time

import numpy as np
import torch
import torch.distributed as dist

from jury.learner.checkpoint import CheckpointError, commit, failed, stage, write_checkpoint
from jury.learner.critic import CRITIC_SUMS, Critic, step_metrics as critic_metrics
from jury.learner.dynamic import BatchFill, ScoredFill, advance, advance_scored, fill_metrics, scored_fill_metrics
from jury.learner.grpo import _advantages, collate, overlong_stats, token_logprobs, use_fused_head
from jury.learner.self_rewards import (Scoring, group_rewards, plan_scoring, rewards_from_scores,
                                      shaped_group_rewards)
from jury.learner.inbox import ScoredInbox
from jury.learner.ledger import batch_result
from jury.learner.shadow import Shadow, initial_kl
from jury.learner.schedule import make_scheduler
from jury.learner.shard import Shard, plan_shards, recv_shard, send_shards
from jury.learner.errors import TrainingStopped
from jury.learner.update import NUCLEUS_STATS, OFF_POLICY_STATS, REJECT_SUMS, STATS, forward_pass, step_stats, train_shard
from jury.learner.weight_sender import WeightSender, drop_tied
from jury.protocol.config import LearnerConfig, MonitorConfig
from jury.protocol.messages import ScoredGroup, StepResult, WeightUpdate
from jury.protocol.plan import Admission, LearnerReward, Overlong, Sampling, Slots
from jury.protocol.record import write_record
from jury.protocol.transport import Receiver

log = logging.getLogger(__name__)
TRAIN, SKIP, MISSING = 1, 0, 2  # what rank 0 tells the others at the start of a step


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _init_distributed(backend: str, rank: int, world_size: int, master: tuple[str, int] | None):
    """The learner's own process group (DeepSpeed's data-parallel group), one process per rank."""
    import deepspeed

    if dist.is_initialized():
        return
    if world_size == 1:
        # DeepSpeed JIT-compiles a shared-memory allreduce op for the CPU accelerator (about 40 s the
        # first time on a fresh machine) at init, whatever the world size; one rank has nothing to
        # reduce with, so it is skipped there (deepspeed.comm's TorchBackend takes None as "no op").
        # (the module from sys.modules: `import deepspeed.comm.torch as m` gives the torch package,
        # which deepspeed.comm imports under that name, and the patch would land on torch)
        import importlib

        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    elif backend == "gloo":  # (the CPU accelerator's op: none is built for GPUs)
        _warn_stale_build_lock("deepspeed_shm_comm")
    host, port = master or ("127.0.0.1", free_port())
    os.environ.update({"MASTER_ADDR": host, "MASTER_PORT": str(port), "RANK": str(rank),
                       "LOCAL_RANK": "0",  # one device per actor: Ray shows each rank only its own GPU
                       "WORLD_SIZE": str(world_size)})
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False)


def held_values(p: torch.Tensor) -> torch.Tensor:
    """The values of parameter `p` that this rank holds: all of them, or under ZeRO-3 its partition
    (`ds_tensor`) without the padding. DeepSpeed cuts a parameter into equal partitions and leaves the
    tail that the ranks do not divide unwritten (torch.empty in _partition_param, deepspeed 0.19):
    a 1-element bias on 2 ranks is all padding on rank 1, and reads whatever the memory held. A
    partition swapped out to NVMe (a 0-dim placeholder in its place) holds nothing here to read."""
    local = getattr(p, "ds_tensor", None)
    if local is None:
        return p.detach()
    size = getattr(local, "ds_numel", local.numel())  # the partition's size, padding included
    if local.dim() != 1 or local.numel() < size:
        return local.detach().reshape(-1)[:0]
    start = size * dist.get_rank(group=getattr(p, "ds_process_group", None))
    return local.detach().narrow(0, 0, max(0, min(p.ds_numel - start, size)))


def first_nonfinite(module, world: int) -> str:
    """The first parameter of `module` that holds inf or NaN (of every rank's values: its ZeRO-3
    partition), with the lowest rank that holds it, or "". A collective when `world` > 1: every rank
    returns the same answer, so the run's message does not depend on which rank's error reaches the
    driver first."""
    name = ""
    for n, p in module.named_parameters():
        local = held_values(p)
        if local.numel() and not bool(torch.isfinite(local).all()):
            name = n
            break
    if world == 1:
        return name
    names = [""] * world
    dist.all_gather_object(names, name)
    return next((f"{n} on rank {r}" for r, n in enumerate(names) if n), "")


def _warn_stale_build_lock(name: str, stale_s: float = 600.0) -> str:
    """A warning (returned, and logged) when PyTorch's JIT build of extension `name` holds a lock older
    than `stale_s`: a build that was killed (a run stopped during DeepSpeed's first compile of its CPU
    shared-memory op) leaves its `lock` file, and every later build of it waits on that file for ever,
    silently. A build in progress is minutes old at most."""
    try:
        from torch.utils.cpp_extension import _get_build_directory  # PyTorch's own path for the build

        lock = os.path.join(_get_build_directory(name, False), "lock")
        age = time.time() - os.path.getmtime(lock)
    except (ImportError, OSError):
        return ""
    if age < stale_s:
        return ""
    message = (f"{lock} is {age / 60:.0f} min old: a JIT build of {name} that was stopped left it, and DeepSpeed's "
               f"start waits on it for ever; if no other process is building {name}, remove that file")
    log.warning(message)
    return message


class Learner:
    def __init__(self, cfg: LearnerConfig, model_path: str, batch_groups: int, *, sampling: Sampling,
                 learner_reward: LearnerReward | None = None, overlong: Overlong | None = None,
                 seed: int = 0, device: str = "cpu", checkpoint: str | None = None,
                 initial_version: int = 0, window_batches: int = 2, slots: Slots | None = None,
                 admission: Admission | None = None, rank: int = 0,
                 master: tuple[str, int] | None = None, total_steps: int = 0, monitor: MonitorConfig | None = None):
        """`master`: rank 0's address and port for the learner's process group (None: this machine,
        one rank). `total_steps`: the run's learner steps, the length of the learning-rate schedule.
        `monitor`: the reward-hacking monitor's settings (its shadow metrics are taken on rank 0)."""
        import deepspeed
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(seed)
        if device == "cpu":
            torch.set_num_threads(cfg.threads)
        self.cfg, self.batch_groups, self.rank = cfg, batch_groups, rank
        # the feeder admits at most window_batches batches past the learner's version (max_staleness
        # + 1): a group with a later index was never admitted, whoever sent it, and is refused
        self.window_batches = window_batches
        self.slots = slots or Slots(batch_groups, 0)  # plan.slots: refill slots per batch under dynamic sampling
        self.admission = admission  # plan.admission: a fixed range of indices per batch, or the first B scored
        self.fill: BatchFill | ScoredFill | None = None  # rank 0, dynamic sampling: the step being filled
        self.fill_metrics: dict[str, float] = {}
        self.sampling = sampling  # how the generators sampled: the loss scores tokens the same way
        self.learner_reward = learner_reward  # self_certainty / entropy, scored here (learner/self_rewards.py)
        self.overlong = overlong  # DAPO's overlong penalty and filter (plan.overlong), for every reward scheme
        self.overlong_metrics: dict[str, float] = {}  # rank 0: the last collated batch's (overlong_stats)
        self.device = torch.device(device)
        _init_distributed("gloo" if device == "cpu" else "nccl", rank, cfg.num_ranks, master)
        self.world = dist.get_world_size()
        dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float32
        model = use_fused_head(AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype))
        if cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)  # the answer spans of self-rewards
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.model_path = model_path
        self.ref_model = None
        if cfg.kl_coef > 0:
            self.ref_model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(self.device).eval()
            self.ref_model.requires_grad_(False)
        # the monitor's shadow metrics and its KL to the first policy (rank 0): the reference model is
        # that policy where there is one, else a frozen copy of the starting weights
        self.monitor = monitor if monitor is not None and monitor.enabled else None
        self.shadow = Shadow(self.monitor) if self.monitor and rank == 0 else None
        self.first_policy = None
        if self.shadow and self.monitor.initial_kl_rows:
            self.first_policy = self.ref_model if self.ref_model is not None else \
                copy.deepcopy(model).to(self.device).eval().requires_grad_(False)
        ds_config = deepspeed_config(cfg)
        optimizer_steps = max(1, total_steps) * cfg.minibatches * cfg.epochs
        self.engine, *_ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=ds_config,
            lr_scheduler=lambda opt: make_scheduler(opt, cfg.lr_schedule, cfg.warmup_steps, optimizer_steps,
                                                    cfg.min_lr_ratio))
        self.critic: Critic | None = None
        if cfg.advantage == "gae":  # the value model, on the same ranks and ZeRO stage (learner/critic.py)
            # a resumed run's from the checkpoint's critic/engine, beside the policy's engine/
            saved = checkpoint and os.path.join(os.path.dirname(os.path.normpath(checkpoint)), "critic", "engine")
            self.critic = Critic(cfg, model_path, ds_config, dtype=dtype, device=self.device, seed=seed,
                                 total_steps=total_steps, checkpoint=saved)
        self.reduce_s = 0.0
        self.engine.allreduce_gradients = _timed(self.engine.allreduce_gradients, self)
        self.poisoned = ""  # a resumed checkpoint's first non-finite parameter: start() refuses to train
        if checkpoint:  # weights, optimizer and scheduler state of a resumed run
            path, _ = self.engine.load_checkpoint(checkpoint)
            if path is None:
                raise FileNotFoundError(f"no DeepSpeed checkpoint in {checkpoint}")
            self.poisoned = self._nonfinite_weights() and f"the checkpoint {checkpoint} holds non-finite weights " \
                                                         f"({self._nonfinite_weights()}): nothing is trained from it"
        self.version = initial_version
        self.record_dir: str | None = None   # record_groups: every trained batch is written here
        self.counts = {"refused_groups": 0, "unscored_groups": 0, "skipped_steps": 0}
        self.nonfinite_streak = 0  # batches in a row with a step skipped for a non-finite loss or gradient
        self.inbox: ScoredInbox | None = None
        self.sender = None

    # ── wiring (rank 0) ──
    def start(self, host: str | None, curve=None) -> str | None:
        """Rank 0 binds the scored-group queue on this node's address; verifiers connect to it."""
        if self.poisoned:
            raise TrainingStopped(self.poisoned)
        if self.rank != 0:
            return None
        receiver = Receiver(host or _node_address(), hwm=1024, maxsize=1024, name="learner-scored", curve=curve,
                            accept=(ScoredGroup,))
        self.inbox = ScoredInbox(receiver, self.batch_groups, self.window_batches, self.slots, self.admission)
        return receiver.endpoint

    def restore_admission(self, next_index: int, pending: list[int], dropped_total: int, refilled_total: int = 0):
        """Rank 0, a resumed run under continuous admission: what was trained, dropped or filtered
        before (ScoredInbox.restore)."""
        self.inbox.restore(next_index, pending, dropped_total, refilled_total)

    def hold(self, indices: list[int], timeout_s: float) -> StepResult:
        """Rank 0: wait until every group in `indices` is here (buffered or already trained),
        without training: forced staleness syncs only once the tasks released at a version are back."""
        t0 = time.perf_counter()
        _, missing = self.inbox.wait_for(indices, self.version, timeout_s)
        if missing:
            return StepResult(self.version, missing=missing)
        return StepResult(self.version, metrics={"learner/hold_s": time.perf_counter() - t0})

    def record(self, path: str):
        """Rank 0: from now on write each trained batch to path/step-NNNNNN.msgpack (`jury replay`)."""
        os.makedirs(path, exist_ok=True)
        self.record_dir = path

    # ── the step (every rank) ──
    def step(self, step: int, timeout_s: float = 600.0) -> StepResult | None:
        """Train batch `step`. Rank 0 returns the StepResult (with `missing` set instead if the
        batch's groups are not all here in timeout_s); the other ranks return None."""
        if step != self.version:
            raise ValueError(f"asked for step {step} but the learner is at version {self.version}")
        if self.rank != 0:
            self.train_on(None)
            return None
        t0 = time.perf_counter()
        refill: list[int] = []
        dropped: list[int] = []  # continuous admission: groups found past max_staleness
        filtered: list[int] = []  # ... with dynamic sampling: flat groups judged, never trained
        continuous_refills = self.admission is not None and self.admission.refills
        if self.slots.refills:
            groups, missing, refill = self._dynamic_batch(step, timeout_s)
        elif continuous_refills:
            groups, missing, refill, dropped, filtered = self._scored_batch(step, timeout_s)
        elif self.admission is not None and self.admission.continuous:
            groups, dropped, missing = self.inbox.first_scored(step, self.version, timeout_s)
        else:
            groups, missing = self.inbox.wait_batch(step, self.version, timeout_s)
        if missing or refill:  # nothing trains yet: the other ranks wait for the next call
            self._announce(MISSING)
            return StepResult(step, missing=missing, refill=refill, dropped=dropped)
        t1, t_train = time.perf_counter(), time.time()
        if self.record_dir:
            write_record(os.path.join(self.record_dir, f"step-{step:06d}.msgpack"), groups)
        metrics = self.train_on(groups)
        t2 = time.perf_counter()
        # every group flat, even after the refills: train_on skipped the step, and its row has the
        # keys of any other (0 tokens, nan rewards and staleness: the driver reads them)
        result = batch_result(groups, step, t_train, self.inbox.arrived)
        result.dropped, result.filtered = dropped, filtered
        result.metrics.update(metrics)
        if self.shadow and groups:  # after training: self-rewards are scored into the groups by then
            result.metrics.update(self.shadow.step(groups, step))
        if self.slots.refills or continuous_refills:
            result.metrics.update(self.fill_metrics)
        result.metrics.update({"learner/wait_s": t1 - t0, "learner/train_s": t2 - t1, "learner/version": self.version,
                               "learner/queue_depth": self.inbox.depth()})
        result.metrics.update({f"learner/{k}": v for k, v in {**self.counts, **self.inbox.counts}.items()})
        result.metrics.update(self.inbox.receiver.stats.as_dict("learner/scored"))
        return result

    def _dynamic_batch(self, step: int, timeout_s: float) -> tuple[list[ScoredGroup], list[int], list[int]]:
        """Dynamic sampling (learner/dynamic.py): (the groups with signal to train, missing indices,
        refill slots to ask for). The fill lasts across the driver's calls for the same step."""
        if self.fill is None or self.fill.step != step:
            self.fill = BatchFill(self.slots, step, self.overlong)
        missing, refill = advance(self.fill, self.inbox, self.version, timeout_s)
        if missing or refill:
            return [], missing, refill
        fill, self.fill = self.fill, None
        for index in fill.flat:  # never trained: no ledger row to take their arrival time
            self.inbox.arrived.pop(index, None)
        self.fill_metrics = fill_metrics(fill)
        return fill.kept_groups(), [], []

    def _scored_batch(self, step: int, timeout_s: float):
        """Dynamic sampling under continuous admission (learner/dynamic.py, ScoredFill): (the groups
        with signal to train, missing indices, flat groups whose places to refill, groups dropped as
        too stale, the step's flat groups once it is done). The fill lasts across the driver's calls."""
        if self.fill is None or self.fill.step != step:
            self.fill = ScoredFill(self.batch_groups, self.admission.refills, step, self.overlong)
        missing, refill, dropped = advance_scored(self.fill, self.inbox, self.version, timeout_s)
        if missing or refill:
            return [], missing, refill, dropped, []
        fill, self.fill = self.fill, None
        self.fill_metrics = scored_fill_metrics(fill)
        return fill.kept, [], [], dropped, fill.filtered()

    def train_on(self, groups: list[ScoredGroup] | None) -> dict:
        """This batch's updates: rank 0 passes the groups, the others None (they get their rows from
        rank 0). The version goes up by one; rank 0 returns the metrics, summed over ranks."""
        shard = self._shard(groups)
        if shard is None:
            return {"learner/skipped_step": 1} if self.rank == 0 else {}
        timers: dict[str, float] = {}
        prox, scored = None, {}
        watched = {}  # the monitor's KL to the first policy, before the update: the rows as they were sampled
        if self.first_policy is not None:
            watched["learner/initial_kl"] = initial_kl(self.first_policy, shard.batch, self.monitor.initial_kl_rows,
                                                       self.sampling, self.cfg.micro_batch)
        if shard.scoring is not None:  # self-rewards: scored in one forward with the proximal log-probs
            prox, scored = self._score_on_learner(shard, groups)
        targets = None
        if self.critic is not None:  # GAE: per-token advantages from the critic's values, before any update
            targets = self.critic.targets(shard, self.pad_id)
            shard.batch.advantages = targets.advantages
        sums = train_shard(self.engine, shard, self.cfg, ref_model=self.ref_model, sampling=self.sampling,
                           pad_id=self.pad_id, timers=timers, prox=prox)
        if targets is not None:  # on the policy's mini-batches and mask (rejections and filters applied)
            sums.update(self.critic.train(shard, targets, self.pad_id, self.sampling.max_new_tokens, timers))
        self.version += 1
        keys = ["loss", "weight", "nonfinite_skips", *STATS, *OFF_POLICY_STATS, *NUCLEUS_STATS, *REJECT_SUMS,
                *(CRITIC_SUMS if targets is not None else ())]
        totals = torch.tensor([sums[k] for k in keys], dtype=torch.float64, device=self.device)
        if self.world > 1:
            dist.all_reduce(totals)
        total = dict(zip(keys, totals.tolist()))
        updates = self.cfg.minibatches * self.cfg.epochs
        out = {"learner/loss": total["loss"] / updates, "learner/tokens": float(shard.tokens.sum()),
               "learner/optimizer_steps": float(updates), "learner/lr": self.engine.get_lr()[0],
               "learner/forward_backward_s": timers.get("forward_backward_s", 0.0),
               "learner/optimizer_s": timers.get("optimizer_s", 0.0), "learner/reduce_s": self._take_reduce_s(),
               "learner/ranks": float(self.world)}
        grad_norm = timers.get("grad_norm", self.engine.get_global_grad_norm())
        if grad_norm is not None:
            out["learner/grad_norm"] = float(grad_norm)
        out.update(self._nonfinite(total["nonfinite_skips"], timers.get("nonfinite", "loss or gradient")))
        out.update({f"learner/{k}": v for k, v in step_stats(total, self.cfg).items()})
        if self.sampling.top_p < 1.0 and total["weight"] > 0:
            out.update({f"learner/{k}": total[k] / total["weight"] for k in NUCLEUS_STATS})
        out.update(scored)
        out.update(watched)
        if targets is not None:
            out.update(critic_metrics(total, targets.stats, updates, self.critic.lr()))
            out["learner/critic_s"] = timers.get("critic_s", 0.0)
        if self.rank == 0 and self.overlong is not None:
            out.update({f"learner/{k}": v for k, v in self.overlong_metrics.items()})
        return out

    def _nonfinite(self, skips: float, what: str) -> dict:
        """Optimizer steps skipped for a non-finite loss or gradient: counted; after
        learner.max_nonfinite_steps batches in a row the run stops, naming the step and what."""
        self.counts["nonfinite_skips"] = self.counts.get("nonfinite_skips", 0) + skips
        self.nonfinite_streak = self.nonfinite_streak + 1 if skips else 0
        if self.nonfinite_streak >= self.cfg.max_nonfinite_steps:
            raise TrainingStopped(
                f"step {self.version - 1}: the {what} was not finite in {self.nonfinite_streak} steps in a row "
                f"(learner.max_nonfinite_steps); no optimizer step took it, the weights are those before step "
                f"{self.version - self.nonfinite_streak}")
        return {"learner/nonfinite_skipped": float(skips)}

    def _score_on_learner(self, shard: Shard, groups: list[ScoredGroup] | None) -> tuple[torch.Tensor, dict]:
        """Self-certainty or entropy rewards (learner/self_rewards.py): every rank scores its rows in
        a no-grad forward, the scores are summed over ranks into the whole batch's, and every rank
        computes the same group advantages, keeping its own rows'. Rank 0 writes the rewards back
        into the groups (metrics, ledger). Returns the proximal log-probs of the same forward."""
        s = shard.scoring
        t0 = time.perf_counter()
        prox, mine = forward_pass(self.engine.module, shard, self.cfg.micro_batch, self.sampling,
                                  self.pad_id, scheme=self.learner_reward.scheme)
        scores = torch.zeros(len(s.rewards), dtype=torch.float64, device=self.device)
        scores[s.rows] = mine
        if self.world > 1:
            dist.all_reduce(scores)
        scoring = Scoring(s.scored.cpu(), s.group.cpu(), s.parsed.cpu(), torch.zeros(0))
        rewards = rewards_from_scores(scores.cpu(), scoring, s.rewards.cpu())
        per_group = group_rewards(rewards, scoring)
        advantages = _advantages(shaped_group_rewards(rewards, s.penalty.cpu(), scoring), self.cfg).to(self.device)
        shard.batch.advantages = advantages[s.rows].to(shard.batch.advantages.dtype)
        shard.batch.rewards = rewards.to(self.device)[s.rows]
        if groups is not None:  # rank 0: the groups collate used, in its order
            usable = [g for g in groups if g.group.samples and g.error is None]
            for g, r in zip(usable, per_group):
                if g.scored_on == "learner":
                    g.rewards = r.astype(np.float32)
        return prox, {"learner/self_reward_s": time.perf_counter() - t0,
                      "learner/self_reward_mean": float(rewards[scoring.scored].mean())}

    def _shard(self, groups: list[ScoredGroup] | None) -> Shard | None:
        """This rank's rows of the batch; None when the batch trains nothing (then the version has
        moved on already, on every rank)."""
        if self.rank != 0:
            status = self._announce(None)
            if status == MISSING:
                return None
            if status == SKIP:
                self.version += 1
                return None
            return recv_shard(self.device)
        batch = collate(groups, self.cfg, self.pad_id, self.overlong)
        self.counts["refused_groups"] += sum(1 for g in groups if not g.group.samples)
        self.counts["unscored_groups"] += sum(1 for g in groups if g.error is not None)
        if batch is None:  # nothing usable: the version still moves on, so the schedule holds
            self._announce(SKIP)
            self.version += 1
            self.counts["skipped_steps"] += 1
            if groups:
                log.warning("learner: step %d skipped: none of its %d groups has samples that were scored "
                            "(refused by the engine or not verifiable)", self.version - 1, len(groups))
            else:
                log.warning("learner: step %d skipped: every group was flat, even after the refills "
                            "(dynamic sampling)", self.version - 1)
            return None
        self._announce(TRAIN)
        self.overlong_metrics = overlong_stats(batch)
        scoring = plan_scoring(groups, batch.completion, self.learner_reward, self.tokenizer)
        if scoring is not None:
            self.counts["self_reward_span_fallback"] = self.counts.get("self_reward_span_fallback", 0) + scoring.fallback
        plan = plan_shards(batch, self.cfg.minibatches, self.world, seed=self.version)
        return send_shards(batch, plan, self.device, scoring)  # one rank: its own shard, nothing sent

    def _announce(self, status: int | None) -> int:
        """Rank 0 tells the other ranks whether this step trains (TRAIN), skips (SKIP) or waits (MISSING)."""
        if self.world == 1:
            return status
        flag = torch.tensor([-1 if status is None else status], dtype=torch.long, device=self.device)
        dist.broadcast(flag, 0)
        return int(flag.item())

    def _take_reduce_s(self) -> float:
        """Seconds spent reducing gradients over ranks since the last call (DeepSpeed's
        allreduce_gradients, ZeRO 0-2; ZeRO-3 reduce-scatters inside backward, counted there)."""
        out, self.reduce_s = self.reduce_s, 0.0
        return out

    # ── the weight plane (rank 0 sends; under ZeRO-3 every rank gathers) ──
    def init_weight_sender(self, host: str | None, world_size: int, backend: str,
                           timeout_s: float = 300.0) -> tuple[str, int]:
        """Rank 0: start the weight group's store on this node; returns where receivers find it."""
        self.sender = WeightSender(host or _node_address(), world_size, backend, timeout_s=timeout_s)
        return self.sender.host, self.sender.port

    def connect_weights(self) -> bool:
        self.sender.connect()
        return True

    def abort_weights(self) -> bool:
        """Rank 0: abort the weight group before the plane is formed again (recovery)."""
        if self.sender is None:
            return False
        self.sender.abort()
        return True

    def weight_update(self, bucket_mb: int, dtype: str | None = None) -> WeightUpdate:
        """The next sync's layout; `dtype`: the engines' weight dtype, which floating-point tensors are
        sent in (an fp32 learner feeding bf16 engines sends half the bytes). Non-finite weights are
        never synced: the generators would sample from NaN. Called on every rank (the check is a
        collective); rank 0's layout is the one used."""
        bad = self._nonfinite_weights()
        if bad:
            raise TrainingStopped(f"step {self.version}: the weights are not finite ({bad}); not synced")
        return WeightSender.layout(self._named_weights(), self.version, bucket_mb << 20, dtype)

    def broadcast(self, update: WeightUpdate) -> dict:
        """Rank 0's half of a sync; gather_s is the time to make each bucket whole (ZeRO-3: an
        all-gather per bucket, on every rank, never the whole model at once; otherwise a copy).
        The other ranks take part in the gathers only."""
        gather = None
        if self.cfg.zero_stage == 3:
            import deepspeed

            gather = lambda params: deepspeed.zero.GatheredParameters(params, modifier_rank=None)  # noqa: E731
        if self.rank != 0:
            if gather:
                named = dict(self._named_weights())
                for bucket in update.buckets:
                    with gather([named[update.names[i]] for i in bucket]):
                        pass
            return {}
        return self.sender.broadcast(update, dict(self._named_weights()), gather)

    def _named_weights(self):
        """(name, tensor) in state_dict order, a tied weight once. Under ZeRO-3 state_dict holds
        empty partitions, so the parameters themselves are returned (partitioned; `broadcast`
        gathers them)."""
        module = self.engine.module
        state = module.state_dict()
        if self.cfg.zero_stage != 3:
            return drop_tied(module, list(state.items()))
        params = dict(module.named_parameters(remove_duplicate=False))
        params.update(module.named_buffers())
        return drop_tied(module, [(k, params[k]) for k in state])

    # ── checkpoints (every rank) and probes ──
    def save(self, path: str, state: dict) -> int:
        """A Hugging Face folder (for generators and evaluation), DeepSpeed's state of every rank in
        engine/ and the run's `state`, written whole beside the last checkpoint and swapped in
        (learner/checkpoint.py): a failed save never touches the last good one."""
        if state.get("version", self.version) != self.version:
            raise ValueError(f"checkpoint state is for version {state['version']}, the learner is at {self.version}")
        bad = self._nonfinite_weights()
        if not bad and self.critic is not None:  # (every rank agrees on `bad`: the check is a collective)
            bad = self._nonfinite_weights(self.critic.engine.module)
            bad = bad and f"the critic's {bad}"
        if bad:  # a checkpoint of NaN weights would be trusted by every run that resumes it
            raise CheckpointError(f"checkpoint at {path} not written: the weights of step {self.version} are not "
                                  f"finite ({bad})")
        state = {**state, "version": self.version, "learner_node": self.node(), "ranks": self.world}
        if self.world == 1:
            write_checkpoint(path, self._write_checkpoint, state)
            return self.version
        error = None
        if self.rank == 0:
            try:
                stage(path)
            except CheckpointError as e:
                error = e
        dist.barrier()
        staging = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.partial")
        try:
            if error is None:
                self._write_checkpoint(staging)
        except Exception as e:  # every rank must learn that one failed, or rank 0 commits half a checkpoint
            error = e
        ok = torch.tensor([0 if error else 1], dtype=torch.long, device=self.device)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if self.rank == 0:
            if ok.item():
                commit(path, state)
            else:
                raise error if isinstance(error, CheckpointError) else failed(path, error or RuntimeError(
                    "another learner rank could not write its part"))
        elif not ok.item():
            raise CheckpointError(f"checkpoint at {path}: a learner rank could not write its part")
        return self.version

    def _nonfinite_weights(self, module=None) -> str:
        """first_nonfinite of `module`, the policy's by default."""
        return first_nonfinite(module or self.engine.module, self.world)

    def _write_checkpoint(self, path):
        from transformers import AutoTokenizer

        self._write_hf(self.engine, path)
        if self.rank == 0:
            AutoTokenizer.from_pretrained(self.model_path).save_pretrained(path)
        self.engine.save_checkpoint(os.path.join(path, "engine"), tag=f"v{self.version}")
        if self.critic is not None:  # beside the policy, under the same manifest (its hashes cover it)
            self.critic.save(os.path.join(path, "critic"), self._write_hf)

    def _write_hf(self, engine, path):
        """engine's model as a Hugging Face folder, written by rank 0; under ZeRO-3 the partitions are
        gathered whole first (a collective: every rank calls it)."""
        if self.cfg.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(engine.module.parameters()), modifier_rank=None):
                weights = {k: v.detach().clone() for k, v in engine.module.state_dict().items()}
            if self.rank == 0:
                engine.module.save_pretrained(path, state_dict=weights)
        elif self.rank == 0:
            engine.module.save_pretrained(path)

    def logprobs_of(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """The learner model's log-prob of each completion token (`jury check-sync`; every rank under
        ZeRO-3, whose forward gathers parameters collectively)."""
        ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
        comp = torch.zeros((1, ids.shape[1] - 1))
        comp[0, len(prompt_ids) - 1:] = 1
        self.engine.eval()
        with torch.no_grad():
            lp, _ = token_logprobs(self.engine.module, ids.to(self.device), torch.ones_like(ids).to(self.device),
                                   comp.to(self.device), self.sampling.temperature)  # raw, as vLLM scores a prompt
        return lp[0, len(prompt_ids) - 1:].tolist()

    def stop(self):
        if self.inbox:
            self.inbox.receiver.close()

    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        """This rank's node address: its part of a checkpoint is written on its disk."""
        return _node_address()


def deepspeed_config(cfg: LearnerConfig) -> dict:
    """The DeepSpeed config of a learner rank. bf16 weights accumulate their gradients in fp32
    (data_types.grad_accum_dtype): summed in bf16, the 32 micro-batches of a qwen3 step would each
    lose the bits below the running sum's 8-bit mantissa. DeepSpeed takes that pairing from ZeRO-1
    on (LearnerConfig refuses bf16 on stage 0)."""
    config = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,  # micro-batches are marked by hand (set_gradient_accumulation_boundary)
        "gradient_clipping": cfg.grad_clip,
        "optimizer": {"type": "AdamW", "params": {"lr": cfg.lr, "weight_decay": cfg.weight_decay,
                                                  "torch_adam": True}},
        "zero_optimization": {"stage": cfg.zero_stage},
        "bf16": {"enabled": cfg.dtype == "bfloat16"},
        "steps_per_print": 10**9,
    }
    if cfg.dtype == "bfloat16":
        config["data_types"] = {"grad_accum_dtype": "fp32"}
    return config


def _timed(fn, owner):
    """fn, adding its wall time to owner.reduce_s."""
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            owner.reduce_s += time.perf_counter() - t0
    return timed


def _node_address() -> str:
    import ray

    return ray.util.get_node_ip_address()
