"""Where a chunker's chunks come from: a chunker config run over the prepared books, the
benchmark's own sections, or a file of chunks written elsewhere (:mod:`.chunk_files`)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.rag.chunk_sets import ChunkerSpec, ChunkSet, count_unit_fallbacks
from litseg.rag.rows import text_of
from litseg.rag.config import DEFAULT_CONF_DIR, method_config
from litseg.rag.benchmarks.records import Benchmark
from litseg.segmentation.types import Chunk, Document
from litseg.utils.config import ConfigError, to_plain
from litseg.chunkers.build import build_chunker_from_config
from litseg.chunkers.spans import overlapping_sentences
from litseg.rag.derived_chunks import expand_derived
from litseg.rag.evaluation.chunk_files import load_chunkset
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.reconstruct import chunk_id


SECTIONS_METHOD = "benchmark_sections"


def resolve_chunkers(chunkers: Any, chunk_files: Sequence[Any] = (), conf_dir: Path = DEFAULT_CONF_DIR
                     ) -> list[ChunkerSpec]:
    """Turn the ``chunkers`` config into specs.

    ``chunkers`` is what Hydra composes from the ``chunkers`` group (label -> method config), or
    a list of method names / paths / mappings. A mapping with ``chunks: PATH`` reads chunks from
    an ``annotate.py`` run folder or a JSONL file; ``name: benchmark_sections`` uses the
    benchmark's own sections; any other ``name`` is a registered chunker. ``chunk_files`` adds
    more files (a path, or ``{label, path}``).
    """
    items: list[tuple[str | None, Any]] = []
    node = to_plain(chunkers)
    if node is None:
        node = []
    if isinstance(node, Mapping):
        items = [(str(k), v) for k, v in expand_derived(node).items()]
    elif isinstance(node, (list, tuple)):
        items = [(None, v) for v in node]
    elif isinstance(node, str):
        items = [(None, node)]
    else:
        raise TypeError(f"chunkers must be a mapping or a list, got {type(node).__name__}")
    for f in to_plain(chunk_files) or []:
        if isinstance(f, Mapping):
            items.append((f.get("label"), {"chunks": f.get("path") or f.get("chunks")}))
        else:
            items.append((None, {"chunks": str(f)}))
    specs: list[ChunkerSpec] = []
    for label, value in items:
        if value is None:
            continue  # a chunker removed with ~chunkers.x or set to null
        if isinstance(value, str):
            if Path(value).exists():
                value = {"chunks": value}
            elif value == SECTIONS_METHOD:
                value = {"name": SECTIONS_METHOD}
            else:
                value = method_config(value, conf_dir)
        if not isinstance(value, Mapping):
            raise TypeError(f"chunker {label!r}: expected a name or a mapping, got {value!r}")
        value = dict(value)
        own_label = value.pop("label", None)
        if value.get("chunks"):
            path = str(value["chunks"])
            specs.append(ChunkerSpec(label=str(own_label or label or _label_from_path(path)), kind="file", path=path))
        elif value.get("name") == SECTIONS_METHOD:
            specs.append(ChunkerSpec(label=str(own_label or label or "sections"), kind="sections"))
        elif value.get("name"):
            specs.append(ChunkerSpec(label=str(own_label or label or value["name"]), kind="method", method=value))
        else:
            raise ConfigError(f"chunker {label!r} needs `name` (a chunker) or `chunks` (a file or run folder)")
    labels = [s.label for s in specs]
    dup = [k for k, v in Counter(labels).items() if v > 1]
    if dup:
        raise ConfigError(f"two chunkers share the label(s) {dup}; give each a `label`")
    if not specs:
        raise ConfigError("no chunkers to evaluate: set chunkers=[token,recursive,...] or chunk_files=[...]")
    return specs


def _label_from_path(path: str) -> str:
    p = Path(path)
    summary = p / "run_summary.json" if p.is_dir() else None
    if summary is not None and summary.is_file():
        try:
            method = json.loads(summary.read_text(encoding="utf-8")).get("method")
            if method:
                return f"{method}@{p.name}"
        except json.JSONDecodeError:
            pass
    return p.stem if p.is_file() else p.name


def prepare_books(bench: Benchmark, *, max_words: int = 2000, max_sentence_words: int = 120,
                  keep_front_matter: bool = False, index_matter: bool = True,
                  progress: bool = False) -> dict[str, Document]:
    """Each book with a text as a :class:`Document` with units and sentences (as annotate.py
    prepares a book file, the matter settings included). Books without text are skipped; their
    questions cannot retrieve."""
    from tqdm.auto import tqdm

    docs: dict[str, Document] = {}
    for book in tqdm(bench.books, desc="prepare books", unit="book", disable=not progress, dynamic_ncols=True):
        if not book.has_text:
            continue
        doc = Document(book_id=book.book_id, text=book.load_text(), title=book.title,
                       author=text_of(book.meta, "author"), source_path=str(book.path or ""))
        prepare_document(doc, max_words=max_words, max_sentence_words=max_sentence_words,
                         keep_front_matter=keep_front_matter, index_matter=index_matter)
        docs[book.book_id] = doc
    return docs


def chunk_books(label: str, chunker: Any, docs: Mapping[str, Document], progress: bool = False) -> ChunkSet:
    """Chunk every unit of every document; a unit that fails is recorded (its fallback chunks,
    if the chunker gave any, are kept) and the run goes on."""
    from tqdm.auto import tqdm

    chunks: list[Chunk] = []
    failures: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for doc in tqdm(list(docs.values()), desc=f"chunk [{label}]", unit="book", disable=not progress,
                    dynamic_ncols=True):
        for res in chunker.chunk_units(doc, doc.units):
            if res.error is not None:
                failures.append({"book_id": res.book_id, "unit_id": res.unit_id, "error": res.error})
            chunks.extend(res.chunks)
            diagnostics.append(res.diagnostics)
    fp = chunker.fingerprint() if hasattr(chunker, "fingerprint") else {}
    return ChunkSet(label=label, method=str(getattr(chunker, "name", label)), chunks=chunks, source="chunked",
                    seconds=time.perf_counter() - t0, unit_failures=failures, config=fp,
                    unit_fallbacks=count_unit_fallbacks(diagnostics))


def sections_chunkset(label: str, bench: Benchmark, docs: Mapping[str, Document]) -> ChunkSet:
    """The benchmark's own units (FairytaleQA sections, GutenQA paragraphs) as chunks: the
    reference granularity the gold evidence was written against."""
    chunks: list[Chunk] = []
    missing = []
    for book in bench.books:
        doc = docs.get(book.book_id)
        if doc is None:
            continue
        if not book.sections:
            missing.append(book.book_id)
            continue
        labels = book.section_labels or [str(i) for i in range(1, len(book.sections) + 1)]
        for no, ((s, e), lab) in enumerate(zip(book.sections, labels), 1):
            unit = next((u for u in doc.units if u.start <= s < u.end), None)
            from_idx, to_idx = overlapping_sentences(unit, s, e) if unit and unit.sentences else (0, 0)
            ids = list(range(from_idx, to_idx + 1)) if from_idx else []
            text = doc.text[s:e]
            chunks.append(Chunk(book_id=book.book_id, unit_id=unit.unit_id if unit else "", method=SECTIONS_METHOD,
                                chunk_id=chunk_id(book.book_id, f"section-{lab}", no), from_idx=from_idx,
                                to_idx=to_idx, main_ids=ids,
                                context_ids=[], main_spans=[(s, e)], context_spans=[], main_text=text, text=text,
                                unit_title=unit.title if unit else "", metadata={"section": lab}))
    if missing and len(missing) == len(docs):
        raise ValueError(f"{bench.name} has no section spans; the '{SECTIONS_METHOD}' chunker needs them")
    warn = [f"{len(missing)} books without sections"] if missing else []
    return ChunkSet(label=label, method=SECTIONS_METHOD, chunks=chunks, source=bench.name, warnings=warn)


#: Config groups a chunker entry may carry itself (``chunkers.NAME.llm``, ``.prompt``, ``.feedback``).
OWN_GROUPS = ("llm", "prompt", "feedback")


def build_chunkset(spec: ChunkerSpec, bench: Benchmark, docs: Mapping[str, Document], *,
                   groups: Mapping[str, Any] | None = None, progress: bool = False) -> ChunkSet:
    """Produce the chunks of one spec. ``groups`` are the config groups a chunker may need
    (``llm``, ``prompt``, ``feedback``)."""
    if spec.kind == "file":
        assert spec.path is not None
        return load_chunkset(spec.label, spec.path, bench, docs)
    if spec.kind == "sections":
        return sections_chunkset(spec.label, bench, docs)
    # A chunker entry may bring its own model and prompt (e.g. the shipped student beside the
    # untrained model in one table); otherwise it reads the run's llm / prompt / feedback groups.
    method = dict(spec.method)
    own = {k: method.pop(k) for k in OWN_GROUPS if method.get(k) is not None}
    chunker = build_chunker_from_config(method, **{**dict(groups or {}), **own})
    try:
        if callable(getattr(chunker, "check", None)):
            chunker.check()  # a model folder or server that is not there: one line, before any unit
        cs = chunk_books(spec.label, chunker, docs, progress=progress)
    finally:
        close = getattr(chunker, "close", None)
        if callable(close):
            close()
    cs.config = {"method": spec.method, "fingerprint": cs.config}
    return cs
