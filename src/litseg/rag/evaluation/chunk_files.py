"""Chunks written elsewhere (an ``annotate.py`` run folder or a JSONL file), checked against the
benchmark's book texts."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from litseg.rag.rows import text_of
from litseg.rag.benchmarks.records import Benchmark
from litseg.rag.chunk_sets import ChunkSet, count_unit_fallbacks
from litseg.segmentation.types import Chunk, Document
from litseg.utils.jsonl import read_jsonl


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def load_chunkset(label: str, path: str | Path, bench: Benchmark, docs: Mapping[str, Document]) -> ChunkSet:
    """Chunks written elsewhere: an ``annotate.py`` run folder (``chunks.jsonl`` with
    ``documents.jsonl``) or any JSONL file of chunk records.

    A record needs a ``book_id`` and its spans (``main_spans`` or ``start``/``end``) as
    character offsets into the book's text. Run folders map their books to the benchmark's by
    the text's SHA-256 (so any file name works), else by id; plain files by ``book_id``. Spans
    are checked against the benchmark text, and ``main_text``, when given, must equal the text
    at the spans: chunks of another edition of a book are refused with the first mismatch.
    """
    p = Path(path)
    if p.is_dir():
        chunk_file = p / "chunks.jsonl"
        if not chunk_file.is_file():
            raise FileNotFoundError(f"{p} holds no chunks.jsonl (not an annotate.py run folder)")
    elif p.is_file():
        chunk_file = p
    else:
        raise FileNotFoundError(f"chunk file or run folder {p} does not exist")
    rows = read_jsonl(chunk_file)
    if not rows:
        raise ValueError(f"{chunk_file}: no chunk records")
    mapping = _book_mapping(p, bench, docs)
    chunks: list[Chunk] = []
    unknown: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    for n, row in enumerate(rows, 1):
        src_book = text_of(row, "book_id")
        if not src_book:
            raise ValueError(f"{chunk_file}: record {n} has no book_id")
        book_id = mapping.get(src_book, src_book)
        doc = docs.get(book_id)
        if doc is None:
            unknown[src_book] += 1
            continue
        chunk = _chunk_from_row(row, book_id, doc.text, f"{chunk_file}: record {n}")
        methods[chunk.method] += 1
        chunks.append(chunk)
    if not chunks:
        raise ValueError(f"{chunk_file}: none of its books ({', '.join(sorted(unknown)[:5])}) is a book of "
                         f"{bench.name} ({', '.join(sorted(docs)[:5])}...)")
    warnings = []
    if unknown:
        warnings.append(f"{sum(unknown.values())} chunks of {len(unknown)} books not in {bench.name} ignored")
    covered = {c.book_id for c in chunks}
    absent = sorted(set(docs) - covered)
    if absent:
        warnings.append(f"{len(absent)} benchmark books have no chunks (their questions count as misses): "
                        f"{', '.join(absent[:5])}")
    # An annotate.py run folder says per unit how its chunks came about. The run writes a
    # `fallback` for every unit; only a unit answered through a model (`calls`) has one to report,
    # so a baseline's row stays "no fallbacks" (None), as the chunker itself reports it.
    diag_file = p / "diagnostics.jsonl" if p.is_dir() else None
    fallbacks = None
    if diag_file is not None and diag_file.is_file():
        kept = {mapping.get(b, b) for b in {text_of(r, "book_id") for r in rows}} & set(docs)
        fallbacks = count_unit_fallbacks(d for d in read_jsonl(diag_file) if "calls" in d
                                         and mapping.get(text_of(d, "book_id"), text_of(d, "book_id")) in kept)
    return ChunkSet(label=label, method=methods.most_common(1)[0][0], chunks=chunks, source=str(p),
                    warnings=warnings, unit_fallbacks=fallbacks)


def _book_mapping(p: Path, bench: Benchmark, docs: Mapping[str, Document]) -> dict[str, str]:
    """Source book id -> benchmark book id, from the run folder's documents.jsonl."""
    docs_file = p / "documents.jsonl" if p.is_dir() else p.with_name("documents.jsonl")
    if not docs_file.is_file():
        return {}
    by_sha = {_text_sha(d.text): bid for bid, d in docs.items()}
    out = {}
    for row in read_jsonl(docs_file):
        bid = text_of(row, "book_id")
        target = by_sha.get(text_of(row, "sha256"))
        if bid and target:
            out[bid] = target
    return out


def _chunk_from_row(row: Mapping[str, Any], book_id: str, text: str, where: str) -> Chunk:
    spans = row.get("main_spans")
    if not spans:
        if row.get("start") is None or row.get("end") is None:
            raise ValueError(f"{where}: needs main_spans or start/end")
        spans = [[row["start"], row["end"]]]
    try:
        main_spans = [(int(s), int(e)) for s, e in spans]
    except (TypeError, ValueError):
        raise ValueError(f"{where}: main_spans must be [[start, end], ...], got {spans!r}") from None
    for s, e in main_spans:
        if not 0 <= s < e <= len(text):
            raise ValueError(f"{where}: span ({s}, {e}) lies outside book {book_id!r} ({len(text)} characters); "
                             "were the chunks made from another text of this book?")
    main_text = "".join(text[s:e] for s, e in main_spans)
    given = row.get("main_text")
    if given and given != main_text:
        raise ValueError(f"{where}: main_text differs from the book text at its spans {main_spans[:2]} "
                         f"({given[:40]!r} vs {main_text[:40]!r}); the chunks were made from another edition")
    d = dict(row)
    d.update(book_id=book_id, main_spans=main_spans, main_text=main_text)
    d.setdefault("unit_id", "")
    d.setdefault("chunk_id", f"{book_id}:{main_spans[0][0]}")
    d.setdefault("method", "external")
    d.setdefault("from_idx", 0)
    d.setdefault("to_idx", 0)
    d.setdefault("main_ids", [])
    d.setdefault("context_ids", [])
    d.setdefault("context_spans", [])
    if not d.get("text"):
        d["text"] = main_text
    return Chunk.from_dict(d)
