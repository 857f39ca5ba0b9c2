"""Every wait of a weight sync is bounded: a role that does not answer stops the run with its name."""
import time

import pytest

from jury.protocol.config_load import load_config


def test_a_sync_that_waits_past_its_bound_names_the_role(tmp_path):
    import ray

    from jury.cluster.errors import SyncTimeout
    from jury.cluster.pipeline import Pipeline

    @ray.remote(num_cpus=0)
    class Hung:
        def update_weights(self, update):
            time.sleep(60)  # an engine that never acknowledges

    ray.init(num_cpus=1, include_dashboard=False)
    try:
        pipe = Pipeline(load_config(None, ["sync_timeout_s=2", "progress=false"]), "unused")
        hung = Hung.remote()
        t0 = time.monotonic()
        with pytest.raises(SyncTimeout, match=r"weight sync to version 3: generator1 did not answer in 2s "
                                              r"\(sync_timeout_s\)"):
            pipe._wait_all({"generator1": hung.update_weights.remote(None)}, "weight sync to version 3")
        assert time.monotonic() - t0 < 30
    finally:
        ray.shutdown()


@pytest.fixture
def ray_local():
    import ray

    ray.init(num_cpus=1, include_dashboard=False)
    yield ray
    ray.shutdown()


def test_the_weight_group_is_aborted_on_every_member_before_it_is_formed_again(ray_local):
    """Recovery forms a new group; each member's old one is aborted first (under NCCL a member
    still inside a broadcast whose peer died would stall until the watchdog). Fakes of the actors
    record what the pipeline asks of them, in the order it arrives."""
    ray = ray_local
    from jury.cluster.learner_group import LearnerGroup
    from jury.cluster.pipeline import Pipeline

    @ray.remote(num_cpus=0)
    class Log:
        def __init__(self):
            self.events = []

        def add(self, event):
            self.events.append(event)

        def get(self):
            return self.events

    @ray.remote(num_cpus=0)
    class Learner:
        def __init__(self, log):
            self.log = log

        def init_weight_sender(self, host, world, backend, timeout):
            ray.get(self.log.add.remote(("learner", "init", world)))
            return "127.0.0.1", 1

        def connect_weights(self):
            return ray.get(self.log.add.remote(("learner", "connect"))) is None

        def abort_weights(self):
            return ray.get(self.log.add.remote(("learner", "abort"))) is None

    @ray.remote(num_cpus=0)
    class Generator:
        def __init__(self, log, name):
            self.log, self.name = log, name

        def init_weight_group(self, host, port, world, first_rank, backend, timeout):
            ray.get(self.log.add.remote((self.name, "join", first_rank)))
            return [{"rank": first_rank, "dtype": "torch.bfloat16"}]

        def abort_weight_group(self):
            ray.get(self.log.add.remote((self.name, "abort")))
            return [True]

    log = Log.remote()
    pipe = Pipeline(load_config(None, ["num_generators=2", "progress=false"]), "unused")
    pipe.learner = LearnerGroup([Learner.remote(log)])
    pipe.generators = [Generator.remote(log, f"generator{i}") for i in range(2)]
    pipe._init_weight_plane()
    first = ray.get(log.get.remote())
    assert not [e for e in first if e[1] == "abort"], first  # nothing to abort the first time
    assert pipe.weight_dtype == "torch.bfloat16"  # what the engines hold: the learner sends in it
    pipe._init_weight_plane()
    again = ray.get(log.get.remote())[len(first):]
    aborts = {e[0] for e in again[:3]}
    assert aborts == {"learner", "generator0", "generator1"} and all(e[1] == "abort" for e in again[:3]), again
    assert again[3] == ("learner", "init", 3) and {e[:2] for e in again[4:]} == {
        ("learner", "connect"), ("generator0", "join"), ("generator1", "join")}, again


def test_a_generator_that_dies_during_a_sync_is_reported_at_once(ray_local):
    """Not after the learner's bounded wait for it: recovery starts while the learner still waits."""
    ray = ray_local
    import os

    from jury.cluster.pipeline import Pipeline

    @ray.remote(num_cpus=0, max_restarts=0)
    class Dies:
        def update_weights(self, update):
            os._exit(1)

    @ray.remote(num_cpus=0)
    class Waits:
        def broadcast(self, update):
            time.sleep(25)

    pipe = Pipeline(load_config(None, ["sync_timeout_s=30", "progress=false"]), "unused")
    waits = Waits.remote()
    t0 = time.monotonic()
    with pytest.raises(ray.exceptions.RayActorError):
        pipe._wait_all({"generator0": Dies.remote().update_weights.remote(None),
                        "learner0": waits.broadcast.remote(None)}, "weight sync to version 1")
    assert time.monotonic() - t0 < 15


def test_a_generator_whose_engine_died_ends_the_learners_wait_at_once(ray_local):
    """The engine's death fails its generator's call (RayTaskError); the driver then sets the
    sync's abort key in the weight group's store, and the learner, waiting for that generator to
    be ready for the first bucket, returns in well under its 60 s bound (sync_timeout_s: the
    fault runs waited it out, 300 s per run)."""
    ray = ray_local
    from jury.cluster.pipeline import Pipeline
    from jury.protocol.messages import WeightUpdate

    @ray.remote(num_cpus=0)
    class Sender:
        def __init__(self):
            import torch

            from jury.learner.weight_sender import WeightSender

            self.sender, self.weights = WeightSender("127.0.0.1", 2, "gloo", timeout_s=60), {"w": torch.ones(2)}

        def where(self):
            return self.sender.host, self.sender.port

        def broadcast(self, update):
            return self.sender.broadcast(update, self.weights)

    @ray.remote(num_cpus=0)
    class EngineDied:
        def update_weights(self, update):
            time.sleep(1)  # the learner is waiting by now
            raise RuntimeError("the vLLM engine core is dead (at the start of a weight sync)")

    pipe = Pipeline(load_config(None, ["sync_timeout_s=60", "progress=false"]), "unused")
    sender = Sender.remote()
    pipe.weight_store = ray.get(sender.where.remote())
    update = WeightUpdate(version=4, names=["w"], dtypes=["torch.float32"], shapes=[[2]], buckets=[[0]])
    learner = sender.broadcast.remote(update)
    t0 = time.monotonic()
    with pytest.raises(ray.exceptions.RayTaskError, match="engine core is dead"):
        pipe._wait_all({"generator0": EngineDied.remote().update_weights.remote(update), "learner0": learner},
                       "weight sync to version 4", on_fail=lambda: pipe._abort_sync(4))
    assert time.monotonic() - t0 < 20
    with pytest.raises(ray.exceptions.RayTaskError, match="weight sync to version 4: aborted by the driver"):
        ray.get(learner, timeout=10)
