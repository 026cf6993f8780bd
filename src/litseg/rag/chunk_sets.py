"""What the evaluation scores: a chunker to evaluate (:class:`ChunkerSpec`) and the chunks it gave
(:class:`ChunkSet`), with the per-unit fallback counts. They sit beside the evaluation package,
not inside it, so that the result records (:mod:`litseg.rag.results`), the report and the chunk
sets derived from others (:mod:`litseg.rag.derived_chunks`) read them without importing the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from litseg.rag.rows import count_of
from litseg.segmentation.runner import FALLBACK_CATEGORIES, fallback_category
from litseg.segmentation.types import Chunk


@dataclass(slots=True)
class ChunkerSpec:
    """What to evaluate under ``label``: a chunker config (``kind="method"``), the benchmark's
    own sections (``"sections"``) or chunks from a file (``"file"``)."""

    label: str
    kind: str
    method: dict[str, Any] = field(default_factory=dict)
    path: str | None = None


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
    # A chunker run that failed in part: ``{units_failed, books_failed, run_dir}`` of its annotation
    # run (the failed units have no chunks); None when every unit was chunked. evaluate.py exits 1.
    run_failures: dict[str, Any] | None = None

    @property
    def failure_count(self) -> int:
        """Failed units and books (``unit_failures`` lists at most the first hundred)."""
        if self.run_failures is None:
            return len(self.unit_failures)
        return int(self.run_failures["units_failed"]) + int(self.run_failures["books_failed"])


def count_unit_fallbacks(diagnostics: Iterable[Mapping[str, Any]]) -> dict[str, int] | None:
    """Units per fallback category over per-unit diagnostics; None when none says ``fallback``."""
    counts: Counter[str] = Counter(fallback_category(dict(d)) for d in diagnostics if "fallback" in d)
    return dict(counts) if counts else None


def fallback_summary(counts: Mapping[str, int] | None) -> dict[str, Any] | None:
    """``{units, counts, shares}`` with a share for every reported category (0.0 when absent)."""
    if counts is None:
        return None
    units = sum(counts.values())
    names = list(FALLBACK_CATEGORIES) + sorted(set(counts) - set(FALLBACK_CATEGORIES) - {"none"})
    return {"units": units, "counts": dict(counts),
            "shares": {k: count_of(counts, k) / units if units else 0.0 for k in names}}
