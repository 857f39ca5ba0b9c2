"""Dependencies point one way: the messages and the verifiers load no engine, trainer or Ray."""
import subprocess
import sys

import pytest

HEAVY = ("vllm", "deepspeed", "ray", "torch")


@pytest.mark.parametrize("module", [
    "jury.cluster.messages", "jury.cluster.transport", "jury.cluster.config", "jury.verifiers.worker",
    "jury.verifiers.math_verify", "jury.verifiers.rewards", "jury.verifiers.lean_gate",
    "jury.verifiers.arith_gate", "jury.verifiers.tinyv", "jury.verifiers.judges", "jury.verifiers.derl",
    "jury.verifiers.derl_scorer", "jury.cluster.diversify",
])
def test_light_modules_do_not_import_heavy_ones(module):
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"{module} loaded {out}"


def test_roles_do_not_import_each_other():
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    roles = ["actors", "learner", "verifiers", "kernels"]
    for role in roles:
        for f in (root / role).glob("*.py"):
            text = f.read_text()
            for other in roles:
                if other != role and other != "kernels":
                    assert not re.search(rf"jury\.{other}\b", text), f"{f.name} imports jury.{other}"
    for f in (root / "kernels").glob("*.py"):
        assert "jury.cluster" not in f.read_text(), f"kernels/{f.name} reaches into the wiring"
