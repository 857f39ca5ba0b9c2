"""A batch's rows spread over the learner's ranks, balanced by tokens.

Rank 0 is the only rank with the scored-group queue. It collates the whole batch (so
advantages are normalised over whole groups), cuts it into PPO mini-batches, and deals
each mini-batch's rows to the ranks so that every rank gets about the same number of
tokens (long and short completions spread, never a rank with all the long ones). Each
rank then receives its rows once per batch, as plain tensors over the learner's own
process group (gloo on the CPU, NCCL on GPUs): the groups reached the learner once,
and nothing is pickled.

    plan = plan_shards(batch, minibatches, world)          # rank 0: rows per (mini-batch, rank)
    shard = send_shards(batch, plan, device)               # rank 0: its own shard; the others' sent
    shard = recv_shard(device)                             # ranks 1..N-1

Every rank computes its loss over its rows divided by the mini-batch's totals (tokens,
sequences), so the sum over ranks is the one-rank loss of the mini-batch; DeepSpeed
averages gradients over ranks, so the loss is multiplied by the world size.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import torch
import torch.distributed as dist

from jury.learner.grpo import Batch

TENSORS = ("input_ids", "attention", "completion", "behav_logp", "advantages", "rewards", "in_loss", "penalty")


@dataclass
class ShardScoring:
    """What a self-reward scored on the learner needs (learner/self_rewards.py): this rank's rows'
    spans, and the whole batch's groups, so that every rank computes the same advantages."""
    rows: torch.Tensor         # (n,) int64, this rank's rows as indices of the whole batch
    span: torch.Tensor         # (n, w-1) float32, the tokens each row's self-reward averages
    scored: torch.Tensor       # (N,) bool, the whole batch's rows scored on the learner
    group: torch.Tensor        # (N,) int64, their groups
    parsed: torch.Tensor       # (N,) bool, rows with an extracted answer
    rewards: torch.Tensor      # (N,) float32, the verifier's rewards (placeholders where scored here)
    penalty: torch.Tensor      # (N,) float32, the overlong penalty added to every row's reward (grpo.overlong_penalty)


@dataclass
class Shard:
    """One rank's rows of a batch, with what the loss needs to know about the whole batch."""
    batch: Batch               # this rank's rows (num_groups: the whole batch's)
    minibatch: torch.Tensor    # (n,) int64, which mini-batch each row belongs to
    tokens: torch.Tensor       # (M,) float64, completion tokens of each mini-batch (all ranks)
    seqs: torch.Tensor         # (M,) float64, sequences of each mini-batch (all ranks)
    scoring: ShardScoring | None = None  # a self-reward scored on the learner; None: none in this batch
    # (M,) float64, `seqs` as the batch came, before an overlong filter or a rejection took rows out of
    # the loss (update.recount): Dr. GRPO's constant counts those rows too (TRL divides by every row)
    generated_seqs: torch.Tensor | None = None

    def loss_seqs(self, agg: str) -> torch.Tensor:
        """The sequences cfg.loss_agg divides by: those left in the loss, but every generated one
        under dr_grpo (a masked row leaves Dr. GRPO's G x max_len alone)."""
        if agg == "dr_grpo" and self.generated_seqs is not None:
            return self.generated_seqs
        return self.seqs


def plan_shards(batch: Batch, minibatches: int, world: int, seed: int = 0) -> list[list[list[int]]]:
    """rows[m][r]: the row indices of mini-batch m on rank r.

    Mini-batches are consecutive runs of a seeded permutation of the rows (every row in exactly
    one); within a mini-batch, rows go longest first to the rank with the fewest tokens so far."""
    n = batch.input_ids.shape[0]
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    length = batch.attention.sum(1).tolist()
    plan = []
    for part in torch.tensor(order, dtype=torch.long).tensor_split(minibatches):
        heap = [(0, r) for r in range(world)]
        ranks: list[list[int]] = [[] for _ in range(world)]
        for i in sorted(part.tolist(), key=lambda i: -length[i]):
            load, r = heapq.heappop(heap)
            ranks[r].append(i)
            heapq.heappush(heap, (load + length[i], r))
        plan.append([sorted(rows) for rows in ranks])
    return plan


