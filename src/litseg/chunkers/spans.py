"""Span helpers shared by the sentence-free baselines (token windows, recursive characters) and the
dynamic merge: they produce character spans, and these helpers turn spans into chunk records.

Every baseline works inside one unit and returns spans into ``Document.text``; the records come
from :func:`litseg.segmentation.reconstruct.build_chunk`, so baselines and LitSeg share one chunk
format.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

from litseg.segmentation.types import Chunk, Document, NamedTokenizer, Unit
from litseg.segmentation.reconstruct import build_chunk

_WORD = re.compile(r"\S+")


def trim_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``[start, end)`` without leading/trailing whitespace, or ``None`` when nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


def overlapping_sentences(unit: Unit, start: int, end: int) -> tuple[int, int]:
    """``(from_idx, to_idx)`` of the unit's sentences that overlap ``[start, end)``.

    A span that touches no sentence (text the sentence splitter left out) gets the nearest
    sentence, so that every chunk still points at a valid sentence range.
    """
    sents = unit.sentences
    if not sents:
        raise ValueError(f"unit {unit.unit_id!r} has no sentences; cannot place a chunk in it")
    ends = [s.end for s in sents]
    starts = [s.start for s in sents]
    first = bisect_right(ends, start)  # first sentence ending after the span starts
    last = bisect_left(starts, end) - 1  # last sentence starting before the span ends
    if first > last:  # no overlap: fall back to the closest sentence
        k = min(max(first, 0), len(sents) - 1)
        if first > 0 and (first >= len(sents) or start - sents[first - 1].end <= sents[first].start - end):
            k = first - 1
        first = last = k
    return sents[first].idx, sents[last].idx


def chunks_from_spans(
    doc: Document,
    unit: Unit,
    spans: Sequence[tuple[int, int]],
    *,
    method: str,
    tokenizer: NamedTokenizer | None = None,
    metadata: Sequence[dict[str, Any]] | None = None,
) -> list[Chunk]:
    """One chunk per document span, numbered in order; ``metadata[i]`` is merged into chunk i."""
    chunks: list[Chunk] = []
    for no, (s, e) in enumerate(spans, start=1):
        from_idx, to_idx = overlapping_sentences(unit, s, e)
        chunk = build_chunk(
            doc,
            unit,
            method=method,
            chunk_no=no,
            from_idx=from_idx,
            to_idx=to_idx,
            main_span=(s, e),
            tokenizer=tokenizer,
        )
        if metadata is not None:
            chunk.metadata.update(metadata[no - 1])
        chunks.append(chunk)
    return chunks


def count_words(text: str) -> int:
    return sum(1 for _ in _WORD.finditer(text))


def span_stats(spans: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Size diagnostics for a list of spans (characters)."""
    if not spans:
        return {"n_chunks": 0}
    lengths = sorted(e - s for s, e in spans)
    return {
        "n_chunks": len(spans),
        "chars_min": lengths[0],
        "chars_median": lengths[len(lengths) // 2],
        "chars_max": lengths[-1],
    }
