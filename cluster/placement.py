"""Where each role runs: Ray options per actor, from the role's config section.

Roles are placed by their config's `num_cpus`, `num_gpus` and custom `resources` (each
node type of cluster/cluster.yaml carries one naming its role). A tensor-parallel GPU
engine needs its GPUs together, so it gets a placement group of its own.
"""
from __future__ import annotations

import os


def generator_placement(g, i: int) -> dict:
    """Ray options placing generator i. A tensor-parallel engine on GPUs gets a placement group:
    its GPUs reserved together on one node, the actor on bundle 0, and vLLM's Ray executor
    putting one worker on each GPU bundle (child tasks are captured into the group)."""
    return _engine_placement(g.num_cpus, g.num_gpus, g.tensor_parallel_size, g.resources, f"jury-generator{i}")


def engine_cpu_binds(engines: int, cores: list[int]) -> list[str]:
    """VLLM_CPU_OMP_THREADS_BIND for each of `engines` CPU engines on one machine with these cores
    (the cores an engine's model runs on: its engine core's, actors/cpu_engine.py, or in vLLM's own
    layout its worker's).

    Left to itself ("auto"), every vLLM CPU engine pins its model to the same cores, all of the
    machine's but the last (kept for its scheduler process): two engines on two cores both decode
    on core 0 while core 1 has only the schedulers and the learner (seen here with
    num_generators=2). Split instead: engine i gets k = max(1, (C - E) // E) cores of its own,
    taken in turn from the start (wrapping round when the cores are fewer than the engines), and
    E cores are left over for the schedulers and the learner where there are enough."""
    k = max(1, (len(cores) - engines) // engines)
    return [",".join(str(cores[(i * k + j) % len(cores)]) for j in range(k)) for i in range(engines)]


def check_cpu_bind(bind: str | None, cores: list[int], cpu_engines: bool):
    """A VLLM_CPU_OMP_THREADS_BIND the user set, refused before anything starts when it names no
    usable cores of this machine (actors.cpu_engine.bind_cores), not in each engine's actor."""
    from jury.actors.cpu_engine import bind_cores
    from jury.protocol.config import ConfigError

    if bind is None or not cpu_engines:
        return
    try:
        bind_cores(bind, cores)
    except ValueError as e:
        raise ConfigError(f"{e} (the CPU engines' cores; unset it for vLLM's own choice)") from None


def check_cpu_engine_start() -> dict:
    """A JURY_CPU_ENGINE_START the user set (actors.cpu_engine.start_method), refused before anything
    starts rather than in each engine's actor; returns it as an env var for the actors (on a cluster
    they do not inherit the driver's environment), or nothing when unset."""
    from jury.actors.cpu_engine import START, start_method
    from jury.protocol.config import ConfigError

    try:
        start_method()
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return {START: os.environ[START]} if os.environ.get(START, "").strip() else {}


def generator_bundles(g) -> list[dict]:
    """Placement-group bundles for one tensor-parallel GPU engine: the actor's CPUs and custom
    resources, then one GPU per tensor-parallel rank. [] when no group is needed (TP 1, or CPU)."""
    return _bundles(g.num_cpus, g.num_gpus, g.tensor_parallel_size, g.resources)


def server_tensor_parallel(spec) -> int:
    """An LLM server over more than one GPU is one engine, tensor parallel over them (the config
    refuses a fractional count above 1)."""
    return int(spec.num_gpus) if spec.num_gpus > 1 else 1


def server_placement(spec, i: int) -> dict:
    """Ray options of an LLM server (TinyV, the Lean gate's roles, DeRL): its plan.servers spec's GPUs.
    Ray shows an actor only the GPUs it asked for (CUDA_VISIBLE_DEVICES), so a server that asks
    for none cannot start CUDA vLLM on a GPU node. It reserves no CPU: it waits on its engine."""
    return _engine_placement(0, spec.num_gpus, server_tensor_parallel(spec), {}, f"jury-llm-server{i}")


def _engine_placement(num_cpus, num_gpus, tensor_parallel_size, resources, name: str) -> dict:
    import ray

    bundles = _bundles(num_cpus, num_gpus, tensor_parallel_size, resources)
    if not bundles:
        return {"num_cpus": num_cpus, "num_gpus": num_gpus, "resources": resources}
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = placement_group(bundles, strategy="STRICT_PACK", name=name)
    ray.get(pg.ready(), timeout=600)
    return {"num_cpus": num_cpus, "num_gpus": 0, "scheduling_strategy": PlacementGroupSchedulingStrategy(
        pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True)}


# The actor's own bundle holds at least this much CPU: Ray refuses a bundle whose resources are all 0
# (an LLM server reserves no CPU), and vLLM's Ray executor places its workers on the GPU bundles only
MIN_BUNDLE_CPU = 0.01


def _bundles(num_cpus, num_gpus, tensor_parallel_size, resources) -> list[dict]:
    if tensor_parallel_size <= 1 or num_gpus <= 0:
        return []
    return [{"CPU": max(num_cpus, MIN_BUNDLE_CPU), **resources}] + [{"GPU": 1.0} for _ in range(tensor_parallel_size)]
