"""The chunker evaluation behind ``evaluate.py``: benchmark in, one comparable report per chunker out.

For each chunker (a method config, the benchmark's own sections, or a file of chunks written
elsewhere) the same fixed components run:

1. the benchmark's books are prepared once (units and sentences, as ``annotate.py`` does) and
   chunked per unit, or chunks are loaded and checked against the book texts;
2. the chunks are indexed (dense + BM25 vectors in one Qdrant collection, book id as payload);
3. every question retrieves within its own book (hybrid fusion), then the reranker reorders;
4. optionally an LLM answers from the top chunks and an LLM judge rates context and answer;
5. everything is scored: retrieval against gold evidence with the size confounders beside it
   (random-ranking Hit@1, chunks per book, words per chunk, share over the embedder's window,
   gold evidence recovered within a fixed character budget), book-level bootstrap intervals,
   answer metrics, judge scores with failure rates, and segment quality.

Per-question rows are kept so that any two chunkers can be compared pairwise
(:func:`pairwise_table`). :mod:`litseg.rag.report` writes the tables and plots.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litseg.rag.datasets import Benchmark, Question, load_benchmark
from litseg.segmentation.types import Chunk, Document

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_CONF_DIR = REPO_ROOT / "conf"
SECTIONS_METHOD = "benchmark_sections"
Span = tuple[int, int]


# ===================================================================================== settings
@dataclass(slots=True)
class EvalSettings:
    """Scoring settings shared by every chunker of a run."""

    ks: tuple[int, ...] = (1, 3, 5, 10)
    mrr_k: int = 10
    budgets: tuple[int, ...] = (1500,)  # characters of ranked chunks read for the size-fair measure
    min_overlap: float = 0.5  # span relevance: overlap >= this share of the shorter of chunk and gold
    string_field: str = "main_text"  # chunk text searched for evidence strings (main_text | text)
    index_text: str = "text"  # chunk text that is embedded and BM25-indexed (text | main_text)
    confidence: float = 0.95
    n_resamples: int = 2000
    seed: int = 0
    segment_quality: bool = True
    keep_top: int = 10  # chunk ids kept per question in the per-question rows
    progress: bool = True

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "EvalSettings":
        m = dict(cfg)
        out = cls()
        for name in ("mrr_k", "n_resamples", "seed", "keep_top"):
            if m.get(name) is not None:
                setattr(out, name, int(m[name]))
        for name in ("min_overlap", "confidence"):
            if m.get(name) is not None:
                setattr(out, name, float(m[name]))
        for name in ("string_field", "index_text"):
            if m.get(name) is not None:
                setattr(out, name, str(m[name]))
        for name in ("segment_quality", "progress"):
            if m.get(name) is not None:
                setattr(out, name, bool(m[name]))
        if m.get("ks"):
            out.ks = tuple(int(k) for k in m["ks"])
        if m.get("budgets"):
            out.budgets = tuple(int(b) for b in m["budgets"])
        if out.string_field not in ("main_text", "text") or out.index_text not in ("main_text", "text"):
            raise ValueError("metrics.string_field and metrics.index_text must be 'main_text' or 'text'")
        return out


# ================================================================================ chunk sources
@dataclass(slots=True)
class ChunkerSpec:
    """What to evaluate under ``label``: a chunker config (``kind="method"``), the benchmark's
    own sections (``"sections"``) or chunks from a file (``"file"``)."""

    label: str
    kind: str
    method: dict[str, Any] = field(default_factory=dict)
    path: str | None = None


def _plain(node: Any) -> Any:
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(node, (DictConfig, ListConfig)):
            return OmegaConf.to_container(node, resolve=True)
    except ImportError:
        pass
    return node


def load_method_config(name: str, conf_dir: Path = DEFAULT_CONF_DIR) -> dict[str, Any]:
    """``conf/method/<name>.yaml`` as a dict (the parameters ``annotate.py method=<name>`` uses),
    with the entries of its defaults list of the form ``/group@key: option`` filled in (e.g.
    ``/prompt@template: lumberchunker`` loads ``conf/prompt/lumberchunker.yaml`` into ``template``).
    Under Hydra the ``chunkers`` group composes the same thing; this serves the list form used
    from Python."""
    from omegaconf import OmegaConf

    conf_dir = Path(conf_dir)
    path = conf_dir / "method" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (conf_dir / "method").glob("*.yaml"))
        raise ValueError(f"unknown chunker {name!r}: no {path}; methods: {', '.join(known)}")
    data = dict(_plain(OmegaConf.load(path)))
    out: dict[str, Any] = {}
    for entry in data.pop("defaults", None) or []:
        if entry == "_self_":
            continue
        if not isinstance(entry, Mapping) or len(entry) != 1:
            raise ValueError(f"{path}: cannot read defaults entry {entry!r} outside Hydra")
        (target, option), = entry.items()
        group, _, key = str(target).lstrip("/").partition("@")
        if not key or key == "_here_":
            raise ValueError(f"{path}: defaults entry {entry!r} needs a '@key' package outside Hydra")
        sub = conf_dir / group / f"{option}.yaml"
        if not sub.is_file():
            raise ValueError(f"{path}: defaults entry {entry!r}: no {sub}")
        out[key] = _plain(OmegaConf.load(sub))
    out.update(data)
    return out


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
    node = _plain(chunkers)
    if node is None:
        node = []
    if isinstance(node, Mapping):
        from litseg.rag.derived_chunks import expand_derived

        items = [(str(k), v) for k, v in expand_derived(node).items()]
    elif isinstance(node, (list, tuple)):
        items = [(None, v) for v in node]
    elif isinstance(node, str):
        items = [(None, node)]
    else:
        raise TypeError(f"chunkers must be a mapping or a list, got {type(node).__name__}")
    for f in _plain(chunk_files) or []:
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
                value = load_method_config(value, conf_dir)
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
            raise ValueError(f"chunker {label!r} needs `name` (a chunker) or `chunks` (a file or run folder)")
    labels = [s.label for s in specs]
    dup = [k for k, v in Counter(labels).items() if v > 1]
    if dup:
        raise ValueError(f"two chunkers share the label(s) {dup}; give each a `label`")
    if not specs:
        raise ValueError("no chunkers to evaluate: set chunkers=[token,recursive,...] or chunk_files=[...]")
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


@dataclass(slots=True)
class ChunkSet:
    label: str
    method: str
    chunks: list[Chunk]
    source: str
    seconds: float = 0.0
    unit_failures: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Units by how their chunks came about (none / repair / pieces / whole_unit / ...; see
    # litseg.segmentation.runner.fallback_category); None for chunkers that report no fallback.
    unit_fallbacks: dict[str, int] | None = None


def count_unit_fallbacks(diagnostics: Iterable[Mapping[str, Any]]) -> dict[str, int] | None:
    """Units per fallback category over per-unit diagnostics; None when none says ``fallback``."""
    from litseg.segmentation.runner import fallback_category

    counts: Counter[str] = Counter(fallback_category(dict(d)) for d in diagnostics if "fallback" in d)
    return dict(counts) if counts else None


def fallback_summary(counts: Mapping[str, int] | None) -> dict[str, Any] | None:
    """``{units, counts, shares}`` with a share for every reported category (0.0 when absent)."""
    from litseg.segmentation.runner import FALLBACK_CATEGORIES

    if counts is None:
        return None
    units = sum(counts.values())
    names = list(FALLBACK_CATEGORIES) + sorted(set(counts) - set(FALLBACK_CATEGORIES) - {"none"})
    return {"units": units, "counts": dict(counts),
            "shares": {k: counts.get(k, 0) / units if units else 0.0 for k in names}}


def prepare_books(bench: Benchmark, *, max_words: int = 2000, max_sentence_words: int = 120,
                  progress: bool = False) -> dict[str, Document]:
    """Each book with a text as a :class:`Document` with units and sentences (as annotate.py
    prepares a book file). Books without text are skipped; their questions cannot retrieve."""
    from tqdm.auto import tqdm

    from litseg.segmentation.preprocess import prepare_document

    docs: dict[str, Document] = {}
    for book in tqdm(bench.books, desc="prepare books", unit="book", disable=not progress, dynamic_ncols=True):
        if not book.has_text:
            continue
        doc = Document(book_id=book.book_id, text=book.load_text(), title=book.title,
                       source_path=str(book.path or ""))
        prepare_document(doc, max_words=max_words, max_sentence_words=max_sentence_words)
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
    from litseg.chunkers.spans import overlapping_sentences
    from litseg.segmentation.reconstruct import chunk_id

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
    from litseg.annotation.store import read_jsonl

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
        src_book = str(row.get("book_id", ""))
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
    # An annotate.py run folder says per unit how its chunks came about.
    diag_file = p / "diagnostics.jsonl" if p.is_dir() else None
    fallbacks = None
    if diag_file is not None and diag_file.is_file():
        kept = {mapping.get(b, b) for b in {str(r.get("book_id", "")) for r in rows}} & set(docs)
        fallbacks = count_unit_fallbacks(d for d in read_jsonl(diag_file) if mapping.get(str(d.get("book_id", "")),
                                                                                          str(d.get("book_id", ""))) in kept)
    return ChunkSet(label=label, method=methods.most_common(1)[0][0], chunks=chunks, source=str(p),
                    warnings=warnings, unit_fallbacks=fallbacks)


def _book_mapping(p: Path, bench: Benchmark, docs: Mapping[str, Document]) -> dict[str, str]:
    """Source book id -> benchmark book id, from the run folder's documents.jsonl."""
    from litseg.annotation.store import read_jsonl

    docs_file = p / "documents.jsonl" if p.is_dir() else p.with_name("documents.jsonl")
    if not docs_file.is_file():
        return {}
    by_sha = {_text_sha(d.text): bid for bid, d in docs.items()}
    out = {}
    for row in read_jsonl(docs_file):
        bid = str(row.get("book_id", ""))
        target = by_sha.get(str(row.get("sha256", "")))
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
    from litseg.chunkers.base import build_chunker_from_config

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


