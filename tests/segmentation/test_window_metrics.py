"""Pk and WindowDiff (litseg.segmentation.agreement): count-robust segmentation errors."""

from litseg.segmentation.agreement import pk_errors, window_size, windowdiff_errors


def blocks(*starts, n):
    bounds = [1, *starts, n + 1]
    return [{"from_idx": a, "to_idx": b - 1} for a, b in zip(bounds, bounds[1:])]


def test_identical_segmentations_make_no_error():
    ref = blocks(6, 11, 16, n=20)
    assert pk_errors(ref, ref, 20).errors == 0
    assert windowdiff_errors(ref, ref, 20).errors == 0
    assert window_size(ref, 20) == 2  # 20 sentences in 4 blocks: half of 5, rounded


def test_cutting_everywhere_is_punished_where_a_tolerant_f1_would_not_be():
    ref = blocks(6, 11, 16, n=20)
    dense = blocks(*range(2, 21), n=20)  # a cut before every sentence hits every reference cut
    none = blocks(n=20)
    k = window_size(ref, 20)
    windows = 20 - k
    pk_dense, wd_dense = pk_errors(dense, ref, 20), windowdiff_errors(dense, ref, 20)
    assert pk_dense.windows == wd_dense.windows == windows
    # every window of the dense cutter holds a boundary; the reference's hold one in 6 of 18
    assert pk_dense.errors == windows - sum(1 for i in range(windows) if any(c - 2 in range(i, i + k) for c in (6, 11, 16)))
    assert wd_dense.errors == windows  # the counts always differ (2 against 0 or 1)
    assert pk_errors(none, ref, 20).rate > 0 and windowdiff_errors(none, ref, 20).rate > 0


def test_a_near_miss_costs_less_than_a_missing_cut():
    ref = blocks(11, n=20)
    near = blocks(12, n=20)
    missing = blocks(n=20)
    assert pk_errors(near, ref, 20).errors < pk_errors(missing, ref, 20).errors
    assert windowdiff_errors(near, ref, 20).errors < windowdiff_errors(missing, ref, 20).errors
