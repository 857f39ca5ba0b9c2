"""The folders are the layers (README, Layout), and this test keeps them so.

    experiments/   nothing imports them
    cluster/       the run-time wiring: may import every role, never the experiment tools
    roles          actors/ verifiers/ learner/: the protocol only (the learner also kernels/)
    protocol/      imports nothing of ours
    kernels/       imports nothing of ours

Every import counts, those inside functions too: a lazy import is still a dependency.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ["protocol", "kernels", "actors", "learner", "verifiers", "cluster", "experiments"]
# what each package may import of ours, besides itself
ALLOWED = {
    "protocol": set(),
    "kernels": set(),
    "actors": {"protocol"},
    "learner": {"protocol", "kernels"},
    "verifiers": {"protocol"},
    "cluster": {"protocol", "kernels", "actors", "learner", "verifiers"},
    "experiments": {"protocol", "kernels", "actors", "learner", "verifiers", "cluster"},
}
HEAVY = ("vllm", "deepspeed", "ray", "torch")


def imports_of(path: pathlib.Path) -> set[str]:
    """The jury packages a file imports (`jury.verifiers.math.verify` -> "verifiers")."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "jury" and len(parts) > 1:
                found.add(parts[1])
    return found


def package_files(package: str) -> list[pathlib.Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_only_the_layers_below_it(package):
    bad = []
    for f in package_files(package):
        for other in imports_of(f) - {package} - ALLOWED[package]:
            bad.append(f"{f.relative_to(ROOT)} imports jury.{other}")
    assert not bad, "layer rule broken:\n" + "\n".join(bad)


def test_nothing_imports_the_experiment_tools():
    users = [f.relative_to(ROOT) for p in PACKAGES if p != "experiments"
             for f in package_files(p) if "experiments" in imports_of(f)]
    assert not users, f"these import jury.experiments: {users}"


def test_the_rule_catches_an_inversion(tmp_path):
    """The checker itself: a role importing another role, or the protocol importing a role, is seen."""
    role = tmp_path / "worker.py"
    role.write_text("def f():\n    from jury.learner.learner import Learner\n")
    assert imports_of(role) == {"learner"}
    assert imports_of(role) - ALLOWED["verifiers"] == {"learner"}
    config = tmp_path / "config.py"
    config.write_text("from jury.verifiers.derl import plans\nimport jury.cluster.driver\n")
    assert imports_of(config) == {"verifiers", "cluster"}


@pytest.mark.parametrize("module", [
    "jury.protocol.messages", "jury.protocol.transport", "jury.protocol.config", "jury.protocol.record",
])
def test_the_protocol_loads_no_engine_trainer_ray_or_verifier(module):
    code = (f"import sys, {module}; print(','.join(m for m in sys.modules "
            f"if m.split('.')[0] in {HEAVY!r} or m.startswith('jury.verifiers') or m.startswith('jury.actors')"
            f" or m.startswith('jury.learner') or m.startswith('jury.cluster')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"{module} loaded {out}"


@pytest.mark.parametrize("module", [
    "jury.verifiers.worker", "jury.verifiers.math.verify", "jury.verifiers.rewards", "jury.verifiers.lean.gate",
    "jury.verifiers.arith_gate", "jury.verifiers.tinyv", "jury.verifiers.judges", "jury.verifiers.derl.plans",
    "jury.verifiers.derl.scorer", "jury.cluster.diversify",
])
def test_light_modules_do_not_import_heavy_ones(module):
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"{module} loaded {out}"
