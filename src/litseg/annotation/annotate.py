"""The annotation run behind ``annotate.py``: books in, chunk records out, resumable.

Each unit is keyed by the hash of its book id, text, sentence boundaries and everything that can
change its chunks (the chunker's fingerprint: method, parameters, model identity, prompt
version). A finished unit is committed to the run directory's ledger (:mod:`.store`); a rerun
into the same directory skips it, so a run killed at any moment (``kill -9`` included) restarts
without redoing or losing a unit. A book whose units are all committed is noted too, and a
restart skips it without reading it again.

Units of several books are handed to the chunker together (``window_units`` at a time) when it
can take them (``chunk_many``), so a batching backend sees wide batches across book boundaries.
A unit that fails outright is recorded in ``failures.jsonl``, counted, and left uncommitted (the
next run tries it again); the others go on. A unit the model could not be reached for (connection
refused, timeout, server errors after the backend's retries) is such a failure, never a fallback.

A run directory belongs to one setup (``setup.json``: the chunker's fingerprint and the
preprocessing settings, what :func:`unit_key` hashes besides the text). A run of another setup
into a directory that holds committed units is refused (:class:`RunSetupMismatch`): its units
would get other keys and land beside the old ones instead of resuming them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litseg.chunkers.base import Chunker, UnitResult
from litseg.errors import SetupError
from litseg.llm.base import stable_json
from litseg.annotation.sources import BookSource, file_hash
from litseg.annotation.store import ALL_FILES, FAILURES, LEDGER, RunStore
from litseg.utils.jsonl import iter_jsonl
from litseg.annotation.totals import CHUNKED, FAILED, SKIPPED, InputOutcomes, RunTotals, UnitCounts
from litseg.segmentation.reading import EmptyInput
from litseg.segmentation.types import Document, Unit
from litseg.utils.task import git_commit
from litseg.segmentation.preprocess import paragraph_starts

__all__ = ["MAX_LISTED_FAILURES", "SETUP", "SUMMARY", "RunSetupMismatch", "RunTotals", "UnitCounts", "annotate",
           "claim_run_dir", "holds_units", "recorded_setup", "run_setup", "sentence_rows",
           "setup_conflict", "setup_differences", "unit_key"]

log = logging.getLogger(__name__)

SUMMARY = "run_summary.json"
SETUP = "setup.json"
#: Failed units named in the summary (all of them are in failures.jsonl).
MAX_LISTED_FAILURES = 100


def unit_key(doc: Document, unit: Unit, fingerprint: dict[str, Any]) -> str:
    """Hash of the unit's book id, text and sentence boundaries, and of the chunker's fingerprint."""
    h = hashlib.sha256()
    h.update(doc.book_id.encode())
    h.update(b"\0" + unit.unit_id.encode() + b"\0")
    h.update(doc.text[unit.start : unit.end].encode("utf-8", "surrogatepass"))
    # Sentence boundaries depend on preprocessing settings: other boundaries, other answer.
    h.update(b"\0" + ",".join(f"{s.start - unit.start}:{s.end - unit.start}" for s in unit.sentences).encode())
    h.update(b"\0" + stable_json(fingerprint).encode())
    return h.hexdigest()[:32]


class RunSetupMismatch(SetupError):
    """A run directory holds committed units of another setup."""


def run_setup(fingerprint: dict[str, Any], prepare_settings: dict[str, Any] | None) -> dict[str, Any]:
    """What a run directory belongs to: the chunker's fingerprint (method, parameters, prompt
    version, model identity) and the preprocessing settings, as :func:`unit_key` hashes them."""
    return json.loads(stable_json({"fingerprint": fingerprint, "preprocess": prepare_settings or {}}))


def recorded_setup(out_dir: Path) -> dict[str, Any] | None:
    """The setup a run directory was written with: ``setup.json``, else the fingerprint in the
    ``run_summary.json`` of a run made before setup.json existed; None when neither is there."""
    for name in (SETUP, SUMMARY):
        path = Path(out_dir) / name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if name == SETUP and isinstance(data, dict):
            return data
        if isinstance(data, dict) and isinstance(data.get("fingerprint"), dict):
            return {"fingerprint": json.loads(stable_json(data["fingerprint"]))}
    return None


def holds_units(out_dir: Path) -> bool:
    """Whether the run directory has committed units."""
    return any("key" in row for row in iter_jsonl(Path(out_dir) / LEDGER))


def setup_differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``key: old before, new now`` for every setting that differs (dotted paths; the
    fingerprint's keys unprefixed, its ``name`` as ``method``). Only the parts ``before`` records
    are compared (an old run directory may record the fingerprint alone)."""
    def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(tree, dict) and tree:
            out: dict[str, Any] = {}
            for k, v in tree.items():
                out.update(flat(v, f"{prefix}.{k}" if prefix else str(k)))
            return out
        return {prefix: tree}

    def label(key: str) -> str:
        key = key.removeprefix("fingerprint.")
        return "method" if key == "name" else key

    def show(value: Any) -> str:
        text = "unset" if value is _UNSET else repr(value)
        return text if len(text) <= 60 else text[:57] + "..."

    a = flat({k: v for k, v in before.items() if k in now})
    b = flat({k: v for k, v in now.items() if k in before})
    keys = sorted(set(a) | set(b), key=lambda k: (label(k) != "method", label(k)))
    return [f"{label(k)}: {show(a.get(k, _UNSET))} before, {show(b.get(k, _UNSET))} now"
            for k in keys if a.get(k, _UNSET) != b.get(k, _UNSET)
            and not (k in ADDITIVE_SETTINGS and k not in a)]


