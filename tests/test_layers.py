"""The folders are the layers (README, Layout), and this test keeps them so.

    experiments/   nothing imports them
    cluster/       the run-time wiring: may import every role, never the experiment tools
    roles          actors/ verifiers/ learner/: the protocol only (the learner also kernels/)
    data/ models/  dataset rows, tasks, prompt templates; the local models: the protocol only
                   (the models also data/: they are warmed up on its tasks)
    protocol/      imports nothing of ours
    kernels/       imports nothing of ours

Every import counts, those inside functions too: a lazy import is still a dependency, and
no two modules may depend on each other, however indirectly (no import cycle).
"""
import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ["protocol", "kernels", "data", "models", "actors", "learner", "verifiers", "cluster", "experiments"]
# what each package may import of ours, besides itself
ALLOWED = {
    "protocol": set(),
    "kernels": set(),
    "data": {"protocol"},
    "models": {"protocol", "data"},
    "actors": {"protocol"},
    "learner": {"protocol", "kernels"},
    "verifiers": {"protocol"},
    "cluster": {"protocol", "kernels", "data", "models", "actors", "learner", "verifiers"},
    "experiments": {"protocol", "kernels", "data", "models", "actors", "learner", "verifiers", "cluster"},
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


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["jury", *parts])


def module_graph() -> dict[str, set[str]]:
    """Every module of ours -> the modules of ours it imports (`from jury.a import b` is
    jury.a.b where b is a module, else jury.a), imports inside functions included."""
    files = {module_name(f): f for p in PACKAGES for f in package_files(p)}
    graph = {}
    for name, path in files.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                         for a in node.names}
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    found = cycles(module_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


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
    "jury.protocol.config_load", "jury.protocol.plan", "jury.protocol.boxed", "jury.protocol.prompt_files",
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
    # the simulator plans runs where no engine, trainer or cluster is installed (issue 28)
    "jury.experiments.simulate", "jury.experiments.sim_costs", "jury.experiments.sim_gpu", "jury.experiments.sim_sweep",
])
def test_light_modules_do_not_import_heavy_ones(module):
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"{module} loaded {out}"
