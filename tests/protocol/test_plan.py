"""The run plan: the config resolved once (protocol/plan.py)."""
import logging

import pytest

from jury.protocol.config import Fault
from jury.protocol.config_load import load_config
from jury.protocol.plan import Sampling, ServerSpec, make_plan

LEAN = ["verifier.gate=lean"]


def test_the_window_is_max_staleness_plus_one_or_the_largest_forced_k_plus_one():
    assert make_plan(load_config(None, ["max_staleness=0"])).window == 1
    assert make_plan(load_config(None, ["max_staleness=3"])).window == 4
    plan = make_plan(load_config(None, ["max_staleness=0", "forced_staleness={0: 1, 4: 3}"]))
    assert plan.window == 5 and plan.forced == {0: 0.25, 4: 0.75}
    assert make_plan(load_config(None)).forced == {}


def test_faults_are_typed_once():
    plan = make_plan(load_config(None, ["num_verifiers=2", "faults=kill:verifier1@3,slow:generator0@2:5"]))
    assert plan.faults == (Fault("kill", "verifier", 1, 3), Fault("slow", "generator", 0, 2, 5.0))
    assert [f.target for f in plan.faults] == ["verifier1", "generator0"]


def test_the_learner_gets_the_generators_sampling():
    plan = make_plan(load_config(None, ["generator.temperature=0.7", "generator.max_new_tokens=40"]))
    assert plan.sampling == Sampling(temperature=0.7, top_p=1.0, max_new_tokens=40)


def test_each_lean_role_gets_a_server_as_long_as_its_prompt_and_answer():
    """The bug this plan fixed: verifier.tinyv_max_model_len (4096) sized every server, so the
    gate's roles, which generate up to 32768 tokens, got servers of 4096."""
    plan = make_plan(load_config(None, LEAN))
    lean = load_config(None).lean
    assert [s.roles for s in plan.servers] == [("formalizer",), ("checker",), ("prover",)]
    assert plan.server_of("formalizer") == ServerSpec(lean.formalizer_model, 4096 + 32768, 0.0, 0.9, ("formalizer",))
    assert {s.max_model_len for s in plan.servers} == {4096 + 32768}
    short = make_plan(load_config(None, LEAN + ["lean.prover_max_tokens=1000", "verifier.llm_prompt_tokens=2000"]))
    assert short.server_of("prover").max_model_len == 3000 and short.server_of("checker").max_model_len == 34768


def test_a_server_shared_by_roles_takes_the_largest():
    cfg = load_config(None, LEAN + ["verifier.reward=tinyv", "verifier.tinyv_model=/m/a", "lean.formalizer_model=/m/a",
                                    "lean.checker_model=/m/a", "lean.prover_model=/m/b", "lean.formalizer_max_tokens=100",
                                    "lean.checker_max_tokens=300", "verifier.llm_prompt_tokens=1000"])
    plan = make_plan(cfg)
    assert [(s.model, s.roles, s.max_model_len) for s in plan.servers] == [
        ("/m/a", ("tinyv", "formalizer", "checker"), 1300), ("/m/b", ("prover",), 1000 + 32768)]
    assert plan.server_of("tinyv") is plan.server_of("checker")


def test_a_server_longer_than_its_model_is_capped_with_a_warning(caplog):
    cfg = load_config(None, LEAN + ["verifier.reward=tinyv"])  # tinyv_model: tiny (4096 positions)
    with caplog.at_level(logging.WARNING):
        plan = make_plan(cfg, positions=lambda model: 4096 if model == "tiny" else None)
    assert plan.server_of("tinyv").max_model_len == 4096
    assert plan.server_of("prover").max_model_len == 4096 + 32768  # unknown positions: not capped
    assert "LLM server for tiny (tinyv)" in caplog.text and "4104" in caplog.text


def test_roles_resolve_their_models_and_gpus_come_from_the_config():
    cfg = load_config(None, ["derl.enabled=true", "verifier.llm_num_gpus=1", "verifier.llm_gpu_memory_utilization=0.5",
                             "derl.plan_max_tokens=300", "derl.judge_max_tokens=200"])
    plan = make_plan(cfg, resolve=lambda model: f"/cache/{model}")
    assert plan.policy_model == "/cache/tiny"
    assert plan.server_of("derl") == ServerSpec("/cache/tiny", 4096 + 300, 1.0, 0.5, ("derl",))
    assert make_plan(load_config(None)).servers == ()  # no LLM role, no server
    with pytest.raises(KeyError):
        make_plan(load_config(None)).server_of("tinyv")


def test_the_baselines_roles_get_their_servers_and_an_endpoint_model_is_only_asked():
    """llm_judge, llm_kd and coreward (rewrites from an LLM) each ask one role; a model listed in
    verifier.llm_endpoints is neither resolved nor sized to its positions: the plan names its URL."""
    resolve = lambda model: f"/cache/{model}"  # noqa: E731
    judge = make_plan(load_config(None, ["verifier.reward=llm_judge", "verifier.judge_max_tokens=100",
                                         "verifier.llm_prompt_tokens=1000"]), resolve=resolve)
    assert judge.server_of("judge") == ServerSpec("/cache/tiny", 1100, 0.0, 0.9, ("judge",))
    kd = make_plan(load_config(None, ["verifier.reward=llm_kd", "verifier.teacher_model=tiny-chain"]), resolve=resolve)
    assert kd.server_of("teacher").model == "/cache/tiny-chain" and kd.server_of("teacher").max_model_len == 4096 + 3072
    assert make_plan(load_config(None, ["verifier.reward=coreward", "verifier.rewrites=llm"])).server_of(
        "rewriter").roles == ("rewriter",)
    url = "http://127.0.0.1:8000/v1/chat/completions"
    remote = make_plan(load_config(None, ["verifier.reward=llm_kd", "verifier.teacher_model=Qwen/Qwen2.5-72B-Instruct",
                                          f"verifier.llm_endpoints={{Qwen/Qwen2.5-72B-Instruct: '{url}'}}"]),
                       resolve=lambda model: model if model == "tiny" else pytest.fail(f"{model} must not be resolved"),
                       positions=lambda model: pytest.fail(f"{model} has no positions here"))
    assert remote.server_of("teacher") == ServerSpec("Qwen/Qwen2.5-72B-Instruct", 4096 + 3072, 0.0, 0.0, ("teacher",),
                                                     url=url)


def test_engines_start_after_the_learner_only_where_roles_may_share_a_gpu():
    import pathlib

    configs = pathlib.Path(__file__).resolve().parents[2] / "configs"
    assert make_plan(load_config(str(configs / "smoke-gpu.yaml"))).engines_after_learner  # half a GPU each
    assert not make_plan(load_config(str(configs / "qwen3-1.7b-jury.yaml"))).engines_after_learner  # whole GPUs
    assert not make_plan(load_config(None)).engines_after_learner  # the CPU: no GPU to share
    # an LLM server on a quarter of a GPU shares it too, whatever the learner has
    shared = ["verifier.reward=tinyv", "verifier.llm_num_gpus=0.25", "verifier.llm_gpu_memory_utilization=0.2",
              "learner.num_gpus=1", "generator.num_gpus=1"]
    assert make_plan(load_config(None, shared)).engines_after_learner
    assert not make_plan(load_config(None, shared[:1] + ["learner.num_gpus=1"])).engines_after_learner
