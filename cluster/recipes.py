"""What each verifier worker builds in its own process: the label checker, the proof gate and
the reward scheme, from picklable recipes the driver ships (they may own processes, a check
pool or Lean REPLs, that cannot travel).

    VerifierWorker(cfg, name, checker=CheckerRecipe(cfg), scheme=SchemeRecipe(cfg, gate, llm, derl))

This is where the run's parts are composed: the scheme gets its gate (verifiers/gate.py:
`gate.verify(problem, majority_answer).proved`) and its LLM, and DeRL wraps the run's scheme.
"""
from __future__ import annotations

from dataclasses import dataclass

from jury.protocol.config import LeanGateConfig, VerifierConfig
from jury.verifiers.checker import LabelChecker
from jury.verifiers.gate import ProofGate
from jury.verifiers.llm import LLMClient
from jury.verifiers.schemes import Scheme


@dataclass
class GateFactory:
    kind: str                 # "arith" | "lean"
    lean_config: LeanGateConfig | None = None
    clients: dict | None = None  # role -> LLMClient (formalizer, checker, prover)

    def __call__(self) -> ProofGate:
        if self.kind == "arith":
            from jury.verifiers.arith_gate import ArithGate

            return ArithGate()
        from jury.verifiers.lean import LeanGate, load_gate_backend

        cfg = self.lean_config
        return LeanGate(cfg, backend=load_gate_backend(cfg), **self.clients)


@dataclass
class CheckerRecipe:
    """The label checker: the rule-based math verifier (verifiers/math)."""

    cfg: VerifierConfig

    def __call__(self) -> LabelChecker:
        from jury.verifiers.math import MathChecker

        return MathChecker(self.cfg)


@dataclass
class SchemeRecipe:
    """The run's reward scheme (verifier.reward) with its gate and LLM; DeRL's around it when `derl`
    (a verifiers.derl.DerlScorer) is given."""

    cfg: VerifierConfig
    gate: GateFactory | None = None
    llm: LLMClient | None = None
    derl: object = None

    def __call__(self) -> Scheme:
        from jury.verifiers.schemes import make_scheme

        scheme = make_scheme(self.cfg, gate=self.gate() if self.gate else None, llm=self.llm)
        if self.derl is not None:
            from jury.verifiers.derl import DerlScheme

            scheme = DerlScheme(self.derl, scheme)
        return scheme