def totals(batch: Batch, plan: list[list[list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(completion tokens, sequences) of each mini-batch. A sequence is a row with at least one
    completion token, as update.recount and the kernels count them (a generation aborted before its
    first token has none): counting every row made the seq-mean and dr_grpo losses of the same
    batch differ by whether a recount ran."""
    tokens = [float(sum(batch.completion[rows].sum() for rows in mb)) for mb in plan]
    seqs = [float(sum(int((batch.completion[rows].sum(1) > 0).sum()) for rows in mb)) for mb in plan]
    return torch.tensor(tokens, dtype=torch.float64), torch.tensor(seqs, dtype=torch.float64)


def take(batch: Batch, plan: list[list[list[int]]], rank: int) -> tuple[Batch, torch.Tensor]:
    """Rank `rank`'s rows of every mini-batch (trimmed to their longest row) and their mini-batch ids."""
    rows = [i for mb in plan for i in mb[rank]]
    which = torch.tensor([m for m, mb in enumerate(plan) for _ in mb[rank]], dtype=torch.long)
    idx = torch.tensor(rows, dtype=torch.long)
    width = int(batch.attention[idx].sum(1).max()) if rows else 2
    part = Batch(batch.input_ids[idx][:, :width], batch.attention[idx][:, :width],
                 batch.completion[idx][:, : width - 1], batch.behav_logp[idx][:, : width - 1],
                 batch.advantages[idx], batch.rewards[idx], batch.num_groups, batch.in_loss[idx], batch.penalty[idx])
    return part, which


def send_shards(batch: Batch, plan: list[list[list[int]]], device: torch.device, scoring=None) -> Shard:
    """Rank 0: send every other rank its rows; returns rank 0's own shard. `scoring`: a
    self_rewards.Scoring of the whole batch, when the learner scores some of its rows."""
    tokens, seqs = totals(batch, plan)
    world = len(plan[0])
    own = None
    for rank in range(world):
        part, which = take(batch, plan, rank)
        mine = _scoring_of(scoring, batch, plan, rank, part.input_ids.shape[1]) if scoring is not None else None
        if rank == 0:
            own = Shard(_to(part, device), which.to(device), tokens.to(device), seqs.to(device),
                        _scoring_to(mine, device))
            continue
        n, width = part.input_ids.shape
        head = torch.tensor([n, width, len(plan), batch.num_groups, len(batch.rewards) if mine else 0],
                            dtype=torch.long, device=device)
        dist.send(head, rank)
        dist.send(tokens.to(device), rank)
        dist.send(seqs.to(device), rank)
        if mine is not None:  # the whole batch's part first: a rank without rows still computes advantages
            for t in (mine.scored, mine.group, mine.parsed, mine.rewards, mine.penalty):
                dist.send(t.contiguous().to(device), rank)
        if n:  # a rank may have no rows (fewer rows than ranks): it still takes part in every collective
            for t in (which, *(getattr(part, k) for k in TENSORS), *((mine.rows, mine.span) if mine else ())):
                dist.send(t.contiguous().to(device), rank)
    return own


def _scoring_of(scoring, batch: Batch, plan: list[list[list[int]]], rank: int, width: int) -> ShardScoring:
    rows = torch.tensor([i for mb in plan for i in mb[rank]], dtype=torch.long)  # take()'s order
    return ShardScoring(rows, scoring.span[rows][:, : width - 1], scoring.scored, scoring.group, scoring.parsed,
                        batch.rewards, batch.penalty)


def _scoring_to(s: ShardScoring | None, device) -> ShardScoring | None:
    if s is None:
        return None
    return ShardScoring(*(getattr(s, f).to(device) for f in ("rows", "span", "scored", "group", "parsed", "rewards", "penalty")))


def recv_shard(device: torch.device) -> Shard:
    """Ranks 1..N-1: this rank's rows of the batch rank 0 is training."""
    head = torch.zeros(5, dtype=torch.long, device=device)
    dist.recv(head, 0)
    n, width, minibatches, num_groups, total = head.tolist()
    shapes = {"input_ids": ((n, width), torch.long), "attention": ((n, width), torch.long),
              "completion": ((n, width - 1), torch.float32), "behav_logp": ((n, width - 1), torch.float32),
              "advantages": ((n,), torch.float32), "rewards": ((n,), torch.float32),
              "in_loss": ((n,), torch.float32), "penalty": ((n,), torch.float32)}
    tokens = _recv((minibatches,), torch.float64, device)
    seqs = _recv((minibatches,), torch.float64, device)
    whole = [_recv((total,), dtype, device) for dtype in (torch.bool, torch.long, torch.bool, torch.float32, torch.float32)] \
        if total else None
    if not n:
        empty = {k: torch.empty(shape, dtype=dtype, device=device) for k, (shape, dtype) in shapes.items()}
        scoring = ShardScoring(torch.empty(0, dtype=torch.long, device=device),
                               torch.empty((0, width - 1), device=device), *whole) if whole else None
        return Shard(Batch(**empty, num_groups=num_groups), torch.empty(0, dtype=torch.long, device=device),
                     tokens, seqs, scoring)
    which = _recv((n,), torch.long, device)
    parts = {k: _recv(shape, dtype, device) for k, (shape, dtype) in shapes.items()}
    scoring = None
    if whole:
        rows, span = _recv((n,), torch.long, device), _recv((n, width - 1), torch.float32, device)
        scoring = ShardScoring(rows, span, *whole)
    return Shard(Batch(**parts, num_groups=num_groups), which, tokens, seqs, scoring)


def _recv(shape, dtype, device) -> torch.Tensor:
    t = torch.empty(shape, dtype=dtype, device=device)
    dist.recv(t, 0)
    return t


def _to(batch: Batch, device: torch.device) -> Batch:
    if batch.input_ids.device == device:
        return batch
    return Batch(**{k: getattr(batch, k).to(device) for k in TENSORS}, num_groups=batch.num_groups)
