"""End-to-end smoke runs of train.py on a CPU with the tiny model (seconds per run, no network).

Covers: `python train.py +experiment=sft|grpo debug=smoke` exactly as written, LoRA parameters
changing, the line every run ends with (and exit code 3 for a run that trains nothing), every
reward logged each step, checkpoint resume, the adapter used by annotate.py and
merged, every experiment file running, multirun grids (basic and Optuna sweepers), W&B offline,
the ablation notebook, and a DeepSpeed ZeRO-2 step in one CPU process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from litseg.utils.jsonl import read_jsonl
from tests.training_helpers import EXPERIMENTS, REPO, compose_train

pytestmark = pytest.mark.slow

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
       "WANDB_MODE": "offline", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


def run_cli(args: list[str], timeout: int = 600, expect: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], check=False, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == expect, f"{args} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def end_line(proc: subprocess.CompletedProcess) -> str:
    """The one line a training run ends with (the last ``train:`` line of its stdout)."""
    lines = [line for line in proc.stdout.splitlines() if line.startswith("train: ")]
    assert lines, proc.stdout[-3000:]
    return lines[-1]


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "train_summary.json").read_text())


def lora_b_weights(adapter: Path) -> dict:
    from safetensors.torch import load_file

    return {k: v for k, v in load_file(str(adapter / "adapter_model.safetensors")).items() if "lora_B" in k}


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory) -> Path:
    from litseg.training.synthetic import make_synthetic_run

    return make_synthetic_run(tmp_path_factory.mktemp("teacher") / "run")


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory, teacher_run) -> Path:
    run_dir = tmp_path_factory.mktemp("sft") / "run"
    run_cli(["train.py", "+experiment=sft", "debug=smoke", f"hydra.run.dir={run_dir}", f"data.runs=[{teacher_run}]"])
    return run_dir


def test_sft_smoke_from_the_command_line(sft_run):
    s = summary(sft_run)
    assert s["experiment"] == "sft" and s["stage_plan"] == ["sft"]
    assert s["stages"]["sft"]["global_step"] == 2
    assert s["stages"]["sft"]["params"]["changed_tensors"] > 0
    # LoRA's B matrices start at zero: any non-zero entry was learnt.
    assert any(float(t.abs().sum()) > 0 for t in lora_b_weights(sft_run / "adapter").values())
    logged = [r for r in read_jsonl(sft_run / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in logged] == [1, 2]
    assert any("eval_loss" in r for r in read_jsonl(sft_run / "metrics.jsonl"))
    assert {"eval/format", "eval/judge", "eval/reward"} <= set(s["eval"])
    assert json.loads((sft_run / "data_report.json").read_text())["examples"]["train"] == 2
    meta = json.loads((sft_run / "adapter" / "litseg_adapter.json").read_text())
    assert meta["base_model"] == "tiny" and meta["schema"] == "lite" and meta["prompt_version"] == "lite-v1"
    assert (sft_run / "config.yaml").is_file() and (sft_run / "eval_samples.jsonl").is_file()


def test_checkpoints_resume(sft_run, teacher_run, tmp_path):
    import shutil

    run_dir = tmp_path / "resumed"
    shutil.copytree(sft_run, run_dir)
    shutil.rmtree(run_dir / "stages" / "sft" / "checkpoints" / "checkpoint-2")
    cfg = compose_train(["+experiment=sft", "debug=smoke", f"data.runs=[{teacher_run}]", "stage.sft.trl.max_steps=3",
                         "stage.sft.trl.eval_strategy=no", "eval.enabled=false"])
    from litseg.training.run import run_training

    s = run_training(cfg, run_dir=run_dir)
    stage = s["stages"]["sft"]
    assert stage["resumed_from"].endswith("checkpoint-1")
    assert stage["global_step"] == 3
    steps = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if "loss" in r]
    assert steps[-2:] == [2, 3]  # steps 2 and 3 were trained again after resuming at 1
    # A finished stage with unchanged settings is reused, not retrained.
    again = run_training(cfg, run_dir=run_dir)
    assert again["stages"]["sft"]["reused"] is True


def test_grpo_smoke_logs_every_reward_and_changes_lora(tmp_path):
    # Exactly the documented command: it once ended with loss 0, every reward 0 and no tensor
    # changed, and said nothing (the shipped rewards are flat on a random model).
    run_dir = tmp_path / "grpo"
    proc = run_cli(["train.py", "+experiment=grpo", "debug=smoke", f"hydra.run.dir={run_dir}"])
    s = summary(run_dir)
    stage = s["stages"]["grpo"]
    assert stage["global_step"] == 2
    changed, n = stage["params"]["changed_tensors"], stage["params"]["trainable_tensors"]
    assert 0 < changed <= n
    assert s["trained_nothing"] == [] and not stage["rewards"]["flat"] and not stage["rewards"]["all_zero"]
    line = end_line(proc)
    assert line.startswith("train: trained | eval/reward=") and f"grpo {changed}/{n}" in line
    assert "is the smoke probe reward" in line  # not a score of the method
    assert f"adapter {run_dir / 'adapter'}" in line and "TRAINED NOTHING" not in proc.stdout
    assert any(float(t.abs().sum()) > 0 for t in lora_b_weights(run_dir / "adapter").values())
    train_rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["stage"] == "grpo" and "loss" in r]
    assert [r["step"] for r in train_rows] == [1, 2]
    for row in train_rows:  # every reward, its failure counts and the objective, at every step
        for key in ("rewards/format/mean", "rewards/judge/mean", "rewards/probe/mean", "reward",
                    "judge/failures", "judge/retries", "judge/unjudgeable", "format/unparsed"):
            assert row.get(key) is not None, key
    # The sample-completions table of each logging step.
    assert sorted(p.name for p in (run_dir / "stages/grpo/checkpoints/completions").glob("*.parquet"))
    assert s["rewards"]["judge"]["stats"]["completions"] >= 4
    assert "eval/reward" in s["eval"] and s["metric_name"] == "eval/reward"
    assert any("below the longest teacher answer" in w for w in s["warnings"])


def test_a_run_that_trains_nothing_says_so_and_exits_3(tmp_path):
    # The smoke run as it was before the probe reward: every shipped reward is 0 on a random
    # model, so GRPO's gradient is 0. It once exited 0 and said nothing.
    run_dir = tmp_path / "flat"
    proc = run_cli(["train.py", "+experiment=grpo", "debug=smoke", f"hydra.run.dir={run_dir}",
                    "rewards.probe.enabled=false", "stage.grpo.trl.max_steps=1", "eval.enabled=false"], expect=3)
    s = summary(run_dir)  # every file is still written
    assert s["stages"]["grpo"]["params"]["changed_tensors"] == 0
    assert any("none of the" in r and "trainable tensors changed" in r for r in s["trained_nothing"])
    assert any("every reward was 0" in r for r in s["trained_nothing"])
    line = end_line(proc)
    assert line.startswith("train: TRAINED NOTHING (") and "grpo 0/" in line and "adapter " in line
    assert "trained nothing (exit code 3)" in proc.stderr


def test_a_judge_that_dies_mid_run_stops_grpo_with_the_error(teacher_run, tmp_path, monkeypatch, capsys):
    from litseg.cli import exit_line, run_task
    from litseg.run_result import SETUP_EXIT
    from litseg.segmentation.schema import Segment
    from litseg.training.rewards import NarratologicalJudgeReward
    from litseg.training.run import run_training

    # The random tiny model writes no readable answer, so nothing would reach the judge: read
    # every answer as one block, so that each step asks the judge.
    monkeypatch.setattr(NarratologicalJudgeReward, "student_segments",
                        lambda self, text, schema, n_sentences: [Segment(subtitle="all", from_idx=1, to_idx=1)])
    run_dir = tmp_path / "grpo"
    cfg = compose_train(["+experiment=grpo", "debug=smoke", f"data.runs=[{teacher_run}]",
                         "judge_llm.backend=tests.training_helpers:make_dying_judge", "+judge_llm.good_batches=1",
                         "stage.grpo.trl.max_steps=5", "stage.grpo.trl.save_steps=100", "eval.enabled=false",
                         "rewards.judge.params.failure_window=2", "rewards.judge.params.min_judgements=1",
                         "rewards.judge.params.max_retries=1"])
    stopped = run_task(run_training, cfg, run_dir=run_dir)  # what train.py does with it: one line, exit code 2
    assert stopped.exit_code == SETUP_EXIT
    err = exit_line("train", [stopped])
    assert "error: reward 'judge': 2 of 2 judgements failed over the last 2 reward call(s)" in err
    assert "ConnectionError" in err
    steps = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["stage"] == "grpo" and "loss" in r]
    assert steps == [1, 2]  # the judge answered step 1, failed in step 2 (1 of 2: allowed), stopped in 3
    assert not (run_dir / "train_summary.json").exists()


def test_adapter_runs_in_annotate_and_merges(sft_run, tmp_path):
    from litseg.llm.base import ChatRequest
    from litseg.llm.transformers_backend import TransformersChatModel
    from litseg.llm.tiny_model import tiny_causal_lm_dir
    from litseg.training.adapters import merge_adapter

    base = tiny_causal_lm_dir()
    adapter = sft_run / "adapter"
    out = tmp_path / "annotated"
    story = REPO / "src/litseg/data/demo/the_two_lanterns.md"
    run_cli(["annotate.py", "method=litseg_lite", "prompt=litseg_lite_compact", "llm=transformers", f"llm.model={base}", f"llm.adapter={adapter}",
             f"input={story}", f"hydra.run.dir={out}", "limit_units=1", "method.max_new_tokens=16",
             "method.max_retries=0", "llm.cache.enabled=false", "view=false", "print_table=0"])
    (diag,) = read_jsonl(out / "diagnostics.jsonl")
    assert diag["error"] is None and read_jsonl(out / "chunks.jsonl")
    assert "adapter" in json.loads((out / "run_summary.json").read_text())["fingerprint"]["model"]

    merged = merge_adapter(base, adapter, tmp_path / "merged")
    request = ChatRequest(messages=[{"role": "user", "content": "Cut this chapter."}], max_tokens=8)
    with_adapter = TransformersChatModel(str(base), adapter=str(adapter), merge_adapter=False,
                                         constrained_decoding="none").chat(request)
    assert with_adapter.text == TransformersChatModel(str(merged), constrained_decoding="none").chat(request).text

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ids = torch.tensor([[17, 42, 99, 1000, 7]])
    with torch.no_grad():
        plain = AutoModelForCausalLM.from_pretrained(base)(ids).logits
        peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(adapter))(ids).logits
        folded = AutoModelForCausalLM.from_pretrained(merged)(ids).logits
    assert torch.allclose(peft, folded, atol=1e-4)  # merging keeps the adapter's function
    assert not torch.allclose(peft, plain, atol=1e-4)  # and the adapter changes the model


# Every other experiment (sft and grpo ran above), one step each, plus W&B offline on one of them.
GRID = [e for e in EXPERIMENTS if e not in ("sft", "grpo")]
# Experiments on a packaged book split (data.split): no book of the smoke data is held out there.
FIXED_SPLIT = {"student", "tagger"}


@pytest.fixture(scope="module")
def grid_runs(tmp_path_factory, teacher_run) -> dict[str, Path]:
    from litseg.training.run import run_training

    root = tmp_path_factory.mktemp("grid")
    dirs = {}
    for experiment in GRID:
        extra = ["logger=wandb"] if experiment == "no_theory" else []
        cfg = compose_train([f"+experiment={experiment}", "debug=smoke", f"data.runs=[{teacher_run}]",
                             "stage.sft.trl.max_steps=1", "stage.grpo.trl.max_steps=1", "stage.sft.trl.eval_strategy=no", *extra])
        run_training(cfg, run_dir=root / experiment)
        dirs[experiment] = root / experiment
    return dirs


@pytest.mark.parametrize("experiment", GRID)
def test_every_experiment_smoke_runs(grid_runs, experiment):
    s = summary(grid_runs[experiment])
    assert s["experiment"] == experiment
    if experiment in FIXED_SPLIT:  # the synthetic teacher's book is in no list of the packaged split:
        # all of it trains, and the skipped evaluation is said, not scored as a number
        assert any("evaluation skipped" in w for w in s["warnings"]), s["warnings"]
    else:
        assert isinstance(s["metric"], float) and "eval/reward" in s["eval"]
    trained = bool(s["stage_plan"])
    assert (grid_runs[experiment] / "adapter").is_dir() == trained
    assert s["trained_nothing"] == []  # every stage that ran changed its weights
    for kind in s["stage_plan"]:
        if kind == "boundary":  # the tagger's nets train in epochs, not trainer steps
            assert s["stages"][kind]["params"]["changed_tensors"] > 0
            # a fresh run reads every unit itself, and its record says so (a cached one says that)
            features = s["stages"][kind]["features"]
            assert features["embeddings"]["computed"] > 0 and features["embeddings"]["cached"] == 0
            assert features["lm"]["computed"] == features["embeddings"]["computed"] and features["lm"]["cached"] == 0
        else:
            assert s["stages"][kind]["global_step"] == 1
    if experiment == "litseg_lite":  # GRPO continued from the SFT adapter
        assert s["stage_plan"] == ["sft", "grpo"]
        assert json.loads((grid_runs[experiment] / "adapter/litseg_adapter.json").read_text())["stage"] == "grpo"


def test_wandb_runs_offline_with_group_and_tags(grid_runs):
    s = summary(grid_runs["no_theory"])
    assert "experiment:no_theory" in s["tags"] and any(t.startswith("prompt:no-theory") for t in s["tags"])
    assert list((grid_runs["no_theory"] / "wandb").glob("offline-run-*"))


def test_ablation_notebook_runs_on_the_smoke_outputs(grid_runs, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(REPO / "notebooks" / "ablations.ipynb", as_version=4)
    # As a user runs it: from notebooks/ (Jupyter's working directory), with LITSEG_RUNS relative
    # to the repository. It once read the runs from notebooks/ and reported "0 runs".
    os.environ["LITSEG_RUNS"] = os.path.relpath(next(iter(grid_runs.values())).parent, REPO)
    os.environ["LITSEG_NOTEBOOK_OUT"] = str(tmp_path)
    try:
        nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    finally:
        os.environ.pop("LITSEG_RUNS", None)
        os.environ.pop("LITSEG_NOTEBOOK_OUT", None)
    table = (tmp_path / "ablation_table.csv").read_text()
    for experiment in GRID:
        assert experiment in table
    assert (tmp_path / "ablation_rewards.png").stat().st_size > 0


def test_one_command_runs_a_grid_and_an_optuna_search(teacher_run, tmp_path):
    common = ["debug=smoke", f"data.runs=[{teacher_run}]"]
    run_cli(["train.py", "-m", "+experiment=no_finetune,no_theory", *common, f"hydra.sweep.dir={tmp_path / 'grid'}"])
    jobs = sorted(p.name for p in (tmp_path / "grid").iterdir() if (p / "train_summary.json").is_file())
    assert jobs == ["0_no_finetune", "1_no_theory"]
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    run_cli(["train.py", "-m", "+experiment=no_finetune", "+sweep=optuna", *common, "hydra.sweeper.n_trials=2",
             f"hydra.sweep.dir={tmp_path / 'optuna'}"])
    result = (tmp_path / "optuna" / "optimization_results.yaml").read_text()
    assert "best_value" in result


@pytest.mark.timeout(1200)  # its launch alone may take 900 s (run_cli's limit)
def test_deepspeed_zero2_single_process_cpu_step(teacher_run, tmp_path):
    pytest.importorskip("deepspeed")
    run_dir = tmp_path / "ds"
    run_cli(["-m", "accelerate.commands.launch", "--config_file", "conf/accelerate/zero2_cpu_smoke.yaml", "train.py",
             "+experiment=sft", "debug=smoke", f"data.runs=[{teacher_run}]", f"hydra.run.dir={run_dir}",
             "stage.sft.trl.max_steps=1", "stage.sft.trl.eval_strategy=no", "eval.enabled=false"], timeout=900)
    s = summary(run_dir)
    assert s["stages"]["sft"]["global_step"] == 1
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()
