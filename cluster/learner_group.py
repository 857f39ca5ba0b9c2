"""The learner's N ranks as one: `learner.num_ranks` Ray actors forming one DeepSpeed group.

    group = LearnerGroup.create(cfg, model_path, env=..., checkpoint=..., initial_version=...)
    endpoint = group.start(host, curve)          # rank 0 binds the scored-group queue
    result = group.step(s, timeout_s)            # every rank trains; rank 0's StepResult
    refs = group.broadcast(update)               # every rank (ZeRO-3 gathers); rank 0 sends

Which process receives what: verifiers send ScoredGroups to rank 0 only (one queue, one
copy of each group); rank 0 collates the batch and deals each rank its rows as tensors
over the learner's own process group (learner/shard.py); weights go to the generators from
rank 0 (learner/weight_sender.py). With more than one rank the actors share a placement
group, one bundle per rank (PACK: on as few nodes as fit, spread when one node has too
few), and rank 0's node holds the group's rendezvous.

A rank that dies stops the run: the other ranks would wait in a collective forever, so
every call here maps a dead rank to `LearnerDied`, naming it, and the pipeline kills the rest.
"""
from __future__ import annotations

import logging

from jury.cluster.errors import RunFailed
from jury.learner.errors import TrainingStopped
from jury.protocol.config import RunConfig
from jury.protocol.plan import RunPlan
from jury.protocol.messages import StepResult

log = logging.getLogger(__name__)


class LearnerDied(RunFailed):
    """A learner rank's process died; the message names the rank."""


class LearnerGroup:
    def __init__(self, ranks: list, placement_group=None):
        self.ranks, self.placement_group = ranks, placement_group

    @classmethod
    def create(cls, cfg: RunConfig, plan: RunPlan, model_path: str, *, env: dict, checkpoint: str | None,
               initial_version: int):
        import ray

        lc, cpu = cfg.learner, cfg.learner.num_gpus == 0
        n = lc.num_ranks
        options = {"max_restarts": 0,
                   "runtime_env": {"env_vars": {**env, **({"DS_ACCELERATOR": "cpu"} if cpu else {})}}}
        pg, master = None, None
        if n > 1:
            from ray.util.placement_group import placement_group
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            bundle = {k: v for k, v in {"CPU": lc.num_cpus, "GPU": lc.num_gpus, **lc.resources}.items() if v > 0}
            pg = placement_group([bundle] * n, strategy="PACK", name="jury-learner")
            ray.get(pg.ready(), timeout=cfg.sync_timeout_s)
            at = lambda i: PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)  # noqa: E731
            rendezvous = ray.remote(_rendezvous_fn).options(num_cpus=0, scheduling_strategy=at(0))
            master = ray.get(rendezvous.remote(), timeout=cfg.sync_timeout_s)
        from jury.learner.learner import Learner

        ranks = []
        for rank in range(n):
            placement = ({"scheduling_strategy": at(rank)} if pg else {"resources": lc.resources})
            actor = ray.remote(Learner).options(num_cpus=lc.num_cpus, num_gpus=lc.num_gpus, **placement, **options)
            ranks.append(actor.remote(
                lc, model_path, cfg.batch_groups, sampling=plan.sampling, learner_reward=plan.learner_reward,
                overlong=plan.overlong, seed=cfg.seed, device="cpu" if cpu else "cuda",
                checkpoint=checkpoint, initial_version=initial_version, window_batches=plan.window, slots=plan.slots,
                admission=plan.admission,
                rank=rank, master=master, total_steps=cfg.steps, monitor=cfg.monitor))
        return cls(ranks, pg)

    @property
    def rank0(self):
        return self.ranks[0]

    # ── calls ──
    def get(self, refs: list, what: str, timeout: float | None = None) -> list:
        """ray.get of one call per rank. A rank that died is reported at once as LearnerDied naming
        it, even while the others are still stuck in a collective waiting for it (or failed on it)."""
        import ray

        results, failed = {}, None
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not ready:
                raise TimeoutError(f"learner ranks did not answer {what} in {timeout}s")
            rank = refs.index(ready[0])
            try:
                results[rank] = ray.get(ready[0])
            except ray.exceptions.RayActorError as e:
                raise LearnerDied(f"learner rank {rank} died during {what}; every actor was stopped. "
                                  f"Cause: {str(e).splitlines()[0][:300]}") from None
            except ray.exceptions.RayTaskError as e:  # maybe the echo of a dead peer: look at the others first
                failed = failed or e
        if failed is not None:
            if isinstance(failed.cause, TrainingStopped):  # the learner's own reason, said as it is
                raise RunFailed(f"learner: {failed.cause}") from None
            raise failed
        return [results[r] for r in range(len(refs))]

    def all(self, method: str, *args) -> list:
        """One call of `method` per rank (refs, rank order)."""
        return [getattr(r, method).remote(*args) for r in self.ranks]

    def start(self, host, curve) -> str:
        return self.get(self.all("start", host, curve), "start")[0]

    def step(self, step: int, timeout_s: float) -> StepResult:
        return self.get(self.all("step", step, timeout_s), f"step {step}")[0]

    def train_on(self, groups) -> dict:
        """A batch given here (replay, check-sync): rank 0 gets the groups, the others their rows."""
        refs = [self.rank0.train_on.remote(groups)] + [r.train_on.remote(None) for r in self.ranks[1:]]
        return self.get(refs, "training")[0]

    def hold(self, indices: list[int], timeout_s: float) -> StepResult:
        return self.get([self.rank0.hold.remote(indices, timeout_s)], "hold")[0]

    def call0(self, method: str, *args, timeout: float | None = None):
        """A call that only rank 0 answers (queue, records, the weight group's sending side)."""
        return self.get([getattr(self.rank0, method).remote(*args)], method, timeout)[0]

    def weight_update(self, bucket_mb: int, dtype: str | None, timeout: float | None = None):
        """The next sync's layout (rank 0's). Every rank is asked: the check that the weights are
        finite is a collective (under ZeRO-3 each rank holds only its partition)."""
        return self.get(self.all("weight_update", bucket_mb, dtype), "weight_update", timeout)[0]

    def broadcast(self, update) -> list:
        """Refs of every rank's part of a sync (rank 0's result first)."""
        return self.all("broadcast", update)

    def save(self, path: str, state: dict) -> int:
        return self.get(self.all("save", path, state), "a checkpoint")[0]

    def logprobs_of(self, prompt_ids, completion_ids) -> list:
        """Refs (every rank runs the forward: ZeRO-3 gathers collectively); rank 0's answer first."""
        return self.all("logprobs_of", prompt_ids, completion_ids)

    def pids(self) -> list[int]:
        return self.get(self.all("pid"), "pid")

    def stop_refs(self) -> list:
        return self.all("stop")

    def kill(self):
        import ray

        for r in self.ranks:
            ray.kill(r, no_restart=True)
        if self.placement_group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.placement_group)


def _rendezvous_fn() -> tuple[str, int]:
    """Rank 0's node address and a free port there: where the learner's process group meets."""
    import socket

    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return ray.util.get_node_ip_address(), port
