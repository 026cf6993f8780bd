"""Pieces shared by the LLM chunkers: numbering a unit, rendering prompts and retry feedback."""

from __future__ import annotations

import re
import logging
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from litseg.chunkers.base import Chunker, UnitResult
from litseg.chunkers.groups import FeedbackConfig, SinglePassPrompt, StagedPrompt
from litseg.errors import ModelUnreachable, SetupError
from litseg.llm.base import ChatModel, ChatRequest, Completion
from litseg.llm.batching import run_batched
from litseg.segmentation.preprocess import paragraph_starts
from litseg.segmentation.reconstruct import build_chunks
from litseg.segmentation.repair import whole_unit_segments
from litseg.segmentation.schema import Segment

from litseg.segmentation.types import Document, Unit
from litseg.segmentation.validation import ValidationIssue, blocking_issues, feedback_message

log = logging.getLogger(__name__)

_WS = re.compile(r"\s+")
Ask = Callable[[ChatRequest], Completion]


def number_sentences(texts: Sequence[str], paragraph_starts: Sequence[bool] | None = None) -> str:
    """``[1] First sentence.\\n[2] Second ...``; line breaks inside a sentence become spaces.

    With ``paragraph_starts`` an empty line goes before every sentence that opens a paragraph
    (the first excepted): a cue the sentence numbers alone lose (most plot boundaries of the
    shared teacher annotations fall on one).
    """
    lines: list[str] = []
    for i, t in enumerate(texts, start=1):
        if paragraph_starts is not None and i > 1 and paragraph_starts[i - 1]:
            lines.append("")
        lines.append(f"[{i}] {_WS.sub(' ', t).strip()}")
    return "\n".join(lines)


def unit_sentence_texts(doc: Document, unit: Unit) -> list[str]:
    return [doc.text[s.start : s.end] for s in unit.sentences]


def unit_paragraph_starts(doc: Document, unit: Unit) -> list[bool]:
    return paragraph_starts(doc.text, [(s.start, s.end) for s in unit.sentences])


def render_single_pass_messages(
    prompt: SinglePassPrompt, sentence_texts: Sequence[str], length_reference: Mapping[str, Any] | None = None,
    paragraph_starts: Sequence[bool] | None = None,
) -> list[dict[str, str]]:
    """System + user messages of a single-pass prompt (LitSeg-Lite and its ablations).

    The training-data builder calls this too, so the student is trained on exactly the prompt
    it is run with. Paragraph breaks are shown only when the prompt asks for them
    (``paragraph_breaks: true``) and they are known.
    """
    breaks = paragraph_starts if prompt.paragraph_breaks else None
    user = prompt.user.format(
        chapter=number_sentences(sentence_texts, breaks),
        last_index=len(sentence_texts),
        length_hint=render_length_hint(prompt, length_reference),
    )
    return [{"role": "system", "content": prompt.system}, {"role": "user", "content": user}]


def sentence_word_counts(doc: Document, unit: Unit) -> list[int]:
    return [len(doc.text[s.start : s.end].split()) for s in unit.sentences]


def render_length_hint(prompt: SinglePassPrompt | StagedPrompt, reference: Mapping[str, Any] | None) -> str:
    """The soft length reference sentence: the prompt's ``length_hint`` template, else the
    reference's own ``hint``, filled with its quantiles ({p25}, {p50}, {p75}); "" without a
    complete reference."""
    if not reference or any(reference.get(q) is None for q in ("p25", "p50", "p75")):
        return ""
    template = str(prompt.length_hint or reference.get("hint") or "")
    return template.format(**reference) if template else ""


