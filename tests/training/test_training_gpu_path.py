"""What the GPU path refuses, checks or gets right before a GPU is involved (issue 23).

Each test names the failure it stands for: a run that would have trained the embedded 135M model
instead of the one meant, several GPUs under a plain process, a judge that is down or serves
another name, ZeRO-3's sharded loading, an adapter saved without weights, a finished stage reused
after its rewards or data changed, a LoRA learning rate that barely moves the adapter, accelerate
configs that start eight processes on a one-GPU machine, and an evaluation model that never
answered. The ZeRO-3 tensor snapshots are in test_training_params.py.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from litseg.errors import SetupError
from litseg.utils.config import from_dict, shipped_option
from litseg.training.config import ConfigError, require_named_model, train_config_from
from tests.training_helpers import CONF, REPO, compose_train

SMOKE_GRPO = ["+experiment=grpo", "debug=smoke", "eval.enabled=false"]


# ------------------------------------------------------------------------------- the model trained
def test_a_recipe_without_a_named_model_stops_before_anything_loads(tmp_path):
    from litseg.training.run import run_training

    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"no student model named: .*model=qwen2_5_7b_instruct model.path="):
        run_training(compose_train(["+experiment=grpo"]), run_dir=run_dir)
    assert not run_dir.exists()


@pytest.mark.parametrize("overrides", [
    ["+experiment=grpo", "debug=smoke"],  # the tiny model
    ["+experiment=student"], ["+experiment=student_grpo"],  # the CPU student's embedded SmolLM2, on purpose
    ["+experiment=grpo", "model=smollm2_135m"],
    ["+experiment=grpo", "model=qwen2_5_7b_instruct", "model.path=/models/Qwen2.5-7B-Instruct"],
    ["+experiment=sft", "model.path=/models/my-lm", "model.name=my-lm"],
])
def test_a_named_model_passes(overrides):
    require_named_model(train_config_from(compose_train(overrides)).model)


@pytest.mark.parametrize("experiment", ["sft", "grpo", "litseg_lite", "no_finetune", "no_theory"])
def test_every_gpu_recipe_needs_the_model_named(experiment):
    with pytest.raises(ConfigError, match="no student model named"):
        require_named_model(train_config_from(compose_train([f"+experiment={experiment}"])).model)


def test_train_py_says_so_in_one_line_with_exit_code_2(tmp_path, capsys):
    from litseg.cli import exit_line, run_task
    from litseg.run_result import SETUP_EXIT
    from litseg.training.run import run_training

    stopped = run_task(run_training, compose_train(["+experiment=grpo"]), run_dir=tmp_path / "run")
    assert stopped.exit_code == SETUP_EXIT == 2  # what train.py's entry exits with, after one line:
    line = exit_line("train", [stopped])
    assert line is not None and "\n" not in line and line.startswith("error: no student model named: ")


# ------------------------------------------------------------------------------- devices and launch
def test_several_gpus_under_a_plain_process_are_refused_before_the_model_loads(tmp_path, monkeypatch):
    import torch

    from litseg.training.run import run_training

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for name in ("WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SetupError, match=r"2 GPUs are visible .*--num_processes 2 .*CUDA_VISIBLE_DEVICES=0"):
        run_training(compose_train(SMOKE_GRPO), run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv("WORLD_SIZE", "2")  # a launcher gave this process one of them
    from litseg.training.launch import check_devices

    check_devices(2)


@pytest.mark.parametrize("name", ["zero2", "zero3"])
def test_gpu_accelerate_configs_take_the_process_count_from_the_command_line(name):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(CONF / "accelerate" / f"{name}.yaml"))
    # Unset: `accelerate launch` stops ("You need to manually pass in `--num_processes`") unless the
    # command line gives the count; 8 here once started eight ranks on a one-GPU machine.
    assert config.num_processes == -1
    header = (CONF / "accelerate" / f"{name}.yaml").read_text().split("\ncompute_environment", 1)[0]
    assert "--num_processes" in header  # the launch line in the opening comment says how many


# ------------------------------------------------------------------------------- the judge at start
def test_a_judge_server_that_is_down_or_serves_another_model_stops_the_run_at_start(tmp_path):
    from litseg.llm.base import ModelUnavailable
    from litseg.testing.fake_openai_server import FakeOpenAIServer
    from litseg.training.run import run_training

    judge = ["judge_llm=server", "judge_llm.model=the-judge", "judge_llm.cache.enabled=false",
             "judge_llm.connect_timeout_s=2", "judge_llm.timeout_s=5"]
    with FakeOpenAIServer(model="another-model") as server:
        cfg = compose_train([*SMOKE_GRPO, *judge, f"judge_llm.base_urls='{server.base_url}'"])
        with pytest.raises(ModelUnavailable, match=r"model 'the-judge' is not among the models the server lists"):
            run_training(cfg, run_dir=tmp_path / "wrong-name")
        url = server.base_url
    cfg = compose_train([*SMOKE_GRPO, *judge, f"judge_llm.base_urls='{url}'"])  # the server is gone now
    with pytest.raises(ModelUnavailable, match="no server answers"):
        run_training(cfg, run_dir=tmp_path / "down")
    assert not (tmp_path / "wrong-name").exists() and not (tmp_path / "down").exists()


# ------------------------------------------------------------------------------- ZeRO-3 loading and saving
def test_the_trainer_config_exists_before_the_model_loads(tmp_path, monkeypatch):
    """Under accelerate's ZeRO-3 the trainer's config is what registers the DeepSpeed config that
    makes from_pretrained load the weights sharded (zero3_init_flag); it was built after the load."""
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled, set_hf_deepspeed_config
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    from litseg.training import builders, stages
    from litseg.training.stages import StagePlan, run_stage

    class ZeroThree:  # what TrainingArguments registers under `accelerate launch` with ZeRO-3
        def is_zero3(self) -> bool:
            return True

    real_sft_config = builders.sft_config

    def sft_config_under_zero3(*args, **kwargs):
        config = real_sft_config(*args, **kwargs)
        config.deepspeed_plugin = types.SimpleNamespace(zero_stage=3, dschf=ZeroThree())
        set_hf_deepspeed_config(config.deepspeed_plugin.dschf)
        return config

    seen = {}

    def load_model(model, *, adapter=None, trainable=True, zero3=False):
        seen.update(sharded_load=is_deepspeed_zero3_enabled(), zero3=zero3)
        raise KeyboardInterrupt  # stop here: the model would load now

    monkeypatch.setattr(builders, "sft_config", sft_config_under_zero3)
    monkeypatch.setattr(stages, "load_model", load_model)  # stages imports it at module top
    tc = train_config_from(compose_train(["+experiment=sft", "debug=smoke"]))
    plan = StagePlan(tc=tc, out=tmp_path, tokenizer=None, datasets={"train": []}, examples={}, longest=None,
                     reward_funcs=[], reward_weights=[], report_to=[], commit=None, main=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_stage(plan, "sft", tmp_path / "stages" / "sft", None, [])
    finally:
        unset_hf_deepspeed_config()
    assert seen == {"sharded_load": True, "zero3": True}


def test_under_zero3_a_loaded_adapter_keeps_the_base_models_dtype(tmp_path):
    """peft upcasts a loaded LoRA to fp32; beside bf16 base weights that broke ZeRO-3's all-gather
    (DeepSpeed 0.19.2). TRL keeps its own adapters in the base dtype; ours (the SFT adapter GRPO
    starts from) must do the same."""
    torch = pytest.importorskip("torch")
    from peft import LoraConfig, get_peft_model

    from litseg.training.builders import load_model
    from litseg.training.config import ModelConfig

    model = from_dict(ModelConfig, {**shipped_option("model", "tiny"), "dtype": "bfloat16"})
    base = load_model(model)
    get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj"])).save_pretrained(str(tmp_path / "adapter"))
    lora = [p for n, p in load_model(model, adapter=tmp_path / "adapter", zero3=True).named_parameters() if "lora_" in n]
    assert lora and {p.dtype for p in lora} == {torch.bfloat16}
    plain = [p for n, p in load_model(model, adapter=tmp_path / "adapter").named_parameters() if "lora_" in n]
    assert {p.dtype for p in plain} == {torch.float32}  # without ZeRO-3 peft's fp32 adapter stays


def test_an_adapter_saved_without_weights_stops_the_run(tmp_path):
    """Under ZeRO-3 without zero3_save_16bit_model the trainer saves a DeepSpeed checkpoint instead
    of the adapter and only logs a warning."""
    from litseg.training.adapters import save_adapter

    class Trainer:
        accelerator = types.SimpleNamespace(wait_for_everyone=lambda: None)

        def save_model(self, folder: str) -> None:
            Path(folder, "adapter_config.json").write_text("{}")

    with pytest.raises(SetupError, match="wrote no weights .*zero3_save_16bit_model: true"):
        save_adapter(Trainer(), None, tmp_path / "adapter", {})
    assert not (tmp_path / "adapter").exists()


# ------------------------------------------------------------------------------- reusing a finished stage
def test_a_finished_stage_is_trained_again_when_what_it_learnt_from_changed(tmp_path, monkeypatch):
    from litseg.llm.testing import ScriptedChatModel
    from litseg.training import stages
    from litseg.training.rewards import NarratologicalJudgeReward
    from litseg.training.stages import StagePlan, run_stages
    from litseg.testing.configs import prompt_config

    trained = []

    def run_stage(plan, kind, stage_dir, adapter_in, warnings):
        trained.append(kind)
        stage_dir.mkdir(parents=True, exist_ok=True)
        return {"global_step": 1, "params": {"trainable_tensors": 1, "changed_tensors": 1}}

    monkeypatch.setattr(stages, "run_stage", run_stage)

    def plan(overrides=(), judge="judge-a", rows=("first",)):
        tc = train_config_from(compose_train([*SMOKE_GRPO, *overrides]))
        reward = NarratologicalJudgeReward(ScriptedChatModel(["{}"], name=judge), prompt_config("judge"))
        return StagePlan(tc=tc, out=tmp_path, tokenizer=None, datasets={"train": [{"prompt": r} for r in rows]},
                         examples={"train": len(rows)}, longest=None, reward_funcs=[reward], reward_weights=[1.0],
                         report_to=[], commit=None, main=True)

    run_stages(plan(), [])
    run_stages(plan(), [])
    assert trained == ["grpo"]  # unchanged: reused
    for changed in (plan(judge="judge-b"), plan(["rewards.format.weight=0.5"]), plan(rows=("other",)),
                    plan(["judge.version=judge-v2"]), plan(["prompt.version=other"])):
        trained.clear()
        run_stages(changed, [])
        assert trained == ["grpo"]


# ------------------------------------------------------------------------------- the GRPO learning rate
def _weight_movement(lr: float, lora: bool, width: int = 3584) -> float:
    """RMS change of a Qwen2.5-7B-wide projection's effective weight after one Adam step."""
    import torch
    from peft import LoraConfig, inject_adapter_in_model

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(width, width, bias=False))
    if lora:
        peft = compose_train([]).peft  # conf/peft/lora.yaml: r 16, alpha 32
        net = inject_adapter_in_model(LoraConfig(r=peft.r, lora_alpha=peft.lora_alpha, target_modules=["0"]), net)
        layer = net[0]
        with torch.no_grad():  # an adapter after SFT: lora_B no longer zero
            layer.lora_B["default"].weight.normal_(0.0, 1e-3)

        def weight():
            return layer.get_delta_weight("default").detach().clone()
    else:
        def weight():
            return net[0].weight.detach().clone()
    before = weight()
    params = [p for p in net.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    x = torch.randn(4, width)
    (net(x) * torch.randn(4, width)).sum().backward()
    optimizer.step()
    return float((weight() - before).pow(2).mean().sqrt())


def test_the_grpo_learning_rate_moves_a_lora_adapter_as_far_as_full_fine_tuning_moves_the_model():
    """The paper gives no GRPO learning rate; 1e-6 is TRL's full fine-tuning default and moves a
    LoRA's effective weight an order of magnitude less than it moves the full model."""
    pytest.importorskip("peft")
    lr = train_config_from(compose_train(["+experiment=grpo"])).stage.grpo.trl["learning_rate"]
    full = _weight_movement(1e-6, lora=False)
    assert _weight_movement(1e-6, lora=True) < 0.2 * full
    assert 0.3 * full < _weight_movement(lr, lora=True) < 3 * full


# ------------------------------------------------------------------------------- evaluation
def test_an_evaluation_model_that_never_answered_is_no_result():
    from litseg.errors import UNAVAILABLE
    from litseg.llm.base import ChatModelError, Completion
    from litseg.llm.testing import ScriptedChatModel
    from litseg.training.evaluation import evaluate_split

    dead = ScriptedChatModel([Completion(text="", error="vllm engine failed: EngineDeadError()", finish_reason="error",
                                         error_kind=UNAVAILABLE)], cycle=True)
    rows = [{"prompt": [{"role": "user", "content": "x"}], "n_sentences": 3, "schema": "lite", "chapter": "[1] a"}]
    with pytest.raises(ChatModelError, match="could not answer 1 of 1 held-out prompts"):
        evaluate_split(rows, dead, [], [], max_new_tokens=8)


def test_the_stage_record_reads_back(tmp_path):
    # done.json stays plain JSON with the new settings (data digest, rewards, judge identity).
    from litseg.training.stages import data_digest

    assert data_digest({"train": [{"a": 1}]}) != data_digest({"train": [{"a": 2}]})
    assert json.loads(json.dumps({"digest": data_digest({"train": []})}))


def test_after_a_zero3_stage_the_evaluation_model_loads_whole(tmp_path):
    """The ZeRO-3 config a stage registered stays live in accelerate's state: the evaluation's
    from_pretrained (and merging) would load under zero.Init, sharded for an engine no longer there
    (here, without DeepSpeed installed, it fails outright)."""
    from transformers.integrations.deepspeed import set_hf_deepspeed_config, unset_hf_deepspeed_config

    from litseg.training.run import run_training

    class ZeroThree:
        def is_zero3(self) -> bool:
            return True

    registered = ZeroThree()
    set_hf_deepspeed_config(registered)
    try:
        summary = run_training(compose_train(["+experiment=no_finetune", "debug=smoke", "rewards=format_only"]),
                               run_dir=tmp_path / "run")
    finally:
        unset_hf_deepspeed_config()
    assert summary["eval"]["eval/examples"] == 1.0


def test_the_evaluation_engine_gets_a_share_of_what_is_free_after_the_trainer(monkeypatch):
    """eval.backend=vllm started its engine at vLLM's 0.9 of the card inside the training process,
    with the trainer's cached memory still held and a judge perhaps beside it."""
    import torch

    from litseg.training import builders
    from litseg.training.run import _engine_memory

    emptied = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (40 * 2**30, 80 * 2**30))
    assert _engine_memory() == {"gpu_memory_utilization": round(builders.ENGINE_SHARE_OF_FREE * 0.5, 3)}
    assert emptied  # the trainer's cache went back first
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (2 * 2**30, 80 * 2**30))
    with pytest.raises(SetupError, match="only 2.0 of 80.0 GiB of the GPU are free"):
        _engine_memory()