_UNSET = object()
#: Settings added after runs were made that only add units beside the old ones (whose keys they
#: leave alone): a run directory made before one existed resumes under it.
ADDITIVE_SETTINGS = frozenset({"preprocess.index_matter"})


def setup_conflict(out_dir: Path, setup: dict[str, Any]) -> str | None:
    """Why ``out_dir`` cannot take a run of ``setup`` (one line), or None when it can."""
    recorded = recorded_setup(out_dir)
    if recorded is None or not holds_units(out_dir):
        return None
    differences = setup_differences(recorded, setup)
    if not differences:
        return None
    if differences[0].startswith("method:"):  # another chunker: its parameters differ as a matter of course
        shown = differences[0]
    else:
        shown = "; ".join(differences[:4]) + (f"; and {len(differences) - 4} more" if len(differences) > 4 else "")
    return (f"{out_dir} holds a run of another setup ({shown}). Units resume by a key over their text and "
            "this setup (unit_key), so this run would put a second segmentation beside the first instead "
            "of resuming it; use another hydra.run.dir, add +new_dir=true (a fresh folder beside this "
            "one), or resume=false (start this folder over)")


def claim_run_dir(out_dir: Path, setup: dict[str, Any]) -> None:
    """Refuse a directory holding another setup's units (:class:`RunSetupMismatch`); otherwise
    record ``setup`` as the directory's (setup.json)."""
    conflict = setup_conflict(out_dir, setup)
    if conflict:
        raise RunSetupMismatch(conflict)
    if recorded_setup(out_dir) != setup or not (Path(out_dir) / SETUP).is_file():
        write_json(Path(out_dir) / SETUP, setup)


def sentence_rows(doc: Document, unit: Unit) -> list[dict[str, Any]]:
    """One row per sentence; ``para`` says whether it opens a paragraph (a prompt cue the
    training-data builder needs without the source text)."""
    paras = paragraph_starts(doc.text, [(s.start, s.end) for s in unit.sentences])
    return [
        {"book_id": doc.book_id, "unit_id": unit.unit_id, "idx": s.idx, "start": s.start, "end": s.end,
         "text": doc.text[s.start : s.end], "para": para}
        for s, para in zip(unit.sentences, paras)
    ]


@dataclass
class _Book:
    source: BookSource
    doc: Document
    book_key: str
    n_units: int
    outstanding: int = 0
    failed: int = 0


@dataclass
class _Pending:
    book: _Book
    unit: Unit
    key: str