def usage_of(attempts: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Calls and token totals over a list of attempt records."""
    return {
        "calls": len(attempts),
        # Records of calls that never reached a model carry no token counts.
        "prompt_tokens": sum(int(a.get("prompt_tokens") or 0) for a in attempts),
        "cached_tokens": sum(int(a.get("cached_tokens") or 0) for a in attempts),
        "completion_tokens": sum(int(a.get("completion_tokens") or 0) for a in attempts),
    }


def make_feedback(template: FeedbackConfig | None, max_attempts: int):
    """A ``feedback(issues, n)`` callable for the retry loop, from the ``feedback`` config group.

    Without a template the core's default wording is used.
    """
    if not template:
        return feedback_message
    attempt = {"k": 0}

    def feedback(issues: Sequence[ValidationIssue], n: int) -> str:
        attempt["k"] += 1
        problems = blocking_issues(issues) or list(issues)
        items = "\n".join(template.item.format(problem=i.message) for i in problems[:12])
        if len(problems) > 12:
            items += f"\n(and {len(problems) - 12} more)"
        return template.user.format(problems=items, last_index=n, attempt=attempt["k"],
                                            max_attempts=max_attempts)

    return feedback


def unreachable_result(name: str, doc: Document, unit: Unit, exc: ModelUnreachable, seconds: float) -> UnitResult:
    """A unit the model could not be reached for: failed, with no chunks (a rerun asks again)."""
    log.error("%s: unit %s/%s failed, the model could not be reached: %s", name, doc.book_id, unit.unit_id, exc)
    error = f"model unreachable: {exc}"
    diag = {**exc.diagnostics, "method": name, "error": error, "unreachable": True, "seconds": seconds}
    return UnitResult(doc.book_id, unit.unit_id, [], diag, error=error)


class LLMChunker(Chunker):
    """Base of the chunkers that segment a unit through a sequence of LLM calls.

    Subclasses implement :meth:`_segment` as plain sequential code calling ``ask(request)``;
    this class runs many units at once through :func:`run_batched` (so batching backends serve
    them together) and turns a unit that raises into a recorded failure with whole-unit chunks,
    so one bad unit never stops the others. A unit the model could not be reached for
    (:class:`~litseg.errors.ModelUnreachable`) fails with no chunks at all; a
    :class:`~litseg.errors.SetupError` (the model cannot serve) stops the run.
    """

    # Set by each subclass from its method config (conf/method/*.yaml holds the values).
    llm: ChatModel
    fallback: str  # a unit that raises: "pieces" under fallback_max_words | "whole_unit" (one chunk)
    fallback_max_words: int
    context_position: str
    workers: int
    max_batch: int

    @abstractmethod
    def _segment(self, doc: Document, unit: Unit, ask: Ask) -> UnitResult: ...

    def _guarded(self, doc: Document, unit: Unit, ask: Ask) -> UnitResult:
        t0 = time.perf_counter()
        try:
            return self._segment(doc, unit, ask)
        except SetupError:
            raise  # the model cannot serve at all: the run stops once, not unit by unit
        except ModelUnreachable as exc:
            return unreachable_result(self.name, doc, unit, exc, time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - recorded on the unit, the batch continues
            log.exception("%s: unit %s/%s failed", self.name, doc.book_id, unit.unit_id)
            error = f"{type(exc).__name__}: {exc}"
            if self.fallback == "whole_unit":
                segments = [Segment(from_idx=1, to_idx=unit.n_sentences)] if unit.n_sentences else []
            else:
                segments = whole_unit_segments(unit.n_sentences, sentence_word_counts(doc, unit),
                                               self.fallback_max_words)
            chunks = build_chunks(doc, unit, segments, method=self.name, context_position=self.context_position)
            diag = {"method": self.name, "tries": 0, "calls": 0, "fallback": "whole_unit",
                    "unit_fallback": self.fallback, "error": error,
                    "seconds": time.perf_counter() - t0, "segments": [s.model_dump() for s in segments]}
            return UnitResult(doc.book_id, unit.unit_id, chunks, diag, error=error)

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        return self._guarded(doc, unit, self.llm.chat)

    def chunk_units(self, doc: Document, units: Iterable[Unit]) -> Iterator[UnitResult]:
        yield from self.chunk_many((doc, u) for u in units)

    def chunk_many(self, items: Iterable[tuple[Document, Unit]]) -> Iterator[UnitResult]:
        """Units of any number of books at once; results come in the order units finish."""
        jobs = [lambda ask, d=d, u=u: self._guarded(d, u, ask) for d, u in items]
        yield from run_batched(self.llm, jobs, workers=self.workers, max_batch=self.max_batch)

    def close(self) -> None:
        self.llm.close()
