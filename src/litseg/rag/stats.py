"""Uncertainty for benchmark scores: book-level bootstrap intervals and paired comparisons.

Questions about the same book are not independent (one book's chunking helps or hurts all of
its questions), so intervals resample whole books and the permutation test flips whole books.
With ~1,000 FairytaleQA questions over 23 stories this gives intervals of about +/-0.05 on MRR;
question-level resampling would claim far less uncertainty than there is.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: Below this many books, intervals and p-values come with a warning (:func:`few_books_warning`).
#: n books give few distinct bootstrap resamples (3 distinct means from 2 books), so the
#: percentile interval comes out far too narrow, and a permutation test that flips whole books
#: cannot go below p = 2 / 2**n (0.5 with 2 books, 0.0625 with 5, 0.002 with 10).
MIN_BOOKS_FOR_INFERENCE = 10


def few_books_warning(n_books: int) -> str | None:
    """A warning for intervals and p-values computed over fewer than
    :data:`MIN_BOOKS_FOR_INFERENCE` books, else None."""
    if n_books >= MIN_BOOKS_FOR_INFERENCE:
        return None
    floor = 2 / 2 ** n_books if n_books else 1.0
    return (f"only {n_books} book(s) (fewer than {MIN_BOOKS_FOR_INFERENCE}): the 95% intervals resample too few books "
            f"to mean much (they come out too narrow) and no permutation p-value can go below {min(floor, 1.0):.3g}; "
            "read them as descriptive, not as evidence of a difference")


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean with its bootstrap confidence interval. ``low``/``high`` are NaN when the data
    hold a single group (nothing to resample)."""

    estimate: float
    low: float
    high: float
    confidence: float
    n_items: int
    n_groups: int
    method: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"


def _group_totals(values: Sequence[float], groups: Sequence[Hashable] | None,
                  weights: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    vals = np.asarray(values, dtype=float)
    if vals.ndim != 1 or vals.size == 0:
        raise ValueError("need a non-empty 1-d sequence of values")
    if np.isnan(vals).any():
        raise ValueError("values contain NaN; drop or fill them first")
    w = np.ones_like(vals) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != vals.shape or (w <= 0).any():
        raise ValueError(f"need one positive weight per value ({vals.size} values, {w.size} weights)")
    if groups is None:
        return vals, w
    if len(groups) != vals.size:
        raise ValueError(f"{vals.size} values but {len(groups)} group labels")
    index: dict[Hashable, int] = {}
    ids = np.fromiter((index.setdefault(g, len(index)) for g in groups), dtype=int, count=vals.size)
    sums = np.bincount(ids, weights=vals, minlength=len(index))
    counts = np.bincount(ids, weights=w, minlength=len(index))
    return sums, counts


def _ratio(sums: np.ndarray, counts: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(sums, axis=axis) / np.sum(counts, axis=axis)


def bootstrap_ci(values: Sequence[float], groups: Sequence[Hashable] | None = None, *,
                 confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0,
                 method: str = "percentile", weights: Sequence[float] | None = None) -> Interval:
    """Mean of ``values`` with a bootstrap interval that resamples whole ``groups`` (books).

    The statistic is the question-weighted mean (all questions of the drawn books pooled), the
    same number the point estimate reports. With ``weights`` it is ``sum(values) / sum(weights)``
    instead, a pooled ratio (e.g. a micro-averaged F1: twice the matched cuts over predicted plus
    reference cuts, per unit). ``groups=None`` resamples single values. Uses
    ``scipy.stats.bootstrap`` (``method``: "percentile", "basic" or "BCa") on per-book sums and
    counts as paired samples; seeded, so the same input gives the same interval.
    """
    from scipy import stats

    sums, counts = _group_totals(values, groups, weights)
    estimate = float(sums.sum() / counts.sum())
    n_items = int(counts.sum()) if weights is None else len(values)
    if sums.size < 2:
        return Interval(estimate, math.nan, math.nan, confidence, n_items, int(sums.size),
                        "single group: no interval")
    if np.allclose(sums / counts, sums[0] / counts[0]):
        # every book has the same mean: every resample does too (BCa would divide by zero)
        return Interval(estimate, estimate, estimate, confidence, n_items, int(sums.size), method)
    res = stats.bootstrap((sums, counts), _ratio, paired=True, vectorized=True, n_resamples=n_resamples,
                          confidence_level=confidence, method=method, rng=np.random.default_rng(seed))
    return Interval(estimate, float(res.confidence_interval.low), float(res.confidence_interval.high),
                    confidence, n_items, int(sums.size), method)


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """System A minus system B on the same questions."""

    n_items: int
    n_groups: int
    mean_a: float
    mean_b: float
    diff: Interval
    p_permutation: float
    p_wilcoxon: float | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["diff"] = self.diff.to_dict()
        return d


def _aligned(a: Mapping[str, float], b: Mapping[str, float]) -> list[str]:
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    if only_a or only_b:
        raise ValueError(f"paired comparison needs the same questions: {len(only_a)} only in A "
                         f"(e.g. {sorted(only_a)[:3]}), {len(only_b)} only in B (e.g. {sorted(only_b)[:3]})")
    if not a:
        raise ValueError("no questions to compare")
    return sorted(a)


def paired_comparison(a: Mapping[str, float], b: Mapping[str, float],
                      groups: Mapping[str, Hashable] | None = None, *, confidence: float = 0.95,
                      n_resamples: int = 2000, n_permutations: int = 9999, seed: int = 0
                      ) -> PairedComparison:
    """Compare two chunkers on per-question results (``qid -> score``, e.g. reciprocal ranks).

    * ``diff``: mean of A - B with a book-level bootstrap interval (:func:`bootstrap_ci`);
    * ``p_permutation``: two-sided paired permutation test that swaps A and B for whole books at
      once (``scipy.stats.permutation_test``, exact when 2^books <= ``n_permutations``);
    * ``p_wilcoxon``: Wilcoxon signed-rank test on the per-question differences (ignores the
      book structure, so it is optimistic; None when every difference is zero).
    """
    from scipy import stats

    qids = _aligned(a, b)
    if groups is not None:
        missing = [q for q in qids if q not in groups]
        if missing:
            raise ValueError(f"{len(missing)} questions have no group, e.g. {missing[:3]}")
    va = np.array([a[q] for q in qids], dtype=float)
    vb = np.array([b[q] for q in qids], dtype=float)
    glabels = [groups[q] for q in qids] if groups is not None else None
    diff = bootstrap_ci(va - vb, glabels, confidence=confidence, n_resamples=n_resamples, seed=seed)
    sa, counts = _group_totals(va, glabels)
    sb, _ = _group_totals(vb, glabels)
    total = counts.sum()

    def mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.sum(x - y, axis=axis) / total

    if np.allclose(sa, sb):
        p_perm = 1.0
    else:
        perm = stats.permutation_test((sa, sb), mean_diff, permutation_type="samples", vectorized=True,
                                      n_resamples=n_permutations, rng=np.random.default_rng(seed))
        p_perm = float(perm.pvalue)
    d = va - vb
    p_wil: float | None = None
    if np.any(d != 0):
        p_wil = float(stats.wilcoxon(d).pvalue)
    return PairedComparison(n_items=len(qids), n_groups=int(sa.size), mean_a=float(va.mean()),
                            mean_b=float(vb.mean()), diff=diff, p_permutation=p_perm, p_wilcoxon=p_wil)
