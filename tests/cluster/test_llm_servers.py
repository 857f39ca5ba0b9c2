"""The LLM servers of the verifier roles (TinyV, the Lean gate, DeRL) get the GPUs the config gives
them: Ray shows an actor only the GPUs it asked for, so a server asking for none cannot start CUDA
vLLM on a GPU node."""
from jury.actors.llm_server import engine_args
from jury.cluster.pipeline import demands, server_args
from jury.cluster.placement import server_placement
from jury.protocol.config_load import load_config
from jury.protocol.plan import make_plan

TINYV = ["verifier.reward=tinyv"]


def test_a_server_asks_ray_for_its_gpus_and_vllm_for_its_memory_share():
    cfg = load_config(None, [*TINYV, "verifier.llm_num_gpus=1", "verifier.llm_gpu_memory_utilization=0.8"])
    spec = make_plan(cfg).server_of("tinyv")
    assert server_placement(spec, 0) == {"num_cpus": 0, "num_gpus": 1.0, "resources": {}}
    args = engine_args(spec.model, **server_args(spec, seed=3))
    assert (args["gpu_memory_utilization"], args["tensor_parallel_size"], args["seed"]) == (0.8, 1, 3)
    assert args["max_model_len"] == spec.max_model_len and "distributed_executor_backend" not in args
    assert ("the LLM server for tiny", "verifier.llm_num_gpus", {"GPU": 1.0}) in demands(cfg)


def test_a_server_over_two_gpus_is_tensor_parallel_with_ray_workers():
    spec = make_plan(load_config(None, [*TINYV, "verifier.llm_num_gpus=2"])).server_of("tinyv")
    args = engine_args(spec.model, **server_args(spec, seed=0))
    assert args["tensor_parallel_size"] == 2 and args["distributed_executor_backend"] == "ray"


def test_the_placement_group_of_a_server_over_two_gpus_is_one_ray_accepts(monkeypatch):
    """Its bundles pass Ray's own validation (ray.util.placement_group._validate_bundles, run here
    without a cluster): the actor's bundle was {"CPU": 0}, which Ray refuses as all zeros, so no
    server over two GPUs could start (outside audit). Its workers go to the GPU bundles only."""
    import importlib

    from jury.cluster import placement

    pg_module = importlib.import_module("ray.util.placement_group")
    seen = []

    def validate_only(bundles, strategy, name):
        pg_module._validate_bundles(bundles)  # raises on what Ray would refuse
        seen.append(bundles)
        raise _Validated

    class _Validated(Exception):
        pass

    monkeypatch.setattr(pg_module, "placement_group", validate_only)
    spec = make_plan(load_config(None, [*TINYV, "verifier.llm_num_gpus=2"])).server_of("tinyv")
    try:
        placement.server_placement(spec, 0)
    except _Validated:
        pass
    assert seen == [[{"CPU": placement.MIN_BUNDLE_CPU}, {"GPU": 1.0}, {"GPU": 1.0}]]


def test_on_the_cpu_a_server_asks_for_no_gpu():
    spec = make_plan(load_config(None, TINYV)).server_of("tinyv")
    assert server_placement(spec, 0) == {"num_cpus": 0, "num_gpus": 0.0, "resources": {}}
    assert "distributed_executor_backend" not in engine_args(spec.model, **server_args(spec, seed=0))
