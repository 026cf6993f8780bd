"""The README's Python snippet for using a run's chunks runs as printed, in a folder holding
`book.txt` and the run it names (made by annotate.py as the README says)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from tests.conftest import REPO

SNIPPET = re.compile(r"<!-- readme-python -->\n```python\n(?P<body>.*?)```\n", re.S)
BOOK = "".join(f"## Chapter {c}\n\n" + " ".join(f"The ferry crossed the grey river for the {s}th time in part {c}."
                                                 for s in range(1, 90)) + "\n\n" for c in (1, 2))


def test_readme_python_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_text_splitters")
    pytest.importorskip("datasets")
    from litseg.annotation.entry import run_annotate

    [snippet] = [m["body"] for m in SNIPPET.finditer((REPO / "README.md").read_text(encoding="utf-8"))]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    Path("book.txt").write_bytes(BOOK.replace("\n", "\r\n").encode("utf-8"))  # offsets survive CRLF too
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=["input=book.txt", "method=recursive", "print_table=0"])
    run_annotate(cfg, Path("outputs/run1"))
    scope: dict[str, object] = {}
    exec(compile(snippet, "README.md", "exec"), scope)  # noqa: S102 - the README's own code
    assert len(scope["chunks"]) == len(scope["table"]) == len(scope["docs"]) > 2
