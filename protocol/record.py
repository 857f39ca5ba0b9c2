"""The record of a run's trained batches (`record_groups=true`, read by `jury replay`).

One file per learner step, `record/step-NNNNNN.msgpack`: a MessagePack list holding each
group of the batch as the wire codec's frames, so a record is exactly what crossed the
learner's queue and decodes with the same strict checks (no pickle).
"""
from __future__ import annotations

import os

import msgpack

from jury.protocol.messages import ScoredGroup, decode, encode


def write_record(path: str, groups: list[ScoredGroup]):
    """One batch, written whole or not at all (a temporary file renamed into place)."""
    with open(path + ".tmp", "wb") as f:
        f.write(msgpack.packb([[bytes(fr) for fr in encode(g)] for g in groups]))
    os.replace(path + ".tmp", path)


def read_record(path: str) -> list[ScoredGroup]:
    with open(path, "rb") as f:
        return [decode(frames) for frames in msgpack.unpackb(f.read())]
