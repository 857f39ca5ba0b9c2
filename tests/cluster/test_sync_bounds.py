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
