"""Persistent response cache and replay (SQLite, standard library only).

:class:`CachedChatModel` wraps any :class:`ChatModel`: an answer is looked up under
``sha256(model identity + request)`` before the model is asked, and stored after, so a rerun never
pays twice. The database is in WAL mode with a generous busy timeout, so several processes (Hydra
multirun jobs, data-parallel workers) can share one file; the first answer stored for a key wins.
Answers that carry ``error`` are never stored. A hit returns the stored :class:`Completion` with
``from_cache=True`` and its original token counts and seconds, so reports of a replayed run match
the run that paid for it.

:class:`ReplayChatModel` answers from the file only, so a recorded run can be repeated without the
model (no weights, no server); a request that was never recorded raises :class:`CacheMiss`.

Sampled requests (temperature > 0) are cached like greedy ones: give each draw its own ``seed``
when several different samples of one prompt are wanted.

Any text a model returns can be stored and replayed exactly, a lone surrogate (``"\ud83d"``,
an emoji's escape pair cut at ``max_tokens``) included: such a record is written with JSON
escapes (SQLite text must be valid UTF-8), and keys hash it with ``surrogatepass``. A replayed
reply that fails validation is handled like a fresh one (the parser never raises on content),
so a rerun of a recorded run cannot crash on it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litseg.llm.base import ChatModel, ChatModelError, ChatRequest, Completion, stable_json
from litseg.llm.config import ReplayLLMConfig
from litseg.segmentation.types import NamedTokenizer

log = logging.getLogger(__name__)

KEY_VERSION = 1  # bump when the key payload changes meaning; old entries then simply miss

_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    model_hash TEXT PRIMARY KEY,
    identity   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS responses (
    key        TEXT PRIMARY KEY,
    model_hash TEXT NOT NULL,
    request    TEXT NOT NULL,
    completion TEXT NOT NULL,
    created    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_by_model ON responses(model_hash);
"""


class CacheMiss(ChatModelError, KeyError):
    """Replay found no recorded answer for a request."""

    def __str__(self) -> str:  # KeyError would print the message as a quoted repr
        return str(self.args[0]) if self.args else ""


def _hashable(obj: Any) -> bytes:
    # surrogatepass: the same bytes as plain UTF-8 for every valid text, and no crash on a lone
    # surrogate (a reply echoed back in a retry conversation may hold one).
    return stable_json(obj).encode("utf-8", "surrogatepass")


def _db_text(obj: Any) -> str:
    """JSON text SQLite accepts: as :func:`stable_json`, or with ASCII escapes when it holds a
    lone surrogate (which UTF-8 cannot encode). Both read back to the same value."""
    text = stable_json(obj)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
    return text


def identity_hash(identity: dict[str, Any]) -> str:
    return hashlib.sha256(_hashable(identity)).hexdigest()


def cache_key(identity: dict[str, Any], request: ChatRequest) -> str:
    """The key of ``request`` to the model described by ``identity``."""
    payload = {"v": KEY_VERSION, "model": identity, "request": request.key_payload()}
    return hashlib.sha256(_hashable(payload)).hexdigest()


@dataclass(slots=True)
class CacheStats:
    entries: int  # answers stored in the file, for every model
    model_entries: int  # answers stored for this model
    hits: int  # lookups answered from the file by this instance
    misses: int  # lookups this instance had to send to the model (or, in replay, could not answer)
    stored: int  # answers this instance wrote

    def to_dict(self) -> dict[str, int]:
        return {"entries": self.entries, "model_entries": self.model_entries, "hits": self.hits,
                "misses": self.misses, "stored": self.stored}


