"""Roles placed by resources on a local multi-node Ray cluster (several raylets on this machine), and
the weight plane between them."""
import pytest

from jury.protocol.config_load import load_config

pytestmark = pytest.mark.slow


def test_roles_land_on_the_nodes_their_resources_name(tiny_model_path, tmp_path):
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.state import list_actors

    from jury.cluster.pipeline import Pipeline

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"head": 1}})
    nodes = {role: cluster.add_node(num_cpus=2, resources={role: 1})
             for role in ("learner_node", "generator_node", "verifier_node")}
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    # lr 0.01 so that check_sync's one step moves the policy; buckets of 1 MB so that a sync sends several
    cfg = load_config(None, [
        f"run_dir={tmp_path}", "steps=2", "batch_groups=2", "generator.group_size=2", "progress=false",
        "learner.lr=0.01", "bucket_mb=1",
        "learner.resources={learner_node: 1}", "generator.resources={generator_node: 1}",
        "verifier.resources={verifier_node: 1}"])
    pipe = Pipeline(cfg, tiny_model_path)
    try:
        pipe.start()
        assert not pipe.started_ray  # it joined the cluster it was given
        assert pipe.curve is not None  # more than one node: the data plane is authenticated by default
        where = {a.class_name: a.node_id for a in list_actors(filters=[("state", "=", "ALIVE")])}
        assert where["Learner"] == nodes["learner_node"].node_id
        assert where["Generator"] == nodes["generator_node"].node_id
        assert where["VerifierWorker"] == nodes["verifier_node"].node_id
        # and the roles, on three nodes, still train together
        pipe.feeder.admit(pipe.version, stop_at=4)
        for step in range(2):
            result = pipe.learner.step(step, 300)
            assert not result.missing and result.metrics["learner/version"] == step + 1
            pipe.sync_weights()
            pipe.feeder.consumed((step + 1) * 2)
            pipe.feeder.admit(pipe.version, stop_at=4)
        _check_weight_sync(pipe, tiny_model_path, tmp_path)
    finally:
        pipe.close()
        ray.shutdown()
        cluster.shutdown()


def _check_weight_sync(pipe, tiny_model_path, tmp_path):
    """The weight plane (ZeRO-0, one learner rank; ZeRO-3 over 2 ranks is checked in
    test_learner_ranks.py), here between nodes: after a step and a sync, vLLM scores a completion
    as the learner does, and a checkpoint's Hugging Face copy is the trained model."""
    import ray
    from transformers import AutoModelForCausalLM

    from jury.experiments.check_sync import check_sync

    sync = check_sync(pipe)  # what `jury check-sync` runs: one group, one step, one sync
    assert sync["gap_before"] <= 1e-4 and sync["gap_after"] <= 1e-4, sync
    assert sync["change"] > 1e-3, "the sync changed nothing"
    assert pipe.version == 3 and ray.get(pipe.generators[0].stats.remote())["version"] == 3
    full = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
    assert sync["sync/bytes"] == sum(t.numel() * t.element_size() for t in full.values())
    assert sync["sync/gather_s"] > 0 and sync["sync/broadcast_s"] > 0

    ckpt = tmp_path / "ckpt"
    pipe.learner.save(str(ckpt), {})
    pipe.learner.save(str(ckpt), {})  # again: one engine tag kept, not two
    assert sorted(p.name for p in (ckpt / "engine").iterdir() if p.is_dir()) == ["v3"]
    saved = AutoModelForCausalLM.from_pretrained(ckpt).state_dict()
    assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in full.items()}
    assert any((saved[k] - full[k]).abs().max() > 0 for k in full)


