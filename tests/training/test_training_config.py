"""train.yaml and its groups: composition, the smoke-run trap, typed settings, launch comments."""

from __future__ import annotations

from pathlib import Path

import pytest

from litseg.training.config import (
    ConfigError,
    TrainConfig,
    from_dict,
    train_config_from,
)
from tests.training_helpers import CONF, EXPERIMENTS, compose_train

SMOKE = ["debug=smoke"]


def test_experiments_exist_for_every_paper_variant():
    assert {"sft", "grpo", "litseg_lite", "no_grpo", "no_finetune", "no_stage1", "no_stage2",
            "no_turning_points", "no_theory"} <= set(EXPERIMENTS)


def test_experiment_is_not_in_the_defaults_list():
    text = (CONF / "train.yaml").read_text()
    defaults = text.split("defaults:", 1)[1].split("\n\n", 1)[0]
    assert "experiment" not in defaults
    # debug comes after _self_, so smoke values override the primary config.
    assert defaults.index("_self_") < defaults.index("debug")


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_smoke_overrides_survive_every_experiment(experiment):
    # The Hydra trap: +experiment=X is appended after the defaults list; smoke settings must win anyway.
    for order in ([f"+experiment={experiment}", *SMOKE], [*SMOKE, f"+experiment={experiment}"]):
        cfg = compose_train(order)
        assert cfg.experiment_name == experiment
        assert cfg.model.path == "tiny"
        assert cfg.data.synthetic is True and cfg.data.max_examples == 2
        assert cfg.stage.sft.trl.max_steps == 2 and cfg.stage.grpo.trl.max_steps == 2
        assert cfg.stage.grpo.trl.num_generations == 2 and cfg.stage.grpo.max_completion_length == 16
        assert cfg.judge_llm.backend == "scripted"
        assert cfg.eval.max_examples == 1
        tc = train_config_from(cfg)
        assert isinstance(tc, TrainConfig)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_command_line_values_win_over_experiment_and_smoke(experiment):
    cfg = compose_train([f"+experiment={experiment}", *SMOKE, "stage.grpo.trl.max_steps=5", "model=smollm2_135m",
                         "judge_llm=embedded", "peft.r=2", "logger=wandb", "data.max_examples=3"])
    assert cfg.stage.grpo.trl.max_steps == 5
    assert cfg.model.path == "embedded"
    assert cfg.judge_llm.backend == "embedded"
    assert cfg.peft.r == 2
    assert cfg.logger.backend == "wandb"
    assert cfg.data.max_examples == 3


@pytest.mark.parametrize("experiment,stages,schema", [
    ("sft", ["sft"], "lite"), ("grpo", ["grpo"], "lite"), ("litseg_lite", ["sft", "grpo"], "lite"),
    ("no_grpo", ["sft"], "lite"), ("no_finetune", [], "lite"), ("no_stage1", [], "lite_no_step1"),
    ("no_stage2", [], "lite_no_step2"), ("no_turning_points", [], "lite_no_turning_points"),
    ("no_theory", [], "lite_no_theory"),
])
def test_experiments_pick_stage_and_prompt(experiment, stages, schema):
    tc = train_config_from(compose_train([f"+experiment={experiment}"]))
    assert tc.stage.run == stages
    assert tc.prompt.schema == schema
    assert tc.judge is not None and tc.judge.name == "judge"


def test_defaults_are_the_papers_objective(tmp_path):
    from litseg.training.builders import grpo_config

    tc = train_config_from(compose_train(["+experiment=grpo"]))
    g, _ = grpo_config(tc, tmp_path, run_name="t", report_to=[], reward_weights=[1.0, 1.0], longest_reference=100)
    # TRL's defaults and conf/stage/common.yaml together make the DAPO objective.
    assert g.loss_type == "dapo" and g.beta == 0.0 and g.mask_truncated_completions
    assert g.epsilon_high > g.epsilon
    assert tc.stage.grpo.max_completion_length == "auto"
    assert set(tc.rewards) == {"format", "judge"}
    assert tc.peft.enabled and g.learning_rate == 1e-5  # a LoRA rate (docs/training.md)
    # No model named: the embedded one it stands for is refused unless a recipe accepts it.
    assert tc.model.path == "embedded" and not tc.model.named


