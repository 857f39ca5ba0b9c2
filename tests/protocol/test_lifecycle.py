"""Every actor class keeps the lifecycle the wiring calls (protocol/lifecycle.py)."""
import inspect

import pytest

from jury.protocol.lifecycle import Lifecycle, RestartableWorker


def methods(protocol) -> set[str]:
    return {name for name, _ in inspect.getmembers(protocol, inspect.isfunction) if not name.startswith("_")}


@pytest.mark.parametrize("module, name, protocol", [
    ("jury.actors.generator", "Generator", RestartableWorker),
    ("jury.verifiers.worker", "VerifierWorker", RestartableWorker),
    ("jury.learner.learner", "Learner", Lifecycle),
    ("jury.actors.llm_server", "LLMServer", Lifecycle),
])
def test_each_actor_has_the_lifecycle_methods(module, name, protocol):
    import importlib

    cls = getattr(importlib.import_module(module), name)
    missing = {m for m in methods(protocol) if not callable(getattr(cls, m, None))}
    assert not missing, f"{name} lacks {sorted(missing)} of {protocol.__name__}"
    assert methods(RestartableWorker) == {"pid", "stop", "is_started", "stats", "fault"}
