"""benchmarks/engine_layout.py: what it reads off a finished run, and the arguments it refuses. The
runs themselves are whole `jury train`s (a benchmark, not a test)."""
import json
import re
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import engine_layout  # noqa: E402


def _run(tmp_path, inline, forked=0):
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / "summary.yaml").write_text(f"startup_s: 30.5\ngenerator0/engine_inline: {inline}\n"
                                      f"generator0/engine_forked: {forked}\n")
    with open(run / "metrics.jsonl", "w") as f:
        for step in range(6):  # a step every 0.5 s, 100 tokens each; the learner 0.1 s + 0.02 s a step
            f.write(json.dumps({"step": step, "time_s": 2.0 + 0.5 * step, "learner/tokens": 100.0,
                                "learner/forward_backward_s": 0.1 * (step + 1), "learner/wait_s": 0.02}) + "\n")
        f.write(json.dumps({"eval/pass_rate": 0.5}) + "\n")  # a row of another kind: not a step
    return run


def test_the_figures_count_the_steps_after_the_warm_up(tmp_path):
    m = engine_layout.measure(_run(tmp_path, 1), warmup=2)
    # timed: steps 3, 4, 5 after step 2 ends at 3.0 s; the last ends at 4.5 s: 300 tokens in 1.5 s
    assert m == {"startup_s": 30.5, "tokens_per_s": pytest.approx(200.0), "forward_backward_s": pytest.approx(0.5),
                 "wait_s": pytest.approx(0.02), "engine_inline": True, "engine_forked": False}
    assert engine_layout.measure(_run(tmp_path / "b", 0), warmup=0)["engine_inline"] is False
    assert engine_layout.measure(_run(tmp_path / "d", 1, forked=1), warmup=0)["engine_forked"] is True
    with pytest.raises(ValueError, match="6 steps in metrics.jsonl, fewer than --warmup"):
        engine_layout.measure(_run(tmp_path / "c", 1), warmup=5)


@pytest.mark.parametrize("argv, says", [
    (["--steps", "0"], "--steps 0: at least 1"),
    (["--steps", "10", "--warmup", "9"], "--warmup 9: from 0 to --steps - 2"),
    (["--layouts", "vllm,mp"], r"--layouts: \['mp'\] not among vllm, spawn, inline"),
    (["learner.nosuch=1"], "settings: .*nosuch"),
])
def test_bad_arguments_are_refused_by_name(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        engine_layout.parse_args(argv)
    assert e.value.code == 2
    assert re.search(says, capsys.readouterr().err)
