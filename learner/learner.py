"""The learner: a DeepSpeed engine over the Hugging Face model, fed by ScoredGroups.

    step s:  groups = wait for the batch s = admission indices [s·B, (s+1)·B)
             batch  = collate(groups)                    # advantages via kernels
             for each micro-batch: loss.backward()       # clipped ratio via kernels
             engine.step(); version = s + 1

Groups arrive out of order (several generators, several verifiers); the learner
buffers them by admission index and always trains batch s on exactly its B groups.
With the feeder's admission rule this bounds staleness exactly, and with
max_staleness 0 it makes a run the same as a plain synchronous loop. Duplicates (a
group re-sent after a crash whose first copy arrived after all) are dropped by
admission index: one already buffered, or one whose batch was already trained.
"""
from __future__ import annotations

import logging
import os
import socket
import time

import torch

from jury.protocol.config import LearnerConfig
from jury.learner.checkpoint import write_checkpoint
from jury.learner.inbox import ScoredInbox
from jury.learner.ledger import batch_result
from jury.protocol.messages import ScoredGroup, StepResult, WeightUpdate
from jury.protocol.record import write_record
from jury.protocol.transport import Receiver
from jury.learner.grpo import collate, length_sorted_chunks, micro_loss, use_fused_head
from jury.learner.weight_sender import WeightSender

