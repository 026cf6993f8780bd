"""Ablations scored like the paper (issue 11, item 5): trained students evaluated by evaluate.py
as LitSeg-Lite chunkers, and the ablation table written from the evaluation's numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, shared_data_dir

pytest.importorskip("trl")
pytest.importorskip("peft")

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
       "WANDB_MODE": "offline", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
# A tiny random model writes nothing readable; short answers keep the students fast (every unit
# then takes the fallback, which the table reports).
STUDENT_FAST = {"max_new_tokens": 16, "max_retries": 0}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A sweep folder like ``train.py -m`` leaves: a prompt ablation that trains nothing, an SFT
    variant with one step, and a job that failed before writing its summary."""
    from tests.training_helpers import compose_train

    from litseg.training.run import run_training

    root = tmp_path_factory.mktemp("multirun")
    for num, experiment in enumerate(["no_stage1", "no_grpo"]):
        cfg = compose_train([f"+experiment={experiment}", "debug=smoke", "stage.sft.trl.max_steps=1",
                             "stage.sft.trl.eval_strategy=no", "eval.enabled=false"])
        run_training(cfg, run_dir=root / f"{num}_{experiment}")
    broken = root / "2_no_theory"
    broken.mkdir()
    (broken / "config.yaml").write_text((root / "0_no_stage1" / "config.yaml").read_text())
    return root


def test_students_are_found_in_job_order_with_their_models(sweep: Path, tmp_path: Path) -> None:
    from litseg.rag.ablations import find_student_runs, student_chunkers

    runs = find_student_runs(sweep)
    assert [(r.label, r.failed) for r in runs] == [("no_stage1", False), ("no_grpo", False), ("no_stage1@2_no_theory", True)]
    entries = student_chunkers(runs, method=STUDENT_FAST)
    assert list(entries) == ["no_stage1", "no_grpo"]
    assert entries["no_stage1"]["llm"]["adapter"] is None  # a prompt ablation trains nothing
    assert Path(entries["no_grpo"]["llm"]["adapter"]).joinpath("adapter_config.json").is_file()
    assert entries["no_stage1"]["prompt"]["schema"] == "lite_no_step1" and entries["no_grpo"]["prompt"]["schema"] == "lite"
    assert entries["no_grpo"]["max_new_tokens"] == 16 and entries["no_grpo"]["name"] == "litseg_lite"
    with pytest.raises(FileNotFoundError, match="no train.py run folder"):
        find_student_runs(tmp_path)


def test_evaluate_scores_every_student_and_writes_the_ablation_table(sweep: Path, tmp_path: Path) -> None:
    from tests.rag.test_rag_pipeline import CHUNKERS, eval_cfg, run

    cfg = eval_cfg(chunkers={"recursive": CHUNKERS["recursive"]}, students=str(sweep),
                   student={"method": STUDENT_FAST, "backend": "transformers", "llm": {}})
    res = run(tmp_path, cfg)
    assert [r.label for r in res.results] == ["recursive", "no_stage1", "no_grpo"]
    data = json.loads((tmp_path / "ablations.json").read_text())
    rows = {r["variant"]: r for r in data["rows"]}
    assert list(rows) == ["no_stage1", "no_grpo", "no_stage1@2_no_theory"]
    results = {r["label"]: r for r in json.loads((tmp_path / "results.json").read_text())["results"]}
    for name in ("no_stage1", "no_grpo"):
        row = rows[name]
        assert row["status"] == "evaluated"
        # the table's numbers are the evaluation's
        for metric in ("mrr@10", "hit@1", "hit@5", "evidence@1500"):
            assert row[metric] == results[name]["metrics"][metric]["estimate"]
        assert row["fallback_whole_unit_share"] + row["fallback_repair_share"] + row["fallback_pieces_share"] <= 1.0
    assert rows["no_grpo"]["stage_plan"] == ["sft"] and rows["no_stage1"]["stage_plan"] == []
    assert rows["no_stage1@2_no_theory"]["status"].startswith("failed")
    md = (tmp_path / "ablations.md").read_text()
    assert "| no_grpo | sft |" in md and "MRR@10 [95% CI]" in md and "evidence@1500" in md
    assert "| no_stage1@2_no_theory | failed: no train_summary.json |" in md


@pytest.mark.slow
@pytest.mark.shared_data
def test_ablation_sweep_then_one_evaluate_command(tmp_path: Path) -> None:
    """The documented two commands, smoke-sized: train the whole grid, then evaluate every student."""
    shared_data_dir()
    sweep_dir = tmp_path / "sweep"
    train = subprocess.run([sys.executable, "train.py", "-m", "+sweep=ablations", "debug=smoke",
                            "stage.sft.trl.max_steps=1", "stage.grpo.trl.max_steps=1", "stage.sft.trl.eval_strategy=no",
                            "eval.enabled=false", f"hydra.sweep.dir={sweep_dir}"],
                           cwd=REPO, env=ENV, capture_output=True, text=True, timeout=3000)
    assert train.returncode == 0, train.stderr[-4000:]
    out = tmp_path / "eval"
    evaluate = subprocess.run([sys.executable, "evaluate.py", "suite=smoke", f"students={sweep_dir}", "chunkers=[]",
                               "retrieval.embedder.model=hashing", "progress=false", "metrics.n_resamples=200",
                               "report.plots=false", "student.method.max_new_tokens=16",
                               "student.method.max_retries=0", f"hydra.run.dir={out}", "logger=wandb"],
                              cwd=REPO, env=ENV, capture_output=True, text=True, timeout=3000)
    assert evaluate.returncode == 0, evaluate.stderr[-4000:]
    rows = json.loads((out / "ablations.json").read_text())["rows"]
    expected = ["litseg_lite", "no_grpo", "no_finetune", "no_stage1", "no_stage2", "no_turning_points", "no_theory"]
    assert [r["variant"] for r in rows] == expected
    assert all(r["status"] == "evaluated" and 0.0 <= r["mrr@10"] <= 1.0 and "evidence@1500" in r for r in rows)
    assert "| litseg_lite | sft+grpo |" in (out / "ablations.md").read_text()
    assert list(out.glob("wandb/offline-run-*"))