class _Annotation:
    """The state of one annotation run: the store, the totals, the window of pending units."""

    def __init__(self, chunker: Chunker, store: RunStore, out_dir: Path, progress: bool) -> None:
        from tqdm.auto import tqdm

        self.chunker, self.store, self.out_dir = chunker, store, out_dir
        self.totals = RunTotals()
        self.inputs = InputOutcomes()
        self.t0 = time.perf_counter()
        self.labels_to_ids = {str(row.get("source_path")): bid for bid, row in store.documents.items()}
        self.ids_in_run: set[str] = set()
        self.batchable = callable(getattr(chunker, "chunk_many", None))
        self.window: list[_Pending] = []
        self.bar = tqdm(total=0, unit="unit", disable=not progress, dynamic_ncols=True, desc=chunker.name)

    def finish_book(self, book: _Book) -> None:
        if book.outstanding == 0 and book.failed == 0 and book.book_key not in self.store.books:
            self.store.record_book(book.book_key, {"book_id": book.doc.book_id, "source": book.source.label,
                                                   "units": book.n_units})

    def handle(self, item: _Pending, res: UnitResult) -> None:
        book, totals = item.book, self.totals
        diag = _unit_diagnostics(book.doc, item.unit, res)
        if res.error is not None:
            self.store.record_failure(item.key, diag)
            totals.units_failed += 1
            if len(totals.failed_units) < MAX_LISTED_FAILURES:
                totals.failed_units.append({"book_id": book.doc.book_id, "unit_id": item.unit.unit_id,
                                            "error": str(res.error)[:300]})
            book.failed += 1
            self.inputs.set(book.source.label, FAILED, f"{book.failed} unit(s) failed")
            log.error("unit %s/%s failed: %s", book.doc.book_id, item.unit.unit_id, res.error)
        else:
            self.store.commit_unit(item.key, [c.to_dict() for c in res.chunks],
                                   sentence_rows(book.doc, item.unit), diag)
            totals.add(res, diag)
        book.outstanding -= 1
        self.finish_book(book)
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        self.bar.set_postfix(tok_s=f"{(totals.prompt_tokens + totals.completion_tokens) / elapsed:.0f}",
                             chunks=totals.chunks, failed=totals.units_failed)
        self.bar.update(1)

    def flush(self) -> None:
        items = list(self.window)
        self.window.clear()
        for item, res in _run_items(self.chunker, items, self.batchable):
            self.handle(item, res)

    def skip_finished_book(self, source: BookSource, book_key: str | None) -> bool:
        """Whether an earlier run finished the book (then it is counted as skipped, unread)."""
        if not book_key or book_key not in self.store.books:
            return False
        self.inputs.set(source.label, CHUNKED, "by an earlier run into this directory")
        self.totals.books_skipped += 1
        self.totals.units_skipped += int(self.store.books[book_key]["units"])
        return True

    def add_book(self, source: BookSource, book_key: str | None, units_of: Callable[[Document], list[Unit]],
                 fingerprint: dict[str, Any]) -> None:
        """Read one book and queue its unfinished units (a book that cannot be read is counted)."""
        try:
            doc = source.load()
        except EmptyInput:  # nothing to segment: reported, and no reason to fail the others
            log.warning("skipping %s: the file is empty", source.label)
            self.inputs.set(source.label, SKIPPED, "empty file")
            return
        except Exception as exc:  # noqa: BLE001 - one bad book must not stop a corpus
            log.error("cannot read %s: %s", source.label, exc)
            self.totals.books_failed.append({"path": source.label, "error": f"{type(exc).__name__}: {exc}"})
            self.inputs.set(source.label, FAILED, f"{type(exc).__name__}: {exc}")
            return
        self.inputs.set(source.label, CHUNKED)
        _assign_book_id(doc, source.label, self.labels_to_ids, self.store.documents, self.ids_in_run)
        self.totals.books += 1
        _record_document(self.store, self.out_dir, doc, source)
        keyed = [(u, unit_key(doc, u, fingerprint)) for u in units_of(doc)]
        pending = [(u, k) for u, k in keyed if not self.store.is_done(k)]
        self.totals.units_skipped += len(keyed) - len(pending)
        book = _Book(source, doc, book_key, len(keyed), outstanding=len(pending))
        if not pending:
            self.finish_book(book)
            return
        self.bar.total += len(pending)
        self.bar.refresh()
        self.window.extend(_Pending(book, u, k) for u, k in pending)


