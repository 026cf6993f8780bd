"""Qdrant as the vector store of the RAG evaluation.

One collection per indexed chunk set holds, for every chunk, a named dense vector (cosine) and a
named sparse vector (BM25 weights, see :class:`~litseg.rag.index.BM25Encoder`), with the book id
and the chunk's place in the book as payload. Searches are restricted to one book by a payload
filter. Embedded mode evaluates payload filters in Python point by point, so a filtered query
costs time proportional to the whole collection (see ``benchmarks/qdrant_index.py`` and
docs/evaluation.md); a server keeps a keyword index on ``book_id`` and does not.

Where the data lives is one setting, ``location``: ``":memory:"`` or a folder (Qdrant embedded in
this process, :mod:`~litseg.rag.stores.qdrant_embedded`), or ``http(s)://host:6333`` (a server or
cluster, :mod:`~litseg.rag.stores.qdrant_server`). The backend ``qdrant`` picks one of the two
from the location.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from litseg.rag.stores import STORES
from litseg.rag.config import StoreConfig, retrieval_part

log = logging.getLogger(__name__)

DENSE = "dense"
SPARSE = "bm25"
_KINDS = {"dense": DENSE, "sparse": SPARSE}


def is_remote(location: str) -> bool:
    return str(location).startswith(("http://", "https://"))


class QdrantStore:
    def __init__(self, location: str = ":memory:", *, api_key_env: str | None = "QDRANT_API_KEY",
                 prefer_grpc: bool = False, timeout_s: float = 60.0, upsert_batch: int = 256,
                 search_batch: int = 64, on_disk: bool = False) -> None:
        from qdrant_client import QdrantClient

        if upsert_batch < 1 or search_batch < 1:
            raise ValueError("upsert_batch and search_batch must be >= 1")
        self.location = str(location)
        self.upsert_batch = upsert_batch
        self.search_batch = search_batch
        self.on_disk = on_disk
        self.is_remote = is_remote(self.location)
        if self.is_remote:
            key = os.environ.get(api_key_env) if api_key_env else None
            self.client = QdrantClient(url=self.location, api_key=key, prefer_grpc=prefer_grpc,
                                       timeout=int(timeout_s))
        elif self.location == ":memory:":
            self.client = QdrantClient(location=":memory:")
        else:
            Path(self.location).mkdir(parents=True, exist_ok=True)
            self.client = QdrantClient(path=self.location)

    @classmethod
    def from_settings(cls, cfg: "StoreConfig") -> "QdrantStore":
        return cls(cfg.location, api_key_env=cfg.api_key_env, prefer_grpc=cfg.prefer_grpc, timeout_s=cfg.timeout_s,
                   upsert_batch=cfg.upsert_batch, search_batch=cfg.search_batch, on_disk=cfg.on_disk)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "QdrantStore":
        """From the ``retrieval.store`` config (keys of :class:`~litseg.rag.config.StoreConfig`;
        those not given are read from ``conf/retrieval/hybrid.yaml``)."""
        known = {f.name for f in dataclasses.fields(StoreConfig)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"retrieval.store: unknown key(s) {unknown}; known: {sorted(known)}")
        settings = retrieval_part(StoreConfig, "store", cfg)
        if not settings.backend.startswith("qdrant"):
            raise ValueError(f"retrieval.store.backend: {settings.backend!r} is not a Qdrant store")
        return cls.from_settings(settings)

    # ------------------------------------------------------------------------------ collections
    def create_collection(self, name: str, *, dense_dim: int | None, sparse: bool = True) -> None:
        """(Re)create ``name`` with a dense vector of ``dense_dim`` (None: no dense vector) and,
        if ``sparse``, a sparse BM25 vector. An existing collection of that name is replaced."""
        from qdrant_client import models

        if self.client.collection_exists(name):
            self.client.delete_collection(name)
        vectors = ({DENSE: models.VectorParams(size=int(dense_dim), distance=models.Distance.COSINE,
                                               on_disk=self.on_disk or None)}
                   if dense_dim else {})
        sparse_cfg = {SPARSE: models.SparseVectorParams()} if sparse else None
        self.client.create_collection(name, vectors_config=vectors, sparse_vectors_config=sparse_cfg)
        if self.is_remote:  # embedded mode has no payload indexes (and warns if asked for one)
            self.client.create_payload_index(name, "book_id", field_schema=models.PayloadSchemaType.KEYWORD)

    def delete_collection(self, name: str) -> None:
        if self.client.collection_exists(name):
            self.client.delete_collection(name)

    def count(self, name: str, book_id: str | None = None) -> int:
        return int(self.client.count(name, count_filter=self._filter(book_id), exact=True).count)

    # ----------------------------------------------------------------------------------- writes
    def upsert(self, name: str, ids: Sequence[int], *, dense: np.ndarray | None, sparse: Sequence[Any] | None,
               payloads: Sequence[Mapping[str, Any]], progress: bool = False) -> None:
        from qdrant_client import models
        from tqdm.auto import tqdm

        n = len(ids)
        if len(payloads) != n or (dense is not None and len(dense) != n) or (sparse is not None and len(sparse) != n):
            raise ValueError("upsert: ids, vectors and payloads differ in length")
        for s in tqdm(range(0, n, self.upsert_batch), desc=f"upsert {name}", unit="batch", disable=not progress,
                      dynamic_ncols=True):
            points = []
            for i in range(s, min(n, s + self.upsert_batch)):
                vec: dict[str, Any] = {}
                if dense is not None:
                    vec[DENSE] = np.asarray(dense[i], dtype=np.float32).tolist()
                if sparse is not None:
                    vec[SPARSE] = models.SparseVector(indices=list(sparse[i].indices), values=list(sparse[i].values))
                points.append(models.PointStruct(id=int(ids[i]), vector=vec, payload=dict(payloads[i])))
            self.client.upsert(name, points=points, wait=True)

    # ---------------------------------------------------------------------------------- queries
    @staticmethod
    def _filter(book_id: str | None) -> Any:
        from qdrant_client import models

        if book_id is None:
            return None
        return models.Filter(must=[models.FieldCondition(key="book_id", match=models.MatchValue(value=book_id))])

    def search(self, name: str, kind: str, vectors: Sequence[Any], book_ids: Sequence[str | None],
               limits: Sequence[int]) -> list[list[tuple[int, float]]]:
        """For each query vector, ``(point id, score)`` pairs best first, restricted to its book.
        ``kind`` is ``"dense"`` (a float vector) or ``"sparse"`` (a SparseVector)."""
        from qdrant_client import models

        if kind not in _KINDS:
            raise ValueError(f"search kind must be 'dense' or 'sparse', got {kind!r}")
        if not len(vectors) == len(book_ids) == len(limits):
            raise ValueError("search: vectors, book ids and limits differ in length")
        using = _KINDS[kind]
        requests = []
        for v, b, k in zip(vectors, book_ids, limits):
            q = (models.SparseVector(indices=list(v.indices), values=list(v.values)) if kind == "sparse"
                 else np.asarray(v, dtype=np.float32).tolist())
            requests.append(models.QueryRequest(query=q, using=using, filter=self._filter(b), limit=max(1, int(k)),
                                                with_payload=False))
        out: list[list[tuple[int, float]]] = []
        for s in range(0, len(requests), self.search_batch):
            for resp in self.client.query_batch_points(name, requests=requests[s:s + self.search_batch]):
                out.append([(int(p.id), float(p.score)) for p in resp.points])
        return out

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:  # noqa: BLE001 - closing must not hide the run's own result
            log.warning("closing the Qdrant client failed: %s", exc)

    def __enter__(self) -> "QdrantStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@STORES.register("qdrant")
def qdrant_store(cfg: "StoreConfig") -> QdrantStore:
    """Embedded or server, as ``location`` says (a URL: server; else embedded)."""
    return QdrantStore.from_settings(cfg)
