"""The chunker evaluation behind ``evaluate.py``: benchmark in, one comparable report per chunker out.

For each chunker (a method config, the benchmark's own sections, or a file of chunks written
elsewhere) the same fixed components run:

1. each chunker runs as ``annotate.py`` runs it: the benchmark's books are the inputs of an
   annotation run (:mod:`litseg.annotation`; batching across books, failed units counted, a rerun
   resumes) in the run folder's ``chunker_runs/<label>/``, and its chunks are read back from there
   like any run folder; or chunks are loaded from a file and checked against the book texts
   (:mod:`.sources`, :mod:`.chunk_files`);
2. the chunks are indexed (dense + BM25 vectors in one collection of the vector store, book id as
   payload; :mod:`.components` builds the store and the models);
3. every question retrieves within its own book (hybrid fusion), then the reranker reorders;
4. optionally an LLM answers from the top chunks and an LLM judge rates context and answer
   (:mod:`.answers`);
5. everything is scored (:mod:`.scoring`): retrieval against gold evidence with the size
   confounders beside it (random-ranking Hit@1, chunks per book, words per chunk, share over the
   embedder's window, gold evidence recovered within a fixed character budget), book-level
   bootstrap intervals, answer metrics, judge scores with failure rates, and segment quality.

Per-question rows are kept so that any two chunkers can be compared pairwise
(:func:`~.aggregate.pairwise_table`). :mod:`.run` ties it together; :mod:`litseg.rag.report`
writes the tables and plots from the records of :mod:`litseg.rag.results`.
"""

from litseg.rag.evaluation.aggregate import pairwise_table, summarize_rows
from litseg.rag.evaluation.chunk_files import load_chunkset
from litseg.rag.evaluation.components import Components, build_components, component_identity
from litseg.rag.results import (GENERATION_NAMES, JUDGE_NAMES, ChunkerResult, EvalSettings, EvaluationResult,
                                retrieval_metric_names)
from litseg.rag.evaluation.run import (evaluate_task, export_texts, limit_books, load_suite, run_evaluation,
                                       select_questions, with_student_chunkers)
from litseg.rag.evaluation.scoring import evaluate_chunkset, segment_quality_of
from litseg.rag.chunk_sets import ChunkerSpec, ChunkSet, count_unit_fallbacks, fallback_summary
from litseg.rag.evaluation.sources import (SECTIONS_METHOD, ChunkerRuns, benchmark_sources, build_chunkset,
                                           read_books, resolve_chunkers, sections_chunkset)

__all__ = [
    "GENERATION_NAMES", "JUDGE_NAMES", "SECTIONS_METHOD", "ChunkSet", "ChunkerResult", "ChunkerRuns", "ChunkerSpec",
    "Components", "EvalSettings", "EvaluationResult", "benchmark_sources", "build_chunkset", "build_components",
    "component_identity", "count_unit_fallbacks", "evaluate_chunkset", "evaluate_task", "export_texts",
    "fallback_summary", "limit_books", "load_chunkset", "load_suite", "pairwise_table", "read_books",
    "resolve_chunkers", "retrieval_metric_names", "run_evaluation", "sections_chunkset", "segment_quality_of",
    "select_questions", "summarize_rows", "with_student_chunkers",
]
