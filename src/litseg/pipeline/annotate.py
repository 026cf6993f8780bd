"""The annotation run behind ``annotate.py``: books in, chunk records out, resumable.

Each unit is keyed by the hash of its text and of everything that can change its chunks (the
chunker's fingerprint: method, parameters, model identity, prompt version). A finished unit is
committed to the run directory's ledger; a rerun into the same directory skips it, so a run
killed at any moment restarts without redoing or losing a unit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litseg.chunkers.base import Chunker, UnitResult
from litseg.llm.base import stable_json
from litseg.pipeline.store import RunStore
from litseg.segmentation.types import Document, Unit

log = logging.getLogger(__name__)


def unit_key(doc: Document, unit: Unit, fingerprint: dict[str, Any]) -> str:
    h = hashlib.sha256()
    h.update(doc.book_id.encode())
    h.update(b"\0" + unit.unit_id.encode() + b"\0")
    h.update(doc.text[unit.start : unit.end].encode("utf-8", "surrogatepass"))
    h.update(b"\0" + stable_json(fingerprint).encode())
    return h.hexdigest()[:32]


def sentence_rows(doc: Document, unit: Unit) -> list[dict[str, Any]]:
    return [
        {"book_id": doc.book_id, "unit_id": unit.unit_id, "idx": s.idx, "start": s.start, "end": s.end,
         "text": doc.text[s.start : s.end]}
        for s in unit.sentences
    ]


@dataclass
class RunTotals:
    books: int = 0
    books_failed: list[dict[str, str]] = field(default_factory=list)
    units: int = 0
    units_skipped: int = 0
    units_failed: int = 0
    chunks: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    repairs: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    source_words: int = 0

    def add(self, res: UnitResult, diag: dict[str, Any]) -> None:
        self.units += 1
        self.chunks += len(res.chunks)
        self.units_failed += int(res.error is not None)
        self.calls += int(diag.get("calls", 0))
        self.prompt_tokens += int(diag.get("prompt_tokens", 0))
        self.cached_tokens += int(diag.get("cached_tokens", 0))
        self.completion_tokens += int(diag.get("completion_tokens", 0))
        self.retries += max(0, int(diag.get("tries", 1)) - 1)
        self.repairs += len(diag.get("repairs", []) or [])
        fb = str(diag.get("fallback", "none"))
        self.fallbacks[fb] = self.fallbacks.get(fb, 0) + 1
        self.source_words += int(diag.get("n_words", 0))


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def annotate(
    *,
    inputs: list[Path],
    chunker: Chunker,
    out_dir: Path,
    prepare: Any,
    limit_units: int | None = None,
    resume: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Chunk every unit of every input book into ``out_dir``; returns the run summary.

    ``prepare(path) -> Document`` reads and indexes one book (raising on unreadable input).
    """
    from tqdm.auto import tqdm

    store = RunStore(out_dir).open() if resume else _fresh_store(out_dir)
    totals = RunTotals()
    t0 = time.perf_counter()
    fingerprint = chunker.fingerprint()
    docs_path = out_dir / "documents.jsonl"
    bar = tqdm(total=0, unit="unit", disable=not progress, dynamic_ncols=True, desc=chunker.name)
    for path in inputs:
        try:
            doc = prepare(path)
        except Exception as exc:  # noqa: BLE001 - one bad book must not stop a batch
            log.error("cannot read %s: %s", path, exc)
            totals.books_failed.append({"path": str(path), "error": f"{type(exc).__name__}: {exc}"})
            continue
        totals.books += 1
        _record_document(docs_path, out_dir, doc)
        units = doc.units[:limit_units] if limit_units else doc.units
        keyed = [(u, unit_key(doc, u, fingerprint)) for u in units]
        pending = [(u, k) for u, k in keyed if not store.is_done(k)]
        totals.units_skipped += len(keyed) - len(pending)
        bar.total += len(pending)
        bar.refresh()
        by_id = {u.unit_id: (u, k) for u, k in pending}
        results = chunker.chunk_units(doc, [u for u, _ in pending])
        while True:
            try:
                res = next(results)
            except StopIteration:
                break
            unit, key = by_id[res.unit_id]
            diag = _unit_diagnostics(doc, unit, res)
            store.commit_unit(key, [c.to_dict() for c in res.chunks], sentence_rows(doc, unit), diag)
            totals.add(res, diag)
            elapsed = max(time.perf_counter() - t0, 1e-9)
            bar.set_postfix(tok_s=f"{(totals.prompt_tokens + totals.completion_tokens) / elapsed:.0f}",
                            chunks=totals.chunks, failed=totals.units_failed)
            bar.update(1)
    bar.close()
    totals.seconds = time.perf_counter() - t0
    summary = {
        "method": chunker.name,
        "fingerprint": fingerprint,
        "git_commit": git_commit(),
        "inputs": [str(p) for p in inputs],
        **{k: v for k, v in totals.__dict__.items()},
        "units_total_in_dir": len(store.done),
        "chunks_total_in_dir": len(store.chunks()),
    }
    (out_dir / "run_summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def _fresh_store(out_dir: Path) -> RunStore:
    for name in ("chunks.jsonl", "sentences.jsonl", "diagnostics.jsonl", "documents.jsonl"):
        (out_dir / name).unlink(missing_ok=True)
    return RunStore(out_dir).open()


def _unit_diagnostics(doc: Document, unit: Unit, res: UnitResult) -> dict[str, Any]:
    d = dict(res.diagnostics)
    d.update(
        book_id=doc.book_id,
        unit_id=unit.unit_id,
        unit_title=unit.title,
        n_sentences=unit.n_sentences,
        n_words=len(doc.text[unit.start : unit.end].split()),
        n_chunks=len(res.chunks),
        error=res.error,
    )
    d.setdefault("tries", 1)
    d.setdefault("fallback", "none")
    return d


def _record_document(path: Path, out_dir: Path, doc: Document) -> None:
    """Note each book once; keep the decoded text when it is not the file itself (EPUB, HTML)."""
    seen = {r.get("book_id") for r in _read(path)}
    if doc.book_id in seen:
        return
    text_file = None
    if Path(doc.source_path).suffix.lower() not in {".txt", ".md", ""}:
        text_file = out_dir / "documents" / f"{doc.book_id}.txt"
        text_file.parent.mkdir(parents=True, exist_ok=True)
        text_file.write_text(doc.text, encoding="utf-8", newline="")
    row = {
        "book_id": doc.book_id, "title": doc.title, "author": doc.author, "source_path": doc.source_path,
        "encoding": doc.encoding, "sha256": hashlib.sha256(doc.text.encode("utf-8", "surrogatepass")).hexdigest(),
        "n_chars": len(doc.text), "n_units": len(doc.units), "text_file": str(text_file) if text_file else None,
        "warnings": doc.warnings,
    }
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _read(path: Path) -> list[dict[str, Any]]:
    from litseg.pipeline.store import read_jsonl

    return read_jsonl(path)
