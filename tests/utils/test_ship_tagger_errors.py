"""Shipping a tagger from a folder that holds none stops with one line and exit code 2 (the
entries' rule for a setup mistake), and leaves the package's models alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from litseg.errors import SetupError
from litseg.models.ship_tagger import ship
from litseg.run_result import SETUP_EXIT


def test_ship_from_a_run_without_a_tagger_raises_and_writes_nothing(tmp_path: Path) -> None:
    dest_root = tmp_path / "models"
    with pytest.raises(SetupError, match="holds no tagger.json"):
        ship(tmp_path / "run", dest_root=dest_root)
    assert not dest_root.exists()


def test_ship_command_line_says_why_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "litseg.models.ship_tagger", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == SETUP_EXIT
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "holds no tagger.json" in lines[0]
