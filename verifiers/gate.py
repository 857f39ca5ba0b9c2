"""The proof gate's one call convention (JURY-RL's δ: is the majority answer proved?).

    gate = ...                                   # arith_gate.ArithGate() or lean.gate.LeanGate(...)
    result = gate.verify(problem, answer)        # asked about the majority answer only
    result.proved                                # True: δ = 1; False: refuted or inconclusive
    result.metrics()                             # its cost record (tokens, attempts, time), summed per call
    gate.close()                                 # processes it owns (Lean REPLs)

A gate is built inside the verifier worker's own process (cluster/recipes.py ships a recipe),
because it may own processes that cannot travel.
"""
from __future__ import annotations

from typing import Protocol


class GateOutcome(Protocol):
    proved: bool

    def metrics(self) -> dict[str, float]: ...


class ProofGate(Protocol):
    def verify(self, problem: str, answer: str) -> GateOutcome: ...

    def close(self) -> None: ...
