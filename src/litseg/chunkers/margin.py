"""Margin-sampling chunker (Meta-Chunking, Zhao et al. 2025): a yes/no question per sentence,
answered by the probabilities of the two answer tokens rather than by generated text.

Per unit, walking the sentences in order with a running chunk that starts as sentence 1:

1. for the running chunk (left) and the next sentence (right) the prompt
   (``conf/prompt/margin_sampling.yaml``) offers two answers, ``split_answer`` ("1") and
   ``keep_answer`` ("2"); one forward pass gives the probability of each as the first token of
   the reply (:meth:`CausalLMScorer.answer_probabilities`);
2. the margin is ``p(split) - p(keep)`` (over the whole vocabulary, or over the two answers only
   with ``renormalize: true``);
3. the sentence opens a new chunk when the margin is above the threshold, otherwise it joins the
   running chunk;
4. with ``dynamic_threshold: true`` the threshold starts at ``threshold`` and, after every
   decision, becomes the mean of the margins seen so far in the unit (the last
   ``threshold_window`` of them when set); otherwise it stays at ``threshold``;
5. optional length cap, off by default (``max_chunk_words: null``, as the method asks the model
   about every sentence): when set and adding the sentence would take the running chunk past
   that many words, a new chunk starts without asking (counted as a forced split). Without the
   cap the prompt is bounded by the unit (``preprocess.max_words``).

Chunks are runs of whole sentences whose spans tile the unit.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from litseg.chunkers.base import Chunker, ChunkerGroups, UnitResult, method_settings, register
from litseg.chunkers.perplexity import ScorerConfig, sentence_run_chunks, usage_diagnostics
from litseg.chunkers.spans import span_stats
from litseg.segmentation.types import Document, NamedTokenizer, Unit

_WS = re.compile(r"\s+")


class AnswerScorer(Protocol):
    """What the margin chunker needs from a scorer (:class:`~litseg.llm.scoring.CausalLMScorer`)."""

    usage: Any

    def answer_probabilities(self, prompt: str | Sequence[dict[str, str]], answers: Sequence[str]) -> list[float]: ...

    def identity(self) -> dict[str, Any]: ...

    def chunk_tokenizer(self) -> NamedTokenizer | None: ...


class MarginSamplingChunker(Chunker):
    def __init__(self, scorer: AnswerScorer, template: Mapping[str, Any], **settings: Any) -> None:
        """``settings`` are fields of :class:`MarginConfig` (``conf/method/margin_sampling.yaml``; its
        model fields are the ``scorer``'s, built by the factory); one left out is read from
        that file, its one home (method_settings)."""
        config = method_settings(MarginConfig, "margin_sampling", {**settings, "template": dict(template)})
        threshold, threshold_window, max_chunk_words = config.threshold, config.threshold_window, config.max_chunk_words
        for key in ("user", "split_answer", "keep_answer"):
            if key not in template:
                raise ValueError(f"margin sampling: the prompt template lacks {key!r} "
                                 "(expected conf/prompt/margin_sampling.yaml or one like it)")
        if str(template["split_answer"]) == str(template["keep_answer"]):
            raise ValueError("margin sampling: split_answer and keep_answer must differ")
        if threshold_window is not None and threshold_window < 1:
            raise ValueError(f"margin sampling: threshold_window must be >= 1 or null, got {threshold_window}")
        if max_chunk_words is not None and max_chunk_words < 1:
            raise ValueError(f"margin sampling: max_chunk_words must be >= 1 or null, got {max_chunk_words}")
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"margin sampling: threshold is a probability margin in [-1, 1], got {threshold}")
        self.scorer = scorer
        self.template = dict(template)
        self.threshold = float(threshold)
        self.dynamic_threshold = bool(config.dynamic_threshold)
        self.threshold_window = threshold_window
        self.max_chunk_words = max_chunk_words
        self.renormalize = bool(config.renormalize)
        self.name = config.name

    def messages(self, left: str, right: str) -> list[dict[str, str]]:
        user = str(self.template["user"]).format(left=left, right=right)
        system = str(self.template.get("system") or "")
        return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]

    def margin(self, left: str, right: str) -> float:
        answers = [str(self.template["split_answer"]), str(self.template["keep_answer"])]
        p_split, p_keep = self.scorer.answer_probabilities(self.messages(left, right), answers)
        if self.renormalize:
            total = p_split + p_keep
            return (p_split - p_keep) / total if total > 0 else 0.0
        return p_split - p_keep

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        started = time.perf_counter()
        before = self.scorer.usage.copy()
        texts = [_WS.sub(" ", doc.text[s.start : s.end]).strip() for s in unit.sentences]
        words = [len(t.split()) for t in texts]
        threshold = self.threshold
        margins: list[float] = []
        thresholds: list[float] = []
        firsts: list[int] = []
        forced = 0
        chunk_start, chunk_words = 0, words[0] if words else 0
        for i in range(1, len(texts)):
            if self.max_chunk_words is not None and chunk_words + words[i] > self.max_chunk_words:
                split = True
                forced += 1
            else:
                m = self.margin(" ".join(texts[chunk_start:i]), texts[i])
                split = m > threshold
                margins.append(m)
                thresholds.append(threshold)
                if self.dynamic_threshold:
                    recent = margins[-self.threshold_window:] if self.threshold_window else margins
                    threshold = sum(recent) / len(recent)
            if split:
                firsts.append(i)
                chunk_start, chunk_words = i, words[i]
            else:
                chunk_words += words[i]
        chunks = sentence_run_chunks(doc, unit, firsts, method=self.name, tokenizer=self.scorer.chunk_tokenizer())
        diagnostics = {
            **usage_diagnostics(before, self.scorer.usage, started),
            "n_sentences": len(texts),
            "splits": [i + 1 for i in firsts],  # 1-based first sentence of each new chunk
            "forced_splits": forced,
            "margins": [round(m, 5) for m in margins],
            "thresholds": [round(t, 5) for t in thresholds],
            **span_stats([(c.start, c.end) for c in chunks]),
        }
        return UnitResult(unit.book_id, unit.unit_id, chunks, diagnostics)

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.scorer.identity(),
                "prompt": self.template.get("version", self.template.get("name")),
                "threshold": self.threshold, "dynamic_threshold": self.dynamic_threshold,
                "threshold_window": self.threshold_window, "max_chunk_words": self.max_chunk_words,
                "renormalize": self.renormalize}

    def close(self) -> None:
        close = getattr(getattr(self.scorer, "chat_model", None), "close", None)
        if callable(close):
            close()


@dataclass(kw_only=True)
class MarginConfig(ScorerConfig):
    """conf/method/margin_sampling.yaml (``template`` composed from conf/prompt/margin_sampling.yaml)."""

    COMPOSED: ClassVar[frozenset[str]] = frozenset({"template"})

    template: dict[str, Any]
    threshold: float
    dynamic_threshold: bool
    threshold_window: int | None
    max_chunk_words: int | None
    renormalize: bool


@register("margin_sampling", config=MarginConfig)
def make_margin_sampling(config: MarginConfig, groups: ChunkerGroups) -> MarginSamplingChunker:
    return MarginSamplingChunker(config.scorer(), config.template, **config.options("template"))