def annotate(
    *,
    inputs: Iterable[BookSource | Path | str],
    chunker: Chunker,
    out_dir: Path,
    prepare: Callable[[Any], Document] | None = None,
    limit_units: int | None = None,
    resume: bool = True,
    progress: bool = True,
    window_units: int = 256,
    prepare_settings: dict[str, Any] | None = None,
    extra_summary: dict[str, Any] | None = None,
    durable: bool = True,
    commit: str | None = None,
) -> dict[str, Any]:
    """Chunk every unit of every input book into ``out_dir``; returns the run summary.

    ``inputs`` are :class:`BookSource` objects, or paths read with ``prepare(path) -> Document``
    (which raises on unreadable input). ``prepare_settings`` (the preprocessing config) is part of
    the key that lets a restart skip a finished book unread. ``commit``: the git commit recorded
    (looked up when not given).
    """
    out_dir = Path(out_dir)
    fingerprint = chunker.fingerprint()
    store = _open_store(out_dir, run_setup(fingerprint, prepare_settings), resume, durable)
    run = _Annotation(chunker, store, out_dir, progress)
    book_salt = stable_json({"fingerprint": fingerprint, "prepare": prepare_settings or {}, "limit": limit_units})

    def units_of(doc: Document) -> list[Unit]:
        return doc.units[:limit_units] if limit_units else doc.units

    try:
        for source in _as_sources(inputs, prepare):
            if source.skip_reason is not None:
                log.warning("skipping %s: %s", source.label, source.skip_reason)
                run.inputs.set(source.label, SKIPPED, source.skip_reason)
                continue
            book_key = _book_key(source, book_salt)
            if resume and run.skip_finished_book(source, book_key):
                continue
            run.add_book(source, book_key, units_of, fingerprint)
            if run.window and (not run.batchable or len(run.window) >= window_units):
                run.flush()
        if run.window:
            run.flush()
    finally:
        run.bar.close()
        store.close()
    run.totals.seconds = time.perf_counter() - run.t0
    inputs = {"inputs": run.inputs.to_list(), "inputs_skipped": run.inputs.count(SKIPPED)}
    summary = _summary(chunker.name, fingerprint, commit or git_commit(), {**(extra_summary or {}), **inputs},
                       run.totals, out_dir)
    write_json(out_dir / SUMMARY, summary)
    return summary


def _open_store(out_dir: Path, setup: dict[str, Any], resume: bool, durable: bool) -> RunStore:
    """The run directory's store, opened (locked) and claimed for ``setup``; ``resume=False``
    clears the directory first."""
    if not resume:
        _clear_run_files(out_dir)
        (out_dir / SETUP).unlink(missing_ok=True)
    store = RunStore(out_dir, durable=durable).open()
    try:
        claim_run_dir(out_dir, setup)  # under the lock: no other writer between the check and the claim
    except BaseException:
        store.close()
        raise
    if store.recovered:
        log.warning("cut off leftovers of an interrupted run: %s", dict(store.recovered))
    return store


def _summary(method: str, fingerprint: dict[str, Any], commit: str | None, extra: dict[str, Any] | None,
             totals: RunTotals, out_dir: Path) -> dict[str, Any]:
    """This run's totals beside those of the whole run directory (read back from the ledger)."""
    in_dir = RunTotals()
    for row in iter_jsonl(out_dir / LEDGER):
        in_dir.add(None, row)
    return {
        "method": method,
        "fingerprint": fingerprint,
        "git_commit": commit,
        **(extra or {}),
        **totals.to_dict(),
        "units_total_in_dir": in_dir.units,
        "chunks_total_in_dir": in_dir.chunks,
        "failures_file": FAILURES if totals.units_failed else None,
        "in_dir": in_dir.to_dict(),
    }


def _as_sources(inputs: Iterable[BookSource | Path | str], prepare: Callable[[Any], Document] | None
                ) -> Iterator[BookSource]:
    for item in inputs:
        if isinstance(item, BookSource):
            yield item
            continue
        if prepare is None:
            raise ValueError("annotate: plain paths need prepare= (or pass BookSource objects)")
        path = Path(item)
        yield BookSource(str(path), (lambda p=path: prepare(p)), (lambda p=path: file_hash(p)))


def _book_key(source: BookSource, salt: str) -> str | None:
    try:
        content = source.content_id()
    except OSError as exc:  # unreadable: loading it will report the error properly
        log.debug("no content id for %s: %s", source.label, exc)
        return None
    return hashlib.sha256(f"{source.label}\0{content}\0{salt}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _assign_book_id(doc: Document, label: str, labels_to_ids: dict[str, str],
                    documents: dict[str, dict[str, Any]], ids_in_run: set[str]) -> None:
    """Keep book ids unique: two files named alike in different folders get distinct ids, and
    a restart gives every source the id it had before."""
    book_id = labels_to_ids.get(label)
    if book_id is None:
        book_id = doc.book_id
        taken = (book_id in documents and str(documents[book_id].get("source_path")) != label) or book_id in ids_in_run
        if taken:
            book_id = f"{book_id}-{hashlib.sha256(label.encode()).hexdigest()[:8]}"
        labels_to_ids[label] = book_id
    ids_in_run.add(book_id)
    if book_id != doc.book_id:
        doc.book_id = book_id
        for unit in doc.units:
            unit.book_id = book_id


