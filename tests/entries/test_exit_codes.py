"""One shape of entry (issue 21, item 6): every entry is ``task(cfg) -> RunResult``, and the exit
code is decided once, in litseg/cli.py, after Hydra returns: the worst of every run's code (every
job of a ``-m`` sweep), 2 > 1 > 3 > 4 > 0, with one line on stderr."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from litseg.annotation.entry import annotate_task
from litseg.cli import Jobs, exit_line, worst_exit
from litseg.errors import SetupError
from litseg.rag.evaluation.run import evaluate_task
from litseg.run_result import (FAILED_EXIT, INPUTS_SKIPPED_EXIT, OK, SETUP_EXIT, UNTRAINED_EXIT, RunResult)
from litseg.training import run as training_run
from tests.conftest import REPO, shared_data_dir

CONF = REPO / "conf"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
TEXT = ("The lantern-maker lived at the edge of the town. Every evening she lit the two lanterns by the gate. "
        "One night the wind blew the first lantern out, and she walked into the dark to find the spark again. ") * 8


def result(code: int, reason: str = "", run_dir: str = "") -> RunResult:
    return RunResult(metric=math.nan, run_dir=run_dir, exit_code=code, reason=reason)


def corpus(root: Path, *, empty: bool = False, broken: bool = False) -> Path:
    """A folder with one small book; an empty file (skipped) or an unreadable one (failed) beside it."""
    root.mkdir(parents=True)
    (root / "book.txt").write_text(TEXT, encoding="utf-8")
    if empty:
        (root / "empty.txt").write_text("  \n", encoding="utf-8")
    if broken:
        (root / "broken.txt").write_bytes(b"\x00\x01\x02" * 100)
    return root


def annotate_cfg(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("annotate", overrides=["method=recursive", "print_table=0", "view=false", *overrides])


# ------------------------------------------------------------------------------ the one rule
@pytest.mark.parametrize(("codes", "worst"), [
    ([], OK), ([OK], OK), ([OK, INPUTS_SKIPPED_EXIT], INPUTS_SKIPPED_EXIT),
    ([INPUTS_SKIPPED_EXIT, UNTRAINED_EXIT], UNTRAINED_EXIT), ([UNTRAINED_EXIT, FAILED_EXIT, OK], FAILED_EXIT),
    ([FAILED_EXIT, SETUP_EXIT, INPUTS_SKIPPED_EXIT], SETUP_EXIT), ([OK, SETUP_EXIT], SETUP_EXIT),
])
def test_the_worst_code_wins(codes: list[int], worst: int) -> None:
    assert worst_exit([result(c) for c in codes]) == worst
    assert worst_exit([result(c) for c in reversed(codes)]) == worst


def test_one_line_names_the_runs_that_did_not_end_with_0() -> None:
    assert exit_line("annotate", [result(OK), result(OK)]) is None
    assert exit_line("annotate", [result(SETUP_EXIT, "input is missing")]) == "error: input is missing"
    assert exit_line("train", [result(UNTRAINED_EXIT, "trained nothing", "runs/a")]) == (
        "train: trained nothing (exit code 3) in runs/a")
    line = exit_line("annotate", [result(OK, run_dir="s/0"), result(INPUTS_SKIPPED_EXIT, "1 input(s) skipped", "s/1"),
                                  result(SETUP_EXIT, "no book files match 'x'", "s/2")])
    assert line == ("annotate: exit code 2: 2 of 3 runs did not end with 0: 1 input(s) skipped (exit code 4) in s/1; "
                    "no book files match 'x' (exit code 2) in s/2")


def test_jobs_collect_every_run_and_exit_once_with_the_worst(capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    jobs = Jobs("annotate")

    def stops(cfg: Any) -> RunResult:
        raise SetupError("input is missing")

    assert jobs.run(lambda cfg: RunResult(metric=3.0, run_dir="r0"), None) == 3.0  # the metric goes to Hydra
    assert math.isnan(jobs.run(stops, None))  # a known error is this run's result, not the end of the sweep
    assert jobs.run(lambda cfg: result(FAILED_EXIT, "1 unit(s) and 0 book(s) failed", "r2"), None) != 0
    assert [r.exit_code for r in jobs.results] == [OK, SETUP_EXIT, FAILED_EXIT]
    with pytest.raises(SystemExit) as stopped:
        jobs.exit()
    assert stopped.value.code == SETUP_EXIT
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("annotate: exit code 2: 2 of 3 runs") and "input is missing" in err[0]

    done = Jobs("evaluate")
    done.run(lambda cfg: RunResult(metric=1.0, run_dir="r"), None)
    done.exit()  # all ended with 0: no line, and the caller goes on (the process exits with 0)
    Jobs("evaluate").exit()  # no run (--cfg job, --help): nothing to report
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------ each task's own code
def test_annotate_task_decides_its_code_from_the_summary(tmp_path: Path) -> None:
    good = annotate_task(annotate_cfg(f"input={corpus(tmp_path / 'good')}"), tmp_path / "r_good")
    assert (good.exit_code, good.reason, good.run_dir) == (OK, "", tmp_path / "r_good")
    assert good.metric == good.summary["chunks"] > 0
    skipped = annotate_task(annotate_cfg(f"input={corpus(tmp_path / 'skip', empty=True)}"), tmp_path / "r_skip")
    assert (skipped.exit_code, skipped.reason) == (INPUTS_SKIPPED_EXIT, "1 input(s) skipped")
    broken = corpus(tmp_path / "broken", empty=True, broken=True)
    failed = annotate_task(annotate_cfg(f"input={broken}"), tmp_path / "r_broken")
    assert (failed.exit_code, failed.reason) == (FAILED_EXIT, "0 unit(s) and 1 book(s) failed")
    lenient = annotate_task(annotate_cfg(f"input={broken}", "strict_exit=false"), tmp_path / "r_lenient")
    assert lenient.exit_code == OK and lenient.summary["books_failed"]


def test_training_task_exits_3_when_the_run_trained_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    summaries = iter([{"metric": 0.5, "run_dir": "t/0", "trained_nothing": []},
                      {"metric": 0.0, "run_dir": "t/1", "trained_nothing": ["grpo: every reward was 0"]}])
    monkeypatch.setattr(training_run, "run_training", lambda cfg, run_dir=None: next(summaries))
    trained, untrained = training_run.training_task(None), training_run.training_task(None)
    assert (trained.exit_code, trained.metric, trained.run_dir) == (OK, 0.5, "t/0")
    assert (untrained.exit_code, untrained.reason, untrained.run_dir) == (UNTRAINED_EXIT, "trained nothing", "t/1")
    assert untrained.summary["trained_nothing"] == ["grpo: every reward was 0"]


def test_evaluate_task_returns_the_objective_and_code_0(tmp_path: Path) -> None:
    shared_data_dir()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("evaluate", overrides=["suite=smoke", "chunkers=[token,recursive]", "progress=false",
                                             "retrieval.embedder.model=hashing", "report.plots=false",
                                             "metrics.n_resamples=200"])
    done = evaluate_task(cfg, tmp_path)
    assert (done.exit_code, done.reason, done.run_dir) == (OK, "", tmp_path)
    assert done.summary["failed_chunkers"] == {}
    assert 0.0 <= done.metric <= 1.0 and (tmp_path / "results.json").is_file()


# ------------------------------------------------------------------- a real sweep, end to end
def sweep(tmp_path: Path, inputs: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "annotate.py", "-m", "method=recursive", "input=" + ",".join(map(str, inputs)),
         f"hydra.sweep.dir={tmp_path / 'sweep'}", "print_table=0", "view=false"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=ENV)


def test_a_sweep_runs_every_job_and_exits_with_the_worst_code(tmp_path: Path) -> None:
    inputs = [corpus(tmp_path / "good"), corpus(tmp_path / "skip", empty=True),
              corpus(tmp_path / "broken", broken=True)]
    proc = sweep(tmp_path, inputs)
    assert proc.returncode == FAILED_EXIT, proc.stderr[-3000:]
    jobs = [tmp_path / "sweep" / str(n) for n in range(3)]
    summaries = [json.loads((job / "run_summary.json").read_text()) for job in jobs]  # every job wrote its files
    assert [len(s["books_failed"]) for s in summaries] == [0, 0, 1] and summaries[1]["inputs_skipped"] == 1
    assert all((job / "annotate.log").is_file() for job in jobs)  # Hydra's job name is still "annotate"
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("annotate: exit code 1: 2 of 3 runs did not end with 0: 1 input(s) skipped (exit code 4)")
    assert f"(exit code 1) in {jobs[2]}" in line


def test_a_job_that_cannot_start_does_not_stop_the_sweep(tmp_path: Path) -> None:
    proc = sweep(tmp_path, [tmp_path / "missing.txt", corpus(tmp_path / "skip", empty=True)])
    assert proc.returncode == SETUP_EXIT, proc.stderr[-3000:]
    assert not (tmp_path / "sweep" / "0" / "run_summary.json").exists()
    assert json.loads((tmp_path / "sweep" / "1" / "run_summary.json").read_text())["inputs_skipped"] == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("annotate: exit code 2: 2 of 2 runs") and "no book files match" in line
    assert "Traceback" not in proc.stderr
