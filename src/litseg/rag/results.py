"""What an evaluation produces: the scoring settings, one result per chunker, the run's result.

Plain records (no imports of the run or of the report), so that :mod:`litseg.rag.report` and the
run can both use them without importing each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from litseg.rag.config import MetricsConfig
    from litseg.rag.chunk_sets import ChunkSet


@dataclass(slots=True)
class EvalSettings:
    """Scoring settings shared by every chunker of a run (the ``metrics`` section; the defaults
    equal conf/evaluate.yaml, checked by tests/rag/test_evaluate_config.py)."""

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
    def from_config(cls, cfg: "MetricsConfig", progress: bool) -> "EvalSettings":
        """From the typed ``metrics`` section and the run's ``progress`` switch."""
        return cls(ks=tuple(cfg.ks), mrr_k=cfg.mrr_k, budgets=tuple(cfg.budgets), min_overlap=cfg.min_overlap,
                   string_field=cfg.string_field, index_text=cfg.index_text, confidence=cfg.confidence,
                   n_resamples=cfg.n_resamples, seed=cfg.seed, segment_quality=cfg.segment_quality,
                   keep_top=cfg.keep_top, progress=progress)


@dataclass(slots=True)
class ChunkerResult:
    label: str
    method: str
    summary: dict[str, Any]
    per_question: list[dict[str, Any]]
    chunk_words: list[int]
    chunkset: "ChunkSet | None" = None


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


def retrieval_metric_names(settings: EvalSettings) -> list[str]:
    return ([f"mrr@{settings.mrr_k}"] + [f"hit@{k}" for k in settings.ks]
            + [f"evidence@{b}" for b in settings.budgets])


GENERATION_NAMES = ("em", "f1", "rougeL", "meteor")

JUDGE_NAMES = ("context_relevance", "answer_accuracy")
