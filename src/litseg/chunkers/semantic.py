"""Semantic chunker: cut where the meaning of adjacent sentence groups shifts most.

Written from the description of LangChain's SemanticChunker (percentile breakpoints), per unit:

1. every sentence is widened to a group: itself plus ``buffer_size`` sentences on each side
   (fewer at the unit's edges), the texts joined by a space;
2. each group is embedded (default: the packaged all-MiniLM-L6-v2, see :mod:`litseg.embeddings`);
3. the cosine distance ``1 - cos`` is taken between the groups of sentences i and i+1;
4. the threshold is the ``breakpoint_percentile``-th percentile of the unit's distances (linear
   interpolation), and a chunk ends after sentence i whenever distance i exceeds it strictly;
5. (our addition, not in the description) a chunk longer than ``max_chunk_tokens`` tokens of the
   embedder is cut again at its largest distance, then each part in turn, until every part fits
   or is a single sentence. The default, ``auto``, is the embedder's window less its two special
   tokens (MiniLM: 256 - 2 = 254 word pieces): without it most chunks of long units outgrow what
   the embedder reads, and are retrieved by their beginning only. ``null`` turns the cap off
   (the method as described).

Chunks are runs of whole sentences. Their spans tile the unit (each chunk runs to where the next
one starts, the first from the unit's start, the last to its end, trimmed of whitespace), so text
the sentence splitter left outside every sentence still lands in a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from litseg.chunkers.base import (
    Chunker,
    ChunkerGroups,
    MethodConfig,
    UnitResult,
    method_settings,
    register,
)
from litseg.chunkers.spans import chunks_from_spans, span_stats, trim_span
from litseg.segmentation.types import Document, Unit
from litseg.embeddings import load_embedder


class SentenceEmbedder(Protocol):
    """What the chunker needs from an embedder; for the ``auto`` cap also ``max_seq_length`` (its
    window) and, for any cap, ``count_tokens(text)`` (:class:`litseg.embeddings.Embedder` has both)."""

    name: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


#: Tokens the embedder adds around every text ([CLS] and [SEP] for MiniLM), out of its window.
SPECIAL_TOKENS = 2


def resolve_cap(max_chunk_tokens: int | str | None, embedder: Any) -> int | None:
    """The chunk cap in embedder tokens: ``auto`` is the embedder's window less its special tokens
    (no cap for an embedder without a window), a number is itself, None is no cap."""
    if max_chunk_tokens is None:
        return None
    if max_chunk_tokens == "auto":
        window = getattr(embedder, "max_seq_length", None)
        return int(window) - SPECIAL_TOKENS if window else None
    if isinstance(max_chunk_tokens, str) or max_chunk_tokens < 1:
        raise ValueError(f"semantic chunker: max_chunk_tokens must be a number >= 1, 'auto' or null, "
                         f"got {max_chunk_tokens!r}")
    if not callable(getattr(embedder, "count_tokens", None)):
        raise ValueError(f"semantic chunker: max_chunk_tokens={max_chunk_tokens} needs an embedder that counts "
                         f"its tokens ({getattr(embedder, 'name', type(embedder).__name__)} does not)")
    return int(max_chunk_tokens)


def cap_runs(firsts: list[int], sizes: list[int], distances: np.ndarray, cap: int) -> list[int]:
    """Chunk starts (0-based sentence positions; ``firsts[0] == 0``) with every run of sentences
    whose ``sizes`` add up to more than ``cap`` cut again, at its largest distance first, until each
    part fits or is one sentence. ``distances[i]`` lies between sentences i and i+1."""
    bounds = [*firsts, len(sizes)]
    out: list[int] = []
    for a, b in zip(bounds, bounds[1:]):
        todo = [(a, b)]
        while todo:
            lo, hi = todo.pop()
            if hi - lo == 1 or sum(sizes[lo:hi]) <= cap:
                out.append(lo)
                continue
            cut = lo + int(np.argmax(distances[lo : hi - 1])) + 1  # the first sentence after the cut
            todo += [(cut, hi), (lo, cut)]
    return sorted(out)


def group_texts(sentences: list[str], buffer_size: int) -> list[str]:
    """Sentence i with ``buffer_size`` neighbours on each side, joined by spaces."""
    n = len(sentences)
    return [" ".join(sentences[max(0, i - buffer_size) : min(n, i + buffer_size + 1)]) for i in range(n)]


def adjacent_distances(embeddings: np.ndarray) -> np.ndarray:
    """Cosine distance between rows i and i+1."""
    e = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(e, axis=1, keepdims=True)
    e = e / np.where(norms == 0, 1.0, norms)
    return 1.0 - np.sum(e[:-1] * e[1:], axis=1)


def breakpoints(distances: np.ndarray, percentile: float) -> tuple[list[int], float]:
    """0-based positions i whose distance to i+1 is above the percentile threshold, and the threshold."""
    if len(distances) == 0:
        return [], float("nan")
    threshold = float(np.percentile(distances, percentile))
    return [int(i) for i in np.flatnonzero(distances > threshold)], threshold


class SemanticChunker(Chunker):
    name = "semantic"

    def __init__(self, embedder: SentenceEmbedder | None = None, **settings: Any) -> None:
        """``settings`` are fields of :class:`SemanticConfig` (``conf/method/semantic.yaml``); one
        left out is read from that file, its one home (method_settings). ``embedder`` replaces the
        model the settings name (``model``, ``batch_size``), e.g. a test's fake."""
        config = method_settings(SemanticConfig, "semantic", settings)
        buffer_size, breakpoint_percentile = config.buffer_size, config.breakpoint_percentile
        if buffer_size < 0:
            raise ValueError(f"semantic chunker: buffer_size must be >= 0, got {buffer_size}")
        if not 0 <= breakpoint_percentile <= 100:
            raise ValueError(
                f"semantic chunker: breakpoint_percentile must be in [0, 100], got {breakpoint_percentile}")
        self.buffer_size = buffer_size
        self.breakpoint_percentile = float(breakpoint_percentile)
        if embedder is None:
            embedder = load_embedder(config.model, batch_size=config.batch_size)
        self.embedder = embedder
        self.max_chunk_tokens = resolve_cap(config.max_chunk_tokens, embedder)

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        sents = unit.sentences
        if not sents:
            span = trim_span(doc.text, unit.start, unit.end)
            if span is not None:
                raise ValueError(f"semantic chunker: unit {unit.unit_id!r} has text but no sentences")
            return UnitResult(unit.book_id, unit.unit_id, [], {"n_chunks": 0})
        texts = [doc.text[s.start : s.end] for s in sents]
        cuts: list[int] = []
        threshold = float("nan")
        distances = np.zeros(0)
        if len(sents) > 1:
            distances = adjacent_distances(self.embedder.encode(group_texts(texts, self.buffer_size)))
            cuts, threshold = breakpoints(distances, self.breakpoint_percentile)
        # Chunk k starts at sentence firsts[k]; its span runs to the next chunk's first sentence.
        firsts = [0] + [i + 1 for i in cuts]
        if self.max_chunk_tokens is not None and len(sents) > 1:
            sizes = [self.embedder.count_tokens(t) for t in texts]  # type: ignore[attr-defined]
            firsts = cap_runs(firsts, sizes, distances, self.max_chunk_tokens)
        bounds = [unit.start] + [sents[i].start for i in firsts[1:]] + [unit.end]
        spans = [span for a, b in zip(bounds, bounds[1:]) if (span := trim_span(doc.text, a, b))]
        chunks = chunks_from_spans(doc, unit, spans, method=self.name)
        diagnostics = {
            "n_sentences": len(sents),
            "threshold": threshold,
            "n_breakpoints": len(cuts),
            "n_cap_cuts": len(firsts) - 1 - len(cuts),  # cuts made to keep chunks under max_chunk_tokens
            "distance_mean": float(distances.mean()) if len(distances) else float("nan"),
            **span_stats(spans),
        }
        return UnitResult(unit.book_id, unit.unit_id, chunks, diagnostics)

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "embedder": getattr(self.embedder, "name", type(self.embedder).__name__),
                "buffer_size": self.buffer_size, "breakpoint_percentile": self.breakpoint_percentile,
                "max_chunk_tokens": self.max_chunk_tokens}


@dataclass(kw_only=True)
class SemanticConfig(MethodConfig):
    """conf/method/semantic.yaml."""

    model: str | None  # null: the packaged all-MiniLM-L6-v2
    buffer_size: int
    breakpoint_percentile: float
    batch_size: int
    max_chunk_tokens: int | str | None  # auto: the embedder's window less 2; null: no cap


@register("semantic", config=SemanticConfig)
def make_semantic(config: SemanticConfig, groups: ChunkerGroups) -> SemanticChunker:
    return SemanticChunker(**config.options())