def test_a_tensor_parallel_engine_gets_its_gpus_together_on_one_node():
    """The placement group a TP=2 GPU generator gets, on a cluster with (declared) GPUs: the
    actor lands on the node holding both GPUs, and tasks it starts with a GPU each (as vLLM's
    Ray executor starts its workers) run inside the group, on that node."""
    import ray
    from ray.cluster_utils import Cluster

    from jury.protocol.config import GeneratorConfig
    from jury.cluster.placement import generator_bundles, generator_placement

    assert generator_bundles(GeneratorConfig()) == []  # TP 1: plain options
    assert generator_bundles(GeneratorConfig(tensor_parallel_size=2)) == []  # CPU: vLLM's own processes
    g = GeneratorConfig(tensor_parallel_size=2, num_gpus=1, num_cpus=1, resources={"generator": 1})
    assert generator_bundles(g) == [{"CPU": 1, "generator": 1}, {"GPU": 1.0}, {"GPU": 1.0}]

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    one_gpu = cluster.add_node(num_cpus=2, num_gpus=1, resources={"generator": 1})
    two_gpus = cluster.add_node(num_cpus=2, num_gpus=2, resources={"generator": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    try:
        @ray.remote(num_gpus=1, num_cpus=0)
        def worker():
            return ray.get_runtime_context().get_node_id(), ray.get_gpu_ids()

        @ray.remote
        class Engine:
            def where(self):
                return ray.get_runtime_context().get_node_id()

            def workers(self, n):
                return ray.get([worker.remote() for _ in range(n)])

        e = Engine.options(**generator_placement(g, 0)).remote()
        assert ray.get(e.where.remote()) == two_gpus.node_id
        placed = ray.get(e.workers.remote(2), timeout=60)
        assert {node for node, _ in placed} == {two_gpus.node_id}
        assert sorted(gpu for _, ids in placed for gpu in ids) == [0, 1]  # each its own GPU
        assert one_gpu.node_id not in {node for node, _ in placed}
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_several_cpu_engines_on_one_machine_decode_on_cores_of_their_own():
    """vLLM's "auto" binding pins every CPU engine's worker to the same cores (two engines on two
    cores both on core 0): each engine gets a slice of its own instead, and E cores stay free for
    the schedulers and the learner where the machine has enough."""
    from jury.cluster.placement import engine_cpu_binds

    assert engine_cpu_binds(2, [0, 1]) == ["0", "1"]
    assert engine_cpu_binds(2, list(range(16))) == ["0,1,2,3,4,5,6", "7,8,9,10,11,12,13"]
    assert engine_cpu_binds(2, [4, 5, 6, 7]) == ["4", "5"]  # the ids allowed, not 0..C-1
    assert engine_cpu_binds(3, [0, 1]) == ["0", "1", "0"]    # fewer cores than engines: in turn
    for engines, cores in ((2, list(range(16))), (4, list(range(8))), (3, list(range(12)))):
        binds = [set(map(int, b.split(","))) for b in engine_cpu_binds(engines, cores)]
        assert all(binds[i].isdisjoint(binds[j]) for i in range(engines) for j in range(i))
        assert len(set(cores) - set().union(*binds)) >= engines


def test_a_cpu_bind_naming_no_usable_core_is_refused_before_anything_starts():
    """A VLLM_CPU_OMP_THREADS_BIND the user set is checked once, by the driver, against this machine's
    cores: not in each engine's actor, where Ray would restart it to fail again."""
    from jury.cluster.placement import check_cpu_bind
    from jury.protocol.config import ConfigError

    with pytest.raises(ConfigError, match=r"VLLM_CPU_OMP_THREADS_BIND='9': core\(s\) \[9\] are not among"):
        check_cpu_bind("9", [0, 1], cpu_engines=True)
    check_cpu_bind("9", [0, 1], cpu_engines=False)  # GPU engines do not read it
    check_cpu_bind(None, [0, 1], cpu_engines=True)
    check_cpu_bind("1", [0, 1], cpu_engines=True)


def test_a_cpu_engine_start_of_neither_kind_is_refused_before_anything_starts(monkeypatch):
    """JURY_CPU_ENGINE_START is checked by the driver (not in each engine's actor) and sent on to the
    actors as it was set: on a cluster they do not inherit the driver's environment."""
    from jury.cluster.placement import check_cpu_engine_start
    from jury.protocol.config import ConfigError

    monkeypatch.delenv("JURY_CPU_ENGINE_START", raising=False)
    assert check_cpu_engine_start() == {}
    monkeypatch.setenv("JURY_CPU_ENGINE_START", "spawn")
    assert check_cpu_engine_start() == {"JURY_CPU_ENGINE_START": "spawn"}
    monkeypatch.setenv("JURY_CPU_ENGINE_START", "vfork")
    with pytest.raises(ConfigError, match="JURY_CPU_ENGINE_START='vfork': 'fork' .* or 'spawn'"):
        check_cpu_engine_start()
