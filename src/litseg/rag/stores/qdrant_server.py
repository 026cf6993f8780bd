"""A Qdrant server or cluster at ``location`` (``http(s)://host:6333``), for corpora that outgrow
one machine; the API key is read from the environment variable named by ``api_key_env``, and a
keyword index on ``book_id`` keeps filtered searches fast."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litseg.rag.stores import STORES
from litseg.rag.stores.qdrant import QdrantStore, is_remote

if TYPE_CHECKING:
    from litseg.rag.config import StoreConfig


@STORES.register("qdrant_server")
def qdrant_server_store(cfg: "StoreConfig") -> QdrantStore:
    if not is_remote(cfg.location):
        raise ValueError(f"retrieval.store.backend=qdrant_server needs an http(s):// URL, got {cfg.location!r}")
    return QdrantStore.from_settings(cfg)
