"""Agreement between raters: ICC(2,1) on scores, Cohen's kappa per rater pair and Fleiss' kappa
on labels (pingouin, scikit-learn and statsmodels are imported by the functions that use them).
Used by :mod:`litseg.rag.human_eval` and :mod:`litseg.rag.human_pairwise`."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any


def icc2_1(df: Any, *, targets: str = "item_id", raters: str = "rater", ratings: str = "score"
           ) -> dict[str, Any]:
    """Two-way random effects, absolute agreement, single rater ICC(2,1) (Shrout & Fleiss'
    ICC2) from ``pingouin.intraclass_corr``; items not scored by every rater are dropped.
    Returns ``{"icc": value, "ci95": [low, high], "n_items", "n_raters"}`` or ``{"icc": None,
    "reason": ...}`` when it cannot be computed (fewer than 2 raters or 5 complete items)."""
    wide = df.pivot_table(index=targets, columns=raters, values=ratings, aggfunc="first").dropna()
    n_items, n_raters = wide.shape
    if n_raters < 2 or n_items < 5:
        return {"icc": None, "n_items": int(n_items), "n_raters": int(n_raters),
                "reason": "needs at least 2 raters and 5 items scored by all of them"}
    import pingouin as pg  # heavy (pulls matplotlib and seaborn): only once there is work

    long = wide.reset_index().melt(id_vars=targets, var_name=raters, value_name=ratings)
    table = pg.intraclass_corr(data=long, targets=targets, raters=raters, ratings=ratings).set_index("Type")
    # pingouin < 0.7 names it "ICC2"; 0.7 names it "ICC(A,1)" (absolute agreement, single rater)
    name = next(n for n in ("ICC(A,1)", "ICC2", "ICC(2,1)") if n in table.index)
    row = table.loc[name]
    icc = float(row["ICC"])
    ci_col = next((c for c in ("CI95", "CI95%") if c in row.index), None)
    ci = [float(x) for x in row[ci_col]] if ci_col else None
    return {"icc": None if math.isnan(icc) else icc, "ci95": ci, "n_items": int(n_items),
            "n_raters": int(n_raters)}


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def cohen_kappas(labels: Mapping[str, Mapping[str, Any]], *, weights: str | None = None,
                 categories: Sequence[Any] | None = None) -> dict[str, dict[str, Any]]:
    """Cohen's kappa and raw agreement for every pair of raters on the items both labelled.
    ``labels`` is rater -> item -> label. ``weights`` ("linear"/"quadratic") gives weighted
    kappa for ordinal scores. Keys are ``"raterA|raterB"``."""
    from sklearn.metrics import cohen_kappa_score

    out: dict[str, dict[str, Any]] = {}
    for r1, r2 in itertools.combinations(sorted(labels), 2):
        common = sorted(set(labels[r1]) & set(labels[r2]))
        if not common:
            out[f"{r1}|{r2}"] = {"kappa": None, "agreement": None, "n_items": 0}
            continue
        a = [labels[r1][i] for i in common]
        b = [labels[r2][i] for i in common]
        cats = list(categories) if categories is not None else sorted(set(a) | set(b))
        if len(cats) < 2:
            kappa = None  # both raters used one and the same label throughout: kappa undefined
        else:
            kappa = _nan_to_none(float(cohen_kappa_score(a, b, labels=cats, weights=weights)))
        out[f"{r1}|{r2}"] = {"kappa": kappa, "agreement": sum(x == y for x, y in zip(a, b)) / len(a),
                             "n_items": len(common)}
    return out


def fleiss_kappa(labels: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Fleiss' kappa (statsmodels) over the items labelled by every rater."""
    import numpy as np
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    raters = sorted(labels)
    if len(raters) < 2:
        return {"kappa": None, "n_items": 0, "n_raters": len(raters), "reason": "needs at least 2 raters"}
    items = sorted(set.intersection(*(set(labels[r]) for r in raters)))
    if not items:
        return {"kappa": None, "n_items": 0, "n_raters": len(raters), "reason": "no item labelled by all"}
    cats = sorted({labels[r][i] for r in raters for i in items}, key=str)
    code = {c: k for k, c in enumerate(cats)}
    data = np.array([[code[labels[r][i]] for r in raters] for i in items])
    table, _ = aggregate_raters(data, n_cat=len(cats))
    kappa = _nan_to_none(float(sm_fleiss(table, method="fleiss"))) if len(cats) > 1 else None
    return {"kappa": kappa, "n_items": len(items), "n_raters": len(raters)}


def labels_by_rater(df: Any, value: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for rater, item, v in zip(df["rater"], df["item_id"], df[value]):
        out[str(rater)][str(item)] = v
    return dict(out)