# ================================================================================== evaluation
@dataclass(slots=True)
class Components:
    """The components shared by all chunkers of a run."""

    dense: Any  # DenseEncoder | None
    bm25_cfg: dict[str, Any] | None
    store: Any  # QdrantStore
    retrieval: Any  # RetrievalSettings
    reranker: Any  # Reranker
    generator: Any = None  # AnswerGenerator | None
    judge: Any = None  # RagJudge | None
    collection_prefix: str = "litseg"
    partition: str = "none"  # none: one collection per chunk set | book: one per book
    context_budget: Any = None  # ContextBudget: what generator and judge read (None: the default budget)


@dataclass(slots=True)
class ChunkerResult:
    label: str
    method: str
    summary: dict[str, Any]
    per_question: list[dict[str, Any]]
    chunk_words: list[int]
    chunkset: ChunkSet | None = None


def _questions_with_text(bench: Benchmark, docs: Mapping[str, Document]) -> list[Question]:
    return [q for q in bench.questions if q.book_id in docs]


class _Relevance:
    """Relevance of each chunk to a question: span overlap for span evidence, containment after
    normalisation for evidence strings (GutenQA's criterion)."""

    def __init__(self, chunks: Sequence[Chunk], settings: EvalSettings) -> None:
        self.chunks = chunks
        self.settings = settings
        self._norm: dict[int, str] = {}

    def normalized(self, pos: int) -> str:
        from litseg.rag.evidence import normalize_for_match

        if pos not in self._norm:
            c = self.chunks[pos]
            self._norm[pos] = normalize_for_match(getattr(c, self.settings.string_field) or c.main_text)
        return self._norm[pos]

    def judge(self, q: Question, positions: Iterable[int]) -> dict[int, bool]:
        from litseg.rag.evidence import chunk_is_relevant, normalize_for_match

        spans = [e.span for e in q.evidence if e.kind == "span" and e.span is not None]
        needles = [normalize_for_match(e.text) for e in q.evidence if e.kind == "string" and e.text]
        needles = [n for n in needles if n]
        out = {}
        for pos in positions:
            rel = False
            if spans:
                rel = chunk_is_relevant(self.chunks[pos].main_spans, spans, self.settings.min_overlap)
            if not rel and needles:
                hay = self.normalized(pos)
                rel = any(n in hay for n in needles)
            out[pos] = rel
        return out


