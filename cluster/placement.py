"""Where each role runs: Ray options per actor, from the role's config section.

Roles are placed by their config's `num_cpus`, `num_gpus` and custom `resources` (each
node type of cluster/cluster.yaml carries one naming its role). A tensor-parallel GPU
engine needs its GPUs together, so it gets a placement group of its own.
"""
from __future__ import annotations


def generator_placement(g, i: int) -> dict:
    """Ray options placing generator i. A tensor-parallel engine on GPUs gets a placement group:
    its GPUs reserved together on one node, the actor on bundle 0, and vLLM's Ray executor
    putting one worker on each GPU bundle (child tasks are captured into the group)."""
    import ray

    bundles = generator_bundles(g)
    if not bundles:
        return {"num_cpus": g.num_cpus, "num_gpus": g.num_gpus, "resources": g.resources}
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = placement_group(bundles, strategy="STRICT_PACK", name=f"jury-generator{i}")
    ray.get(pg.ready(), timeout=600)
    return {"num_cpus": g.num_cpus, "num_gpus": 0, "scheduling_strategy": PlacementGroupSchedulingStrategy(
        pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True)}


def generator_bundles(g) -> list[dict]:
    """Placement-group bundles for one tensor-parallel GPU engine: the actor's CPUs and custom
    resources, then one GPU per tensor-parallel rank. [] when no group is needed (TP 1, or CPU)."""
    if g.tensor_parallel_size <= 1 or g.num_gpus <= 0:
        return []
    return [{"CPU": g.num_cpus, **g.resources}] + [{"GPU": 1.0} for _ in range(g.tensor_parallel_size)]
