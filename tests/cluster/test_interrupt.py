"""What schedulers and broken files do to a real run (`jury train` in a process of its own):
SIGTERM stops it as Ctrl-C does, saying where to resume; a checkpoint whose weights are NaN
(bytes the hash vouches for) never trains: the run stops before a step, naming the parameter."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import RunProcesses

pytestmark = pytest.mark.slow


def _jury(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "jury.experiments.cli", "train", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_sigterm_then_a_nan_checkpoint(tiny_model_path, tmp_path):
    import torch

    from jury.learner.checkpoint import commit

    run = tmp_path / "run"
    with RunProcesses() as started:  # every process the run starts (Ray's, the engines, the reapers)
        proc = _jury(f"run_dir={run}", "steps=200", "checkpoint_every=1", "batch_groups=2",
                     "generator.group_size=2", "progress=false")
        deadline = time.time() + 600
        while not (run / "latest_checkpoint").exists():
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
            time.sleep(1)
        time.sleep(2)  # a step or two more, so that SIGTERM lands mid-run
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("jury train: interrupted by SIGTERM; every actor was stopped. Resume from step "), last
    assert f"jury train --resume {run}" in last
    left = started.left(bound_s=60)
    assert not left, f"processes of the run left after SIGTERM: {left}"

    # the learner's state in the checkpoint (what --resume loads) poisoned, its manifest rehashed
    path = json.loads((run / "latest_checkpoint").read_text())["path"]
    state = json.loads(open(os.path.join(path, "state.json")).read())
    files = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(path, "engine")) for f in fs
             if f.endswith("model_states.pt")]
    sd = torch.load(files[0], weights_only=False)
    module = sd["module"]
    name = next(k for k, v in module.items() if v.is_floating_point())
    module[name].fill_(float("nan"))
    torch.save(sd, files[0])
    os.replace(path, path + ".partial-src")
    staging = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.partial")
    os.replace(path + ".partial-src", staging)
    os.remove(os.path.join(staging, "manifest.json"))  # commit writes a new one
    commit(path, state)  # hashes the poisoned bytes: only the learner's own check can stop it now

    proc = _jury("--resume", str(run), f"steps={state['version'] + 8}")
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"jury train: learner: the checkpoint {path}/engine holds non-finite weights ({name})"), last
    rows = [json.loads(line) for line in open(run / "metrics.jsonl")]
    assert len(rows) == state["version"]  # nothing trained after the checkpoint
