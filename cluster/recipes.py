"""What each verifier worker builds in its own process: the label checker, the proof gate and
the reward scheme, from picklable recipes the driver ships (they may own processes, a check
pool or Lean REPLs, that cannot travel).

    VerifierWorker(cfg, name, checker=CheckerRecipe(cfg), scheme=SchemeRecipe(cfg, gate, llm, derl, template))

This is where the run's parts are composed: the scheme gets its gate (verifiers/gate.py:
`gate.verify(problem, majority_answer).proved`), its LLM and the worker's own label checker
(LLM-KD checks samples against the teacher's answer with it), and DeRL wraps the run's scheme.
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
    (a verifiers.derl.DerlScorer) is given. `template`: the run's prompt template (data.template
    resolved, with {problem}): how LLM-KD's teacher is shown a problem."""

    cfg: VerifierConfig
    gate: GateFactory | None = None
    llm: LLMClient | None = None
    derl: object = None
    template: str = "{problem}\n"

    def __call__(self, checker: LabelChecker | None = None) -> Scheme:
        """`checker`: the worker's label checker (built first, in the same process)."""
        from jury.verifiers.schemes import make_scheme

        scheme = make_scheme(self.cfg, gate=self.gate() if self.gate else None, llm=self.llm, checker=checker,
                             template=self.template)
        if self.derl is not None:
            from jury.verifiers.derl import DerlScheme

            scheme = DerlScheme(self.derl, scheme)
        return scheme
