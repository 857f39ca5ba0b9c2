"""Config: defaults load, overrides apply, bad keys and values are refused by name."""
import pytest

from jury.protocol.config import ConfigError
from jury.protocol.config_load import load_config


def test_defaults_and_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("steps: 5\ngenerator:\n  group_size: 4\n")
    cfg = load_config(str(f), ["generator.temperature=0.7", "verifier.reward=majority_vote", "learner.lr=1e-5"])
    assert (cfg.steps, cfg.generator.group_size, cfg.generator.temperature) == (5, 4, 0.7)
    assert cfg.verifier.reward == "majority_vote" and cfg.learner.lr == 1e-5
    assert cfg.batch_groups == 8  # untouched defaults stay


@pytest.mark.parametrize("overrides, field", [
    (["stepz=3"], "stepz"),
    (["generator.groupsize=3"], "generator.groupsize"),
    (["steps=three"], "steps"),
    (["steps=0"], "steps"),
    (["learner.advantage=ppo"], "learner.advantage"),
    (["verifier.check_timeout_s=0"], "check_timeout_s"),
    (["max_staleness=-1"], "max_staleness"),
    (["max_staleness=0", "sync_every=3"], "max_staleness"),
    (["max_prompt_tokens=250"], "max_prompt_tokens"),
    (["generator=5"], "generator"),
    (["novalue"], "key=value"),
    # values nobody here wrote, tried from outside: each was accepted and broke the run later
    (["learner.micro_batch=0"], r"learner\.micro_batch must be >= 1, got 0"),
    (["generator.top_p=2"], r"generator\.top_p must be in \(0, 1\], got 2"),
    (["verifier.pool_workers=0"], r"verifier\.pool_workers must be >= 1"),
    (["learner.lr=-1"], r"learner\.lr must be > 0, got -1"),
    (["generator.temperature=-1"], r"generator\.temperature must be > 0"),
    (["learner.zero_stage=7"], r"learner\.zero_stage must be 0, 1, 2 or 3, got 7"),
    (["group_timeout_s=-5"], r"group_timeout_s must be > 0, got -5"),
    (["weight_backend=nccl"], r"weight_backend=nccl runs between GPUs only"),
    # GPU placements that start, then fail on the GPU (or take another role's memory)
    (["learner.dtype=bfloat16"], r"learner\.zero_stage must be 1, 2 or 3 with dtype bfloat16 .*ZeRO-1 can"),
    (["generator.num_gpus=0.5"], r"generator\.gpu_memory_utilization must be <= num_gpus \(0\.5\) when the role "
                                 r"has a fraction of a GPU"),
    (["verifier.llm_num_gpus=0.25", "verifier.llm_gpu_memory_utilization=0.5"],
     r"verifier\.llm_gpu_memory_utilization must be <= llm_num_gpus \(0\.25\)"),
    (["verifier.llm_num_gpus=1.5"], r"verifier\.llm_num_gpus must be <= 1 or a whole number"),
    (["weight_backend=nccl", "learner.num_gpus=1", "num_generators=2", "generator.num_gpus=0.5",
      "generator.gpu_memory_utilization=0.4"], r"num_generators=2 needs generator\.num_gpus >= 1 \(got 0\.5\).*NCCL"),
    (["generator.min_new_tokens=20"], r"generator\.min_new_tokens must be in \[0, max_new_tokens\]"),
    (["learner.clip_low=1.5"], r"learner\.clip_low"),
    (["sync_timeout_s=0"], r"sync_timeout_s must be > 0"),
    (["model="], r"model must be"),
    (["faults=kill_engine:verifier0@1"], r"kill_engine for a generator"),
    (["faults=freeze:learner0@1"], r"action kill\|freeze\|slow\|raise"),  # a learner rank can only be killed
    (["data.bad_rows=maybe"], "data.bad_rows"),
    (["data.format=csv"], "data.format"),
    (["data.chat_template=sometimes"], "data.chat_template"),
    (["data.chat_template=1"], "data.chat_template"),
    (["data.epochs=-1"], "data.epochs"),
    (["data.shuffle_buffer=0"], "data.shuffle_buffer"),
    (["data.answer_key="], "data.answer_key"),
    (["data.answer_key=problem"], "data.problem_key, answer_key, id_key and rewrite_key must differ"),
    (["data.system_prompt=Be brief.", "data.chat_template=off"], "data.system_prompt needs a chat template"),
    (["data.problem_key=3"], "data.problem_key must be str"),
    (["verifier.reward=judge"], "verifier.reward must be one of"),
    (["verifier.unparsable=floor"], r"verifier\.unparsable must be one of \['cap', 'residual'\]"),
    (["verifier.judge_max_tokens=0"], r"verifier\.judge_max_tokens must be >= 1"),
    (["verifier.teacher_temperature=-1"], r"verifier\.teacher_temperature must be >= 0"),
    (["verifier.rewrites=both"], "verifier.rewrites"),
    (["verifier.llm_endpoints={tiny: 'http://h:8000/v1/models'}"], r"verifier\.llm_endpoints must be model -> an http"),
    (["verifier.llm_endpoints={tiny: 3}"], r"verifier\.llm_endpoints must map names to text"),
    (["verifier.reward=coreward"], "verifier.rewrites=data needs data.rewrite_key"),
    (["verifier.reward=coreward", "data.rewrite_key=rewrite"], "the built-in 'synthetic' task has no rewrites"),
    (["data.rewrite_key=rewrite"], "data.rewrite_key .* is read only under verifier.reward=coreward"),
    (["verifier.reward=coreward", "verifier.rewrites=llm", "derl.enabled=true"], "derl.enabled with verifier.reward=coreward"),
    (["learner.correction=tis"], "learner.correction"),
    (["learner.correction=tis_token", "learner.is_cap=0.5"], r"learner\.is_cap must be >= 1 .*, got 0.5"),
    (["learner.correction=mask_token", "learner.mask_low=1.5"], r"learner\.mask_low must be in \[0, 1\]"),
    (["learner.correction=mask_token", "learner.mask_high=0.9"], r"learner\.mask_high must be >= 1"),
    (["learner.is_cap=3"], r"learner\.is_cap must be unset for correction=none"),
    (["learner.correction=mask_seq", "learner.is_cap=3"], r"learner\.is_cap must be unset .* it has a band"),
    (["learner.correction=decoupled", "learner.mask_high=3"], r"learner\.mask_low must be unset .* it has a cap"),
    (["learner.dual_clip=1"], r"learner\.dual_clip must be > 1"),
    (["learner.loss_agg=seq-mean"], r"learner\.loss_agg must be one of"),
    (["learner.tis_cap=1.5", "learner.correction=tis_seq"], r"learner\.tis_cap is the old spelling"),
    # accepted before, and each broke the run later or trained on nothing without a word
    (["generator.group_size=1"], r"generator\.group_size must be >= 2 \(a group of one sample has advantage 0"),
    (["generator.temperature=0"], r"generator\.temperature must be > 0 .*greedy is for eval"),
    (["generator.top_p=0"], r"generator\.top_p must be in \(0, 1\]"),
    (["learner.correction=mask_seq", "learner.mask_low=1", "learner.mask_high=1"],
     r"learner\.mask_high must be > mask_low"),
    (["seed=4294967295", "num_generators=2"], r"seed must be in \[0, 2\*\*32 - num_generators\] \(4294967294\)"),
    (["seed=-1"], r"seed must be in \[0, 2\*\*32"),
    (["resend_after_s=1200", "group_timeout_s=600"], r"resend_after_s must be < group_timeout_s \(600\)"),
    (["batch_groups=1", "generator.group_size=2", "learner.minibatches=3"],
     r"learner\.minibatches \(3\) exceeds a rank's samples per step .* = 2\)"),
    (["batch_groups=2", "generator.group_size=2", "learner.num_ranks=2", "learner.minibatches=3"],
     r"learner\.minibatches \(3\) exceeds .* = 2\)"),
    # inf and nan, in every section: `x > 0` passes inf, `x < 0` passes nan
    (["verifier.check_timeout_s=.inf"], r"verifier\.check_timeout_s must be a finite number, got inf"),
    (["sync_timeout_s=inf"], r"sync_timeout_s must be a finite number, got inf"),
    (["learner.lr=.inf"], r"learner\.lr must be a finite number"),
    (["learner.lr=nan"], r"learner\.lr must be a finite number, got nan"),
    (["lean.proof_timeout_s=.nan"], r"lean\.proof_timeout_s must be a finite number"),
    (["lean.lean.start_timeout_s=.nan"], r"lean\.lean\.start_timeout_s must be a finite number"),
    (["derl.plan_temperature=.nan"], r"derl\.plan_temperature must be a finite number"),
    # continuous admission: no batch of indices for forced staleness to schedule (refills combine with it)
    (["admission=continuous", "forced_staleness=2"], r"admission=continuous with forced_staleness"),
    (["admission=continuous", "dynamic_sampling=true", "max_refills=0"], r"max_refills must be >= 1"),
    (["admission=rolling"], r"admission"),
    # refills draw past the passes data.epochs allows: the stream ran dry near the run's end (outside audit)
    (["data.epochs=1", "dynamic_sampling=true"], r"data\.epochs=1 with dynamic_sampling: .* bound the run with `steps`"),
    (["data.epochs=2", "admission=continuous"], r"data\.epochs=2 with admission=continuous with over_budget=drop"),
    (["over_budget=keep"], r"over_budget"),
    # YAML that does not parse, or that would quietly drop part of a value
    (["generator.resources={a:"], r"override 'generator\.resources=\{a:': the value is not valid YAML"),
    (["data.system_prompt=You are solver #1 of the team"], r"YAML reads ' #\.\.\.' as a comment .* quote the value"),
    (["run_dir=runs/x #2"], r"run_dir=\"runs/x #2\""),
])
def test_bad_values_are_refused_naming_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        load_config(None, overrides)


