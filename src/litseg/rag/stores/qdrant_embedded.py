"""Qdrant embedded in this process: ``location`` is ``":memory:"`` (nothing written) or a folder
(persisted; one process at a time may open it). Payload filters are evaluated point by point,
so a filtered query costs time in proportion to the collection (``retrieval.store.partition=book``
keeps collections small; see docs/evaluation.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litseg.rag.stores import STORES
from litseg.rag.stores.qdrant import QdrantStore, is_remote

if TYPE_CHECKING:
    from litseg.rag.config import StoreConfig


@STORES.register("qdrant_embedded")
def qdrant_embedded_store(cfg: "StoreConfig") -> QdrantStore:
    if is_remote(cfg.location):
        raise ValueError(f"retrieval.store.backend=qdrant_embedded needs ':memory:' or a folder, got {cfg.location!r} "
                         "(use backend=qdrant_server for a URL)")
    return QdrantStore.from_settings(cfg)
