"""The retrieval index: dense and BM25 vectors of every chunk, kept together in one Qdrant collection.

* :class:`DenseEncoder` embeds passages and queries with a sentence-transformers model (the
  packaged all-MiniLM-L6-v2 by default) and optional instruction prefixes, one for each side.
  :class:`HashingEmbedder` is a model-free stand-in (feature hashing of words) for tests, smoke
  runs and store benchmarks.
* :class:`BM25Encoder` turns texts into sparse vectors whose dot product with a query's term
  counts is exactly the BM25 score computed by the ``bm25s`` library: bm25s precomputes, per
  term and document, ``idf * tf-saturation``; those weights become the sparse vector.
* :class:`ChunkIndex` writes both vectors of every chunk with its book id to a
  :class:`~litseg.rag.stores.qdrant.QdrantStore` collection and answers dense and sparse searches
  restricted to one book.

Nothing here imports torch at module level; the sentence-transformers model loads on first use.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from litseg.embeddings import load_embedder
from litseg.rag.config import BM25Config, EmbedderConfig, retrieval_part
from litseg.utils.config import ConfigError

if TYPE_CHECKING:
    from litseg.rag.stores import VectorStore

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------ dense side
@runtime_checkable
class TextEmbedder(Protocol):
    """What the index needs from an embedding model (``litseg.embeddings.Embedder`` fits)."""

    name: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Deterministic bag-of-words vectors by feature hashing: each lower-cased word adds +-1 to a
    coordinate chosen by a hash of the word, then rows are scaled to unit length.

    No model and no randomness across runs; texts sharing words get positive cosine. Good
    enough to exercise indexing and ranking in tests and to benchmark the store; it is not a
    semantic embedder.
    """

    def __init__(self, dimension: int = 384, max_seq_length: int | None = None) -> None:
        if dimension < 2:
            raise ValueError(f"HashingEmbedder: dimension must be >= 2, got {dimension}")
        self.dimension = int(dimension)
        self.max_seq_length = max_seq_length
        self.name = f"hashing-{self.dimension}"

    @staticmethod
    @lru_cache(maxsize=200_000)
    def _slot(word: str, dimension: int) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
        return h % dimension, (1.0 if (h >> 63) & 1 else -1.0)

    def encode(self, texts: list[str], show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                j, sign = self._slot(word, self.dimension)
                out[i, j] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def count_tokens(self, text: str) -> int:
        return len(_WORD.findall(text))

    def identity(self) -> dict[str, Any]:
        return {"model": self.name}


class DenseEncoder:
    """A text embedder plus the instruction prefixes of the two sides of retrieval.

    Passages are encoded as ``passage_prefix + text`` and queries as ``query_prefix + text``
    (instruction-tuned embedders want such prefixes; all-MiniLM-L6-v2 was trained without them,
    so the defaults are empty). Query vectors are cached by text, so several chunkers
    evaluated on the same questions embed each question once.
    """

    def __init__(self, model: TextEmbedder, *, query_prefix: str = "", passage_prefix: str = "",
                 batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.query_prefix = query_prefix or ""
        self.passage_prefix = passage_prefix or ""
        self.batch_size = batch_size
        self._query_cache: dict[str, np.ndarray] = {}
        self._dimension: int | None = None

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name", type(self.model).__name__))

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            dim = getattr(self.model, "dimension", None)
            self._dimension = int(dim) if dim else int(self._encode(["dimension probe"]).shape[1])
        return self._dimension

    @property
    def window(self) -> int | None:
        """Word pieces the model reads (special tokens excluded), or None when unbounded/unknown."""
        limit = getattr(self.model, "max_seq_length", None)
        if not limit:
            return None
        return int(limit) - _special_tokens(self.model)

    def count_tokens(self, text: str) -> int:
        counter = getattr(self.model, "count_tokens", None)
        return int(counter(text)) if callable(counter) else len(text.split())

    def passage_text(self, text: str) -> str:
        return self.passage_prefix + text

    def _encode(self, texts: list[str]) -> np.ndarray:
        vecs = np.asarray(self.model.encode(texts), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ValueError(f"embedder {self.name} returned shape {vecs.shape} for {len(texts)} texts")
        return vecs

    def encode_passages(self, texts: Sequence[str], progress: bool = False, desc: str = "embed chunks"
                        ) -> np.ndarray:
        from tqdm.auto import tqdm

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = []
        for s in tqdm(range(0, len(texts), self.batch_size), desc=desc, unit="batch", disable=not progress,
                      dynamic_ncols=True):
            parts.append(self._encode([self.passage_text(t) for t in texts[s:s + self.batch_size]]))
        return np.concatenate(parts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._query_cache))
        for s in range(0, len(todo), self.batch_size):
            batch = todo[s:s + self.batch_size]
            for t, v in zip(batch, self._encode([self.query_prefix + t for t in batch])):
                self._query_cache[t] = v
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._query_cache[t] for t in texts])

    def embed_plain(self, texts: list[str]) -> np.ndarray:
        """Vectors without any prefix (for boundary similarity, which compares raw sentences)."""
        return self._encode(texts) if texts else np.zeros((0, self.dimension), dtype=np.float32)

    def identity(self) -> dict[str, Any]:
        ident = getattr(self.model, "identity", None)
        base = ident() if callable(ident) else {"model": self.name}
        return {**base, "query_prefix": self.query_prefix, "passage_prefix": self.passage_prefix,
                "window": self.window}