def test_unknown_and_mistyped_settings_are_rejected():
    cfg = compose_train(SMOKE)
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(cfg, resolve=True)
    data["stage"]["sft"]["learning_rat"] = 1.0
    with pytest.raises(ConfigError, match="stage.sft.learning_rat"):
        train_config_from(data)
    data["stage"]["sft"].pop("learning_rat")
    data["stage"]["grpo"]["completion_length_cap"] = "long"
    with pytest.raises(ConfigError, match="stage.grpo.completion_length_cap"):
        train_config_from(data)
    data["stage"]["grpo"]["completion_length_cap"] = 4096
    data["stage"]["run"] = ["sft", "dpo"]
    with pytest.raises(ConfigError, match="dpo"):
        train_config_from(data)


def test_from_dict_coerces_yaml_numbers():
    from litseg.training.config import GRPOSettings

    s = from_dict(GRPOSettings, {"trl": {}, "max_completion_length": "auto", "completion_length_margin": 2,
                                 "completion_length_cap": 10, "use_vllm": False, "init_adapter": None})
    assert s.completion_length_margin == 2.0 and isinstance(s.completion_length_margin, float)


def test_trl_settings_are_checked_against_trl_with_their_dotted_path():
    from litseg.training.builders import trl_arguments

    assert trl_arguments("sft", {"learning_rate": 1}) == {"learning_rate": 1.0}
    with pytest.raises(ConfigError, match=r"^stage\.sft\.trl\.learnig_rate: unknown TRL SFTConfig field; "
                                          r"did you mean stage\.sft\.trl\.learning_rate\?$"):
        trl_arguments("sft", {"learnig_rate": 1e-4})
    with pytest.raises(ConfigError, match=r"^stage\.grpo\.trl\.num_generations: expected an integer"):
        trl_arguments("grpo", {"num_generations": "eight"})
    with pytest.raises(ConfigError, match=r"^stage\.grpo\.trl\.seed: set by litseg from seed"):
        trl_arguments("grpo", {"seed": 3})


def _configs() -> list[Path]:
    groups = ["model", "peft", "stage", "rewards", "logger", "experiment", "debug", "sweep", "judge_llm",
              "accelerate"]
    return [CONF / "train.yaml", *[p for g in groups for p in sorted((CONF / g).glob("*.yaml"))]]


@pytest.mark.parametrize("path", _configs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_config_starts_with_how_to_launch_it(path):
    lines = path.read_text().splitlines()
    header = []
    for line in lines[1:] if lines[0].startswith("# @package") else lines:
        if not line.startswith("#"):
            break
        header.append(line)
    assert header, f"{path} does not start with a comment"
    assert any("train.py" in line or "accelerate launch" in line for line in header), \
        f"{path}: the opening comment shows no launch command"


def test_sweeps_compose():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        grid = compose("train", overrides=["+sweep=ablations"], return_hydra_config=True)
        params = grid.hydra.sweeper.params
        assert set(str(params["+experiment"]).split(",")) >= {"litseg_lite", "no_grpo", "no_finetune", "no_theory"}
        assert grid.logger.group == "ablations"
        lr = compose("train", overrides=["+experiment=grpo", "+sweep=grpo_grid"], return_hydra_config=True)
        assert "stage.grpo.trl.learning_rate" in lr.hydra.sweeper.params


def test_optuna_sweep_composes():
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        optuna = compose("train", overrides=["+experiment=grpo", "+sweep=optuna"], return_hydra_config=True)
    assert "optuna" in optuna.hydra.sweeper._target_.lower()
    assert optuna.hydra.sweeper.direction == "maximize"
    assert "stage.grpo.trl.learning_rate" in optuna.hydra.sweeper.params


def test_train_yaml_settings_and_their_dataclass_defaults_agree():
    """data, eval and output live in train.yaml itself (no group): their dataclass defaults must
    not drift from it (the YAML is where a user reads them)."""
    import dataclasses

    from litseg.training.config import DataConfig, EvalConfig, OutputConfig, TrainConfig, train_config_from
    from tests.training_helpers import compose_train

    composed = train_config_from(compose_train([]))
    drift = [f"{section}.{f.name}" for section, cls in (("data", DataConfig), ("eval", EvalConfig),
                                                       ("output", OutputConfig))
             for f in dataclasses.fields(cls) if getattr(cls(), f.name) != getattr(getattr(composed, section), f.name)]
    top = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    drift += [f for f in ("experiment_name", "seed") if top[f] != getattr(composed, f)]
    assert not drift
