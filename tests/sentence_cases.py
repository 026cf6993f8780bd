"""The labelled sentence cases (tests/data/*_cases.jsonl), rebuilt from the shared texts.

A case taken from a book holds no text of its own: ``source`` names the shared file (relative to
``../shared/data``, ``../shared/data/texts`` or, for ``literaryqa/ID.txt``, the LiteraryQA texts)
with its line range where known, ``chars`` the excerpt's character offsets in that file, ``newline`` how the
case rewrites its line endings (``cr``, ``crlf``; absent: as in the file) and ``spans`` the expected
sentences as offsets into the excerpt. Cases written for litseg, and FairytaleQA rows (not Project Gutenberg texts), keep ``text`` and
``sentences``.
Without the shared data only those are loaded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_SOURCE = re.compile(r"(\S+)(?: lines \d+-\d+)?$")


def _resolve(data: Path, name: str) -> Path | None:
    candidates = [data / name, data / "texts" / name]
    if name.startswith("literaryqa/"):
        candidates.append(data / "benchmarks" / "literaryqa" / "texts" / name.split("/", 1)[1])
    return next((p for p in candidates if p.is_file()), None)


def _file_text(path: Path, newline: str | None) -> str:
    with path.open(encoding="utf-8", newline="") as fh:
        text = fh.read()
    if newline == "cr":
        return text.replace("\r\n", "\r")
    if newline == "crlf":
        return text.replace("\r\n", "\n").replace("\n", "\r\n")
    return text


def load_cases(path: Path, data: Path | None) -> list[dict[str, Any]]:
    """Every case of ``path`` with ``text`` and ``sentences``; book excerpts only when the shared
    ``data`` folder (``../shared/data``) is given and holds their source."""
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        if "chars" in case:
            source = _resolve(data, _SOURCE.match(case["source"]).group(1)) if data is not None else None
            if source is None:
                continue
            start, end = case["chars"]
            text = _file_text(source, case.get("newline"))[start:end]
            case = {**case, "text": text, "sentences": [text[a:b] for a, b in case["spans"]]}
        cases.append(case)
    return cases
