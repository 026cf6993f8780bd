"""Run-directory storage for annotation: append-only JSONL files with a commit ledger.

A unit is finished once its line is in ``diagnostics.jsonl`` (the ledger, written last). Each
ledger line records where the unit's rows sit in ``chunks.jsonl`` and ``sentences.jsonl`` (byte
offsets), and one process at a time writes a run directory (an exclusive lock on ``run.lock``),
so anything after the last committed offset is a leftover of a run killed mid-unit.
:meth:`RunStore.open` cuts such leftovers off (and a torn last line of any file), so a restarted
run redoes exactly the unfinished units and never duplicates a row. Cutting a tail costs the
same for a small run and a corpus; ledgers written before offsets existed are cleaned by
rewriting the data files instead.

Besides the unit ledger, ``books.jsonl`` notes every book whose units are all committed (so a
restart skips it without reading it again) and ``failures.jsonl`` keeps the error of every unit
that failed outright; such a unit is not committed, so the next run tries it again.

Writing never fails on content. Every row is serialised before anything is written; a value
UTF-8 cannot hold (a lone surrogate from a model's reply) or JSON cannot print (an integer past
Python's conversion limit) is replaced (:func:`litseg.segmentation.textsafe.clean_value`), and
the unit's ledger line says so under ``storage_notes``.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from litseg.segmentation.textsafe import clean_value
from litseg.utils.jsonl import iter_jsonl, read_jsonl
from litseg.annotation.totals import UnitCounts

CHUNKS = "chunks.jsonl"
SENTENCES = "sentences.jsonl"
LEDGER = "diagnostics.jsonl"
DOCUMENTS = "documents.jsonl"
BOOKS = "books.jsonl"
FAILURES = "failures.jsonl"
LOCK = "run.lock"
DATA_FILES = (CHUNKS, SENTENCES)
ALL_FILES = (CHUNKS, SENTENCES, LEDGER, DOCUMENTS, BOOKS, FAILURES)

# Ledger fields kept in memory per finished unit (the full rows stay on disk).
_DONE_FIELDS = ("book_id", "unit_id", "unit_index", "n_chunks", "offsets")


class RunDirLocked(RuntimeError):
    """Another process is writing this run directory."""


def read_range(path: Path, start: int, end: int) -> list[dict[str, Any]]:
    """The rows stored in bytes ``[start, end)`` of a JSONL file."""
    with path.open("rb") as f:
        f.seek(start)
        blob = f.read(end - start)
    # Split on b"\n" only: str.splitlines() would also cut at U+2028, U+0085, ... which JSON
    # writes unescaped inside strings (a sentence holding a line separator broke the export).
    return [json.loads(line) for line in blob.split(b"\n") if line.strip()]


def dumps_line(row: dict[str, Any]) -> bytes:
    """One JSONL line; values that cannot be written are replaced (see :func:`safe_line`)."""
    return safe_line(row)[0]


def safe_line(row: dict[str, Any]) -> tuple[bytes, int]:
    """One JSONL line and the number of values that had to be replaced to write it (lone
    surrogates, control characters in the same strings, integers past the conversion limit)."""
    try:
        return (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode("utf-8"), 0
    except (UnicodeEncodeError, ValueError):
        cleaned, changes = clean_value(row)
        return (json.dumps(cleaned, ensure_ascii=False, default=str) + "\n").encode("utf-8"), max(1, changes)


class RunStore:
    """The files of one run directory. ``RunStore(dir).open()`` locks, recovers and loads it."""

    def __init__(self, out_dir: str | Path, *, durable: bool = True, lock: bool = True):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.durable = durable  # fsync every commit (survives power loss, not only kill -9)
        self._want_lock = lock
        self._lock_file: Any = None
        self.done: dict[str, dict[str, Any]] = {}  # unit key -> small ledger summary
        self.books: dict[str, dict[str, Any]] = {}  # book key -> books.jsonl row
        self.documents: dict[str, dict[str, Any]] = {}  # book_id -> documents.jsonl row
        self.recovered: Counter[str] = Counter()  # file -> bytes cut off as leftovers at open

    # ------------------------------------------------------------------ open / close
    def open(self) -> RunStore:
        """Lock the directory, cut off leftovers of a killed run and load the ledgers."""
        if self._want_lock:
            self._acquire_lock()
        for name in ALL_FILES:
            self._cut_torn_tail(self.dir / name)
        (self.dir / LEDGER).touch()  # a run with nothing to do is still a run directory
        legacy = False
        for row in iter_jsonl(self.dir / LEDGER):
            if "key" not in row:
                continue
            self.done[row["key"]] = {k: row[k] for k in _DONE_FIELDS if k in row}
            legacy = legacy or "offsets" not in row
        if legacy:
            self._rewrite_committed()
        else:
            self._cut_uncommitted()
        for row in iter_jsonl(self.dir / BOOKS):
            if "book_key" in row:
                self.books[row["book_key"]] = row
        for row in iter_jsonl(self.dir / DOCUMENTS):
            if "book_id" in row:
                self.documents.setdefault(row["book_id"], row)
        return self

    def close(self) -> None:
        if self._lock_file is not None:
            try:
                import fcntl

                fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
            except (ImportError, OSError):
                pass
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> RunStore:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _acquire_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # no advisory locks on this platform: one writer is the user's job
            return
        handle = (self.dir / LOCK).open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise RunDirLocked(f"{self.dir} is being written by another process (lock on {LOCK}); "
                               "give each concurrent run its own directory") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock_file = handle  # the OS drops the lock when the process dies, even by kill -9

    # ------------------------------------------------------------------ recovery
    def _cut_torn_tail(self, path: Path) -> None:
        """Truncate a file whose last line was cut mid-write back to its last full line."""
        if not path.exists() or path.stat().st_size == 0:
            return
        with path.open("rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            size = f.seek(0, os.SEEK_END)
            pos = size
            block = 1 << 16
            while pos > 0:  # find the last newline, reading backwards
                step = min(block, pos)
                pos -= step
                f.seek(pos)
                chunk = f.read(step)
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    pos += nl + 1
                    break
            else:
                pos = 0
            f.truncate(pos)
        self.recovered[path.name] += size - pos

    def _cut_uncommitted(self) -> None:
        ends = {name: 0 for name in DATA_FILES}
        for info in self.done.values():
            for name, (_, end) in (info.get("offsets") or {}).items():
                if name in ends:
                    ends[name] = max(ends[name], int(end))
        for name, end in ends.items():
            path = self.dir / name
            if path.exists() and path.stat().st_size > end:
                cut = path.stat().st_size - end
                with path.open("rb+") as f:
                    f.truncate(end)
                self.recovered[name] += cut

    def _rewrite_committed(self) -> None:
        """Ledgers without offsets: keep only rows of committed units (reads the whole file)."""
        for name in DATA_FILES:
            path = self.dir / name
            if not path.exists():
                continue
            rows = read_jsonl(path)
            kept = [r for r in rows if r.get("unit_key") in self.done]
            if len(kept) != len(rows):
                tmp = path.with_suffix(".tmp")
                with tmp.open("wb") as f:
                    for r in kept:
                        f.write(dumps_line(r))
                os.replace(tmp, path)
                self.recovered[name] += len(rows) - len(kept)

    # ------------------------------------------------------------------ units
    def is_done(self, key: str) -> bool:
        return key in self.done

    def commit_unit(
        self,
        key: str,
        chunks: Iterable[dict[str, Any]],
        sentences: Iterable[dict[str, Any]],
        diagnostics: dict[str, Any],
    ) -> dict[str, Any]:
        """Append a finished unit; the ledger line goes last so a crash leaves no half unit.

        All lines are made before the first is written, so content can never stop a commit
        halfway; values that had to be replaced are counted in ``storage_notes``."""
        notes: list[str] = []
        lines: dict[str, list[bytes]] = {}
        for name, rows in ((CHUNKS, chunks), (SENTENCES, sentences)):
            lines[name] = []
            changed = 0
            for r in rows:
                line, k = safe_line({**r, "unit_key": key})
                lines[name].append(line)
                changed += k
            if changed:
                notes.append(f"{name}: {changed} value(s) that cannot be stored (lone surrogates, "
                             "control characters, over-long integers) replaced")
        offsets = {name: self._append_lines(name, lines[name]) for name in DATA_FILES}
        row = {**diagnostics, "key": key, "offsets": offsets}
        if notes:
            row["storage_notes"] = [*(row.get("storage_notes") or []), *notes]
        ledger_line, k = safe_line(row)
        if k:
            row["storage_notes"] = [*(row.get("storage_notes") or []),
                                    f"{LEDGER}: {k} value(s) that cannot be stored replaced"]
            ledger_line = safe_line(row)[0]
        self._append_lines(LEDGER, [ledger_line])
        self.done[key] = {k: row[k] for k in _DONE_FIELDS if k in row}
        return row

    def record_failure(self, key: str, row: dict[str, Any]) -> None:
        self._append(FAILURES, [{**row, "key": key, "time": time.time()}])

    def record_book(self, book_key: str, row: dict[str, Any]) -> None:
        full = {**row, "book_key": book_key}
        self._append(BOOKS, [full])
        self.books[book_key] = full

    def record_document(self, row: dict[str, Any]) -> None:
        if row["book_id"] in self.documents:
            return
        self._append(DOCUMENTS, [row])
        self.documents[row["book_id"]] = row

    def _append(self, name: str, rows: Iterable[dict[str, Any]]) -> list[int]:
        return self._append_lines(name, [dumps_line(r) for r in rows])

    def _append_lines(self, name: str, lines: list[bytes]) -> list[int]:
        with (self.dir / name).open("ab") as f:
            start = f.seek(0, os.SEEK_END)
            f.write(b"".join(lines))
            f.flush()
            if self.durable:
                os.fsync(f.fileno())
            return [start, f.tell()]

    # ------------------------------------------------------------------ reading
    def chunks(self) -> list[dict[str, Any]]:
        return read_jsonl(self.dir / CHUNKS)

    def diagnostics(self) -> list[dict[str, Any]]:
        return read_jsonl(self.dir / LEDGER)

    def n_chunks(self) -> int:
        return sum(UnitCounts.from_row(d).n_chunks for d in self.done.values())
