"""Where a chunker's chunks come from: a chunker config run over the benchmark's books by the
annotation run of ``annotate.py`` (one resumable run folder per chunker, read back as a run folder
by :mod:`.chunk_files`), the benchmark's own sections, or a file of chunks written elsewhere."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litseg.annotation.annotate import RunSetupMismatch
from litseg.annotation.entry import annotate_books
from litseg.annotation.sources import BookSource, Prepare
from litseg.rag.chunk_sets import ChunkerSpec, ChunkSet
from litseg.rag.rows import text_of
from litseg.rag.config import DEFAULT_CONF_DIR, method_config
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook
from litseg.segmentation.types import Chunk, Document
from litseg.utils.config import ConfigError, to_plain
from litseg.chunkers.build import build_chunker_from_config
from litseg.llm.factory import llm_config_from
from litseg.segmentation.config import PreprocessConfig
from litseg.chunkers.spans import overlapping_sentences
from litseg.rag.derived_chunks import expand_derived
from litseg.rag.evaluation.chunk_files import load_chunkset
from litseg.segmentation.reading import slugify
from litseg.segmentation.reconstruct import chunk_id


SECTIONS_METHOD = "benchmark_sections"
#: The source of a chunk set a chunker made in this run (not read from a file).
CHUNKED = "chunked"


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


def benchmark_sources(bench: Benchmark, prepare: Prepare) -> list[BookSource]:
    """The benchmark's books that have a text, as book sources of an annotation run: read with
    ``prepare`` (the annotation's reader, :func:`litseg.annotation.entry.document_reader`), keyed
    on restart by their text. Books without text are left out; their questions cannot retrieve."""

    def document(book: BenchmarkBook) -> Document:
        return Document(book_id=book.book_id, text=book.load_text(), title=book.title,
                        author=text_of(book.meta, "author"), source_path=str(book.path or ""))

    def text_hash(book: BenchmarkBook) -> str:
        return hashlib.sha256(book.load_text().encode("utf-8", "surrogatepass")).hexdigest()

    # The label names the book in the run folder's documents.jsonl: the benchmark and the book id
    # keep it unique where two books share a file name.
    return [BookSource(f"{bench.name}:{book.book_id}", (lambda book=book: prepare(document(book))),
                       (lambda book=book: text_hash(book)))
            for book in bench.books if book.has_text]


def read_books(sources: Sequence[BookSource]) -> dict[str, Document]:
    """Each source's document, as the annotation run reads it, by book id."""
    docs = (source.load() for source in sources)
    return {doc.book_id: doc for doc in docs}


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


@dataclass(frozen=True)
class ChunkerRuns:
    """How the chunkers of one evaluation chunk: each through an annotation run (the machinery of
    ``annotate.py``) over the benchmark's books, in its own folder ``<runs_dir>/<label>``, which a
    rerun into the same place resumes. ``groups`` are the run's ``llm`` / ``prompt`` /
    ``feedback`` groups, ``preprocess`` its preprocess group (``max_words: auto`` included)."""

    runs_dir: Path
    preprocess: PreprocessConfig
    groups: Mapping[str, Any]
    window_units: int
    progress: bool = False

    def folder(self, label: str) -> Path:
        return self.runs_dir / slugify(label)


def build_chunkset(spec: ChunkerSpec, bench: Benchmark, docs: Mapping[str, Document], *,
                   runs: ChunkerRuns | None = None) -> ChunkSet:
    """Produce the chunks of one spec: a file read, the benchmark's sections, or a chunker run
    through the annotation run (``runs``) and its chunks read back from the run folder."""
    if spec.kind == "file":
        assert spec.path is not None
        return load_chunkset(spec.label, spec.path, bench, docs)
    if spec.kind == "sections":
        return sections_chunkset(spec.label, bench, docs)
    if runs is None:
        raise ValueError(f"chunker {spec.label!r}: a chunker config needs ChunkerRuns to run in")
    return annotated_chunkset(spec, bench, docs, runs)


def annotated_chunkset(spec: ChunkerSpec, bench: Benchmark, docs: Mapping[str, Document],
                       runs: ChunkerRuns) -> ChunkSet:
    """The chunker of ``spec`` run over the benchmark by the annotation run (batching across
    books, resuming what its folder holds) and read back like any run folder. Failed units have no
    chunks; they are listed in ``unit_failures`` (and the summary) so that the run counts them."""
    # A chunker entry may bring its own model and prompt (e.g. the shipped student beside the
    # untrained model in one table); otherwise it reads the run's llm / prompt / feedback groups.
    method = dict(spec.method)
    own = {k: method.pop(k) for k in OWN_GROUPS if method.get(k) is not None}
    if "llm" in own:  # the entry's own llm section, typed as the run's is
        own["llm"] = llm_config_from(own["llm"], f"chunkers.{spec.label}.llm")
    groups = {**dict(runs.groups), **own}
    chunker = build_chunker_from_config(method, **groups)
    folder = runs.folder(spec.label)
    try:
        summary = annotate_books(chunker, lambda prepare: benchmark_sources(bench, prepare), folder,
                                 preprocess=runs.preprocess, llm_config=groups.get("llm"),
                                 window_units=runs.window_units, progress=runs.progress,
                                 extra_summary={"input": f"{bench.name} (evaluate.py, chunker {spec.label})"})
    except RunSetupMismatch as exc:
        raise RunSetupMismatch(f"chunkers.{spec.label}: {folder} holds chunks of another setup of this chunker; "
                               "evaluate into another hydra.run.dir (a rerun of the same command resumes)") from exc
    failures = [*({"book_id": "", "unit_id": "", "error": f"{b['path']}: {b['error']}"}
                  for b in summary["books_failed"]), *summary["failed_units"]]
    if summary["chunks_total_in_dir"] == 0:
        cs = ChunkSet(label=spec.label, method=chunker.name, chunks=[], source=CHUNKED)
    else:
        cs = load_chunkset(spec.label, folder, bench, docs)
    cs.source = CHUNKED  # made by this run (the report saves such chunks); the folder is in config
    cs.seconds = float(summary["seconds"])
    cs.unit_failures = failures
    cs.config = {"method": spec.method, "fingerprint": summary["fingerprint"], "run_dir": str(folder),
                 "word_cap": summary["word_cap"]}
    cs.run_failures = {"units_failed": int(summary["units_failed"]), "books_failed": len(summary["books_failed"]),
                       "run_dir": str(folder)} if failures else None
    return cs
