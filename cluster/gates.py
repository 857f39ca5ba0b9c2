"""Proof gates, built inside each verifier worker from a picklable recipe.

A gate follows verifiers/gate.py: `gate.verify(problem, majority_answer).proved`. The
Lean gate owns a pool of REPL processes and LLM clients, so the driver ships a recipe
(`GateFactory`) and the worker builds the gate in its own process.
"""
from __future__ import annotations

from dataclasses import dataclass
from jury.verifiers.gate import ProofGate


@dataclass
class GateFactory:
    kind: str                 # "arith" | "lean"
    lean_config: object = None
    clients: dict | None = None  # role -> LLMClient (formalizer, checker, prover)

    def __call__(self) -> ProofGate:
        if self.kind == "arith":
            from jury.verifiers.arith_gate import ArithGate

            return ArithGate()
        from jury.verifiers.lean.backends import load_gate_backend
        from jury.verifiers.lean.gate import LeanGate

        cfg = self.lean_config
        return LeanGate(cfg, backend=load_gate_backend(cfg), **self.clients)