def _has_gold(q: Question) -> bool:
    return bool(q.evidence)


def evaluate_chunkset(cs: ChunkSet, bench: Benchmark, docs: Mapping[str, Document], questions: Sequence[Question],
                      comp: Components, settings: EvalSettings, *, generation_qids: set[str] | None = None,
                      collection: str | None = None) -> ChunkerResult:
    """Index one chunk set, answer ``questions`` with it and score everything."""
    from litseg.rag.index import BM25Encoder, ChunkIndex, IndexedChunk, build_bm25_encoder
    from litseg.rag.metrics import chunk_statistics
    from litseg.rag.store import collection_name

    timings: dict[str, float] = {"chunking": cs.seconds}
    chunks = sorted(cs.chunks, key=lambda c: (c.book_id, c.start, c.end))
    book_positions: dict[str, list[int]] = defaultdict(list)
    passages = []
    for pos, c in enumerate(chunks):
        order = len(book_positions[c.book_id])
        book_positions[c.book_id].append(pos)
        text = (c.text if settings.index_text == "text" else c.main_text) or c.main_text
        passages.append(IndexedChunk(position=pos, book_id=c.book_id, order=order, text=text, chunk_id=c.chunk_id,
                                     payload={"unit_id": c.unit_id, "method": c.method}))

    # ---- chunk statistics and segment quality (do not depend on questions)
    dense = comp.dense
    stats_kw: dict[str, Any] = {}
    if dense is not None and dense.window:
        stats_kw = {"count_tokens": lambda t: dense.count_tokens(dense.passage_text(t)), "window": dense.window}
    t0 = time.perf_counter()
    stats = chunk_statistics([_IndexView(c, p.text) for c, p in zip(chunks, passages)], embed_text_key="text",
                             **stats_kw) if chunks else {"n_chunks": 0}
    seg = segment_quality_of(chunks, docs, dense if settings.segment_quality else None, progress=settings.progress)
    timings["chunk_stats"] = time.perf_counter() - t0

    # ---- index
    t0 = time.perf_counter()
    bm25: BM25Encoder | None = build_bm25_encoder(comp.bm25_cfg) if comp.bm25_cfg is not None else None
    name = collection or collection_name(comp.collection_prefix, bench.name, cs.label)
    index = ChunkIndex(comp.store, name, dense, bm25, partition=comp.partition)
    rr_calls, rr_failures = comp.reranker.calls, comp.reranker.failures
    try:
        index.build(passages, progress=settings.progress)
        rows, gen_summary = _query_and_score(cs, bench, chunks, passages, book_positions, questions, index, comp,
                                             settings, generation_qids, timings, index_started=t0)
    finally:
        index.drop()

    summary = summarize_rows(rows, settings)
    summary.update({
        "label": cs.label, "method": cs.method, "source": cs.source, "config": cs.config,
        "chunks": stats, "segment_quality": seg, "generation": gen_summary,
        "rerank": {"kind": comp.reranker.name, "calls": comp.reranker.calls - rr_calls,
                   "failures": comp.reranker.failures - rr_failures},
        "unit_failures": len(cs.unit_failures), "fallbacks": fallback_summary(cs.unit_fallbacks),
        "warnings": cs.warnings, "seconds": timings,
        "embedder_window": dense.window if dense is not None else None,
        "questions_without_chunks": sum(1 for q in questions if not book_positions.get(q.book_id)),
    })
    words = [len(c.main_text.split()) for c in chunks]
    return ChunkerResult(cs.label, cs.method, summary, rows, words, cs)