def test_old_tis_cap_still_loads_as_the_correction_it_meant(tmp_path):
    # run folders written before learner.correction hold tis_cap (0: none, X > 0: the behaviour weight
    # truncated at X, what is now tis_token)
    old = tmp_path / "config.yaml"
    old.write_text("learner:\n  tis_cap: 0.0\n")
    assert load_config(str(old)).learner.correction == "none"
    cfg = load_config(str(old), ["learner.tis_cap=1.5"]).learner
    assert (cfg.correction, cfg.is_cap, cfg.recompute_proximal) == ("tis_token", 1.5, True)
    assert not load_config(None).learner.recompute_proximal  # the default corrects nothing


def test_data_section_reads_on_and_off_as_yaml_does(tmp_path):
    assert load_config(None, []).data.chat_template == "auto"
    assert load_config(None, ["data.chat_template=on"]).data.chat_template is True
    assert load_config(None, ["data.chat_template=off"]).data.chat_template is False
    f = tmp_path / "c.yaml"
    f.write_text("dataset: d.parquet\ndata:\n  answer_key: solution\n  chat_template: true\n  epochs: 6\n")
    cfg = load_config(str(f))
    assert (cfg.dataset, cfg.data.answer_key, cfg.data.chat_template, cfg.data.epochs) == ("d.parquet", "solution",
                                                                                            True, 6)


