"""The Lean proof gate (JURY-RL §4.2.2): autoformalize, check consistency, prove, check with Lean.

Entry points:
    LeanGate(cfg, backend=load_gate_backend(cfg), formalizer=..., checker=..., prover=...)
        the gate (verifiers/gate.py's protocol): gate.verify(problem, answer).proved
    load_gate_backend(cfg)   where Lean runs: the local REPL pool, a kimina server, LeanDojo
    screen_file(text)        the static screen a proof passes before it reaches Lean
"""
from jury.verifiers.lean.backends import load_gate_backend
from jury.verifiers.lean.gate import LeanGate
from jury.verifiers.lean.screen import screen_file

__all__ = ["LeanGate", "load_gate_backend", "screen_file"]
