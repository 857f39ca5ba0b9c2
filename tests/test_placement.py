"""Roles placed by resources on a local multi-node Ray cluster (several raylets on this machine)."""
import pytest

from jury.cluster.config import load_config

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
    cfg = load_config(None, [
        f"run_dir={tmp_path}", "steps=2", "batch_groups=2", "generator.group_size=2", "progress=false",
        "learner.resources={learner_node: 1}", "generator.resources={generator_node: 1}",
        "verifier.resources={verifier_node: 1}"])
    pipe = Pipeline(cfg, tiny_model_path)
    try:
        pipe.start()
        assert not pipe.started_ray  # it joined the cluster it was given
        where = {a.class_name: a.node_id for a in list_actors(filters=[("state", "=", "ALIVE")])}
        assert where["Learner"] == nodes["learner_node"].node_id
        assert where["Generator"] == nodes["generator_node"].node_id
        assert where["VerifierWorker"] == nodes["verifier_node"].node_id
        # and the roles, on three nodes, still train together
        pipe.feeder.admit(pipe.version, stop_at=4)
        for step in range(2):
            row = ray.get(pipe.learner.step.remote(step, 300))
            assert "missing" not in row and row["learner/version"] == step + 1
            pipe.sync_weights()
            pipe.feeder.consumed((step + 1) * 2)
            pipe.feeder.admit(pipe.version, stop_at=4)
    finally:
        pipe.close()
        ray.shutdown()
        cluster.shutdown()
