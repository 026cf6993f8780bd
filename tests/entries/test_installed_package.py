"""An installed litseg runs on its own: a wheel built from this checkout, installed into a fresh
virtual environment, composes the configs it ships (litseg/conf) from a folder outside the
checkout, through ``python -m litseg.annotate`` and the installed commands; the benchmark data
it cannot ship stops ``litseg-evaluate`` with one line naming the setting."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

#: What a wheel is built from (copied, so that the build leaves nothing in the checkout).
PACKAGING = ("conf", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
BOOK = ("The Lantern Keeper\n\nMara lit the west lantern every evening before the tide came in. Her brother "
        "Tomas kept the east one.\n\nOne night a storm put out the east lantern. When she reached the tower, "
        "Tomas was gone.\n")


def _run(args: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    # No PYTHONPATH: the checkout's src/ must not be what runs; no shared data beside a temp folder.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LITSEG_SHARED_DIR")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _wheel(tmp: Path) -> Path:
    source = tmp / "source"
    shutil.copytree(REPO / "src" / "litseg", source / "src" / "litseg", ignore=shutil.ignore_patterns("__pycache__"))
    for name in PACKAGING:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, source / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                  "-w", str(tmp / "dist"), str(source)], tmp)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return next((tmp / "dist").glob("litseg-*.whl"))


def _venv(tmp: Path, wheel: Path) -> Path:
    """A fresh environment holding the wheel; the dependencies are this interpreter's (a .pth
    line per site-packages folder: plain paths, so its editable litseg is not among them)."""
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], tmp)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp).stdout.strip()
    (Path(purelib) / "_litseg_test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                      "-q", str(wheel)], tmp)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv


@pytest.mark.slow
def test_an_installed_package_composes_its_own_configs(tmp_path: Path) -> None:
    venv = _venv(tmp_path, _wheel(tmp_path))
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "book.txt").write_text(BOOK, encoding="utf-8")

    where = _run([str(python), "-c", "import litseg.utils.locations as l; print(l.__file__); print(l.config_dir())"],
                 work)
    module, conf = where.stdout.split()
    assert Path(module).is_relative_to(venv) and Path(conf).is_relative_to(venv), where.stdout + where.stderr
    assert (Path(conf) / "method" / "recursive.yaml").is_file()

    done = _run([str(python), "-m", "litseg.annotate", "input=book.txt", "method=recursive", "hydra.run.dir=out"],
                work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    chunks = [json.loads(line) for line in (work / "out" / "chunks.jsonl").read_text(encoding="utf-8").splitlines()]
    assert chunks and {c["method"] for c in chunks} == {"recursive"}
    assert all(c["main_text"] and c["main_text"] in BOOK for c in chunks)  # slices of the book

    mistake = _run([str(bin_dir / "litseg-annotate"), "input=book.txt", "method=recursve"], work)
    assert mistake.returncode == 2 and "did you mean recursive" in mistake.stderr, mistake.stderr

    no_data = _run([str(bin_dir / "litseg-evaluate"), "suite=smoke", "chunkers=[recursive]",
                    "retrieval.embedder.model=hashing", "hydra.run.dir=evaluated"], work)
    assert no_data.returncode == 2 and "LITSEG_SHARED_DIR" in no_data.stderr, no_data.stdout + no_data.stderr
