"""The components shared by every chunker of a run (embedder, BM25 settings, vector store,
retrieval fusion, reranker, generator, judge, answer context), built from the typed config."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from litseg.rag.config import EvaluateConfig, evaluate_config
from litseg.llm.factory import build_llm
from litseg.rag.context_budget import ContextBudget
from litseg.rag.generate import AnswerGenerator
from litseg.rag.index import build_dense_encoder
from litseg.rag.judge import RagJudge
from litseg.rag.rerank import build_reranker
from litseg.rag.retrieve import RetrievalSettings
from litseg.rag.stores import VectorStore, build_store

T = TypeVar("T")


@dataclass(slots=True)
class Components:
    """The components shared by all chunkers of a run."""

    dense: Any  # DenseEncoder | None
    bm25_cfg: Any  # BM25Config | a mapping | None (no sparse side)
    store: VectorStore
    retrieval: Any  # RetrievalSettings
    reranker: Any  # Reranker
    generator: Any = None  # AnswerGenerator | None
    judge: Any = None  # RagJudge | None
    collection_prefix: str = "litseg"
    partition: str = "none"  # none: one collection per chunk set | book: one per book
    context_budget: Any = None  # ContextBudget: what generator and judge read (None: the default budget)


def build_components(cfg: EvaluateConfig | Mapping[str, Any], suite: Any = None) -> Components:
    """The run's shared components from its config (a typed one, or a mapping completed from
    conf/evaluate.yaml). ``suite`` is kept for callers that pass it; the config's suite is used."""
    c = cfg if isinstance(cfg, EvaluateConfig) else evaluate_config(cfg)
    r = c.retrieval
    settings = RetrievalSettings.from_config(r)
    dense = build_dense_encoder(r.embedder) if settings.mode in ("hybrid", "dense") else None
    bm25 = r.bm25 if settings.mode in ("hybrid", "sparse") else None
    llm_of = _llm_cache()
    reranker = build_reranker(r.rerank, llm_factory=lambda: llm_of(c.judge))
    generator = None
    if c.generation.enabled:
        # No top_n or length cut here: the passages come filled to `answer_context.budget_chars`.
        g = c.generation
        generator = AnswerGenerator(llm_of(g), _required(g.prompt, "generation.prompt"), answer_style=c.suite.answer_style,
                                    max_tokens=g.max_tokens, batch_size=g.batch_size)
    judge = None
    if c.judge.enabled:
        j = c.judge
        judge = RagJudge(llm_of(j), _required(j.prompt, "judge.prompt"), max_tokens=j.max_tokens, batch_size=j.batch_size,
                         constrained=j.constrained)
    return Components(dense=dense, bm25_cfg=bm25, store=build_store(r.store), retrieval=settings, reranker=reranker,
                      generator=generator, judge=judge, collection_prefix=r.store.collection_prefix,
                      partition=r.store.partition, context_budget=ContextBudget.from_config(c.answer_context))


def _required(prompt: T | None, where: str) -> T:
    """A prompt the enabled step needs; evaluate.yaml composes each, a hand-made config may not."""
    if prompt is None:
        raise ValueError(f"{where} is missing: evaluate.yaml composes it (conf/prompt)")
    return prompt


def _llm_cache() -> Any:
    """``llm_of(section)``: one model object per distinct llm config (reranker, generator, judge)."""
    built: dict[str, Any] = {}

    def llm_of(section: Any) -> Any:
        if section.llm is None:
            raise ValueError("an llm config is needed here (llm@generation.llm=... / llm@judge.llm=...)")
        key = json.dumps(dataclasses.asdict(section.llm), sort_keys=True, default=str)
        if key not in built:
            built[key] = build_llm(section.llm)
            built[key].check()  # fail fast, in one line, when the model or server is not there
        return built[key]

    return llm_of


def component_identity(comp: Components) -> dict[str, Any]:
    def ident(x: Any) -> Any:
        f = getattr(x, "identity", None)
        return f() if callable(f) else (type(x).__name__ if x is not None else None)

    from dataclasses import asdict, is_dataclass

    return {"dense": ident(comp.dense), "bm25": asdict(comp.bm25_cfg) if is_dataclass(comp.bm25_cfg) else comp.bm25_cfg, "store": getattr(comp.store, "location", None),
            "partition": comp.partition,
            "retrieval": asdict(comp.retrieval) if is_dataclass(comp.retrieval) else str(comp.retrieval),
            "reranker": ident(comp.reranker), "generator": ident(getattr(comp.generator, "llm", None)),
            "judge": ident(getattr(comp.judge, "llm", None)), "answer_context": ident(comp.context_budget)}
