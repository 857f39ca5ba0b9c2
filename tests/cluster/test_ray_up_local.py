"""`ray up` for real: cluster/cluster-local.yaml on three loopback "nodes" of this machine
(scripts/loopback-nodes.sh), driven by the README's commands, "On a cluster": `ray up`,
`ray submit`, `ray job submit`, reading the runs back, `ray down`.

Needs root, openssh-server and rsync (.ci/run installs them); skipped, saying how, without.
The test runs on a copy of the cluster file with this run's key, token, free ports and a
cluster name of its own; everything else is the file as committed.
"""
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "loopback-nodes.sh"
LEARNER_IP, GENERATOR_IP = "127.0.0.2", "127.0.0.3"
BATCH = 4 * 3  # configs/local-cluster.yaml: batch_groups x steps


def ray_cli() -> str:
    beside = Path(sys.executable).parent / "ray"  # the ray of the Python running the tests
    return str(beside) if beside.exists() else "ray"


def run(args, env=None, timeout=600) -> str:
    """A command from the repository root, as a user types it; its output, or a failure
    that shows the end of it."""
    out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{' '.join(map(str, args))} exited {out.returncode}:\n{text[-6000:]}"
    return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def nodes(tmp_path):
    """sshd on 127.0.0.1-3 in a PID namespace of their own; stopping it ends the namespace."""
    folder = tmp_path / "nodes"
    env = {**os.environ, "PYTHON": sys.executable}
    start = subprocess.run(["bash", str(SCRIPT), "start", str(folder)], env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    if start.returncode == 3:
        pytest.skip(f"no loopback SSH nodes: {start.stderr.strip()}. To run this test: as root, with "
                    "openssh-server and rsync installed (apt-get install -y openssh-server rsync; "
                    ".ci/run installs them)")
    assert start.returncode == 0, start.stdout + start.stderr
    try:
        yield folder
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], timeout=60, check=False)


def cluster_copy(nodes: Path, tmp_path: Path) -> tuple[Path, int, Path]:
    """cluster-local.yaml with this run's key, token, ports and name: (file, dashboard port, token)."""
    config = yaml.safe_load((ROOT / "cluster" / "cluster-local.yaml").read_text())
    config["cluster_name"] = f"jury-rl-local-test-{os.getpid()}"
    config["auth"]["ssh_private_key"] = str(nodes / "key")
    token = tmp_path / "auth_token"
    run([ray_cli(), "get-auth-token", "--generate"], env={**os.environ, "HOME": str(tmp_path)})
    shutil.move(tmp_path / ".ray" / "auth_token", token)
    assert "~/.ray/auth_token" in config["file_mounts"]
    config["file_mounts"]["~/.ray/auth_token"] = str(token)
    gcs, dashboard, client = free_port(), free_port(), free_port()
    for key, new in {"--port=6379": f"--port={gcs}", ":6379": f":{gcs}",
                     "--dashboard-port=8265": f"--dashboard-port={dashboard}",
                     "--ray-client-server-port=10001": f"--ray-client-server-port={client}"}.items():
        commands = config["head_start_ray_commands"] + config["worker_start_ray_commands"]
        assert any(key in c for c in commands), f"cluster-local.yaml no longer has {key}"
        for name in ("head_start_ray_commands", "worker_start_ray_commands"):
            config[name] = [c.replace(key, new) for c in config[name]]
    path = tmp_path / "cluster-local.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, dashboard, token


def forget_cluster(name: str):
    """What `ray up` and `ray down` leave on the launching side: the local provider's record
    of the nodes, the config cache, the SSH control folder."""
    tmp = Path(tempfile.gettempdir())
    for path in (tmp / "ray").glob(f"cluster-{name}.*"):
        path.unlink()
    for path in tmp.glob("ray-config-*"):
        if name in path.read_text(errors="replace"):
            path.unlink()
    for path in tmp.glob(f"ray_ssh_*/{hashlib.sha256(name.encode()).hexdigest()[:10]}"):
        shutil.rmtree(path, ignore_errors=True)


def ray_list(what: str, address: str, env: dict) -> list[dict]:
    return json.loads(run([ray_cli(), "list", what, "--address", address, "--detail", "--format", "json",
                           "--limit", "1000"], env=env, timeout=120))


def wait_for_nodes(address: str, env: dict, count: int, timeout=300) -> list[dict]:
    deadline = time.time() + timeout
    while True:
        alive = [n for n in ray_list("nodes", address, env) if n["state"] == "ALIVE"]
        if len(alive) >= count or time.time() > deadline:
            return alive
        time.sleep(5)


def namespace_processes(nodes: Path) -> list[str]:
    """Command lines of every process in the nodes' PID namespace."""
    unshare = (nodes / "unshare.pid").read_text().strip()
    init = Path(f"/proc/{unshare}/task/{unshare}/children").read_text().split()[0]
    ns = os.readlink(f"/proc/{init}/ns/pid")
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "ns" / "pid") == ns:
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
        except OSError:  # gone meanwhile
            pass
    return found


