"""The task shell shared by the entry scripts (litseg.utils.task)."""

import json
import math

from omegaconf import OmegaConf

from litseg.utils.task import start_task


def test_start_writes_the_resolved_config_and_finish_writes_the_summary(tmp_path):
    cfg = OmegaConf.create({"a": 1, "b": "${a}"})
    task = start_task("demo", cfg, tmp_path / "run", fallback="unused")
    assert OmegaConf.load(task.run_dir / "config.yaml") == {"a": 1, "b": 1}
    metric = task.finish({"chunks": 3}, 3, file="summary.json")
    assert metric == 3.0
    saved = json.loads((task.run_dir / "summary.json").read_text())
    assert saved["chunks"] == 3 and "wall_seconds" in saved and "git_commit" in saved


def test_outside_hydra_the_fallback_directory_is_used_and_no_metric_is_nan(tmp_path):
    task = start_task("demo", {"x": 1}, fallback=tmp_path / "fb", write=False)
    assert task.run_dir == tmp_path / "fb" and not (task.run_dir / "config.yaml").exists()
    assert math.isnan(task.finish({}, None))
