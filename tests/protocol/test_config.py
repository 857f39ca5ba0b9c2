"""Config: defaults load, overrides apply, bad keys and values are refused by name."""
import pytest

from jury.protocol.config import ConfigError, load_config


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
])
def test_bad_values_are_refused_naming_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        load_config(None, overrides)


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
    from jury.protocol.config import parse_staleness

    assert load_config(None, []).forced_staleness == {}
    assert load_config(None, ["forced_staleness=2"]).forced_staleness == {2: 1.0}
    cfg = load_config(None, ["forced_staleness={4: 3, 0: 1}"])
    assert parse_staleness(cfg.forced_staleness) == {0: 0.25, 4: 0.75}
    for bad in ("x", "-1", "{1: 0}", "{a: 1}", "{2: x}", "[1, 2]", "1.5"):
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
