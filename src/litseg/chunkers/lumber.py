"""LumberChunker (Duarte et al. 2024): an LLM reads a window of numbered pieces and names the
first piece where the content clearly shifts; the window then moves on from there.

Per unit, with pieces = the unit's sentences (``granularity: sentences``, as the LitSeg paper runs
it) or its paragraphs (``granularity: paragraphs``: runs of sentences not separated by a blank
line), numbered with their 1-based position in the unit:

1. a window starts at the first piece not yet chunked and takes the following pieces while their
   total stays within ``token_budget`` tokens (at least two pieces, so that there is a choice);
2. the model gets the numbered window (``conf/prompt/lumberchunker.yaml``) and answers
   ``{"shift_at": k}``, decoded under a JSON Schema that allows only the window's second to last
   piece when the backend can constrain decoding; answers are read leniently (mended JSON, then
   "ID 12"-style or bare numbers in the text);
3. a valid ``k`` closes a chunk with the pieces before ``k``; the next window starts at ``k``;
4. an unusable answer (no number in the window's range, a backend error) is asked again with a
   note on what was wrong, up to ``max_retries`` times; after that the whole window becomes one
   chunk (fallback ``window_end``, counted in the diagnostics) and the next window starts after it;
5. this repeats until at most one piece is left, which becomes a chunk of its own without a
   call. As in the original, the model must name a shift in every window, the last window of a
   unit included, so units tend to end in short chunks; the dynamic merge (``merge:``) evens
   granularity out, as the LitSeg paper does for its LumberChunker+Merge baseline.

Everything goes through the :class:`~litseg.llm.base.ChatModel` layer, so any backend and the
response cache work. Token budgets are measured with ``budget_tokenizer`` (default ``auto``: the
embedded SmolLM2 tokenizer, else whitespace words), which does not depend on the backend, so a
run replayed from its cache sees the same windows.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from litseg.chunkers.base import (
    Chunker,
    ChunkerGroups,
    MethodConfig,
    UnitResult,
    method_settings,
    register,
)
from litseg.chunkers.llm_common import unreachable_result
from litseg.chunkers.perplexity import sentence_run_chunks
from litseg.chunkers.spans import span_stats
from litseg.errors import ModelUnreachable, is_unavailable
from litseg.llm.base import ChatModel, ChatRequest, Completion
from litseg.llm.batching import run_batched
from litseg.segmentation.types import Document, Unit
from litseg.chunkers.token import load_tokenizer

GRANULARITIES = ("sentences", "paragraphs")
ANSWER_KEY = "shift_at"
_WS = re.compile(r"\s+")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n|\r\n[^\S\r\n]*\r\n|\r[^\S\r]*\r")
_ID_NUMBER = re.compile(r"(?i)\b(?:id|piece|paragraph|sentence|unit)\s*[#:]?\s*0*(\d+)")
_NUMBER = re.compile(r"(?<![\d.])0*(\d+)(?![\d.]*\d)")

Ask = Callable[[ChatRequest], Completion]


def unit_pieces(doc: Document, unit: Unit, granularity: str) -> list[tuple[int, int]]:
    """``(first, last)`` 0-based sentence positions of each piece of the unit."""
    n = unit.n_sentences
    if granularity == "sentences":
        return [(i, i) for i in range(n)]
    pieces: list[tuple[int, int]] = []
    start = 0
    for i in range(1, n):
        gap = doc.text[unit.sentences[i - 1].end : unit.sentences[i].start]
        if _BLANK_LINE.search(gap):
            pieces.append((start, i - 1))
            start = i
    if n:
        pieces.append((start, n - 1))
    return pieces


def answer_schema(first_id: int, last_id: int) -> dict[str, Any]:
    """JSON Schema of an answer naming a piece from ``first_id`` to ``last_id``."""
    return {
        "type": "object",
        "properties": {ANSWER_KEY: {"type": "integer", "minimum": first_id, "maximum": last_id}},
        "required": [ANSWER_KEY],
        "additionalProperties": False,
    }


def parse_shift(text: str, low: int, high: int) -> tuple[int | None, str]:
    """The piece number an answer names if it lies in ``low..high``, else ``(None, why)``.

    Tried in order: a JSON object (mended with ``json_repair``) holding ``shift_at``; numbers
    introduced by "ID", "piece", "paragraph", ...; any other whole number in the text. The first
    number in range wins.
    """
    seen: list[int] = []
    for candidate in _json_numbers(text):
        seen.append(candidate)
        if low <= candidate <= high:
            return candidate, ""
    for pattern in (_ID_NUMBER, _NUMBER):
        for m in pattern.finditer(text):
            value = int(m.group(1))
            seen.append(value)
            if low <= value <= high:
                return value, ""
    if not text.strip():
        return None, "the reply was empty"
    if seen:
        return None, f"{seen[0]} is not a piece number from {low} to {high}"
    return None, "the reply named no piece number"


def _json_numbers(text: str) -> list[int]:
    start = text.find("{")
    if start < 0:
        return []
    try:
        import json_repair

        data = json_repair.loads(text[start:])
    except Exception:  # noqa: BLE001 - unreadable JSON falls through to the number patterns
        return []
    items = data if isinstance(data, list) else [data]
    out = []
    for item in items:
        if isinstance(item, dict) and ANSWER_KEY in item:
            try:
                out.append(int(str(item[ANSWER_KEY]).strip()))
            except ValueError:
                continue
    return out


class LumberChunker(Chunker):
    def __init__(self, llm: ChatModel, template: Mapping[str, Any], **settings: Any) -> None:
        """``settings`` are fields of :class:`LumberConfig` (``conf/method/lumberchunker.yaml``); one
        left out is read from that file, its one home (method_settings)."""
        config = method_settings(LumberConfig, "lumberchunker", {**settings, "template": dict(template)})
        token_budget, granularity, budget_tokenizer = config.token_budget, config.granularity, config.budget_tokenizer
        max_retries, max_new_tokens = config.max_retries, config.max_new_tokens
        for key in ("user", "retry"):
            if key not in template:
                raise ValueError(f"lumberchunker: the prompt template lacks {key!r} "
                                 "(expected conf/prompt/lumberchunker.yaml or one like it)")
        if granularity not in GRANULARITIES:
            raise ValueError(f"lumberchunker: granularity must be one of {GRANULARITIES}, got {granularity!r}")
        if token_budget < 1 or max_retries < 0 or max_new_tokens < 1:
            raise ValueError("lumberchunker: token_budget and max_new_tokens must be >= 1, max_retries >= 0")
        self.llm = llm
        self.template = dict(template)
        self.token_budget = int(token_budget)
        self.granularity = granularity
        self.budget_tokenizer = budget_tokenizer
        self.max_retries = int(max_retries)
        self.max_new_tokens = int(max_new_tokens)
        self.constrained = bool(config.constrained)
        self.workers = int(config.workers)
        self.name = config.name
        self._counter: Callable[[str], int] | None = None
        self._counter_name = budget_tokenizer

    # ------------------------------------------------------------------ tokens
    def count_budget_tokens(self, text: str) -> int:
        if self._counter is None:
            if self.budget_tokenizer == "llm":
                self._counter, self._counter_name = self.llm.count_tokens, f"llm:{self.llm.name}"
            else:
                tokenizer = load_tokenizer(self.budget_tokenizer)
                self._counter = lambda t: len(tokenizer.offsets(t))
                self._counter_name = tokenizer.name
        return self._counter(text)

    # ------------------------------------------------------------------ prompt
    def messages(self, numbered: list[tuple[int, str]]) -> list[dict[str, str]]:
        first, last = numbered[0][0], numbered[-1][0]
        listing = "\n".join(f"[{k}] {text}" for k, text in numbered)
        user = str(self.template["user"]).format(numbered=listing, first=first, second=first + 1, last=last)
        system = str(self.template.get("system") or "")
        return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]

    def _ask_shift(self, ask: Ask, numbered: list[tuple[int, str]], stats: dict[str, Any]) -> int | None:
        """The piece number the model names for this window, or None after the retries."""
        low, high = numbered[0][0] + 1, numbered[-1][0]
        messages = self.messages(numbered)
        schema = answer_schema(low, high) if self.constrained else None
        for attempt in range(self.max_retries + 1):
            completion = ask(ChatRequest(messages=messages, json_schema=schema, max_tokens=self.max_new_tokens))
            stats["calls"] += 1
            stats["prompt_tokens"] += completion.prompt_tokens
            stats["cached_tokens"] += completion.cached_tokens
            stats["completion_tokens"] += completion.completion_tokens
            stats["cache_hits"] += int(completion.from_cache)
            if is_unavailable(completion):  # never seen by the model: the unit fails, no window_end fallback
                raise ModelUnreachable(completion.error or "model unavailable", {k: stats[k] for k in (
                    "calls", "prompt_tokens", "cached_tokens", "completion_tokens")})
            if completion.error is not None:
                shift, why = None, f"the model failed ({completion.error})"
            else:
                shift, why = parse_shift(completion.text, low, high)
            if shift is not None:
                return shift
            stats["retries"] += int(attempt < self.max_retries)
            stats["problems"].append(why)
            retry = str(self.template["retry"]).format(problem=why, second=low, last=high)
            messages = [*messages, {"role": "assistant", "content": completion.text},
                        {"role": "user", "content": retry}]
        return None

    # ------------------------------------------------------------------ chunking
    def _segment(self, doc: Document, unit: Unit, ask: Ask) -> UnitResult:
        started = time.perf_counter()
        pieces = unit_pieces(doc, unit, self.granularity)
        texts = [_WS.sub(" ", doc.text[unit.sentences[a].start : unit.sentences[b].end]).strip()
                 for a, b in pieces]
        sizes = [self.count_budget_tokens(t) for t in texts]
        stats: dict[str, Any] = {"calls": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0,
                                 "cache_hits": 0, "retries": 0, "problems": []}
        firsts: list[int] = []  # 0-based piece positions that open a chunk (after the first)
        windows: list[list[int | None]] = []
        fallbacks = 0
        start, n = 0, len(pieces)
        while start < n - 1:
            end, total = start, sizes[start]
            while end + 1 < n and (end - start < 1 or total + sizes[end + 1] <= self.token_budget):
                end += 1
                total += sizes[end]
            numbered = [(k + 1, texts[k]) for k in range(start, end + 1)]
            shift = self._ask_shift(ask, numbered, stats)
            windows.append([start + 1, end + 1, shift])
            if shift is None:
                fallbacks += 1
                start = end + 1
            else:
                start = shift - 1
            if start < n:
                firsts.append(start)
        sentence_firsts = [pieces[k][0] for k in firsts]
        chunks = sentence_run_chunks(doc, unit, sentence_firsts, method=self.name,
                                     tokenizer=self.llm.chunk_tokenizer())
        diagnostics = {
            "calls": stats["calls"],
            "prompt_tokens": stats["prompt_tokens"],
            "cached_tokens": stats["cached_tokens"],
            "completion_tokens": stats["completion_tokens"],
            "cache_hits": stats["cache_hits"],
            "seconds": time.perf_counter() - started,
            "tries": 1 + stats["retries"],
            "retries": stats["retries"],
            "fallback": "window_end" if fallbacks else "none",
            "n_fallbacks": fallbacks,
            "problems": stats["problems"][:20],
            "granularity": self.granularity,
            "n_pieces": n,
            "budget_tokenizer": self._counter_name,
            "windows": windows,  # [first piece, last piece, answer or null], 1-based
            **span_stats([(c.start, c.end) for c in chunks]),
        }
        return UnitResult(unit.book_id, unit.unit_id, chunks, diagnostics)

    def _reachable_segment(self, doc: Document, unit: Unit, ask: Ask) -> UnitResult:
        started = time.perf_counter()
        try:
            return self._segment(doc, unit, ask)
        except ModelUnreachable as exc:
            return unreachable_result(self.name, doc, unit, exc, time.perf_counter() - started)

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        return self._reachable_segment(doc, unit, self.llm.chat)

    def chunk_units(self, doc: Document, units: Iterable[Unit]) -> Iterator[UnitResult]:
        # Units are independent: their window loops run side by side and their calls are batched.
        jobs = [lambda ask, u=u: self._reachable_segment(doc, u, ask) for u in units]
        yield from run_batched(self.llm, jobs, workers=self.workers)

    def fingerprint(self) -> dict[str, Any]:
        if self._counter is None:
            self.count_budget_tokens("")
        return {"name": self.name, "model": self.llm.identity(),
                "prompt": self.template.get("version", self.template.get("name")),
                "token_budget": self.token_budget, "granularity": self.granularity,
                "budget_tokenizer": self._counter_name, "max_retries": self.max_retries,
                "max_new_tokens": self.max_new_tokens, "constrained": self.constrained}

    def close(self) -> None:
        self.llm.close()


@dataclass(kw_only=True)
class LumberConfig(MethodConfig):
    """conf/method/lumberchunker.yaml (``template`` composed from conf/prompt/lumberchunker.yaml)."""

    COMPOSED: ClassVar[frozenset[str]] = frozenset({"template"})
    NEEDS: ClassVar[frozenset[str]] = frozenset({"llm"})

    template: dict[str, Any]
    token_budget: int
    granularity: str
    budget_tokenizer: str
    max_retries: int
    max_new_tokens: int
    constrained: bool
    workers: int


@register("lumberchunker", config=LumberConfig)
def make_lumberchunker(config: LumberConfig, groups: ChunkerGroups) -> LumberChunker:
    return LumberChunker(groups.chat_model(), config.template, **config.options("template"))