class ResponseStore:
    """The SQLite file: one connection per thread and process, opened lazily."""

    def __init__(self, path: str | os.PathLike[str], *, timeout_s: float = 60.0, readonly: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.timeout_s = timeout_s
        self.readonly = readonly
        if readonly:
            if not self.path.is_file():
                raise ChatModelError(f"response cache {self.path} does not exist; nothing to replay")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connect()  # fail early on a bad path or a file that is not a database

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            return conn
        # A connection must not cross a fork; a child opens its own.
        if self.readonly:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                   timeout=self.timeout_s, isolation_level=None)
        else:
            conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
            if not self.readonly:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
            else:
                conn.execute("SELECT 1 FROM responses LIMIT 1")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise ChatModelError(f"response cache {self.path} is not a usable litseg cache: {exc}") from exc
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def get(self, key: str) -> Completion | None:
        row = self._connect().execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return Completion.from_dict(json.loads(row[0]))
        except (ValueError, TypeError) as exc:
            log.warning("response cache %s: unreadable entry %s (%s); asking the model again",
                        self.path, key[:12], exc)
            return None

    def put(self, key: str, identity: dict[str, Any], request: ChatRequest, completion: Completion) -> bool:
        """Store an answer; False when another process stored this key first."""
        record = completion.to_dict()
        record["from_cache"] = False
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT OR IGNORE INTO models(model_hash, identity) VALUES (?, ?)",
                         (identity_hash(identity), _db_text(identity)))
            cur = conn.execute(
                "INSERT OR IGNORE INTO responses(key, model_hash, request, completion, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, identity_hash(identity), _db_text(request.key_payload()), _db_text(record),
                 time.time()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return cur.rowcount == 1

    def count(self, model_hash: str | None = None) -> int:
        conn = self._connect()
        if model_hash is None:
            return int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
        return int(conn.execute("SELECT COUNT(*) FROM responses WHERE model_hash = ?",
                                (model_hash,)).fetchone()[0])

    def identities(self) -> list[dict[str, Any]]:
        """Every model identity with answers in the file."""
        rows = self._connect().execute("SELECT identity FROM models ORDER BY identity").fetchall()
        return [json.loads(r[0]) for r in rows]

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            conn.close()
        self._local.conn = None


class CachedChatModel(ChatModel):
    """``CachedChatModel(inner, "runs/llm_cache.sqlite")``: answers once per (model, request)."""

    def __init__(self, inner: ChatModel, path: str | os.PathLike[str], *, timeout_s: float = 60.0) -> None:
        self.inner = inner
        self.name = inner.name
        self.store = ResponseStore(path, timeout_s=timeout_s)
        self._identity = inner.identity()
        self._model_hash = identity_hash(self._identity)
        self.hits = 0
        self.misses = 0
        self.stored = 0

    def identity(self) -> dict[str, Any]:
        return self._identity

    def key(self, request: ChatRequest) -> str:
        return cache_key(self._identity, request)

    def chat(self, request: ChatRequest) -> Completion:
        return self.chat_batch([request])[0]

    def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        keys = [self.key(r) for r in requests]
        results: dict[str, Completion] = {}
        to_ask: dict[str, ChatRequest] = {}  # one model call per distinct key, even within a batch
        for key, request in zip(keys, requests):
            if key in results or key in to_ask:
                continue
            found = self.store.get(key)
            if found is not None:
                found.from_cache = True
                results[key] = found
                self.hits += 1
            else:
                to_ask[key] = request
                self.misses += 1
        pending = list(to_ask.items())
        size = self.inner.answers_per_call() or len(pending) or 1
        # Slice by what the backend answers per call anyway, storing each slice when it is done.
        for start in range(0, len(pending), size):
            part = pending[start:start + size]
            answers = self.inner.chat_batch([request for _, request in part])
            if len(answers) != len(part):
                raise ChatModelError(f"{self.inner.name} answered {len(answers)} of {len(part)} requests")
            for (key, request), answer in zip(part, answers):
                results[key] = answer
                if answer.error is None:
                    self.stored += int(self.store.put(key, self._identity, request, answer))
        return [Completion.from_dict(results[k].to_dict()) for k in keys]

    def stats(self) -> CacheStats:
        return CacheStats(entries=self.store.count(), model_entries=self.store.count(self._model_hash),
                          hits=self.hits, misses=self.misses, stored=self.stored)

    def check(self) -> None:
        self.inner.check()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def chunk_tokenizer(self) -> NamedTokenizer | None:
        return self.inner.chunk_tokenizer()

    def count_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        return self.inner.count_prompt_tokens(messages)

    def close(self) -> None:
        self.inner.close()
        self.store.close()

    def __repr__(self) -> str:
        return f"CachedChatModel({self.inner!r}, path={str(self.store.path)!r})"


class ReplayChatModel(ChatModel):
    """Answers only from a response cache; ``identity`` names the recorded model.

    ``identity`` may be omitted when the file holds the answers of exactly one model.
    """

    config_class = ReplayLLMConfig

    @classmethod
    def from_config(cls, section: ReplayLLMConfig) -> ReplayChatModel:
        """``backend: replay``: the file is ``path``, else ``cache.path``."""
        cache = section.cache  # never None from llm_config_from: replay.yaml's cache fills it
        if cache is None:
            raise ValueError("replay backend: its cache section is missing (build it with llm_config_from)")
        path = section.path or cache.path
        if not path:
            raise ValueError("replay backend: set cache.path (or path) to the recorded response cache")
        return cls(path, section.identity, timeout_s=cache.timeout_s)

    def __init__(self, path: str | os.PathLike[str], identity: dict[str, Any] | None = None, *,
                 timeout_s: float = 60.0) -> None:
        self.store = ResponseStore(path, timeout_s=timeout_s, readonly=True)
        if identity is None:
            recorded = self.store.identities()
            if len(recorded) != 1:
                listing = "\n  ".join(stable_json(i) for i in recorded) or "(none)"
                raise ChatModelError(f"replay: {self.store.path} holds answers of {len(recorded)} models; "
                                     f"give the identity of the one to replay. Recorded:\n  {listing}")
            identity = recorded[0]
        self._identity = dict(identity)
        self._model_hash = identity_hash(self._identity)
        self.name = f"replay:{self._identity.get('name') or self._identity.get('model') or 'model'}"
        self.hits = 0
        self.misses = 0

    def identity(self) -> dict[str, Any]:
        return self._identity

    def chat(self, request: ChatRequest) -> Completion:
        key = cache_key(self._identity, request)
        found = self.store.get(key)
        if found is None:
            self.misses += 1
            recorded = self.store.count(self._model_hash)
            preview = request.messages[-1]["content"][:80] if request.messages else ""
            raise CacheMiss(
                f"replay: no recorded answer for key {key} in {self.store.path} (model "
                f"{stable_json(self._identity)}, {recorded} answers recorded for it); last message "
                f"starts {preview!r}. Run once with the real model and cache enabled to record it.")
        self.hits += 1
        found.from_cache = True
        return found

    def stats(self) -> CacheStats:
        return CacheStats(entries=self.store.count(), model_entries=self.store.count(self._model_hash),
                          hits=self.hits, misses=self.misses, stored=0)

    def close(self) -> None:
        self.store.close()
