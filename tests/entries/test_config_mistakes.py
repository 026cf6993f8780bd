"""Config mistakes on the command line of every entry (annotate.py, evaluate.py, train.py): an
option that is not in a config group, a key that is not in the config, a value of the wrong type,
missing data. Each ends in one line with the valid choices or a "did you mean", and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from litseg.cli import command_line_error, exit_line, run_task
from litseg.run_result import SETUP_EXIT
from litseg.utils.config import ConfigError
from tests.conftest import REPO

CONF = REPO / "conf"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


def one_error_line(script: str, *args: str, tmp_path: Path) -> str:
    """Run the entry; assert exit code 2 and that its whole output is one ``error:`` line."""
    proc = subprocess.run([sys.executable, script, *args, f"hydra.run.dir={tmp_path / 'run'}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env=ENV)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == SETUP_EXIT, lines[-10:]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize(("entry", "argv", "expected"), [
    ("annotate", ["method=recursve"], "method: no option 'recursve' in conf/method/; did you mean recursive?"),
    ("annotate", ["-m", "method=recursive,tokn"], "no option 'tokn' in conf/method/; did you mean token?"),
    ("annotate", ["method=recursive", "method.chunk_sise=5"],
     "method.chunk_sise: no such setting; did you mean method.chunk_size?"),
    ("annotate", ["method=[a"], "no viable alternative at input '[a'"),
    ("evaluate", ["chunkers=[token,recursve]"], "chunkers: no option 'recursve' in conf/chunkers/; did you mean recursive?"),
    ("evaluate", ["llm@generation.llm=opnai"], "llm: no option 'opnai' in conf/llm/; did you mean openai?"),
    ("evaluate", ["chunkers=[recursive]", "chunkers.recursive.chunk_sise=5"],
     "chunkers.recursive.chunk_sise: no such setting; did you mean chunkers.recursive.chunk_size?"),
    ("train", ["+experiment=sfft"], "experiment: no option 'sfft' in conf/experiment/; did you mean sft?"),
    ("train", ["+experiment=grpo", "debug=smok"], "debug: no option 'smok' in conf/debug/; did you mean smoke?"),
    ("train", ["+experiment=sft", "data.runz=[x]"], "data.runz: no such setting; did you mean data.runs?"),
])
def test_command_line_mistakes_are_named_with_their_choices(entry: str, argv: list[str], expected: str) -> None:
    message = command_line_error(CONF, entry, argv)
    assert message is not None and expected in message and "\n" not in message
    if "no option" in message:
        assert "Choices: " in message


@pytest.mark.parametrize(("entry", "argv"), [
    ("annotate", ["method=recursive", "input=book.txt", "hydra.run.dir=/tmp/x"]),
    ("evaluate", ["-m", "suite=fairytaleqa", "chunkers=[recursive]", "chunkers.recursive.chunk_size=500,1000"]),
    ("train", ["+experiment=grpo", "debug=smoke"]),
    ("train", ["-m", "+sweep=ablations"]),
    ("annotate", ["--cfg", "job", "method=left_to_hydra"]),  # Hydra's own flags: Hydra answers
])
def test_valid_command_lines_pass(entry: str, argv: list[str]) -> None:
    assert command_line_error(CONF, entry, argv) is None


def test_unknown_keys_and_wrong_types_inside_the_task_are_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    from litseg.training.builders import check_trl_settings
    from litseg.training.config import train_config_from

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        wrong_type = compose("train", overrides=["+experiment=sft", "stage.sft.trl.learning_rate=abc"])
        added = compose("train", overrides=["+experiment=sft", "+data.runz=[x]"])
    stopped = run_task(lambda cfg: check_trl_settings(train_config_from(cfg)), wrong_type)
    assert stopped.exit_code == SETUP_EXIT
    assert exit_line("train", [stopped]) == "error: stage.sft.trl.learning_rate: expected a number, got 'abc'"
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) data.runz; did you mean data.runs\?"):
        train_config_from(added)


def test_annotate_an_unknown_method_one_line_exit_2(tmp_path: Path) -> None:
    line = one_error_line("annotate.py", "method=recursve", "input=book.txt", tmp_path=tmp_path)
    assert "did you mean recursive?" in line and "Choices: imported, litseg" in line


def test_evaluate_an_unknown_chunker_one_line_exit_2(tmp_path: Path) -> None:
    line = one_error_line("evaluate.py", "chunkers=[recursve]", tmp_path=tmp_path)
    assert "no option 'recursve' in conf/chunkers/; did you mean recursive?" in line


def test_train_an_unknown_experiment_one_line_exit_2(tmp_path: Path) -> None:
    line = one_error_line("train.py", "+experiment=sfft", tmp_path=tmp_path)
    assert "did you mean sft?" in line


def test_train_a_misspelt_trl_setting_one_line_exit_2(tmp_path: Path) -> None:
    """A ``trl:`` key is checked against TRL's config class before anything loads."""
    line = one_error_line("train.py", "+experiment=sft", "debug=smoke", "+stage.sft.trl.learnig_rate=1e-4",
                          tmp_path=tmp_path)
    assert line == ("error: stage.sft.trl.learnig_rate: unknown TRL SFTConfig field; "
                    "did you mean stage.sft.trl.learning_rate?")


def test_train_without_data_is_a_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    """``train.py +experiment=sft`` with no data.runs: the data step's error, one line, exit 2 (in
    process: the entry around it is the one the subprocess tests drive)."""
    from litseg.training.config import train_config_from
    from litseg.training.data import build_datasets

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        tc = train_config_from(compose("train", overrides=["+experiment=sft"]))
    stopped = run_task(build_datasets, tc.data, tc.prompt, None)
    assert stopped.exit_code == SETUP_EXIT
    assert stopped.reason.startswith("no annotate run directories given: set data.runs=[")


def test_evaluate_without_chunkers_or_with_a_misspelt_embedder_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from litseg.rag.evaluation.sources import resolve_chunkers
    from litseg.rag.index import build_dense_encoder

    stopped = run_task(resolve_chunkers, {})
    assert stopped.exit_code == SETUP_EXIT
    assert stopped.reason.startswith("no chunkers to evaluate: set chunkers=[token,recursive,")
    with pytest.raises(ConfigError, match=r"retrieval.embedder.model='hashng': .*or 'hashing'"):
        build_dense_encoder({"model": "hashng"})
