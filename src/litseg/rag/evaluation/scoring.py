"""One chunk set indexed, queried and scored: retrieval against gold evidence with the size
confounders beside it, segment quality, and (on the sample) answers and judge ratings."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from litseg.rag.benchmarks.records import Benchmark, Question
from litseg.rag.evaluation.aggregate import summarize_rows
from litseg.rag.evaluation.answers import generate_and_judge
from litseg.rag.evaluation.components import Components
from litseg.rag.results import ChunkerResult, EvalSettings
from litseg.rag.chunk_sets import ChunkSet, fallback_summary
from litseg.segmentation.types import Chunk, Document
from litseg.rag.evidence import chunk_is_relevant, evidence_recovered_chars, normalize_for_match
from litseg.rag.index import BM25Encoder, ChunkIndex, IndexedChunk, build_bm25_encoder
from litseg.rag.metrics import question_retrieval_scores, random_hit_at_k, random_mrr
from litseg.rag.chunk_quality import chunk_statistics, segment_quality
from litseg.rag.retrieve import HybridRetriever
from litseg.rag.stores import collection_name

Span = tuple[int, int]


def questions_with_text(bench: Benchmark, docs: Mapping[str, Document]) -> list[Question]:
    return [q for q in bench.questions if q.book_id in docs]


class _Relevance:
    """Relevance of each chunk to a question: span overlap for span evidence, containment after
    normalisation for evidence strings (GutenQA's criterion)."""

    def __init__(self, chunks: Sequence[Chunk], settings: EvalSettings) -> None:
        self.chunks = chunks
        self.settings = settings
        self._norm: dict[int, str] = {}

    def normalized(self, pos: int) -> str:
        if pos not in self._norm:
            c = self.chunks[pos]
            self._norm[pos] = normalize_for_match(getattr(c, self.settings.string_field) or c.main_text)
        return self._norm[pos]

    def judge(self, q: Question, positions: Iterable[int]) -> dict[int, bool]:
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
        "unit_failures": cs.failure_count, "run_failures": cs.run_failures, "fallbacks": fallback_summary(cs.unit_fallbacks),
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
        gen_summary = generate_and_judge(rows, rankings, chunks, bench, comp, settings, generation_qids)
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
    if not gold:
        return None
    return evidence_recovered_chars(ranked_spans, gold, budget)


def segment_quality_of(chunks: Sequence[Chunk], docs: Mapping[str, Document], dense: Any = None,
                       progress: bool = False) -> dict[str, Any]:
    """Boundary measures of a chunk set: boundaries are the starts of chunks within a unit
    (except the first); sentence spans come from the prepared books."""
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
