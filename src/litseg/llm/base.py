"""One chat interface for every backend (transformers, vLLM, OpenAI-compatible servers, replay).

Backends turn a :class:`ChatRequest` into a :class:`Completion`. Everything above this layer
(chunkers, judges, generators) talks to :class:`ChatModel` only, so the response cache and the
token accounting work the same for all of them.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from litseg.errors import SetupError
from litseg.models import MODELS_DIR, adapter_digest
from litseg.segmentation.types import NamedTokenizer


@dataclass(slots=True)
class ChatRequest:
    messages: list[dict[str, str]]
    json_schema: dict[str, Any] | None = None  # constrain decoding to this JSON Schema when set
    max_tokens: int = 1024
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] | None = None
    # An EBNF grammar (xgrammar's dialect) that backends able to use one decode under instead of
    # json_schema (the transformers/embedded backend); the others keep to json_schema.
    grammar: str | None = None

    def key_payload(self) -> dict[str, Any]:
        """Everything that can change the answer; used by the response cache. (No grammar: the key
        of every request without one stays what it was before the field existed.)"""
        payload = asdict(self)
        if payload["grammar"] is None:
            del payload["grammar"]
        return payload


@dataclass(slots=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from a prefix cache, when the backend reports it
    seconds: float = 0.0
    finish_reason: str = "stop"  # "length" when the answer was cut at max_tokens
    model: str = ""
    from_cache: bool = False  # answered by the response cache, not the model
    error: str | None = None  # set when the backend failed after its own retries
    # With ``error``: ``"unavailable"`` when the model could not be reached or would not serve
    # (connection refused, timeout, HTTP 5xx/429 after the backend's retries, 401/403/404, a body
    # that is no answer): the model never saw the request, so the caller must not treat it as an
    # answer (a unit asking it fails, and a rerun asks again). None for other errors.
    error_kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Completion:
        """Inverse of :meth:`to_dict`; unknown keys (from a newer version) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatModelError(RuntimeError):
    """A model could not be built or could not answer (bad config, missing weights...)."""


class ModelUnavailable(ChatModelError, SetupError):
    """The model cannot serve at all: its folder or weights are missing or unloadable, or no
    server answers at start. A run stops at once with this message (one line from the entry
    scripts) instead of failing every unit with it."""


def tokenizer_label(model: str) -> str:
    """How chunk records name a model's tokenizer: a hub name as given, a local path by its last
    part (the record says which tokenizer, not where this machine keeps it)."""
    path = Path(model).expanduser()
    return path.name if path.is_absolute() or path.exists() else model


class ChatModel(ABC):
    """A chat-completion model. Subclasses implement :meth:`chat`; batching is optional."""

    name: str = "chat-model"

    @abstractmethod
    def chat(self, request: ChatRequest) -> Completion: ...

    def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        """Answer many requests; backends that batch (vLLM, async HTTP) override this."""
        return [self.chat(r) for r in requests]

    def answers_per_call(self) -> int | None:
        """How many requests of a batch one underlying model call answers (None: the whole batch
        at once). A cache in front stores the answers of each such slice as soon as it is done, so
        a run killed in the middle of a long batch keeps what it has paid for."""
        return 1

    def identity(self) -> dict[str, Any]:
        """What identifies this model for the cache (name, weights, adapter, quantisation...)."""
        return {"name": self.name}

    def count_tokens(self, text: str) -> int:
        """Token count of ``text``; backends with a tokenizer override this."""
        return max(1, len(text) // 4) if text else 0

    def chunk_tokenizer(self) -> NamedTokenizer | None:
        """The tokenizer a chunk's ``n_tokens`` is counted with, named; None when
        :meth:`count_tokens` is only an estimate (then chunks carry their word count alone)."""
        return None

    def count_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """Tokens the prompt of ``messages`` costs, chat template included where the backend knows it."""
        per_message_overhead = 4  # role markers and separators of a typical chat template
        return sum(self.count_tokens(m.get("content") or "") + per_message_overhead for m in messages)

    def check(self) -> None:  # noqa: B027 - optional hook
        """Fail fast with :class:`ModelUnavailable` (one line) when the model cannot serve: called
        once before a run, so a missing folder or an unreachable server is not found unit by unit.
        Cheap: it looks, it does not load weights."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (engines, sessions)."""


def adapter_identity(adapter: str) -> dict[str, Any]:
    """How a LoRA adapter enters a backend's cache identity: a shipped adapter by its name (not this
    machine's path), every adapter by a digest of its weights, so that retraining into the same
    folder never replays the cached answers of the old weights."""
    from pathlib import Path

    path = Path(adapter).expanduser()
    try:  # a shipped adapter, or one inside a shipped model (the tagger's writer): its name under models/
        name = path.resolve().relative_to(MODELS_DIR.resolve()).as_posix()
    except ValueError:
        name = adapter
    return {"adapter": name, "adapter_sha256": adapter_digest(path)}


def stable_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(slots=True)
class Usage:
    """Accumulated accounting for a unit or a run."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    errors: int = 0
    per_call: list[dict[str, Any]] = field(default_factory=list)

    def add(self, c: Completion) -> None:
        self.calls += 1
        self.cache_hits += int(c.from_cache)
        self.prompt_tokens += c.prompt_tokens
        self.cached_tokens += c.cached_tokens
        self.completion_tokens += c.completion_tokens
        self.seconds += c.seconds
        self.errors += int(c.error is not None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("per_call")
        return d
