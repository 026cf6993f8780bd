"""Per-question rows summarised per chunker and compared pairwise, with book-level bootstrap
intervals (questions are resampled when there is a single book)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from litseg.rag.results import (GENERATION_NAMES, JUDGE_NAMES, ChunkerResult, EvalSettings,
                                           retrieval_metric_names)
from litseg.rag.stats import bootstrap_ci, paired_comparison


def summarize_rows(rows: Sequence[Mapping[str, Any]], settings: EvalSettings) -> dict[str, Any]:
    """Means with book-level bootstrap intervals of every per-question metric present."""
    out: dict[str, Any] = {"n_questions": len(rows), "metrics": {}}
    gold = [r for r in rows if r.get("has_gold")]
    out["n_with_gold"] = len(gold)
    out["n_without_relevant_chunk"] = sum(1 for r in gold if not r.get("n_relevant"))
    names = (retrieval_metric_names(settings) + ["random_hit@1", f"random_mrr@{settings.mrr_k}"]
             + list(GENERATION_NAMES) + list(JUDGE_NAMES))
    # With a single book (GutenQA's Emma) there is nothing to resample at book level: questions are
    # resampled instead, which understates the uncertainty; the summary says which was done.
    by_book = len({r["book_id"] for r in rows}) > 1
    out["resampling"] = "books" if by_book else "questions (single book)"
    for name in names:
        vals = [(r[name], r["book_id"]) for r in rows if r.get(name) is not None]
        if not vals:
            continue
        ci = bootstrap_ci([v for v, _ in vals], [b for _, b in vals] if by_book else None,
                          confidence=settings.confidence, n_resamples=settings.n_resamples, seed=settings.seed)
        out["metrics"][name] = ci.to_dict()
    return out


def pairwise_table(results: Sequence[ChunkerResult], metrics: Sequence[str], settings: EvalSettings
                   ) -> list[dict[str, Any]]:
    """Every ordered pair (A listed before B) on every metric both have per question: mean
    difference with a book-level bootstrap interval and a book-level permutation p-value."""
    out = []
    for i, a in enumerate(results):
        for b in results[i + 1:]:
            for m in metrics:
                va = {r["qid"]: r[m] for r in a.per_question if r.get(m) is not None}
                vb = {r["qid"]: r[m] for r in b.per_question if r.get(m) is not None}
                common = sorted(set(va) & set(vb))
                if len(common) < 2:
                    continue
                groups = {r["qid"]: r["book_id"] for r in a.per_question}
                by_book = len({groups[q] for q in common}) > 1  # else resample questions (see summarize_rows)
                pc = paired_comparison({q: va[q] for q in common}, {q: vb[q] for q in common},
                                       groups if by_book else None,
                                       confidence=settings.confidence, n_resamples=settings.n_resamples,
                                       seed=settings.seed)
                out.append({"a": a.label, "b": b.label, "metric": m, "n": pc.n_items,
                            "books": len({groups[q] for q in common}),
                            "resampling": "books" if by_book else "questions",
                            "mean_a": pc.mean_a, "mean_b": pc.mean_b, "diff": pc.diff.estimate,
                            "diff_low": pc.diff.low, "diff_high": pc.diff.high, "p_permutation": pc.p_permutation,
                            "p_wilcoxon": pc.p_wilcoxon})
    return out