def test_values_with_a_hash_that_yaml_keeps(tmp_path):
    cfg = load_config(None, ['data.system_prompt="You are solver #1."', "data.chat_template=on", "run_dir=runs/x#2"])
    assert cfg.data.system_prompt == "You are solver #1." and cfg.run_dir == "runs/x#2"


def test_a_config_file_that_is_not_yaml(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("steps: 5\ngenerator:\n  group_size: [4\n")
    with pytest.raises(ConfigError, match=r"c\.yaml is not valid YAML"):
        load_config(str(f))


def test_bad_yaml_top_level(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(str(f))


def test_cli_refuses_a_bad_key_before_starting_anything(capsys):
    from jury.experiments.cli import main

    assert main(["train", "learner.nope=1"]) == 2
    assert "learner.nope" in capsys.readouterr().err


def test_forced_staleness_is_parsed_and_checked():
    from jury.protocol.plan import parse_staleness

    assert load_config(None, []).forced_staleness == {}
    assert load_config(None, ["forced_staleness=2"]).forced_staleness == {2: 1.0}
    cfg = load_config(None, ["forced_staleness={4: 3, 0: 1}"])
    assert parse_staleness(cfg.forced_staleness) == {0: 0.25, 4: 0.75}
    for bad in ("x", "-1", "{1: 0}", "{a: 1}", "{2: x}", "[1, 2]", "1.5", "{1: .inf, 2: 1}", "{1: .nan}"):
        with pytest.raises(ConfigError, match="forced_staleness"):
            load_config(None, [f"forced_staleness={bad}"])
    with pytest.raises(ConfigError, match="sync_every"):
        load_config(None, ["forced_staleness=2", "sync_every=2", "max_staleness=1"])


def test_tracking_lists_trackers_once_each():
    assert load_config(None, []).tracking == ()  # default: metrics.jsonl only, as before
    assert load_config(None, ["tracking=[tensorboard, wandb]"]).tracking == ("tensorboard", "wandb")
    assert load_config(None, ["tracking=wandb"]).tracking == ("wandb",)  # one name is a list of one
    cfg = load_config(None, ["tracking=[wandb]", "wandb.project=p", "wandb.entity=team", "wandb.mode=offline"])
    assert (cfg.wandb.project, cfg.wandb.entity, cfg.wandb.mode) == ("p", "team", "offline")
    assert load_config(None, []).wandb.mode == "auto"
    for bad, field in (("tracking=[tb]", "tracking"), ("tracking=[wandb, wandb]", "tracking"),
                       ("tracking=3", "tracking"), ("wandb.mode=cloud", "wandb.mode"),
                       ("wandb.project=", "project")):
        with pytest.raises(ConfigError, match=field):
            load_config(None, [bad])


def test_a_model_path_that_does_not_exist_is_refused_before_a_run_folder_is_made(tmp_path, capsys):
    from jury.experiments.cli import main

    run = tmp_path / "run"
    assert main(["train", f"model={tmp_path / 'nope'}", f"run_dir={run}"]) == 2
    assert f"model: {tmp_path / 'nope'} is not a Hugging Face model folder" in capsys.readouterr().err
    assert not run.exists()


def test_a_max_model_len_the_model_cannot_take_is_refused_before_a_run_folder_is_made(tmp_path, capsys):
    """vLLM refuses max_model_len above the model's positions, but only at engine start, after
    Ray is up; the preflight refuses it first (rope_scaling stretches the bound: not judged)."""
    import json

    from jury.cluster.driver import preflight
    from jury.experiments.cli import main

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 128}))
    run = tmp_path / "run"
    assert main(["train", f"model={model}", "max_model_len=256", f"run_dir={run}"]) == 2
    assert f"max_model_len (256) exceeds the 128 positions model {model} takes" in capsys.readouterr().err
    assert not run.exists()
    preflight(load_config(None, [f"model={model}", "max_model_len=128", "max_prompt_tokens=64",
                                 "generator.max_new_tokens=64"]))
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 128,
                                                   "rope_scaling": {"type": "yarn", "factor": 4.0}}))
    preflight(load_config(None, [f"model={model}", "max_model_len=256"]))
    with pytest.raises(ConfigError, match=r"max_model_len \(2048\) exceeds the 1024 positions model tiny-chain"):
        preflight(load_config(None, ["model=tiny-chain", "max_model_len=2048"]))
    with pytest.raises(ConfigError, match=r"exceeds the 4096 positions model tiny"):
        preflight(load_config(None, ["max_model_len=5000"]))


