"""Hybrid retrieval: dense and BM25 searches in the question's own book, fused into one ranking.

Fusion is reciprocal rank fusion (each list adds ``w / (k + rank)``, k = 60 by default) or a
weighted sum of min-max-normalised scores. Every ranking breaks ties the same way: higher score
first, then the chunk's place in its book, so results never depend on the store's internal order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from litseg.rag.index import ChunkIndex, Hit

if TYPE_CHECKING:
    from litseg.rag.config import RetrievalConfig

MODES = ("hybrid", "dense", "sparse")
FUSIONS = ("rrf", "weighted")


@dataclass(slots=True)
class Retrieved:
    """One ranked candidate. ``position`` indexes :attr:`ChunkIndex.passages`; the dense and
    sparse ranks (1-based) and scores are kept where the candidate appeared in that list."""

    position: int
    score: float
    dense_rank: int | None = None
    sparse_rank: int | None = None
    dense_score: float | None = None
    sparse_score: float | None = None
    rerank_score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def rrf_scores(rankings: Sequence[Sequence[int]], k: float = 60.0, weights: Sequence[float] | None = None
               ) -> dict[int, float]:
    """Reciprocal rank fusion: ``sum_i w_i / (k + rank_i(d))`` over the lists that hold ``d``."""
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    out: defaultdict[int, float] = defaultdict(float)
    for w, ranking in zip(weights, rankings):
        for rank, item in enumerate(ranking, 1):
            out[item] += w / (k + rank)
    return dict(out)


def minmax(scores: Mapping[int, float]) -> dict[int, float]:
    """Scores scaled to [0, 1]; all-equal scores become 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi == lo:
        return {d: 1.0 for d in scores}
    return {d: (s - lo) / (hi - lo) for d, s in scores.items()}


def weighted_scores(score_maps: Sequence[Mapping[int, float]], weights: Sequence[float]) -> dict[int, float]:
    """Weighted sum of min-max-normalised scores; a candidate missing from a list gets 0 there."""
    if len(score_maps) != len(weights):
        raise ValueError("one weight per score list")
    out: defaultdict[int, float] = defaultdict(float)
    for w, scores in zip(weights, score_maps):
        for d, s in minmax(scores).items():
            out[d] += w * s
    return dict(out)


def ranked(scores: Mapping[int, float], tiebreak: Sequence[Any]) -> list[int]:
    """Keys of ``scores`` best first; equal scores go by ``tiebreak[key]`` ascending."""
    return sorted(scores, key=lambda d: (-scores[d], tiebreak[d]))


@dataclass(slots=True)
class RetrievalSettings:
    mode: str = "hybrid"
    fusion: str = "rrf"
    rrf_k: float = 60.0
    dense_weight: float = 1.0
    sparse_weight: float = 1.0
    candidates: int | None = 100  # per search list; None = every chunk of the book

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"retrieval.mode must be one of {MODES}, got {self.mode!r}")
        if self.fusion not in FUSIONS:
            raise ValueError(f"retrieval.fusion must be one of {FUSIONS}, got {self.fusion!r}")
        if self.candidates is not None and self.candidates < 1:
            raise ValueError(f"retrieval.candidates must be >= 1 or null, got {self.candidates}")
        if self.dense_weight < 0 or self.sparse_weight < 0 or self.dense_weight + self.sparse_weight == 0:
            raise ValueError("retrieval weights must be >= 0 and not both 0")

    @classmethod
    def from_config(cls, cfg: "RetrievalConfig") -> "RetrievalSettings":
        """The fusion settings of a typed ``retrieval`` config."""
        return cls(mode=cfg.mode, fusion=cfg.fusion, rrf_k=cfg.rrf_k, dense_weight=cfg.dense_weight,
                   sparse_weight=cfg.sparse_weight, candidates=cfg.candidates)


class HybridRetriever:
    """Ranks the chunks of a :class:`ChunkIndex` for questions, each within its own book."""

    def __init__(self, index: ChunkIndex, settings: RetrievalSettings | None = None) -> None:
        self.index = index
        self.settings = settings or RetrievalSettings()
        if self.settings.mode in ("hybrid", "dense") and index.dense is None:
            raise ValueError(f"retrieval mode {self.settings.mode!r} needs dense vectors")
        if self.settings.mode in ("hybrid", "sparse") and index.bm25 is None:
            raise ValueError(f"retrieval mode {self.settings.mode!r} needs BM25 vectors")
        self._order = [(p.order, p.position) for p in index.passages]

    def retrieve(self, queries: Sequence[str], book_ids: Sequence[str | None]) -> list[list[Retrieved]]:
        """The fused ranking per query (at most ``candidates`` per list enter the fusion)."""
        s = self.settings
        n = len(queries)
        dense: list[list[Hit]] = [[] for _ in range(n)]
        sparse: list[list[Hit]] = [[] for _ in range(n)]
        if s.mode in ("hybrid", "dense"):
            dense = self.index.search_dense(queries, book_ids, s.candidates)
        if s.mode in ("hybrid", "sparse"):
            sparse = self.index.search_sparse(queries, book_ids, s.candidates)
        return [self._fuse(d, sp) for d, sp in zip(dense, sparse)]

    def _sorted(self, hits: list[Hit]) -> list[Hit]:
        return sorted(hits, key=lambda h: (-h.score, self._order[h.position]))

    def _fuse(self, dense: list[Hit], sparse: list[Hit]) -> list[Retrieved]:
        s = self.settings
        dense, sparse = self._sorted(dense), self._sorted(sparse)
        lists, weights, maps = [], [], []
        if s.mode in ("hybrid", "dense"):
            lists.append([h.position for h in dense])
            weights.append(s.dense_weight)
            maps.append({h.position: h.score for h in dense})
        if s.mode in ("hybrid", "sparse"):
            lists.append([h.position for h in sparse])
            weights.append(s.sparse_weight)
            maps.append({h.position: h.score for h in sparse})
        if s.fusion == "rrf":
            fused = rrf_scores(lists, s.rrf_k, weights)
        else:
            fused = weighted_scores(maps, weights)
        d_rank = {h.position: (r, h.score) for r, h in enumerate(dense, 1)}
        s_rank = {h.position: (r, h.score) for r, h in enumerate(sparse, 1)}
        out = []
        for pos in ranked(fused, self._order):
            dr, ds = d_rank.get(pos, (None, None))
            sr, ss = s_rank.get(pos, (None, None))
            out.append(Retrieved(pos, fused[pos], dr, sr, ds, ss))
        return out

