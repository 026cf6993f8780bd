"""How a training run ends and what it refuses before training (no trainer step runs here).

The verdict (``trained_nothing``) and the one line every run ends with, GRPO with too few examples
for one generation batch, a baseline run given as teacher data, and the ablation notebook reading
runs from the repository and failing on none. The smoke runs that train are in
tests/entries/test_training_smoke.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from litseg.training.run import end_line, untrained_reasons
from litseg.training.stages import rewards_logged
from tests.training_helpers import REPO, compose_train


def _stage(changed: int, total: int = 28, steps: int = 2, **extra) -> dict:
    return {"global_step": steps, "params": {"trainable_tensors": total, "changed_tensors": changed}, **extra}


def test_a_stage_that_changed_no_tensor_or_saw_only_zero_rewards_trained_nothing():
    assert untrained_reasons({"sft": _stage(28)}) == []
    (reason,) = untrained_reasons({"sft": _stage(0)})
    assert reason == "sft: none of the 28 trainable tensors changed in 2 step(s)"
    zero = {"steps": 2, "all_zero": True, "flat": True}
    reasons = untrained_reasons({"grpo": _stage(0, rewards=zero)})
    assert reasons == ["grpo: none of the 28 trainable tensors changed in 2 step(s)",
                       "grpo: every reward was 0 at all 2 logged step(s)"]
    flat = untrained_reasons({"grpo": _stage(28, rewards={"steps": 3, "all_zero": False, "flat": True})})
    assert len(flat) == 1 and "never differed within a group" in flat[0]
    assert untrained_reasons({"grpo": _stage(0, total=0)}) == ["grpo: the model has no trainable tensor"]
    # A stage reused from an earlier run was judged when it ran.
    assert untrained_reasons({"sft": _stage(0, reused=True)}) == []


def test_logged_rewards_all_zero_or_flat_are_recognised():
    assert rewards_logged([]) == {"steps": 0, "all_zero": False, "flat": False}
    zero = [{"reward": 0.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0, "step": s} for s in (1, 2)]
    assert rewards_logged(zero + [{"train_loss": 0.0}]) == {"steps": 2, "all_zero": True, "flat": True}
    flat = [{"reward": 0.4, "reward_std": 0.0, "step": 1}, {"reward": 0.5, "reward_std": 0.0, "step": 2}]
    assert rewards_logged(flat) == {"steps": 2, "all_zero": False, "flat": True}
    varied = [{"reward": 0.4, "reward_std": 0.1, "frac_reward_zero_std": 0.5}, {"reward": 0.0, "reward_std": 0.0}]
    assert rewards_logged(varied) == {"steps": 2, "all_zero": False, "flat": False}


def test_every_run_ends_with_one_line_naming_metric_adapter_and_changed_tensors():
    summary = {"metric_name": "eval/reward", "metric": 0.41234, "adapter": "/runs/a/adapter", "run_dir": "/runs/a",
               "stages": {"sft": _stage(28, reused=True), "grpo": _stage(20)}, "trained_nothing": []}
    line = end_line(summary)
    assert "\n" not in line
    assert line == ("train: trained | eval/reward=0.4123 | adapter /runs/a/adapter | "
                    "tensors changed: sft 28/28 (reused), grpo 20/28 | run /runs/a")
    summary.update(stages={"grpo": _stage(0)}, trained_nothing=["grpo: none of the 28 trainable tensors changed"])
    assert end_line(summary).startswith("train: TRAINED NOTHING (grpo: none of the 28 trainable tensors changed) |")
    assert "no training stage" in end_line({**summary, "stages": {}, "trained_nothing": [], "adapter": None})


def test_a_smoke_runs_last_line_says_its_reward_is_the_probes():
    """debug=smoke adds a probe reward so that a random model's weights move; its share of the
    eval reward is named, or the line would read like a real score."""
    summary = {"metric_name": "eval/reward", "metric": 0.0625, "adapter": None, "run_dir": "/runs/s",
               "stages": {"grpo": _stage(20)}, "trained_nothing": [],
               "rewards": {"format": {"weight": 1.0}, "probe": {"weight": 1.0}},
               "eval": {"eval/reward": 0.0625, "eval/format": 0.0, "eval/probe": 0.0625}}
    assert "eval/reward=0.0625 (of which 0.0625 is the smoke probe reward: " in end_line(summary)
    del summary["rewards"]["probe"]
    assert "probe" not in end_line(summary)


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory) -> Path:
    from litseg.training.synthetic import make_synthetic_run

    return make_synthetic_run(tmp_path_factory.mktemp("teacher") / "run")


def test_grpo_with_too_few_examples_for_one_generation_batch_says_so(teacher_run, tmp_path):
    pytest.importorskip("trl")
    from litseg.training.run import run_training

    # 4 x 1 x 1 completions per generation batch / 2 generations = 2 prompts, but 1 example:
    # TRL's own message was "max_steps must be set".
    cfg = compose_train(["+experiment=grpo", "debug=smoke", f"data.runs=[{teacher_run}]", "data.max_examples=1",
                         "stage.grpo.trl.per_device_train_batch_size=4", "stage.grpo.trl.max_steps=-1", "eval.enabled=false"])
    with pytest.raises(ValueError, match=r"too few training examples for one generation batch: 1 example\(s\), "
                                         r"but each generation batch needs 2 distinct prompts"):
        run_training(cfg, run_dir=tmp_path / "run")
    assert not (tmp_path / "run" / "stages").exists()  # refused before any model was loaded


def test_a_baseline_run_given_as_teacher_data_is_named(tmp_path):
    pytest.importorskip("datasets")
    from hydra import compose, initialize_config_dir

    from litseg.annotation.entry import run_annotate
    from litseg.training.data import check_teacher_runs
    from litseg.training.run import run_training

    story = REPO / "src/litseg/data/demo/the_two_lanterns.md"
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=["method=recursive", f"input={story}", "print_table=0",
                                             "export.enabled=false", "view=false"])
    baseline = tmp_path / "recursive"
    run_annotate(cfg, baseline)
    # It once read the run and dropped every unit as "segments_invalid".
    with pytest.raises(ValueError, match=r"not a teacher run: .*recursive \(method=recursive\)"):
        run_training(compose_train(["+experiment=sft", "debug=smoke", f"data.runs=[{baseline}]"]),
                     run_dir=tmp_path / "train")
    # Without run_summary.json the first chunk names the method.
    (baseline / "run_summary.json").unlink()
    with pytest.raises(ValueError, match="method=recursive"):
        check_teacher_runs([baseline])
    for method in ("litseg", "imported"):
        run = tmp_path / method
        run.mkdir()
        (run / "run_summary.json").write_text(json.dumps({"method": method}))
        check_teacher_runs([run])  # teacher runs pass


def test_relative_run_folders_are_read_from_the_repository(tmp_path):
    from litseg.training.report import find_runs, repository_root, resolve_in_repository

    assert repository_root(REPO / "notebooks") == REPO
    assert repository_root(tmp_path) == REPO  # outside the checkout: the one this package comes from
    assert resolve_in_repository("outputs/train", REPO / "notebooks") == REPO / "outputs/train"
    assert resolve_in_repository(tmp_path) == tmp_path
    with pytest.raises(FileNotFoundError, match=r"no training runs: .* holds no train_summary.json"):
        find_runs(tmp_path)
    run = tmp_path / "sweep" / "0_sft"
    run.mkdir(parents=True)
    (run / "train_summary.json").write_text(json.dumps({"experiment": "sft"}))
    (runs,) = find_runs(os.path.relpath(tmp_path, REPO), REPO / "notebooks")
    assert runs["experiment"] == "sft" and runs["run_dir"] == str(run)


@pytest.mark.timeout(600)  # the kernel's own start-up and cell limits come first
def test_the_notebook_fails_when_it_finds_no_run(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    empty = tmp_path / "no-runs"
    empty.mkdir()
    monkeypatch.setenv("LITSEG_RUNS", os.path.relpath(empty, REPO))
    monkeypatch.setenv("LITSEG_NOTEBOOK_OUT", str(tmp_path / "out"))
    notebook = nbformat.read(REPO / "notebooks" / "ablations.ipynb", as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO / "notebooks")}})
    # It once printed "0 runs" and drew empty plots, exiting 0.
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="no training runs"):
        client.execute()
    assert not (tmp_path / "out" / "ablation_table.csv").exists()
