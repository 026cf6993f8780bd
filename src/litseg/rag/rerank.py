"""Rerankers: reorder the first ``top_n`` retrieved candidates of each question.

* ``none`` keeps the fused ranking (the default: no cross-encoder ships with litseg);
* ``cross_encoder``: a sentence-transformers CrossEncoder from a local model directory;
* ``llm``: an LLM rates each candidate's relevance with the first context-relevance template of
  ``conf/prompt/rag_judge.yaml``; a candidate whose rating cannot be read keeps its place
  below the rated ones of equal score, and the failures are counted.

Candidates after ``top_n`` follow in their retrieval order. Ties go by retrieval rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from litseg.rag.retrieve import Retrieved


class Reranker:
    name = "none"

    def __init__(self, top_n: int = 20) -> None:
        if top_n < 1:
            raise ValueError(f"rerank top_n must be >= 1, got {top_n}")
        self.top_n = top_n
        self.failures = 0
        self.calls = 0

    def rerank_many(self, queries: Sequence[str], candidates: Sequence[list[Retrieved]],
                    texts: Sequence[str], progress: bool = False) -> list[list[Retrieved]]:
        """``texts[c.position]`` is the text of candidate ``c``."""
        return [list(c) for c in candidates]

    def _apply(self, ranking: list[Retrieved], scores: Sequence[float | None]) -> list[Retrieved]:
        head, tail = ranking[: self.top_n], ranking[self.top_n:]
        keyed = []
        for rank, (cand, s) in enumerate(zip(head, scores)):
            keyed.append((s is None, -(s if s is not None else 0.0), rank, replace(cand, rerank_score=s)))
        keyed.sort(key=lambda k: k[:3])
        return [k[3] for k in keyed] + tail

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "top_n": self.top_n}


class CrossEncoderReranker(Reranker):
    name = "cross_encoder"

    def __init__(self, model: str, *, top_n: int = 20, batch_size: int = 32, max_length: int | None = 512,
                 device: str | None = None) -> None:
        super().__init__(top_n)
        path = Path(model).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"cross-encoder {model!r} is not a local directory; models are never "
                                    "downloaded here - give the folder of a sentence-transformers CrossEncoder")
        from sentence_transformers import CrossEncoder

        self.model_path = str(path.resolve())
        self.batch_size = batch_size
        self.model = CrossEncoder(self.model_path, max_length=max_length, device=device or "cpu",
                                  local_files_only=True)

    def rerank_many(self, queries: Sequence[str], candidates: Sequence[list[Retrieved]],
                    texts: Sequence[str], progress: bool = False) -> list[list[Retrieved]]:
        from tqdm.auto import tqdm

        out = []
        for q, ranking in tqdm(list(zip(queries, candidates)), desc="rerank", unit="q", disable=not progress,
                               dynamic_ncols=True):
            head = ranking[: self.top_n]
            if not head:
                out.append([])
                continue
            scores = self.model.predict([(q, texts[c.position]) for c in head], batch_size=self.batch_size,
                                        show_progress_bar=False)
            self.calls += len(head)
            out.append(self._apply(ranking, [float(s) for s in scores]))
        return out

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "model": self.model_path}


class LLMReranker(Reranker):
    """Pointwise LLM relevance ratings (0, 1, 2) of the first ``top_n`` candidates."""

    name = "llm"

    def __init__(self, llm: Any, prompt: Mapping[str, Any], *, top_n: int = 10, max_chars: int = 4000,
                 batch_size: int = 16) -> None:
        from litseg.rag.judge import RagJudge

        super().__init__(top_n)
        self.judge = RagJudge(llm, prompt, max_context_chars=max_chars, batch_size=batch_size)
        self.template = [prompt["context_relevance"][0]]

    def rerank_many(self, queries: Sequence[str], candidates: Sequence[list[Retrieved]],
                    texts: Sequence[str], progress: bool = False) -> list[list[Retrieved]]:
        pairs = [(qi, c) for qi, ranking in enumerate(candidates) for c in ranking[: self.top_n]]
        values = [{"question": queries[qi], "context": texts[c.position][: self.judge.max_context_chars]}
                  for qi, c in pairs]
        # One template only: the reranker needs an order, not the judge's averaged score.
        scores = self.judge.rate(self.template, values, progress=progress, desc="rerank (llm)")
        self.calls += len(scores)
        self.failures += sum(1 for s in scores if s.failed)
        by_q: dict[int, list[float | None]] = {}
        for (qi, _), s in zip(pairs, scores):
            by_q.setdefault(qi, []).append(s.score)
        return [self._apply(list(r), by_q.get(qi, [])) for qi, r in enumerate(candidates)]


def build_reranker(cfg: Mapping[str, Any] | None, *, llm_factory: Any = None,
                   prompt: Mapping[str, Any] | None = None) -> Reranker:
    """From the ``retrieval.rerank`` config: ``kind`` (none | cross_encoder | llm), ``top_n``,
    ``model`` (cross-encoder directory), ``batch_size``; ``llm_factory()`` builds the judge
    model for ``kind: llm`` and ``prompt`` is the rag_judge prompt."""
    cfg = dict(cfg or {})
    kind = str(cfg.get("kind") or "none")
    top_n = int(cfg.get("top_n") or 20)
    if kind == "none":
        return Reranker(top_n)
    if kind == "cross_encoder":
        if not cfg.get("model"):
            raise ValueError("retrieval.rerank.kind=cross_encoder needs retrieval.rerank.model (a local directory)")
        return CrossEncoderReranker(str(cfg["model"]), top_n=top_n, batch_size=int(cfg.get("batch_size") or 32),
                                    max_length=cfg.get("max_length", 512), device=cfg.get("device"))
    if kind == "llm":
        if llm_factory is None or prompt is None:
            raise ValueError("retrieval.rerank.kind=llm needs an llm config and the rag_judge prompt")
        return LLMReranker(llm_factory(), prompt, top_n=top_n, max_chars=int(cfg.get("max_chars") or 4000),
                           batch_size=int(cfg.get("batch_size") or 16))
    raise ValueError(f"retrieval.rerank.kind must be none, cross_encoder or llm, got {kind!r}")