def _query_and_score(cs: ChunkSet, bench: Benchmark, chunks: list[Chunk], passages: list[Any],
                     book_positions: Mapping[str, list[int]], questions: Sequence[Question], index: Any,
                     comp: Components, settings: EvalSettings, generation_qids: set[str] | None,
                     timings: dict[str, float], *, index_started: float
                     ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """After ``index.build``: retrieval (+ rerank) for every question whose book has chunks, the
    per-question rows with their scores, then generation and judging on the sample."""
    from litseg.rag.metrics import question_retrieval_scores, random_hit_at_k, random_mrr
    from litseg.rag.retrieve import HybridRetriever

    timings["index"] = time.perf_counter() - index_started
    timings.update({f"index_{k}": v for k, v in index.seconds.items()})

    # ---- retrieve (+ rerank) for the questions whose book has chunks
    t0 = time.perf_counter()
    answerable = [q for q in questions if book_positions.get(q.book_id)]
    rankings: dict[str, list[Any]] = {}
    if answerable:
        retriever = HybridRetriever(index, comp.retrieval)
        from tqdm.auto import tqdm

        step = 256
        for s in tqdm(range(0, len(answerable), step), desc=f"retrieve [{cs.label}]", unit="batch",
                      disable=not settings.progress, dynamic_ncols=True):
            batch = answerable[s:s + step]
            found = retriever.retrieve([q.question for q in batch], [q.book_id for q in batch])
            found = comp.reranker.rerank_many([q.question for q in batch], found, [p.text for p in passages])
            for q, r in zip(batch, found):
                rankings[q.qid] = r
    timings["retrieve"] = time.perf_counter() - t0

    # ---- per-question retrieval scores
    rel = _Relevance(chunks, settings)
    rows: list[dict[str, Any]] = []
    for q in questions:
        ranking = rankings.get(q.qid, [])
        positions = [r.position for r in ranking]
        row: dict[str, Any] = {"qid": q.qid, "book_id": q.book_id, "chunker": cs.label, "question": q.question,
                               "answers": q.answers, "has_gold": _has_gold(q),
                               "n_chunks_book": len(book_positions.get(q.book_id, [])),
                               "top_chunks": [chunks[p].chunk_id for p in positions[: settings.keep_top]]}
        if _has_gold(q):
            flags = rel.judge(q, book_positions.get(q.book_id, []))
            n_rel = sum(flags.values())
            rel_list = [flags[p] for p in positions]
            scores = question_retrieval_scores(rel_list, settings.ks, settings.mrr_k)
            first = next((i for i, f in enumerate(rel_list, 1) if f), None)
            row.update(scores)
            row.update({"n_relevant": n_rel, "first_relevant_rank": first})
            n_c = row["n_chunks_book"]
            if n_c:
                row["random_hit@1"] = random_hit_at_k(n_rel, n_c, 1)
                row[f"random_mrr@{settings.mrr_k}"] = random_mrr(n_rel, n_c, settings.mrr_k)
            else:
                row["random_hit@1"] = 0.0
                row[f"random_mrr@{settings.mrr_k}"] = 0.0
            gold = q.gold_spans
            read = [_reader_spans(chunks[p], settings) for p in positions]
            for budget in settings.budgets:
                row[f"evidence@{budget}"] = _recovered(read, gold, budget)
        rows.append(row)

    # ---- generation and judge
    gen_summary: dict[str, Any] = {}
    if (comp.generator is not None or comp.judge is not None) and generation_qids:
        t0 = time.perf_counter()
        gen_summary = _generate_and_judge(rows, rankings, chunks, bench, comp, settings, generation_qids)
        timings["generation"] = time.perf_counter() - t0
    return rows, gen_summary


def _reader_spans(chunk: Chunk, settings: EvalSettings) -> list[Span]:
    """The document spans a reader of the chunk sees, in order: with context-enriched chunks
    (``index_text="text"``) the context sentences count against the budget (and towards the
    evidence) like the main text."""
    if settings.index_text == "text" and chunk.context_spans:
        return sorted([tuple(s) for s in chunk.main_spans] + [tuple(s) for s in chunk.context_spans])
    return list(chunk.main_spans)


class _IndexView:
    """A chunk seen with the text that is actually indexed (for the window check)."""

    def __init__(self, chunk: Chunk, indexed: str) -> None:
        self.book_id = chunk.book_id
        self.main_text = chunk.main_text
        self.main_spans = chunk.main_spans
        self.text = indexed
        self.context_ids = chunk.context_ids


def _recovered(ranked_spans: list[list[Span]], gold: list[Span], budget: int) -> float | None:
    from litseg.rag.evidence import evidence_recovered_chars

    if not gold:
        return None
    return evidence_recovered_chars(ranked_spans, gold, budget)


def segment_quality_of(chunks: Sequence[Chunk], docs: Mapping[str, Document], dense: Any = None,
                       progress: bool = False) -> dict[str, Any]:
    """Boundary measures of a chunk set: boundaries are the starts of chunks within a unit
    (except the first); sentence spans come from the prepared books."""
    from litseg.rag.metrics import segment_quality

    by_unit: dict[tuple[str, str], list[Span]] = defaultdict(list)
    for c in chunks:
        by_unit[(c.book_id, c.unit_id)].append((c.start, c.end))
    sentences: dict[str, list[Span]] = {}
    for bid, doc in docs.items():
        spans = sorted({(s.start, s.end) for u in doc.units for s in u.sentences})
        sentences[bid] = spans
    units = [(docs[b].text, sentences[b], spans) for (b, _), spans in by_unit.items() if b in docs]
    embed = None
    if dense is not None:
        def embed(texts: list[str]) -> Any:
            import numpy as np

            out = []
            step = 256
            from tqdm.auto import tqdm

            for s in tqdm(range(0, len(texts), step), desc="boundary similarity", unit="batch",
                          disable=not progress, dynamic_ncols=True):
                out.append(dense.embed_plain(texts[s:s + step]))
            return np.concatenate(out) if out else np.zeros((0, dense.dimension))
    return segment_quality(units, embed)


def _generate_and_judge(rows: list[dict[str, Any]], rankings: Mapping[str, list[Any]], chunks: Sequence[Chunk],
                        bench: Benchmark, comp: Components, settings: EvalSettings, qids: set[str]
                        ) -> dict[str, Any]:
    from litseg.rag.generate import AnswerInput
    from litseg.rag.judge import summarize
    from litseg.rag.metrics import GENERATION_METRICS

    from litseg.rag.context_budget import ContextBudget, summarize_packs

    titles = {b.book_id: b.title for b in bench.books}
    chosen = [r for r in rows if r["qid"] in qids]
    # One character budget for every chunker; generator and judge read the same passages.
    budget = comp.context_budget if comp.context_budget is not None else ContextBudget()
    packs = {r["qid"]: budget.pack_ranking(rankings.get(r["qid"], []), chunks) for r in chosen}
    for r in chosen:
        r.update(packs[r["qid"]].row_fields())

    def refs(qid: str) -> list[str]:
        return packs[qid].passages

    out: dict[str, Any] = {"n_questions": len(chosen), "context": summarize_packs(list(packs.values()), budget)}
    answers: dict[str, str] = {}
    if comp.generator is not None:
        items = [AnswerInput(r["qid"], titles.get(r["book_id"], ""), r["question"], refs(r["qid"])) for r in chosen]
        generated = comp.generator.answer(items, progress=settings.progress)
        failed = 0
        for r, g in zip(chosen, generated):
            r["answer"] = g.text
            r["answer_error"] = g.error
            failed += g.error is not None
            answers[r["qid"]] = g.text
            for m, fn in GENERATION_METRICS.items():
                r[m] = None if g.error else fn(g.text, r["answers"])
        out["generation_failures"] = failed
        out["generation_failure_rate"] = failed / len(chosen) if chosen else 0.0
        out["completion_tokens"] = sum(g.completion_tokens for g in generated)
    if comp.judge is not None:
        ctx = ["\n\n".join(refs(r["qid"])) for r in chosen]
        cr = comp.judge.context_relevance([r["question"] for r in chosen], ctx, progress=settings.progress)
        for r, s in zip(chosen, cr):
            r["context_relevance"] = s.score
            r["context_relevance_ratings"] = s.ratings
        out["context_relevance"] = summarize(cr)
        if comp.generator is not None:
            with_answer = [r for r in chosen if r.get("answer_error") is None]
            aa = comp.judge.answer_accuracy([r["question"] for r in with_answer], [r["answer"] for r in with_answer],
                                            [r["answers"] for r in with_answer], progress=settings.progress)
            for r, s in zip(with_answer, aa):
                r["answer_accuracy"] = s.score
                r["answer_accuracy_ratings"] = s.ratings
            out["answer_accuracy"] = summarize(aa)
            out["answer_accuracy"]["not_judged_no_answer"] = len(chosen) - len(with_answer)
    return out


# ================================================================================= aggregation
def retrieval_metric_names(settings: EvalSettings) -> list[str]:
    return ([f"mrr@{settings.mrr_k}"] + [f"hit@{k}" for k in settings.ks]
            + [f"evidence@{b}" for b in settings.budgets])


GENERATION_NAMES = ("em", "f1", "rougeL", "meteor")
JUDGE_NAMES = ("context_relevance", "answer_accuracy")


def summarize_rows(rows: Sequence[Mapping[str, Any]], settings: EvalSettings) -> dict[str, Any]:
    """Means with book-level bootstrap intervals of every per-question metric present."""
    from litseg.rag.stats import bootstrap_ci

    out: dict[str, Any] = {"n_questions": len(rows), "metrics": {}}
    gold = [r for r in rows if r.get("has_gold")]
    out["n_with_gold"] = len(gold)
    out["n_without_relevant_chunk"] = sum(1 for r in gold if not r.get("n_relevant"))
    names = (retrieval_metric_names(settings) + ["random_hit@1", f"random_mrr@{settings.mrr_k}"]
             + list(GENERATION_NAMES) + list(JUDGE_NAMES))
    # With a single book (GutenQA's Emma) there is nothing to resample at book level: questions are
    # resampled instead, which understates the uncertainty; the summary says which was done.
    by_book = len({r["book_id"] for r in rows}) > 1
    out["resampling"] = "books" if by_book else "questions (single book)"
    for name in names:
        vals = [(r[name], r["book_id"]) for r in rows if r.get(name) is not None]
        if not vals:
            continue
        ci = bootstrap_ci([v for v, _ in vals], [b for _, b in vals] if by_book else None,
                          confidence=settings.confidence, n_resamples=settings.n_resamples, seed=settings.seed)
        out["metrics"][name] = ci.to_dict()
    return out


def pairwise_table(results: Sequence[ChunkerResult], metrics: Sequence[str], settings: EvalSettings
                   ) -> list[dict[str, Any]]:
    """Every ordered pair (A listed before B) on every metric both have per question: mean
    difference with a book-level bootstrap interval and a book-level permutation p-value."""
    from litseg.rag.stats import paired_comparison

    out = []
    for i, a in enumerate(results):
        for b in results[i + 1:]:
            for m in metrics:
                va = {r["qid"]: r[m] for r in a.per_question if r.get(m) is not None}
                vb = {r["qid"]: r[m] for r in b.per_question if r.get(m) is not None}
                common = sorted(set(va) & set(vb))
                if len(common) < 2:
                    continue
                groups = {r["qid"]: r["book_id"] for r in a.per_question}
                by_book = len({groups[q] for q in common}) > 1  # else resample questions (see summarize_rows)
                pc = paired_comparison({q: va[q] for q in common}, {q: vb[q] for q in common},
                                       groups if by_book else None,
                                       confidence=settings.confidence, n_resamples=settings.n_resamples,
                                       seed=settings.seed)
                out.append({"a": a.label, "b": b.label, "metric": m, "n": pc.n_items,
                            "books": len({groups[q] for q in common}),
                            "resampling": "books" if by_book else "questions",
                            "mean_a": pc.mean_a, "mean_b": pc.mean_b, "diff": pc.diff.estimate,
                            "diff_low": pc.diff.low, "diff_high": pc.diff.high, "p_permutation": pc.p_permutation,
                            "p_wilcoxon": pc.p_wilcoxon})
    return out


# ======================================================================================= runs
@dataclass(slots=True)
class EvaluationResult:
    suite: str
    benchmark: dict[str, Any]
    results: list[ChunkerResult]
    pairwise: list[dict[str, Any]]
    settings: EvalSettings
    wall_seconds: float
    meta: dict[str, Any] = field(default_factory=dict)

    def metric(self, name: str, label: str | None = None) -> float:
        """The mean of ``name`` for chunker ``label`` (the first chunker when None); NaN if absent."""
        res = next((r for r in self.results if label is None or r.label == label), None)
        if res is None:
            raise KeyError(f"no chunker {label!r}; have {[r.label for r in self.results]}")
        found = res.summary["metrics"].get(name)
        if found is not None:
            return float(found["estimate"])
        for section in ("segment_quality", "chunks"):
            v = res.summary.get(section, {}).get(name)
            if isinstance(v, (int, float)):
                return float(v)
        return math.nan


def select_questions(bench: Benchmark, docs: Mapping[str, Document], max_questions: int | None, seed: int
                     ) -> list[Question]:
    qs = _questions_with_text(bench, docs)
    if max_questions is not None and max_questions < len(qs):
        keep = set(random.Random(seed).sample(range(len(qs)), max_questions))
        qs = [q for i, q in enumerate(qs) if i in keep]
    return qs


def limit_books(bench: Benchmark, max_books: int | None) -> Benchmark:
    if max_books is None or max_books >= len(bench.books):
        return bench
    books = bench.books[:max_books]
    keep = {b.book_id for b in books}
    return Benchmark(name=bench.name, books=books, questions=[q for q in bench.questions if q.book_id in keep],
                     warnings=bench.warnings, meta={**bench.meta, "max_books": max_books})


def resolve_path(value: str, base_dirs: Sequence[Path] = ()) -> str:
    """A relative path as given when it exists from the current directory, else the first
    existing one under ``base_dirs`` (e.g. the repository root), else unchanged."""
    p = Path(value).expanduser()
    if p.is_absolute() or p.exists():
        return str(p)
    for base in base_dirs:
        if (Path(base) / p).exists():
            return str(Path(base) / p)
    return value


def load_suite(suite: Mapping[str, Any], base_dirs: Sequence[Path] = (REPO_ROOT,)) -> Benchmark:
    """The suite's benchmark: ``load_benchmark(suite.loader, **suite.args)`` with path-like
    arguments resolved, then ``max_books`` applied."""
    loader = suite.get("loader")
    if not loader:
        raise ValueError("the suite config needs `loader` (fairytaleqa, literaryqa, gutenqa, narrativeqa)")
    args = dict(suite.get("args") or {})
    for key in ("path", "questions", "paragraphs", "questions_file", "texts_dir"):
        if isinstance(args.get(key), str):
            args[key] = resolve_path(args[key], base_dirs)
            if not Path(args[key]).exists():
                raise FileNotFoundError(f"suite {suite.get('name')}: {key}={args[key]} does not exist "
                                        "(set LITSEG_SHARED_DIR or shared_dir=... to the shared folder)")
    bench = load_benchmark(str(loader), **args)
    return limit_books(bench, suite.get("max_books"))


def run_evaluation(cfg: Mapping[str, Any], out_dir: Path | None = None, *, benchmark: Benchmark | None = None,
                   components: Components | None = None, conf_dir: Path = DEFAULT_CONF_DIR) -> EvaluationResult:
    """Run a whole evaluation from a composed config (see ``conf/evaluate.yaml``) and write its
    report to ``out_dir``. ``benchmark``/``components`` replace what the config would build
    (tests pass small ones)."""
    from litseg.rag.report import write_report

    t_start = time.perf_counter()
    c = _plain(cfg)
    settings = EvalSettings.from_config(c.get("metrics") or {})
    settings.progress = bool(c.get("progress", settings.progress))
    suite = c.get("suite") or {}
    bench = benchmark if benchmark is not None else load_suite(suite)
    for w in bench.warnings[:20]:
        log.warning("%s: %s", bench.name, w)
    students, chunkers = with_student_chunkers(c, conf_dir)
    specs = resolve_chunkers(chunkers, c.get("chunk_files") or [], conf_dir)
    prep = c.get("preprocess") or {}
    docs = prepare_books(bench, max_words=int(prep.get("max_words", 2000)),
                         max_sentence_words=int(prep.get("max_sentence_words", 120)), progress=settings.progress)
    questions = select_questions(bench, docs, suite.get("max_questions"), settings.seed)
    if not questions:
        raise ValueError(f"{bench.name}: no questions on books with text")
    comp = components if components is not None else build_components(c, suite)
    gen_cfg = c.get("generation") or {}
    gen_qids: set[str] = set()
    if comp.generator is not None or comp.judge is not None:
        n = gen_cfg.get("max_questions")
        pool = [q.qid for q in questions]
        gen_qids = set(pool if n is None or n >= len(pool) else random.Random(settings.seed + 1).sample(pool, int(n)))
    groups = {k: cfg_get(cfg, k) for k in ("llm", "prompt", "feedback")}
    results: list[ChunkerResult] = []
    from litseg.rag.derived_chunks import ChunkSetBuilder

    chunk_sets = ChunkSetBuilder(build_chunkset)  # a `+merge` row reuses its base row's chunks
    try:
        for spec in specs:
            log.info("evaluating %s (%s)", spec.label, spec.kind)
            cs = chunk_sets(spec, bench, docs, groups=groups, progress=settings.progress)
            if not cs.chunks:
                raise ValueError(f"chunker {spec.label!r} produced no chunks")
            res = evaluate_chunkset(cs, bench, docs, questions, comp, settings, generation_qids=gen_qids)
            results.append(res)
    finally:
        if components is None:
            comp.store.close()
    pair_metrics = list(c.get("pairwise_metrics") or [f"mrr@{settings.mrr_k}", f"evidence@{settings.budgets[0]}"])
    pairwise = pairwise_table(results, pair_metrics, settings) if len(results) > 1 else []
    wall = time.perf_counter() - t_start
    result = EvaluationResult(suite=str(suite.get("name") or bench.name), benchmark=bench.summary(), results=results,
                              pairwise=pairwise, settings=settings, wall_seconds=wall,
                              meta={"components": component_identity(comp), "questions_evaluated": len(questions),
                                    "generation_questions": len(gen_qids), "books_prepared": len(docs),
                                    "units": sum(len(d.units) for d in docs.values())})
    if out_dir is not None:
        write_report(result, Path(out_dir), c.get("report") or {}, logger_cfg=c.get("logger"), config=c)
        if students is not None:
            from litseg.rag.ablations import write_ablation_table

            write_ablation_table(students, result, Path(out_dir), logger_cfg=c.get("logger"))
    return result


def with_student_chunkers(c: Mapping[str, Any], conf_dir: Path = DEFAULT_CONF_DIR) -> tuple[Any, Any]:
    """``(student runs, chunkers)``: with ``students=`` (train.py run or sweep folders) each
    finished run joins ``chunkers`` as a LitSeg-Lite entry with its own model, adapter and prompt
    (:mod:`litseg.rag.ablations`); without it, ``(None, chunkers)`` unchanged."""
    chunkers = c.get("chunkers")
    if not c.get("students"):
        return None, chunkers
    from litseg.rag.ablations import find_student_runs, student_chunkers

    settings = c.get("student") or {}
    runs = find_student_runs(c["students"])
    entries = student_chunkers(runs, method=settings.get("method"), backend=str(settings.get("backend") or "transformers"),
                               llm=settings.get("llm"), conf_dir=conf_dir)
    if isinstance(chunkers, (list, tuple)):
        return runs, [*chunkers, *({"label": k, **v} for k, v in entries.items())]
    return runs, {**dict(chunkers or {}), **entries}


def cfg_get(cfg: Any, key: str) -> Any:
    """A config group node as composed (kept as DictConfig for build_chunker_from_config)."""
    try:
        return cfg.get(key)
    except AttributeError:
        return None


def build_components(c: Mapping[str, Any], suite: Mapping[str, Any]) -> Components:
    from litseg.rag.context_budget import ContextBudget
    from litseg.rag.generate import AnswerGenerator
    from litseg.rag.index import build_dense_encoder
    from litseg.rag.judge import RagJudge
    from litseg.rag.rerank import build_reranker
    from litseg.rag.retrieve import RetrievalSettings
    from litseg.rag.store import QdrantStore

    r = c.get("retrieval") or {}
    settings = RetrievalSettings.from_config(r)
    dense = build_dense_encoder(r.get("embedder") or {}) if settings.mode in ("hybrid", "dense") else None
    bm25_cfg = dict(r.get("bm25") or {}) if settings.mode in ("hybrid", "sparse") else None
    store_cfg = dict(r.get("store") or {})
    prefix = str(store_cfg.get("collection_prefix") or "litseg")
    partition = str(store_cfg.get("partition") or "none")
    store = QdrantStore.from_config(store_cfg)
    judge_cfg = c.get("judge") or {}
    gen_cfg = c.get("generation") or {}

    built: dict[str, Any] = {}  # one model object per distinct llm config (reranker, generator, judge)

    def llm_of(section: Mapping[str, Any]) -> Any:
        from litseg.llm.factory import build_llm

        if not section.get("llm"):
            raise ValueError("an llm config is needed here (llm@generation.llm=... / llm@judge.llm=...)")
        key = json.dumps(section["llm"], sort_keys=True, default=str)
        if key not in built:
            built[key] = build_llm(section["llm"])
            built[key].check()  # fail fast, in one line, when the model or server is not there
        return built[key]

    rerank_cfg = r.get("rerank") or {}
    reranker = build_reranker(rerank_cfg, llm_factory=lambda: llm_of(judge_cfg), prompt=rerank_cfg.get("prompt"))
    generator = None
    if gen_cfg.get("enabled"):
        # No top_n or length cut here: the passages come filled to `answer_context.budget_chars`.
        generator = AnswerGenerator(llm_of(gen_cfg), gen_cfg.get("prompt") or {},
                                    answer_style=str(suite.get("answer_style") or ""),
                                    max_tokens=int(gen_cfg.get("max_tokens", 64)),
                                    batch_size=int(gen_cfg.get("batch_size", 16)))
    judge = None
    if judge_cfg.get("enabled"):
        judge = RagJudge(llm_of(judge_cfg), judge_cfg.get("prompt") or {},
                         max_tokens=int(judge_cfg.get("max_tokens", 24)),
                         batch_size=int(judge_cfg.get("batch_size", 16)),
                         constrained=bool(judge_cfg.get("constrained", True)))
    return Components(dense=dense, bm25_cfg=bm25_cfg, store=store, retrieval=settings, reranker=reranker,
                      generator=generator, judge=judge, collection_prefix=prefix, partition=partition,
                      context_budget=ContextBudget.from_config(c.get("answer_context")))


def component_identity(comp: Components) -> dict[str, Any]:
    def ident(x: Any) -> Any:
        f = getattr(x, "identity", None)
        return f() if callable(f) else (type(x).__name__ if x is not None else None)

    from dataclasses import asdict, is_dataclass

    return {"dense": ident(comp.dense), "bm25": comp.bm25_cfg, "store": getattr(comp.store, "location", None),
            "partition": comp.partition,
            "retrieval": asdict(comp.retrieval) if is_dataclass(comp.retrieval) else str(comp.retrieval),
            "reranker": ident(comp.reranker), "generator": ident(getattr(comp.generator, "llm", None)),
            "judge": ident(getattr(comp.judge, "llm", None)), "answer_context": ident(comp.context_budget)}


def export_texts(bench: Benchmark, out_dir: Path) -> list[Path]:
    """Write each book's text to ``<out_dir>/<book_id>.txt`` exactly (no newline translation),
    so that ``annotate.py`` can chunk the very text the benchmark's spans refer to; its run
    folder then evaluates with ``+chunkers.NAME={chunks: RUN_DIR}``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for b in bench.books:
        if not b.has_text:
            continue
        p = out_dir / f"{b.book_id}.txt"
        with p.open("w", encoding="utf-8", newline="") as fh:
            fh.write(b.load_text())
        paths.append(p)
    return paths


def hydra_output_dir(default: str = "outputs/evaluate") -> Path:
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except (ImportError, ValueError):
        return Path(default)


def run_from_hydra(cfg: Any, out_dir: Path | None = None) -> float:
    """What ``evaluate.py`` runs: the evaluation (or the text export), a printed summary, and
    the objective for sweepers (NaN, with a warning, when the run did not produce it)."""
    from omegaconf import OmegaConf

    from litseg.rag.report import main_table, markdown_table

    out = Path(out_dir) if out_dir is not None else hydra_output_dir()
    out.mkdir(parents=True, exist_ok=True)
    if cfg.get("export_texts"):
        bench = load_suite(_plain(cfg.suite))
        paths = export_texts(bench, Path(str(cfg.export_texts)))
        print(f"wrote {len(paths)} book texts of {bench.name} to {cfg.export_texts}; chunk them with\n"
              f"  python annotate.py input='{cfg.export_texts}/*.txt' method=NAME hydra.run.dir=RUN\n"
              f"and evaluate with  python evaluate.py suite={cfg.suite.name} '+chunkers.NAME={{chunks: RUN}}'")
        return float(len(paths))
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True), encoding="utf-8")
    result = run_evaluation(cfg, out)
    head, rows = main_table(result)
    print(markdown_table(head, rows))
    print(f"wall time {result.wall_seconds:.0f} s; report: {out / 'results.md'}")
    objective = cfg.get("objective") or {}
    metric = objective.get("metric")
    if not metric:
        return math.nan
    value = result.metric(str(metric), objective.get("chunker"))
    if math.isnan(value):
        log.warning("objective %s was not computed in this run (no gold evidence, or generation/judge off); "
                    "returning NaN", metric)
    return value
