"""LitSeg-Lite: one call per unit; the answer holds the summarised workflow and the segments.

The prompt (``conf/prompt/*.yaml``) names its answer schema; the answer is decoded under that
JSON Schema when the backend can constrain decoding, then validated, retried with feedback,
repaired by the fallback and rebuilt into chunk records (``litseg.segmentation``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from litseg.chunkers.base import ChunkerGroups, MethodConfig, UnitResult, method_settings, register
from litseg.chunkers.groups import FeedbackConfig, PromptConfig, SinglePassPrompt, WriterPrompt
from litseg.chunkers.llm_common import (
    LLMChunker,
    make_feedback,
    render_single_pass_messages,
    sentence_word_counts,
    unit_paragraph_starts,
    unit_sentence_texts,
    usage_of,
)
from litseg.llm.base import ChatModel, ChatRequest
from litseg.segmentation.grammar import RANGE_FIRST, coverage_grammar
from litseg.segmentation.reconstruct import build_chunks
from litseg.segmentation.runner import check_unit_fallback, segment_with_retries
from litseg.segmentation.schema import SchemaLimits, get_schema, json_schema
from litseg.segmentation.snapping import snap_to_paragraphs
from litseg.segmentation.types import Document, Unit


class LitSegLiteChunker(LLMChunker):
    def __init__(self, llm: ChatModel, prompt: PromptConfig, *,
                 feedback: FeedbackConfig | None = None,
                 length_reference: Mapping[str, Any] | None = None, **settings: Any) -> None:
        """``settings`` are fields of :class:`LitSegLiteConfig` (``conf/method/litseg_lite.yaml``);
        one left out is read from that file, its one home (method_settings)."""
        config = method_settings(LitSegLiteConfig, "litseg_lite", settings)
        if isinstance(prompt, WriterPrompt):  # annotate.py's default prompt belongs to the tagger's writer
            raise ValueError(f"prompt {prompt.name!r} is LitSeg-Tagger's writer prompt; LitSeg-Lite takes a "
                             "single-pass prompt: prompt=litseg_lite_compact (with llm=student) or prompt=litseg_lite")
        if not isinstance(prompt, SinglePassPrompt):
            raise ValueError(f"prompt {getattr(prompt, 'name', prompt)!r} is no single-pass prompt (with system, "
                             "user and schema): LitSeg-Lite takes prompt=litseg_lite or one of its ablations")
        self.name = config.name
        self.llm = llm
        self.prompt = prompt
        self.answer_model = get_schema(prompt.schema)
        self.max_retries = config.max_retries
        self.max_new_tokens = config.max_new_tokens
        self.constrained = config.constrained
        # Only the compact answer has a grammar; other schemas decode under their JSON Schema.
        self.coverage_grammar = bool(config.coverage_grammar and config.constrained and prompt.schema in RANGE_FIRST)
        # Cuts move to paragraph starts only where the prompt shows paragraphs to the model.
        self.cut_at_paragraphs = bool(config.cut_at_paragraphs and prompt.paragraph_breaks)
        self.bounded_schema = config.bounded_schema
        self.schema_limits = SchemaLimits.from_config(config.schema_limits)
        self.fallback = check_unit_fallback(config.fallback)
        self.fallback_max_words = config.fallback_max_words
        self.context_position = config.context_position
        self.length_reference = dict(length_reference) if length_reference else None
        self.feedback_template = feedback
        self.workers = config.workers
        self.max_batch = config.max_batch

    def fingerprint(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "prompt": self.prompt.version,
            "schema": self.prompt.schema,
            "model": self.llm.identity(),
            "max_retries": self.max_retries,
            "max_new_tokens": self.max_new_tokens,
            "constrained": self.constrained,
            **({"coverage_grammar": True} if self.coverage_grammar else {}),
            **({"cut_at_paragraphs": "snap"} if self.cut_at_paragraphs else {}),
            "bounded_schema": self.bounded_schema,
            "schema_limits": self.schema_limits.to_dict() if self.bounded_schema else None,
            "fallback": self.fallback,
            "fallback_max_words": self.fallback_max_words,
            "context_position": self.context_position,
            "length_reference": self.length_reference,
        }

    def messages(self, doc: Document, unit: Unit) -> list[dict[str, str]]:
        return render_single_pass_messages(self.prompt, unit_sentence_texts(doc, unit), self.length_reference,
                                           unit_paragraph_starts(doc, unit))

    def _grammar(self, n: int) -> str | None:
        """The coverage grammar of a unit of ``n`` sentences, bounded as the schema is."""
        limits = self.schema_limits  # the grammar's string lengths follow them, bounded schema or not
        return coverage_grammar(n, title_chars=limits.text["chapter_title"], subtitle_chars=limits.text["subtitle"],
                                max_context=limits.list_limit("context_idx", n) or n,
                                range_first=RANGE_FIRST[self.prompt.schema])

    def _segment(self, doc: Document, unit: Unit, ask) -> UnitResult:
        t0 = time.perf_counter()
        n = unit.n_sentences
        if n == 0:
            return UnitResult(doc.book_id, unit.unit_id, [], {"tries": 0, "fallback": "none", "calls": 0})
        limits = self.schema_limits if self.constrained and self.bounded_schema else None
        schema = (json_schema(self.answer_model, n_sentences=n, bounded=limits)
                  if self.constrained else None)
        grammar = self._grammar(n) if self.coverage_grammar else None

        def ask_messages(messages: list[dict[str, str]]):
            return ask(ChatRequest(messages=messages, json_schema=schema, grammar=grammar,
                                   max_tokens=self.max_new_tokens))

        outcome = segment_with_retries(
            ask_messages, self.messages(doc, unit), n=n, answer_model=self.answer_model,
            sentence_words=sentence_word_counts(doc, unit), max_fallback_words=self.fallback_max_words,
            max_retries=self.max_retries, feedback=make_feedback(self.feedback_template, self.max_retries),
            fallback=self.fallback, limits=limits,
        )
        segments, snapped = list(outcome.segments), 0
        if self.cut_at_paragraphs and outcome.diagnostics.fallback in ("none", "repair"):
            segments, snapped = snap_to_paragraphs(segments, n, unit_paragraph_starts(doc, unit))
        chunks = build_chunks(doc, unit, segments, method=self.name,
                              tokenizer=self.llm.chunk_tokenizer(), context_position=self.context_position)
        diag = outcome.diagnostics.to_dict()
        attempts = diag.get("attempts", [])
        # seconds: this unit's wall time, which in a batch includes waiting for the others;
        # model_seconds: the model's own time for its answers (a generate call's time shared by its batch)
        diag.update(usage_of(attempts), seconds=time.perf_counter() - t0,
                    model_seconds=sum(float(a.get("seconds") or 0.0) for a in attempts))
        # The final (validated, possibly repaired) segments and the chosen answer: what the
        # training-data builder reads back from diagnostics.jsonl.
        diag["segments"] = [s.model_dump() for s in segments]
        if self.cut_at_paragraphs:
            diag["snapped_cuts"] = snapped
        if outcome.answer is not None:
            diag["answer"] = outcome.answer.model_dump()
        return UnitResult(doc.book_id, unit.unit_id, chunks, diag)


@dataclass(kw_only=True)
class LitSegLiteConfig(MethodConfig):
    """conf/method/litseg_lite.yaml."""

    NEEDS: ClassVar[frozenset[str]] = frozenset({"llm", "prompt"})
    TAKES: ClassVar[frozenset[str]] = frozenset({"feedback", "length_reference"})

    max_retries: int
    max_new_tokens: int
    constrained: bool
    coverage_grammar: bool
    cut_at_paragraphs: bool
    bounded_schema: bool
    # The step texts are summaries here: the YAML halves the teacher's text bounds (conf/method/litseg.yaml).
    schema_limits: dict[str, dict[str, int | None]]
    fallback: str
    fallback_max_words: int
    context_position: str
    workers: int
    max_batch: int


@register("litseg_lite", config=LitSegLiteConfig)
def make_litseg_lite(config: LitSegLiteConfig, groups: ChunkerGroups) -> LitSegLiteChunker:
    return LitSegLiteChunker(groups.chat_model(), groups.prompt_section(), feedback=groups.feedback,
                             length_reference=groups.length_reference, **config.options())