def check_run(run_dir: Path, learner_node: str):
    """A real run: three learner steps on every admitted group, weights synced, a checkpoint."""
    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    ledger = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[-1]["learner/version"] == 3
    assert all(r["learner/tokens"] > 0 for r in rows)
    assert summary["feeder/admitted"] == BATCH
    assert summary["generator0/rollouts/sent"] == summary["verifier0/rollouts/received"] == BATCH
    assert summary["generator0/version"] == 2  # synced after steps 1 and 2
    assert sorted(e["index"] for e in ledger) == list(range(BATCH))  # every group trained once
    final = Path(summary["final_checkpoint"])
    assert (final / "model.safetensors").exists()
    assert json.loads((final / "state.json").read_text())["learner_node"] == learner_node


def test_ray_up_submit_job_submit_down(nodes, tmp_path, tiny_model_path):
    ray = ray_cli()
    cluster, dashboard_port, token = cluster_copy(nodes, tmp_path)
    dashboard = f"http://127.0.0.1:{dashboard_port}"
    # a client of a cluster with token authentication (README): the mode, and the token
    client = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    shared = tmp_path / "shared"  # every node sees /tmp: the runs and their checkpoints
    launch_args = ["--config", "configs/local-cluster.yaml", f"model={tiny_model_path}"]
    t0 = time.time()
    try:
        run([ray, "up", "-y", str(cluster)])
        nodes_up = wait_for_nodes(dashboard, client, 3)
        by_ip = {n["node_ip"]: n for n in nodes_up}
        assert {LEARNER_IP, GENERATOR_IP} <= set(by_ip) and len(by_ip) == 3, sorted(by_ip)
        assert by_ip[LEARNER_IP]["resources_total"].get("learner") == 1
        assert by_ip[GENERATOR_IP]["resources_total"].get("generator") == 1
        head = next(n for n in nodes_up if n["is_head_node"])
        assert head["resources_total"].get("verifier") == 1
        t_up = time.time()

        # the nodes run the checkout `ray up` synced into the node's home, not this one's install
        where = run([ray, "exec", str(cluster), "python -c 'import jury.cluster as c; print(c.__file__)'"])
        assert re.search(rf"{re.escape(str(nodes))}/node-127\.0\.0\.1/jury-rl/cluster/__init__\.py", where), where

        run([ray, "submit", str(cluster), "cluster/launch.py", "--", *launch_args,
             f"run_dir={shared / 'submit'}"])
        check_run(shared / "submit", LEARNER_IP)
        t_submit = time.time()

        out = run([ray, "job", "submit", "--address", dashboard, "--submission-id", f"jury-test-{os.getpid()}",
                   "--working-dir", ".", "--", "python", "cluster/launch.py", *launch_args,
                   f"run_dir={shared / 'job'}"], env=client)
        assert f"Job 'jury-test-{os.getpid()}' succeeded" in out, out[-3000:]
        check_run(shared / "job", LEARNER_IP)
        t_job = time.time()

        # both runs' roles ran where their resources are: learner .2, generator .3, verifier the head
        node_ip = {n["node_id"]: n["node_ip"] for n in ray_list("nodes", dashboard, client)}
        actors = [a for a in ray_list("actors", dashboard, client)
                  if a["class_name"] in ("Learner", "Generator", "VerifierWorker")]
        placed = {(a["job_id"], a["class_name"]): node_ip[a["node_id"]] for a in actors}
        jobs = {job for job, _ in placed}
        assert len(jobs) == 2, placed
        for job in jobs:
            assert placed[(job, "Learner")] == LEARNER_IP, placed
            assert placed[(job, "Generator")] == GENERATOR_IP, placed
            assert placed[(job, "VerifierWorker")] == head["node_ip"], placed
    finally:
        down = subprocess.run([ray, "down", "-y", str(cluster)], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, check=False)
        forget_cluster(yaml.safe_load(cluster.read_text())["cluster_name"])
    assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-3000:]

    # nothing of the cluster is left: in the nodes' namespace only the SSH servers remain
    # (and sessions closing: ssh keeps a shared connection open for 10 s after its last use)
    deadline = time.time() + 60
    while True:
        left = [p for p in namespace_processes(nodes) if not (p.startswith("sshd:") or p.endswith("init.sh"))]
        if not left or time.time() > deadline:
            break
        time.sleep(2)
    assert not left, f"processes left after ray down: {left}"
    print(f"ray up + nodes {t_up - t0:.0f}s, ray submit {t_submit - t_up:.0f}s, "
          f"ray job submit {t_job - t_submit:.0f}s, ray down {time.time() - t_job:.0f}s")