log = logging.getLogger(__name__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init_distributed(backend: str):
    import deepspeed

    if not torch.distributed.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        deepspeed.init_distributed(dist_backend=backend)


class Learner:
    def __init__(self, cfg: LearnerConfig, model_path: str, batch_groups: int, *, max_new_tokens: int,
                 temperature: float, seed: int = 0, device: str = "cpu", checkpoint: str | None = None,
                 initial_version: int = 0, window_batches: int = 2):
        import deepspeed
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(seed)
        if device == "cpu":
            torch.set_num_threads(cfg.threads)
        self.cfg, self.batch_groups = cfg, batch_groups
        # the feeder admits at most window_batches batches past the learner's version (max_staleness
        # + 1): a group with a later index was never admitted, whoever sent it, and is refused
        self.window_batches = window_batches
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self.device = torch.device(device)
        _init_distributed("gloo" if device == "cpu" else "nccl")
        dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float32
        model = use_fused_head(AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype))
        self.pad_id = AutoTokenizer.from_pretrained(model_path).pad_token_id or 0
        self.model_path = model_path
        self.ref_model = None
        if cfg.kl_coef > 0:
            self.ref_model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(self.device).eval()
            self.ref_model.requires_grad_(False)
        ds_config = {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1,  # micro-batches are marked by hand (set_gradient_accumulation_boundary)
            "gradient_clipping": cfg.grad_clip,
            "optimizer": {"type": "AdamW", "params": {"lr": cfg.lr, "weight_decay": cfg.weight_decay,
                                                      "torch_adam": True}},
            "zero_optimization": {"stage": cfg.zero_stage},
            "bf16": {"enabled": cfg.dtype == "bfloat16"},
            "steps_per_print": 10**9,
        }
        self.engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
        if checkpoint:  # weights and optimizer state of a resumed run
            path, _ = self.engine.load_checkpoint(checkpoint)
            if path is None:
                raise FileNotFoundError(f"no DeepSpeed checkpoint in {checkpoint}")
        self.version = initial_version
        self.record_dir: str | None = None   # record_groups: every trained batch is written here
        self.counts = {"refused_groups": 0, "unscored_groups": 0, "skipped_steps": 0}
        self.inbox: ScoredInbox | None = None
        self.sender = None

    # ── wiring ──
    def start(self, host: str | None, curve=None) -> str:
        """Bind the scored-group queue on this node's address; verifiers connect to it."""
        receiver = Receiver(host or _node_address(), hwm=1024, maxsize=1024, name="learner-scored", curve=curve,
                            accept=(ScoredGroup,))
        self.inbox = ScoredInbox(receiver, self.batch_groups, self.window_batches)
        return receiver.endpoint

    def hold(self, indices: list[int], timeout_s: float) -> StepResult:
        """Wait until every group in `indices` is here (buffered or already trained), without
        training: forced staleness syncs only once the tasks released at a version are back."""
        t0 = time.perf_counter()
        _, missing = self.inbox.wait_for(indices, self.version, timeout_s)
        if missing:
            return StepResult(self.version, missing=missing)
        return StepResult(self.version, metrics={"learner/hold_s": time.perf_counter() - t0})

    def record(self, path: str):
        """From now on write each trained batch to path/step-NNNNNN.msgpack (see `jury replay`)."""
        os.makedirs(path, exist_ok=True)
        self.record_dir = path

    # ── the step ──
    def step(self, step: int, timeout_s: float = 600.0) -> StepResult:
        """Train batch `step`; a result with `missing` set instead if its groups are not all here
        in timeout_s."""
        if step != self.version:
            raise ValueError(f"asked for step {step} but the learner is at version {self.version}")
        t0 = time.perf_counter()
        groups, missing = self.inbox.wait_batch(step, self.version, timeout_s)
        if missing:
            return StepResult(step, missing=missing)
        t1, t_train = time.perf_counter(), time.time()
        if self.record_dir:
            write_record(os.path.join(self.record_dir, f"step-{step:06d}.msgpack"), groups)
        metrics = self.train_on(groups)
        t2 = time.perf_counter()
        result = batch_result(groups, step, t_train, self.inbox.arrived)
        result.metrics.update(metrics)
        result.metrics.update({"learner/wait_s": t1 - t0, "learner/train_s": t2 - t1, "learner/version": self.version,
                               "learner/queue_depth": self.inbox.depth()})
        result.metrics.update({f"learner/{k}": v for k, v in {**self.counts, **self.inbox.counts}.items()})
        result.metrics.update(self.inbox.receiver.stats.as_dict("learner/scored"))
        return result

    def train_on(self, groups: list[ScoredGroup]) -> dict:
        """One optimizer step on these groups; the version goes up by one."""
        batch = collate(groups, self.cfg, self.pad_id)
        self.counts["refused_groups"] += sum(1 for g in groups if not g.group.samples)
        self.counts["unscored_groups"] += sum(1 for g in groups if g.error is not None)
        if batch is None:  # nothing usable: the version still moves on, so the schedule holds
            self.version += 1
            self.counts["skipped_steps"] += 1
            log.warning("learner: step %d skipped: none of its %d groups has samples that were scored "
                        "(refused by the engine or not verifiable)", self.version - 1, len(groups))
            return {"learner/skipped_step": 1}
        n, mb = batch.input_ids.shape[0], self.cfg.micro_batch
        total_tokens = max(1, batch.num_tokens)
        sums: dict[str, float] = {}
        loss_total = 0.0
        self.engine.train()
        chunks = length_sorted_chunks(batch, mb)
        for i, idx in enumerate(chunks):
            self.engine.set_gradient_accumulation_boundary(i == len(chunks) - 1)
            loss, stats = micro_loss(self.engine.module, _to(batch, self.device), idx, self.cfg,
                                     ref_model=self.ref_model, total_tokens=total_tokens, total_seqs=n,
                                     max_new_tokens=self.max_new_tokens, temperature=self.temperature)
            self.engine.backward(loss, scale_wrt_gas=False)
            loss_total += loss.item()
            w = float(batch.completion[idx].sum())
            for k, v in stats.items():
                sums[k] = sums.get(k, 0.0) + float(v) * w
        self.engine.step()
        self.version += 1
        out = {"learner/loss": loss_total, "learner/tokens": float(total_tokens)}
        grad_norm = self.engine.get_global_grad_norm()
        if grad_norm is not None:
            out["learner/grad_norm"] = float(grad_norm)
        for k in ("clip_frac", "approx_kl", "tis_frac", "ratio_mean", "entropy"):
            if k in sums:
                out[f"learner/{k}"] = sums[k] / total_tokens
        return out

    # ── the weight plane ──
    def init_weight_sender(self, host: str | None, world_size: int, backend: str,
                           timeout_s: float = 300.0) -> tuple[str, int]:
        """Start the weight group's store on this node; returns where receivers find it."""
        self.sender = WeightSender(host or _node_address(), world_size, backend, timeout_s=timeout_s)
        return self.sender.host, self.sender.port

    def connect_weights(self) -> bool:
        self.sender.connect()
        return True

    def weight_update(self, bucket_mb: int) -> WeightUpdate:
        return WeightSender.layout(self._named_weights(), self.version, bucket_mb << 20)

    def broadcast(self, update: WeightUpdate) -> dict:
        """Rank 0's half of a sync; gather_s is the time to make each bucket whole (ZeRO-3:
        an all-gather per bucket, never the whole model at once; otherwise a copy)."""
        gather = None
        if self.cfg.zero_stage == 3:
            import deepspeed

            gather = lambda params: deepspeed.zero.GatheredParameters(params, modifier_rank=None)  # noqa: E731
        return self.sender.broadcast(update, dict(self._named_weights()), gather)

    def _named_weights(self):
        """(name, tensor) in state_dict order. Under ZeRO-3 state_dict holds empty partitions,
        so the parameters themselves are returned (partitioned; `broadcast` gathers them)."""
        state = self.engine.module.state_dict()
        if self.cfg.zero_stage != 3:
            return list(state.items())
        names = list(state)
        params = dict(self.engine.module.named_parameters(remove_duplicate=False))
        params.update(self.engine.module.named_buffers())
        return [(k, params[k]) for k in names]

    # ── checkpoints and probes ──
    def save(self, path: str, state: dict) -> int:
        """A Hugging Face folder (for generators and evaluation), DeepSpeed's state in engine/ and the
        run's `state` (with this learner's version), written whole beside the last checkpoint and
        swapped in (learner/checkpoint.py): a failed save never touches the last good one."""
        if state.get("version", self.version) != self.version:
            raise ValueError(f"checkpoint state is for version {state['version']}, the learner is at {self.version}")
        write_checkpoint(path, self._write_checkpoint, {**state, "version": self.version, "learner_node": self.node()})
        return self.version

    def _write_checkpoint(self, path):
        from transformers import AutoTokenizer

        if self.cfg.zero_stage == 3:  # partitions gathered whole for the Hugging Face copy
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(self.engine.module.parameters()), modifier_rank=None):
                weights = {k: v.detach().clone() for k, v in self.engine.module.state_dict().items()}
            self.engine.module.save_pretrained(path, state_dict=weights)
        else:
            self.engine.module.save_pretrained(path)
        AutoTokenizer.from_pretrained(self.model_path).save_pretrained(path)
        self.engine.save_checkpoint(os.path.join(path, "engine"), tag=f"v{self.version}")

    def logprobs_of(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """The learner model's log-prob of each completion token (`jury check-sync`)."""
        from jury.learner.grpo import token_logprobs

        ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
        comp = torch.zeros((1, ids.shape[1] - 1))
        comp[0, len(prompt_ids) - 1:] = 1
        self.engine.eval()
        with torch.no_grad():
            lp, _ = token_logprobs(self.engine.module, ids.to(self.device), torch.ones_like(ids).to(self.device),
                                   comp.to(self.device), self.temperature)
        return lp[0, len(prompt_ids) - 1:].tolist()

    def stop(self):
        if self.inbox:
            self.inbox.receiver.close()

    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        """This learner's node address: checkpoints are written on its disk."""
        return _node_address()


def _node_address() -> str:
    import ray

    return ray.util.get_node_ip_address()


def _to(batch, device):
    if device.type == "cpu":
        return batch
    from dataclasses import replace

    return replace(batch, **{k: getattr(batch, k).to(device) for k in
                             ("input_ids", "attention", "completion", "behav_logp", "advantages", "rewards")})
