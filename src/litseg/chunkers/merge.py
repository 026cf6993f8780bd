"""Dynamic merge: join adjacent chunks of a baseline, inside each unit, towards a target length, so
that baselines are compared with LitSeg at matching granularity (e.g. LitSeg's soft length
reference) instead of at whatever size their defaults happen to give.

The rule, per unit, over the base chunker's chunks in order (lengths measured on the span from the
first chunk's start to the furthest end, so overlapping chunks are not counted twice):

* a group starts with the first chunk;
* the next chunk joins the group when the joined length lies no further from the target than the
  group's current length does (``joined - target <= target - current``, i.e.
  ``joined + current <= 2 * target``); otherwise the group is closed and the chunk starts a new
  one;
* each group becomes one chunk whose main span runs from the group's first start to its furthest
  end; chunks are renumbered, ``method`` becomes ``"<base>+merge"`` and
  ``metadata["merged_from"]`` lists the chunk ids that went into it.

A chunk already at or over the target is never joined to anything, chunks are never split, units
are never crossed, and the last group of a unit may stay short. Subtitles and context sentences of
the base chunks are dropped (the baselines have none).

Use it as ``merge: {target: 350, measure: words}`` in any chunker's method config
(``build_chunker("semantic", merge={"target": 350, "measure": "words"})``), or call :func:`merge_unit_result` on
results you already have.
"""

from __future__ import annotations

import dataclasses
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from litseg.chunkers.base import Chunker, MergeOptions, UnitResult
from litseg.chunkers.spans import chunks_from_spans, span_stats
from litseg.segmentation.types import Chunk, Document, Unit
from litseg.utils.config import from_dict

MEASURES = ("words", "chars", "sentences")
_WORD = re.compile(r"\S+")


class _Lengths:
    """Lengths of spans inside one unit in the chosen measure, in O(log n) each."""

    def __init__(self, doc: Document, unit: Unit, measure: str) -> None:
        self.measure = measure
        if measure == "words":
            self._starts = [m.start() for m in _WORD.finditer(doc.text, unit.start, unit.end)]
        elif measure == "sentences":
            self._starts = [s.start for s in unit.sentences]
            self._ends = [s.end for s in unit.sentences]

    def __call__(self, start: int, end: int) -> int:
        if self.measure == "chars":
            return end - start
        if self.measure == "words":
            return bisect_left(self._starts, end) - bisect_left(self._starts, start)
        # sentences overlapping [start, end)
        return max(0, bisect_left(self._starts, end) - bisect_left(self._ends, start + 1))


def merge_groups(spans: list[tuple[int, int]], target: float, length: Any) -> list[list[int]]:
    """Indices of the spans that form each merged group (the rule in the module docstring)."""
    groups: list[list[int]] = []
    cur: list[int] = []
    cur_start = cur_end = 0
    for i, (s, e) in enumerate(spans):
        if cur:
            joined_end = max(cur_end, e)
            if length(cur_start, joined_end) + length(cur_start, cur_end) <= 2 * target:
                cur.append(i)
                cur_end = joined_end
                continue
            groups.append(cur)
        cur, cur_start, cur_end = [i], s, e
    if cur:
        groups.append(cur)
    return groups


def merge_unit_result(
    doc: Document, unit: Unit, result: UnitResult, *, target: float, measure: str,
    method: str | None = None,
) -> UnitResult:
    """The unit's chunks merged towards ``target`` (see the module docstring)."""
    _check(target, measure)
    chunks: list[Chunk] = sorted(result.chunks, key=lambda c: (c.start, c.end))
    spans = [(c.start, c.end) for c in chunks]
    length = _Lengths(doc, unit, measure)
    groups = merge_groups(spans, target, length)
    merged_spans = [(spans[g[0]][0], max(spans[i][1] for i in g)) for g in groups]
    base_method = chunks[0].method if chunks else "chunker"
    merged = chunks_from_spans(
        doc, unit, merged_spans, method=method or f"{base_method}+merge",
        metadata=[{"merged_from": [chunks[i].chunk_id for i in g]} for g in groups],
    )
    # The base's diagnostics stay (LLM usage counters are read from there); sizes describe the output.
    diagnostics = {**result.diagnostics, **span_stats(merged_spans)}
    diagnostics["merge"] = {"target": target, "measure": measure, "chunks_before": len(chunks),
                            "lengths": [length(s, e) for s, e in merged_spans]}
    return UnitResult(result.book_id, result.unit_id, merged, diagnostics, result.error)


class DynamicMerge(Chunker):
    """Wraps any chunker and merges its chunks per unit towards ``target``."""

    def __init__(self, base: Chunker, target: float, measure: str) -> None:
        _check(target, measure)
        self.base = base
        self.target = target
        self.measure = measure
        self.name = f"{base.name}+merge"

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        return self._merge(doc, unit, self.base.chunk_unit(doc, unit))

    def chunk_units(self, doc: Document, units: Iterable[Unit]) -> Iterator[UnitResult]:
        # Delegate to the base so that chunkers which batch their units keep doing so.
        units = list(units)
        by_id = {u.unit_id: u for u in units}
        for result in self.base.chunk_units(doc, units):
            yield self._merge(doc, by_id[result.unit_id], result)

    def _merge(self, doc: Document, unit: Unit, result: UnitResult) -> UnitResult:
        return merge_unit_result(doc, unit, result, target=self.target, measure=self.measure,
                                 method=self.name)

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "base": self.base.fingerprint(), "target": self.target,
                "measure": self.measure}


def merge_options(merge: MergeOptions | Mapping[str, Any], where: str = "method.merge") -> MergeOptions:
    """``merge`` typed: both keys given (``{target, measure}``; :class:`MergeOptions` has no defaults)."""
    if isinstance(merge, MergeOptions):
        return merge
    unknown = set(merge) - {f.name for f in dataclasses.fields(MergeOptions)}
    if unknown:
        raise ValueError(f"merge: unknown keys {sorted(unknown)}; expected 'target' and 'measure'")
    return from_dict(MergeOptions, merge, where)


def with_merge(chunker: Chunker, merge: MergeOptions | Mapping[str, Any] | None) -> Chunker:
    """``chunker`` wrapped in :class:`DynamicMerge` when ``merge`` (``{target, measure}``) is set;
    ``None`` or a null ``target`` leaves it as it is."""
    if not merge:
        return chunker
    if isinstance(merge, Mapping) and set(merge) <= {"target", "measure"} and "target" in merge \
            and merge["target"] is None:
        return chunker  # off: a null target needs no measure
    merge = merge_options(merge)
    if merge.target is None:
        return chunker
    return DynamicMerge(chunker, target=merge.target, measure=merge.measure)


def _check(target: float, measure: str) -> None:
    if measure not in MEASURES:
        raise ValueError(f"merge: measure must be one of {MEASURES}, got {measure!r}")
    if not isinstance(target, (int, float)) or target <= 0:
        raise ValueError(f"merge: target must be a positive number, got {target!r}")
