"""Reading JSONL files that a run appends to (a line torn by a crash is skipped)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSONL file, skipping blank lines and a torn line (a write cut by a crash)."""
    if not path.exists():
        return
    with path.open("r", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except ValueError:  # a torn line (or a number past the conversion limit)
                continue
            if isinstance(row, dict):
                yield row


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a JSONL file, skipping a torn last line (a write cut by a crash)."""
    return list(iter_jsonl(path))
