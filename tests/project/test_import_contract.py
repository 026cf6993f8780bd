"""The import graph stays readable: the layers and no-circle contracts of pyproject.toml
(``[tool.importlinter]``) hold for this checkout's ``src/``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SRC = REPO / "src"


def _lint_imports() -> str:
    found = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(found).exists():
        pytest.skip("lint-imports is not installed (pip install -e '.[dev]' installs import-linter)")
    return found


def test_import_contract_holds() -> None:
    # The checkout's src/ first on the path: an editable install elsewhere must not be checked instead.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([_lint_imports(), "--no-cache", "--config", str(REPO / "pyproject.toml")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