def _special_tokens(model: Any) -> int:
    """Special tokens (e.g. [CLS] and [SEP]) the model adds inside its window, when knowable."""
    inner = getattr(model, "_model", None)
    tokenizer = getattr(inner, "tokenizer", None)
    counter = getattr(tokenizer, "num_special_tokens_to_add", None)
    try:
        return int(counter(pair=False)) if callable(counter) else 0
    except Exception:  # noqa: BLE001 - a tokenizer without the method simply counts none
        return 0


def build_dense_encoder(cfg: "EmbedderConfig | Mapping[str, Any]") -> DenseEncoder:
    """From the ``retrieval.embedder`` config: ``model`` (``default`` = packaged MiniLM, a
    sentence-transformers directory, or ``hashing`` / ``hashing-<dim>``), ``query_prefix``,
    ``passage_prefix``, ``batch_size``, ``device`` (a mapping takes the YAML's defaults)."""
    cfg = retrieval_part(EmbedderConfig, "embedder", cfg)
    model: TextEmbedder
    if cfg.model.startswith("hashing"):
        dim = int(cfg.model.split("-", 1)[1]) if "-" in cfg.model else cfg.dimension
        model = HashingEmbedder(dim) if dim else HashingEmbedder()
    else:
        try:
            model = load_embedder(None if cfg.model == "default" else cfg.model, device=cfg.device,
                                  batch_size=cfg.batch_size)
        except FileNotFoundError as exc:  # a misspelt name reads as a missing folder: name the choices
            raise ConfigError(f"retrieval.embedder.model={cfg.model!r}: {exc}; or 'hashing' (hashing-<dim>), "
                              "the model-free stand-in") from exc
    return DenseEncoder(model, query_prefix=cfg.query_prefix, passage_prefix=cfg.passage_prefix,
                        batch_size=cfg.batch_size)