def test_overrides_after_options_reach_the_command(tmp_path, capsys):
    """Overrides before and after an option (`jury replay RUN --out X k=v`, `jury train k=v
    --config X k=v`) all reach the command; a stray option is still refused."""
    from jury.experiments.cli import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("steps: 3\n")
    for argv in (["train", "steps=2", "--config", str(cfg), "learner.nope=1"],
                 ["train", "--config", str(cfg), "steps=2", "learner.nope=1"]):
        assert main(argv) == 2  # the override got through to the config check
        assert "learner.nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--config", str(cfg), "steps=2", "--bogus"])
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_a_run_folder_records_its_config_version_and_reads_back_the_same(tmp_path):
    from jury.protocol.config_load import CONFIG_VERSION, dump_config, load_run_config

    cfg = load_config(None, ["steps=7", "learner.correction=tis_token"])
    (tmp_path / "config.yaml").write_text(dump_config(cfg))
    assert (tmp_path / "config.yaml").read_text().startswith(f"config_version: {CONFIG_VERSION}\n")
    assert load_run_config(str(tmp_path)) == cfg
    assert load_config(str(tmp_path / "config.yaml")) == cfg  # a run's config.yaml as --config


def test_an_old_run_folder_is_migrated_and_a_new_file_with_a_removed_key_is_refused(tmp_path):
    from jury.protocol.config_load import load_run_config

    # written before versions: verifier.tinyv_max_model_len sized the LLM servers, nothing trained
    (tmp_path / "config.yaml").write_text("steps: 3\nverifier:\n  tinyv_max_model_len: 2048\n")
    assert load_run_config(str(tmp_path)).steps == 3
    user = tmp_path / "mine.yaml"
    user.write_text("verifier:\n  tinyv_max_model_len: 2048\n")
    with pytest.raises(ConfigError, match=r"tinyv_max_model_len is gone: .*llm_prompt_tokens"):
        load_config(str(user))
    user.write_text("config_version: 99\n")
    with pytest.raises(ConfigError, match="config_version 99 is not one this jury-rl reads"):
        load_config(str(user))


