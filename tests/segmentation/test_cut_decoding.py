"""Cut decoding (litseg.segmentation.cut_decoding): exact, covering, and free of a fixed count."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from litseg.segmentation.cut_decoding import blocks_from_cuts, decode_cuts


def brute_force(scores, threshold, m):
    n = len(scores)
    best, best_cuts = 0.0, []
    for k in range(1, n):
        for cuts in itertools.combinations(range(2, n + 1), k):
            blocks = blocks_from_cuts(cuts, n)
            if min(b - a + 1 for a, b in blocks) < m:
                continue
            total = sum(scores[c - 1] - threshold for c in cuts)
            if total > best + 1e-12:
                best, best_cuts = total, list(cuts)
    return best, best_cuts


scores_lists = st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=1, max_size=9)


@settings(max_examples=200, deadline=None)
@given(scores=scores_lists, threshold=st.floats(-2, 2, width=32), m=st.integers(1, 4))
def test_decoding_finds_the_best_cut_set_under_the_minimum_block(scores, threshold, m):
    cuts = decode_cuts(scores, threshold=threshold, min_block=m)
    best, _ = brute_force(scores, threshold, m)
    got = sum(scores[c - 1] - threshold for c in cuts)
    assert abs(got - best) < 1e-6
    blocks = blocks_from_cuts(cuts, len(scores))
    assert blocks[0][0] == 1 and blocks[-1][1] == len(scores)
    assert all(b - a + 1 >= m for a, b in blocks) or not cuts
    assert all(b + 1 == c for (_, b), (c, _) in zip(blocks, blocks[1:]))


def test_the_count_follows_the_scores_not_a_rhythm():
    flat = [-3.0] * 40
    assert decode_cuts(flat) == []  # no boundary anywhere: one block
    peaks = list(flat)
    for i in (5, 6, 30):
        peaks[i - 1] = 4.0
    # two strong neighbours two sentences apart cannot both start a block of at least 2 sentences
    assert decode_cuts(peaks, min_block=2) in ([5, 30], [6, 30])
    assert decode_cuts(peaks, min_block=1) == [5, 6, 30]
    assert decode_cuts(peaks, threshold=5.0) == []


def test_blocks_from_cuts_ignores_cuts_outside_the_unit():
    assert blocks_from_cuts([1, 3, 3, 9], 5) == [(1, 2), (3, 5)]
    assert blocks_from_cuts([], 0) == []
