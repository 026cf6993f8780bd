"""Vector stores of the RAG evaluation: one protocol, a registry of backends by name.

``retrieval.store.backend`` names a registered factory ``(StoreConfig) -> VectorStore``; the
built-in backends are Qdrant, embedded in this process (``qdrant_embedded``) or a server or
cluster (``qdrant_server``), and ``qdrant``, which picks one of the two from ``location``. Adding
a store is one module in this package registering itself with ``@STORES.register("name")`` and
one ``conf/retrieval`` file naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from litseg.utils.registry import Registry

if TYPE_CHECKING:
    import numpy as np

    from litseg.rag.config import StoreConfig


@runtime_checkable
class VectorStore(Protocol):
    """What :class:`litseg.rag.index.ChunkIndex` needs of a store: named collections holding a
    dense and/or a sparse vector per point with a ``book_id`` payload, searched per book."""

    location: str

    def create_collection(self, name: str, *, dense_dim: int | None, sparse: bool = True) -> None: ...

    def delete_collection(self, name: str) -> None: ...

    def count(self, name: str, book_id: str | None = None) -> int: ...

    def upsert(self, name: str, ids: Sequence[int], *, dense: "np.ndarray | None", sparse: Sequence[Any] | None,
               payloads: Sequence[Mapping[str, Any]], progress: bool = False) -> None: ...

    def search(self, name: str, kind: str, vectors: Sequence[Any], book_ids: Sequence[str | None],
               limits: Sequence[int]) -> list[list[tuple[int, float]]]: ...

    def close(self) -> None: ...


def collection_name(*parts: str) -> str:
    """A collection name from free-form parts (chunker labels may hold any character)."""
    name = "_".join(re.sub(r"[^A-Za-z0-9_-]+", "-", p).strip("-") for p in parts if p)
    if not name:
        raise ValueError("empty collection name")
    return name[:200]


StoreFactory = Callable[["StoreConfig"], VectorStore]
STORES: Registry[StoreFactory] = Registry("vector store", discover=["litseg.rag.stores"])


def build_store(cfg: "StoreConfig") -> VectorStore:
    """The store ``cfg.backend`` names, built from ``retrieval.store``."""
    return STORES.get(cfg.backend)(cfg)
