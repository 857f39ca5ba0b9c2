"""The label checker's one call convention: how a domain reads samples and checks them.

    checker = MathChecker(cfg)                 # verifiers/math/checker.py (code execution, another domain: a new file)
    checker.preflight()                        # at the worker's start: refuse settings it cannot work under (ConfigError)
    answers = [checker.extract(s.text) for s in group.samples]
    keys = checker.keys(answers)               # vote keys: equivalent answers, equal keys; None never votes
    verdicts = checker.check(answers, label, texts)   # a Verdict per sample against the label (it
                                               # may read a text again knowing the label's shape:
    checker.read(answers, label, texts)        # the answers it compared, for TinyV's prompt; optional)
    checker.stats(); checker.close()           # its counters (metrics); processes it owns

The worker calls it once per group; the run's reward scheme (verifiers/schemes.py) reads the
keys and verdicts. A checker is built inside the worker's own process (it may own a process
pool), from a picklable recipe the wiring ships.
"""
from __future__ import annotations

from typing import Protocol

from jury.protocol.messages import Verdict


class LabelChecker(Protocol):
    name: str  # the Verdict.verifier of its verdicts

    def preflight(self) -> float: ...

    def extract(self, text: str) -> str | None: ...

    def unread(self, text: str) -> str | None: ...  # "timeout"/"error": the extraction failed, not no answer

    def keys(self, answers: list[str | None]) -> list[str | None]: ...

    def check(self, answers: list[str | None], label: str, texts: list[str]) -> list[Verdict]: ...

    def stats(self) -> dict[str, float]: ...

    def close(self) -> None: ...