def _run_items(chunker: Chunker, items: list[_Pending], batchable: bool) -> Iterator[tuple[_Pending, UnitResult]]:
    """Results for every item; if the chunker's batch breaks off, the rest run one by one."""
    remaining = {(it.book.doc.book_id, it.unit.unit_id): it for it in items}
    try:
        if batchable:
            results: Iterable[UnitResult] = chunker.chunk_many([(it.book.doc, it.unit) for it in items])  # type: ignore[attr-defined]
        else:
            results = _per_book(chunker, items)
        for res in results:
            item = remaining.pop((res.book_id, res.unit_id), None)
            if item is None:
                log.warning("chunker returned an unexpected unit %s/%s", res.book_id, res.unit_id)
                continue
            yield item, res
    except SetupError:
        raise  # the model cannot serve at all: stop the run once, not unit by unit
    except Exception:  # noqa: BLE001 - the batch broke; finish its units one by one
        log.exception("%s: a batch failed; running its %d remaining unit(s) one by one", chunker.name, len(remaining))
    for item in list(remaining.values()):
        try:
            res = chunker.chunk_unit(item.book.doc, item.unit)
        except SetupError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded as this unit's failure
            res = UnitResult(item.book.doc.book_id, item.unit.unit_id, [], {}, error=f"{type(exc).__name__}: {exc}")
        yield item, res


def _per_book(chunker: Chunker, items: list[_Pending]) -> Iterator[UnitResult]:
    by_book: dict[str, list[_Pending]] = {}
    for it in items:
        by_book.setdefault(it.book.doc.book_id, []).append(it)
    for group in by_book.values():
        yield from chunker.chunk_units(group[0].book.doc, [it.unit for it in group])


def _clear_run_files(out_dir: Path) -> None:
    for name in ALL_FILES:
        (out_dir / name).unlink(missing_ok=True)


def _unit_diagnostics(doc: Document, unit: Unit, res: UnitResult) -> dict[str, Any]:
    d = dict(res.diagnostics)
    d.update(
        book_id=doc.book_id,
        unit_id=unit.unit_id,
        unit_index=unit.index,
        unit_title=unit.title,
        n_sentences=unit.n_sentences,
        n_words=len(doc.text[unit.start : unit.end].split()),
        n_chunks=len(res.chunks),
        error=res.error,
    )
    d.setdefault("tries", 1)
    d.setdefault("fallback", "none")
    d["matter"] = unit.matter  # a preface, notes ... kept retrievable (preprocess.index_matter); "" for narrative
    if unit.part is not None:  # a chapter longer than preprocess.max_words, cut into pieces
        d["cut"] = {"reason": "word_cap", "part": unit.part[0], "parts": unit.part[1]}
    return d


def _record_document(store: RunStore, out_dir: Path, doc: Document, source: BookSource) -> None:
    """Note each book once; keep the decoded text when it is not a plain text file on disk."""
    if doc.book_id in store.documents:
        return
    text_file = None
    if source.stored_text or Path(doc.source_path).suffix.lower() not in {".txt", ".md", ""}:
        text_file = out_dir / "documents" / f"{doc.book_id}.txt"
        text_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = text_file.with_suffix(".tmp")
        tmp.write_text(doc.text, encoding="utf-8", newline="")
        os.replace(tmp, text_file)
    store.record_document({
        "book_id": doc.book_id, "title": doc.title, "author": doc.author, "source_path": source.label,
        "encoding": doc.encoding, "sha256": hashlib.sha256(doc.text.encode("utf-8", "surrogatepass")).hexdigest(),
        "n_chars": len(doc.text), "n_units": len(doc.units), "text_file": str(text_file) if text_file else None,
        "warnings": doc.warnings,
        # front and back matter kept out of the units, with reasons and word counts
        "matter": [m.to_dict(doc.text) for m in getattr(doc, "matter", [])],
    })


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
