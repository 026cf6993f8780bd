"""Run-directory storage for annotation: append-only JSONL files with a commit ledger.

A unit is finished once its line is in ``diagnostics.jsonl`` (written last, flushed and fsynced).
Lines in ``chunks.jsonl`` / ``sentences.jsonl`` of units without a ledger line are leftovers of a
run killed mid-unit; :meth:`RunStore.open` drops them, so a restarted run redoes exactly the
unfinished units and never duplicates a chunk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHUNKS = "chunks.jsonl"
SENTENCES = "sentences.jsonl"
LEDGER = "diagnostics.jsonl"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a JSONL file, skipping a torn last line (a write cut by a crash)."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    with path.open("r", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


class RunStore:
    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.done: dict[str, dict[str, Any]] = {}

    def open(self) -> "RunStore":
        """Load the ledger and drop uncommitted leftovers from the data files."""
        for row in read_jsonl(self.dir / LEDGER):
            if "key" in row:
                self.done[row["key"]] = row
        for name in (CHUNKS, SENTENCES):
            path = self.dir / name
            if not path.exists():
                continue
            rows = read_jsonl(path)
            kept = [r for r in rows if r.get("unit_key") in self.done]
            if len(kept) != len(rows) or _has_torn_line(path):
                tmp = path.with_suffix(".tmp")
                with tmp.open("w", encoding="utf-8") as f:
                    for r in kept:
                        f.write(json.dumps(r, ensure_ascii=False) + "\n")
                os.replace(tmp, path)
        return self

    def is_done(self, key: str) -> bool:
        return key in self.done

    def commit_unit(
        self,
        key: str,
        chunks: Iterable[dict[str, Any]],
        sentences: Iterable[dict[str, Any]],
        diagnostics: dict[str, Any],
    ) -> None:
        """Append a finished unit; the ledger line goes last so a crash leaves no half unit."""
        self._append(CHUNKS, ({**c, "unit_key": key} for c in chunks))
        self._append(SENTENCES, ({**s, "unit_key": key} for s in sentences))
        row = {**diagnostics, "key": key}
        self._append(LEDGER, [row])
        self.done[key] = row

    def _append(self, name: str, rows: Iterable[dict[str, Any]]) -> None:
        with (self.dir / name).open("a", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def chunks(self) -> list[dict[str, Any]]:
        return read_jsonl(self.dir / CHUNKS)

    def diagnostics(self) -> list[dict[str, Any]]:
        return read_jsonl(self.dir / LEDGER)


def _has_torn_line(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return False
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"
