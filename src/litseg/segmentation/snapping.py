"""Move a segmentation's cuts to the nearest paragraph start, after decoding.

Most of the strong teacher's cuts fall where a paragraph begins (the share is in docs/training.md).
A small student often cuts a sentence or two away from it. Restricting the decoding grammar to
paragraph starts looked like the way to enforce this, but an index is decoded digit by digit and a
restricted set of ends traps the model into far larger numbers (see :mod:`litseg.segmentation.grammar`),
so the rule is applied here, to the valid answer: each cut moves to the nearest paragraph start
(the earlier one on a tie), cuts that land on the same start merge, and the blocks are rebuilt.

A rebuilt block takes the subtitle of the answer's block that shares most sentences with it (the
earlier one on a tie) and the context sentences of every answer block it overlaps, less those now
inside its own range. Coverage and order are kept by construction; a unit without
paragraph breaks (one paragraph) is left as it is.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from litseg.segmentation.schema import Segment


def nearest_start(cut: int, starts: Sequence[int]) -> int:
    """The element of sorted ``starts`` nearest to ``cut``; the earlier one on a tie."""
    pos = bisect_left(starts, cut)
    if pos == 0:
        return starts[0]
    if pos == len(starts):
        return starts[-1]
    before, after = starts[pos - 1], starts[pos]
    return before if cut - before <= after - cut else after


def snap_to_paragraphs(segments: Sequence[Segment], n: int,
                       paragraph_starts: Sequence[bool]) -> tuple[list[Segment], int]:
    """``segments`` (a valid, covering, ordered segmentation of ``n`` sentences) with every cut moved
    to the nearest paragraph start, and how many cuts moved or merged. ``paragraph_starts[i]`` says
    whether sentence ``i + 1`` opens a paragraph."""
    if len(paragraph_starts) != n:
        raise ValueError(f"paragraph_starts has {len(paragraph_starts)} entries for a unit of {n} sentences")
    starts = [i for i, first in enumerate(paragraph_starts, start=1) if first and i > 1]
    ordered = sorted(segments, key=lambda s: s.from_idx)
    old_cuts = [s.from_idx for s in ordered[1:]]
    if not starts or not old_cuts:
        return list(ordered), 0
    new_cuts = sorted({nearest_start(c, starts) for c in old_cuts})
    if new_cuts == old_cuts:
        return list(ordered), 0
    bounds = [1, *new_cuts, n + 1]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        lo, hi = a, b - 1
        overlaps = [(min(hi, s.to_idx) - max(lo, s.from_idx) + 1, -s.from_idx, s) for s in ordered
                    if s.from_idx <= hi and s.to_idx >= lo]
        chosen = max(overlaps, key=lambda t: (t[0], t[1]))[2]
        context = sorted({c for _, _, s in overlaps for c in s.context_idx if not lo <= c <= hi})
        out.append(Segment(subtitle=chosen.subtitle, from_idx=lo, to_idx=hi, context_idx=context))
    kept = set(new_cuts)
    return out, sum(1 for c in old_cuts if c not in kept)
