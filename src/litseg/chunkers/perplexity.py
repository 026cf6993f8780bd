"""Perplexity chunker (Meta-Chunking, Zhao et al. 2025): cut at local minima of the sentence loss.

Per unit:

1. every sentence gets its mean token loss (log-perplexity, nats) under a causal LM, conditioned on
   the sentences before it inside a bounded context (:meth:`CausalLMScorer.piece_losses`: windows
   of ``window_tokens`` tokens, each preceded by the last ``context_tokens`` tokens before it);
2. sentence *i* is a minimum of that curve when it lies below both neighbours by more than
   ``threshold`` (``loss[i-1] - loss[i] > threshold`` and ``loss[i+1] - loss[i] > threshold``), or
   when it lies that far below its left neighbour and exactly level with its right one (the start
   of a flat stretch);
3. our reading of the method: a minimum is a sentence the preceding text predicts well, so it
   still belongs to the running chunk, and the rise after it opens the next one. With
   ``boundary: after`` (default) a chunk ends at each minimum; ``boundary: before`` starts a new
   chunk at the minimum instead.

Chunks are runs of whole sentences whose spans tile the unit (see :func:`sentence_run_chunks`).
Units of one or two sentences have no interior minimum and cost no model call.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
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
from litseg.segmentation.types import Chunk, Document, NamedTokenizer, Unit
from litseg.llm.scoring import CausalLMScorer

BOUNDARIES = ("after", "before")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")


class PieceLossScorer(Protocol):
    """What the perplexity chunker needs from a scorer (:class:`~litseg.llm.scoring.CausalLMScorer`)."""

    usage: Any

    def piece_losses(self, pieces: Sequence[str], *, leads: Sequence[str] | None = None,
                     context_tokens: int = 256, window_tokens: int = 1024) -> list[float]: ...

    def identity(self) -> dict[str, Any]: ...

    def chunk_tokenizer(self) -> NamedTokenizer | None: ...


# ----------------------------------------------------------------------------- shared helpers


def sentence_run_chunks(
    doc: Document, unit: Unit, firsts: Sequence[int], *, method: str,
    tokenizer: NamedTokenizer | None = None, metadata: Sequence[dict[str, Any]] | None = None,
) -> list[Chunk]:
    """Chunks that are runs of whole sentences; ``firsts`` are the 0-based sentence positions that
    open a new chunk (position 0 is implied). Chunk *k* spans from its first sentence's start to
    the next chunk's first sentence (the first from the unit's start, the last to the unit's end),
    trimmed of whitespace, so text outside every sentence still lands in a chunk."""
    sents = unit.sentences
    if not sents:
        if trim_span(doc.text, unit.start, unit.end) is not None:
            raise ValueError(f"{method}: unit {unit.unit_id!r} has text but no sentences")
        return []
    starts = sorted({i for i in firsts if 0 < i < len(sents)})
    bounds = [unit.start] + [sents[i].start for i in starts] + [unit.end]
    spans = [trim_span(doc.text, a, b) for a, b in zip(bounds, bounds[1:])]
    if any(s is None for s in spans):
        raise ValueError(f"{method}: unit {unit.unit_id!r} has an empty sentence run")
    return chunks_from_spans(doc, unit, [s for s in spans if s is not None], method=method,
                             tokenizer=tokenizer, metadata=metadata)


def sentence_pieces(doc: Document, unit: Unit) -> tuple[list[str], list[str]]:
    """The unit's sentences as the model reads them: ``(pieces, leads)``.

    A sentence after a plain space carries that space (it belongs to the first word's token); a
    line break or blank line before a sentence is its lead (fed to the model, not scored).
    Windows line endings are read as ``\\n``.
    """
    pieces: list[str] = []
    leads: list[str] = []
    prev_end: int | None = None
    for s in unit.sentences:
        text = doc.text[s.start : s.end].replace("\r\n", "\n").replace("\r", "\n")
        gap = "" if prev_end is None else doc.text[prev_end : s.start].replace("\r\n", "\n").replace("\r", "\n")
        if "\n" in gap:
            leads.append("\n\n" if _BLANK_LINE.search(gap) else "\n")
            pieces.append(text)
        else:
            leads.append("")
            pieces.append((" " if gap else "") + text)
        prev_end = s.end
    return pieces, leads


def local_minima(losses: Sequence[float], threshold: float = 0.0) -> list[int]:
    """0-based positions of the interior minima of the loss curve (rule 2 of the module docstring).
    NaN values (sentences without tokens) are never minima and never make a neighbour one."""
    out: list[int] = []
    for i in range(1, len(losses) - 1):
        left, mid, right = losses[i - 1], losses[i], losses[i + 1]
        if any(math.isnan(x) for x in (left, mid, right)):
            continue
        if left - mid > threshold and (right - mid > threshold or right == mid):
            out.append(i)
    return out


def usage_diagnostics(before: Any, after: Any, started: float) -> dict[str, Any]:
    """Scorer work for one unit in the keys the run summary reads."""
    return {"calls": after.calls - before.calls, "prompt_tokens": after.tokens - before.tokens,
            "completion_tokens": 0, "model_seconds": round(after.seconds - before.seconds, 4),
            "seconds": time.perf_counter() - started}


# ----------------------------------------------------------------------------- chunker


class PerplexityChunker(Chunker):
    def __init__(self, scorer: PieceLossScorer, **settings: Any) -> None:
        """``settings`` are fields of :class:`PerplexityConfig` (``conf/method/perplexity.yaml``; its
        model fields are the ``scorer``'s, built by the factory); one left out is read from
        that file, its one home (method_settings)."""
        config = method_settings(PerplexityConfig, "perplexity", settings)
        threshold, boundary = config.threshold, config.boundary
        context_tokens, window_tokens = config.context_tokens, config.window_tokens
        if boundary not in BOUNDARIES:
            raise ValueError(f"perplexity chunker: boundary must be one of {BOUNDARIES}, got {boundary!r}")
        if threshold < 0:
            raise ValueError(f"perplexity chunker: threshold must be >= 0, got {threshold}")
        if context_tokens < 0 or window_tokens < 1:
            raise ValueError("perplexity chunker: context_tokens must be >= 0 and window_tokens >= 1")
        self.scorer = scorer
        self.threshold = float(threshold)
        self.boundary = boundary
        self.context_tokens = int(context_tokens)
        self.window_tokens = int(window_tokens)
        self.name = config.name

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        started = time.perf_counter()
        before = self.scorer.usage.copy()
        n = unit.n_sentences
        losses: list[float] = []
        if n > 2:
            pieces, leads = sentence_pieces(doc, unit)
            losses = self.scorer.piece_losses(pieces, leads=leads, context_tokens=self.context_tokens,
                                              window_tokens=self.window_tokens)
        minima = local_minima(losses, self.threshold)
        firsts = [m + 1 for m in minima] if self.boundary == "after" else minima
        chunks = sentence_run_chunks(doc, unit, firsts, method=self.name, tokenizer=self.scorer.chunk_tokenizer())
        diagnostics = {
            **usage_diagnostics(before, self.scorer.usage, started),
            "n_sentences": n,
            "minima": [m + 1 for m in minima],  # 1-based sentence indices
            "losses": [None if math.isnan(x) else round(x, 4) for x in losses],
            **span_stats([(c.start, c.end) for c in chunks]),
        }
        return UnitResult(unit.book_id, unit.unit_id, chunks, diagnostics)

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.scorer.identity(), "threshold": self.threshold,
                "boundary": self.boundary, "context_tokens": self.context_tokens,
                "window_tokens": self.window_tokens}

    def close(self) -> None:
        close = getattr(getattr(self.scorer, "chat_model", None), "close", None)
        if callable(close):
            close()


def load_scorer(model: str | None, gguf_file: str | None, dtype: str, device: str,
                num_threads: int | None, model_id: str | None) -> Any:
    return CausalLMScorer.load(model, gguf_file=gguf_file, dtype=dtype, device=device,
                               num_threads=num_threads, model_id=model_id)


@dataclass(kw_only=True)
class ScorerConfig(MethodConfig):
    """The local causal LM a logit-reading chunker scores with (null model: the embedded GGUF)."""

    model: str | None
    gguf_file: str | None
    dtype: str
    device: str
    num_threads: int | None
    model_id: str | None

    def scorer(self) -> Any:
        return load_scorer(self.model, self.gguf_file, self.dtype, self.device, self.num_threads, self.model_id)


@dataclass(kw_only=True)
class PerplexityConfig(ScorerConfig):
    """conf/method/perplexity.yaml."""

    threshold: float
    boundary: str
    context_tokens: int
    window_tokens: int


@register("perplexity", config=PerplexityConfig)
def make_perplexity(config: PerplexityConfig, groups: ChunkerGroups) -> PerplexityChunker:
    return PerplexityChunker(config.scorer(), **config.options())
