"""Cuts from per-sentence scores: the decoding step of a boundary model (``method=litseg_tagger``).

A boundary model gives every sentence ``i`` (2..n) of a unit a score: how strongly a new plot
block should start there (a logit). :func:`decode_cuts` picks the set of cuts with the largest
total ``score - threshold`` under one rule, a minimum block length, so the number of blocks follows
from the scores (no fixed count, no rhythm): a unit with no strong boundary stays whole, and one
with many gets many. Exact dynamic programming in O(n); pure Python, no torch.

:func:`blocks_from_cuts` turns cuts into the ``from_idx``/``to_idx`` ranges every chunker returns
(1-based, inclusive, covering the unit in order).
"""

from __future__ import annotations

from collections.abc import Sequence


def decode_cuts(scores: Sequence[float], *, threshold: float = 0.0, min_block: int = 1) -> list[int]:
    """The 1-based sentences that start a new block (sentence 1 never does).

    ``scores[i]`` belongs to sentence ``i + 1``; ``scores[0]`` is ignored. Chosen: the cut set that
    maximises the sum of ``score - threshold`` over its cuts, with every block (the first and the
    last included) at least ``min_block`` sentences long. Ties go to fewer cuts.
    """
    n = len(scores)
    m = max(1, int(min_block))
    if n < 2 * m:
        return []
    gain = [float(s) - threshold for s in scores]
    # best[i]: the best total of a cut set whose last cut is sentence i + 1 (index i); prev[i]: the
    # index of the cut before it (-1: none). run_best/run_arg: the best best[j] over j <= i - m.
    best = [float("-inf")] * n
    prev = [-1] * n
    run_best, run_arg = 0.0, -1  # "no earlier cut" scores 0
    for i in range(m, n - m + 1):
        j = i - m
        if j >= m and best[j] > run_best:
            run_best, run_arg = best[j], j
        best[i] = gain[i] + run_best
        prev[i] = run_arg
    end_best, end = 0.0, -1
    for i in range(m, n - m + 1):
        if best[i] > end_best:
            end_best, end = best[i], i
    out: list[int] = []
    while end >= 0:
        out.append(end + 1)
        end = prev[end]
    return sorted(out)


def blocks_from_cuts(cuts: Sequence[int], n: int) -> list[tuple[int, int]]:
    """``(from_idx, to_idx)`` of the blocks that ``cuts`` (1-based block starts) make of ``n``
    sentences; cuts outside 2..n and repeated cuts are ignored."""
    if n <= 0:
        return []
    starts = [1, *sorted({int(c) for c in cuts if 1 < int(c) <= n})]
    return [(a, b - 1) for a, b in zip(starts, [*starts[1:], n + 1])]