# ----------------------------------------------------------------------------------- sparse side
@dataclass(frozen=True, slots=True)
class SparseVector:
    """Term ids (sorted, unique) and weights."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.values):
            raise ValueError("sparse vector: indices and values differ in length")

    def __len__(self) -> int:
        return len(self.indices)

    def dot(self, other: "SparseVector") -> float:
        mine = dict(zip(self.indices, self.values))
        return float(sum(mine[i] * v for i, v in zip(other.indices, other.values) if i in mine))


_BM25_METHODS = ("lucene", "robertson", "atire")  # those without a non-occurrence term


class BM25Encoder:
    """BM25 as sparse vectors, with weights from ``bm25s``.

    ``fit(texts, groups)`` builds one bm25s index per group (``idf_scope="book"``: the group is
    the book, so term rarity is judged within the book that retrieval is restricted to) or one
    over everything (``idf_scope="corpus"``), and returns each text's vector of precomputed
    term weights. ``encode_query`` gives the query's term counts, so
    ``query . passage`` equals bm25s' own score. Tokens: bm25s' tokenizer (lower case, words of
    two or more characters, English stop words removed) and, by default, the Snowball English
    stemmer from PyStemmer.
    """

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, method: str = "lucene",
                 stopwords: str | list[str] | None = "en", stemmer: str | None = "english",
                 idf_scope: str = "book") -> None:
        if method not in _BM25_METHODS:
            raise ValueError(f"bm25 method must be one of {_BM25_METHODS} (variants with a score for "
                             f"absent terms cannot be written as sparse vectors), got {method!r}")
        if idf_scope not in ("book", "corpus"):
            raise ValueError(f"bm25 idf_scope must be 'book' or 'corpus', got {idf_scope!r}")
        self.k1, self.b, self.method = float(k1), float(b), method
        self.stopwords = stopwords if stopwords else None
        self.stemmer_name = stemmer or None
        self.idf_scope = idf_scope
        self.vocab: dict[str, int] = {}
        self._stemmer = _load_stemmer(self.stemmer_name)

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        import bm25s

        if not texts:
            return []
        toks = bm25s.tokenize(list(texts), stopwords=self.stopwords, stemmer=self._stemmer, return_ids=False,
                              show_progress=False)
        return [[t for t in doc if t] for doc in toks]

    def fit(self, texts: Sequence[str], groups: Sequence[str] | None = None) -> list[SparseVector]:
        import bm25s

        if groups is not None and len(groups) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(groups)} group labels")
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
        tokens = self.tokenize(texts)
        keys = list(groups) if (groups is not None and self.idf_scope == "book") else [""] * len(texts)
        members: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            members.setdefault(k, []).append(i)
        weights: list[dict[int, float]] = [{} for _ in texts]
        for rows in members.values():
            docs = [tokens[i] for i in rows]
            if not any(docs):
                continue
            bm = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            bm.index([d if d else [""] for d in docs], show_progress=False)
            scores = bm.scores
            data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
            for term, col in sorted(bm.vocab_dict.items()):  # sorted: ids stable across runs
                if not term or col + 1 >= len(indptr):
                    continue
                gid = self.vocab.setdefault(term, len(self.vocab))
                for r, w in zip(indices[indptr[col]:indptr[col + 1]], data[indptr[col]:indptr[col + 1]]):
                    weights[rows[int(r)]][gid] = float(w)
        return [SparseVector(tuple(sorted(w)), tuple(w[i] for i in sorted(w))) for w in weights]

    def encode_query(self, text: str) -> SparseVector:
        counts = Counter(self.vocab[t] for t in self.tokenize([text])[0] if t in self.vocab)
        ids = sorted(counts)
        return SparseVector(tuple(ids), tuple(float(counts[i]) for i in ids))

    def identity(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "method": self.method, "stopwords": self.stopwords,
                "stemmer": self.stemmer_name, "idf_scope": self.idf_scope}


def _load_stemmer(name: str | None) -> Any:
    """A PyStemmer stemmer (bm25s calls its ``stemWords`` on the unique tokens)."""
    if not name:
        return None
    try:
        import Stemmer
    except ImportError as exc:
        raise ImportError("BM25 stemming needs PyStemmer (pip install PyStemmer); or set "
                          "retrieval.bm25.stemmer=null") from exc
    return Stemmer.Stemmer(name)


def build_bm25_encoder(cfg: "BM25Config | Mapping[str, Any]") -> BM25Encoder:
    """From the ``retrieval.bm25`` config (a mapping takes the YAML's defaults)."""
    cfg = retrieval_part(BM25Config, "bm25", cfg)
    return BM25Encoder(k1=cfg.k1, b=cfg.b, method=cfg.method, stopwords=cfg.stopwords, stemmer=cfg.stemmer,
                       idf_scope=cfg.idf_scope)


# ---------------------------------------------------------------------------------------- index
@dataclass(slots=True)
class IndexedChunk:
    """One retrievable passage: the text that is embedded and matched, and where it came from.

    ``position`` is the passage's place in the index (also its point id in the store);
    ``order`` its place within its book, used to break score ties.
    """

    position: int
    book_id: str
    order: int
    text: str
    chunk_id: str = ""
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Hit:
    position: int
    score: float


class ChunkIndex:
    """Dense + BM25 vectors of a chunk set in a store, searched per book.

    ``partition="none"`` (default) keeps every chunk in one collection and restricts each search
    to the question's book with a payload filter. ``partition="book"`` gives each book its own
    collection (``<collection>__<hash of book id>``), still filtered by book id: the results are
    the same, but Qdrant's embedded mode, which checks filters point by point in Python, then
    only scans one book per query (see docs/evaluation.md for the figures).
    """

    def __init__(self, store: VectorStore, collection: str, dense: DenseEncoder | None, bm25: BM25Encoder | None, *,
                 partition: str = "none") -> None:
        if dense is None and bm25 is None:
            raise ValueError("an index needs a dense encoder, a BM25 encoder, or both")
        if partition not in ("none", "book"):
            raise ValueError(f"index partition must be 'none' or 'book', got {partition!r}")
        self.store = store
        self.collection = collection
        self.partition = partition
        self.dense = dense
        self.bm25 = bm25
        self.passages: list[IndexedChunk] = []
        self.book_sizes: Counter[str] = Counter()
        self.seconds: dict[str, float] = {}
        self._collections: list[str] = []

    def collection_of(self, book_id: str | None) -> str:
        if self.partition == "none":
            return self.collection
        if book_id is None:
            raise ValueError("a book-partitioned index can only be searched within one book")
        return f"{self.collection}__{hashlib.sha1(book_id.encode('utf-8')).hexdigest()[:16]}"

    def build(self, passages: Sequence[IndexedChunk], progress: bool = False) -> "ChunkIndex":
        import time

        for i, p in enumerate(passages):
            if p.position != i:
                raise ValueError(f"passage positions must be 0..n-1 in order; got {p.position} at {i}")
        self.passages = list(passages)
        self.book_sizes = Counter(p.book_id for p in self.passages)
        texts = [p.text for p in self.passages]
        t0 = time.perf_counter()
        vectors = self.dense.encode_passages(texts, progress=progress) if self.dense else None
        t1 = time.perf_counter()
        sparse = self.bm25.fit(texts, [p.book_id for p in self.passages]) if self.bm25 else None
        t2 = time.perf_counter()
        groups: dict[str, list[int]] = {}
        for p in self.passages:
            groups.setdefault(self.collection_of(p.book_id), []).append(p.position)
        for name, rows in groups.items():
            self.store.create_collection(name, dense_dim=self.dense.dimension if self.dense else None,
                                         sparse=self.bm25 is not None)
            self._collections.append(name)
            payloads = [{"book_id": self.passages[i].book_id, "order": self.passages[i].order,
                         "chunk_id": self.passages[i].chunk_id, **self.passages[i].payload} for i in rows]
            self.store.upsert(name, rows, dense=vectors[rows] if vectors is not None else None,
                              sparse=[sparse[i] for i in rows] if sparse is not None else None,
                              payloads=payloads, progress=progress and len(groups) == 1)
        t3 = time.perf_counter()
        self.seconds = {"embed": t1 - t0, "bm25": t2 - t1, "upsert": t3 - t2}
        return self

    def _limit(self, book_id: str | None, limit: int | None) -> int:
        n = self.book_sizes[book_id] if book_id is not None else len(self.passages)
        return n if limit is None else min(n, int(limit))

    def search_dense(self, queries: Sequence[str], book_ids: Sequence[str | None], limit: int | None
                     ) -> list[list[Hit]]:
        if self.dense is None:
            raise ValueError("this index has no dense vectors")
        vecs = self.dense.encode_queries(list(queries))
        return self._search("dense", list(vecs), book_ids, limit)

    def search_sparse(self, queries: Sequence[str], book_ids: Sequence[str | None], limit: int | None
                      ) -> list[list[Hit]]:
        if self.bm25 is None:
            raise ValueError("this index has no BM25 vectors")
        vecs = [self.bm25.encode_query(q) for q in queries]
        return self._search("sparse", vecs, book_ids, limit)

    def _search(self, kind: str, vectors: list[Any], book_ids: Sequence[str | None], limit: int | None
                ) -> list[list[Hit]]:
        if len(vectors) != len(book_ids):
            raise ValueError(f"{len(vectors)} queries but {len(book_ids)} book ids")
        limits = [self._limit(b, limit) for b in book_ids]
        todo: dict[str, list[int]] = {}
        for i, (v, n) in enumerate(zip(vectors, limits)):
            if n > 0 and not (kind == "sparse" and len(v) == 0):
                todo.setdefault(self.collection_of(book_ids[i]), []).append(i)
        out: list[list[Hit]] = [[] for _ in vectors]
        for name, idx in todo.items():
            found = self.store.search(name, kind, [vectors[i] for i in idx], [book_ids[i] for i in idx],
                                      [limits[i] for i in idx])
            for i, hits in zip(idx, found):
                out[i] = [Hit(int(pid), float(score)) for pid, score in hits]
        return out

    def drop(self) -> None:
        for name in self._collections:
            self.store.delete_collection(name)
        self._collections = []
