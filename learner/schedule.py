"""The learning-rate schedule: linear warm-up, then constant, linear or cosine decay.

    lr(t) = lr · (t + 1) / W                                  t < W (warm-up, t counts optimizer steps from 0)
    lr(t) = lr                                                constant
    lr(t) = lr · (m + (1 - m) · (1 - p))                      linear,  p = (t - W) / (T - W)
    lr(t) = lr · (m + (1 - m) · (1 + cos(π p)) / 2)           cosine

T is the run's optimizer steps (steps · minibatches · epochs), m = min_lr_ratio; past T
the rate stays at lr · m. The first step of a warm-up runs at lr / W, not 0. DeepSpeed
steps the scheduler with the optimizer and keeps its position in checkpoints.
"""
from __future__ import annotations

import math


def lr_factor(t: int, kind: str, warmup: int, total: int, min_ratio: float) -> float:
    """The multiplier of the base learning rate at optimizer step t (0-based)."""
    if warmup and t < warmup:
        return (t + 1) / warmup
    if kind == "constant":
        return 1.0
    p = min(1.0, (t - warmup) / max(1, total - warmup))
    decay = 1.0 - p if kind == "linear" else (1.0 + math.cos(math.pi * p)) / 2.0
    return min_ratio + (1.0 - min_ratio) * decay


def make_scheduler(optimizer, kind: str, warmup: int, total: int, min_ratio: float):
    """A torch LambdaLR over lr_factor."""
    from torch.optim.lr_scheduler import LambdaLR

    return LambdaLR(optimizer, lambda t: lr_factor(t, kind, warmup, total, min_ratio))