@pytest.mark.parametrize("version", [None, 2])
def test_a_run_folder_from_before_the_methods_were_fixed_keeps_its_method(tmp_path, version):
    """decoupled was token TIS (min(w, is_cap)) and the aggregations had other names: a run folder
    written then resumes and replays under the method it ran, never under the new meaning."""
    from jury.protocol.config_load import load_run_config

    head = f"config_version: {version}\n" if version else ""
    (tmp_path / "config.yaml").write_text(head + "learner:\n  correction: decoupled\n  is_cap: 2.0\n  mask_low: 0.5\n"
                                          "  mask_high: 5.0\n  loss_agg: seq-mean\n")
    lc = load_run_config(str(tmp_path)).learner
    assert (lc.correction, lc.cap, lc.loss_agg) == ("tis_token", 2.0, "seq-mean-token-mean")
    (tmp_path / "config.yaml").write_text(head + "learner:\n  correction: mask_seq\n  is_cap: 2.0\n  mask_low: 0.5\n"
                                          "  mask_high: 5.0\n  loss_agg: drgrpo\n")
    lc = load_run_config(str(tmp_path)).learner
    assert (lc.correction, lc.band, lc.loss_agg) == ("mask_seq", (0.5, 5.0), "dr_grpo")
    # a config written now means AReaL's decoupled PPO
    assert load_config(None, ["learner.correction=decoupled"]).learner.cap == 5.0


def test_a_run_folder_from_before_the_unparsable_rule_resumes_with_the_rule_it_ran(tmp_path):
    from jury.protocol.config_load import dump_config, load_run_config

    # every field is recorded, so a folder without verifier.unparsable predates it: ResZero then
    # left unparsable samples in its residual set, and --resume or replay must keep doing so
    text = dump_config(load_config(None, ["steps=4"])).replace("  unparsable: cap\n", "")
    (tmp_path / "config.yaml").write_text(text)
    assert load_run_config(str(tmp_path)).verifier.unparsable == "residual"
    assert load_run_config(str(tmp_path), ["verifier.unparsable=cap"]).verifier.unparsable == "cap"
    assert load_config(None).verifier.unparsable == "cap"  # a new run gets the cap
