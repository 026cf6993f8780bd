"""The records that travel through the whole pipeline.

Offsets are character offsets into ``Document.text`` (the decoded source, BOM removed, line
endings untouched), half-open ``[start, end)``. A chunk never stores text that cannot be found
again at its spans: ``Document.text[start:end]`` is the ground truth, everything else derives
from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class NamedTokenizer:
    """A tokenizer that sizes chunks: its name (kept in :attr:`Chunk.tokenizer`) and its counter."""

    name: str
    count: Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Sentence:
    """One indexed sentence of a unit. ``idx`` is 1-based within its unit."""

    idx: int
    start: int
    end: int


@dataclass(slots=True)
class Unit:
    """A top-level narrative unit (chapter, act, scene, canto, ...) or a piece of one.

    ``path`` holds the titles of the enclosing levels, outermost first (e.g. ``["VOLUME I",
    "CHAPTER III"]``); ``part`` is set when an overlong unit was split under the word cap
    (``(k, total)``, 1-based). ``matter`` is the reason (of :data:`MATTER_REASONS`, never one of
    :data:`NEVER_INDEXED`) of a unit made from front or back matter kept retrievable (an editor's
    introduction, a preface, notes); ``""`` for the narrative.
    """

    book_id: str
    unit_id: str
    index: int
    start: int
    end: int
    title: str = ""
    kind: str = "section"
    path: list[str] = field(default_factory=list)
    part: tuple[int, int] | None = None
    sentences: list[Sentence] = field(default_factory=list)
    matter: str = ""

    @property
    def n_sentences(self) -> int:
        return len(self.sentences)


# Why a span between the Project Gutenberg markers is front or back matter rather than narrative.
MATTER_REASONS: tuple[str, ...] = (
    "credits", "title page", "contents", "preface", "introduction", "dedication", "illustrations",
    "cast list", "extracts", "notes", "appendix", "index", "glossary", "transcriber's note",
    "adverts", "licence", "colophon", "front matter", "back matter",
)


# Matter that readers ask about, chunked as units flagged ``matter`` (preprocess.index_matter):
# what an author or editor wrote around the story.
INDEXED_MATTER: tuple[str, ...] = (
    "preface", "introduction", "dedication", "extracts", "notes", "appendix", "glossary", "cast list",
)
# Matter that is never in a unit, whatever the settings: it is not the book's writing (title
# pages, lists, credits, licence, publishers' adverts, transcribers' and printers' notes).
NEVER_INDEXED: tuple[str, ...] = (
    "credits", "title page", "contents", "illustrations", "index", "transcriber's note", "adverts",
    "licence", "colophon",
)


@dataclass(frozen=True, slots=True)
class MatterSpan:
    """Text between the Project Gutenberg markers that is kept out of the narrative units, with
    its reason (one of :data:`MATTER_REASONS`) and its heading when it has one. Units (matter
    units included) and the matter spans left in ``Document.matter`` together hold every
    non-whitespace character between the markers exactly once."""

    start: int
    end: int
    reason: str
    title: str = ""
    where: str = "front"  # "front" (before the first unit) or "back" (after the last one)

    def words(self, text: str) -> int:
        return len(text[self.start:self.end].split())

    def to_dict(self, text: str | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {"start": self.start, "end": self.end, "reason": self.reason,
                             "title": self.title, "where": self.where}
        if text is not None:
            d["words"] = self.words(text)
        return d


@dataclass(slots=True)
class Document:
    """A decoded book. ``body_start``/``body_end`` delimit the narrative after licence and
    front-matter stripping; its units tile it, and units made of front or back matter
    (``Unit.matter``) lie before or after it. ``matter`` records the front and back matter
    between the Project Gutenberg markers that is in no unit (title page, contents, index,
    adverts, ...) with reasons."""

    book_id: str
    text: str
    title: str = ""
    author: str = ""
    source_path: str = ""
    encoding: str = "utf-8"
    body_start: int = 0
    body_end: int = -1
    units: list[Unit] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # front and back matter between the Gutenberg markers, in text order (set by find_units)
    matter: list[MatterSpan] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.body_end < 0:
            self.body_end = len(self.text)

    def span(self, start: int, end: int) -> str:
        return self.text[start:end]

    def sentence_text(self, s: Sentence) -> str:
        return self.text[s.start : s.end]


@dataclass(slots=True)
class Chunk:
    """The chunk record every consumer reads (RAG, rewards, reports, adapters).

    ``main_ids`` are the unit-local sentence indices of the main range, ``context_ids`` those of
    the context sentences that lie outside it. ``main_spans`` are the document spans of the main
    text in source order (one contiguous span for a sentence range or a character window), and
    ``main_text == "".join(doc.text[s:e] for s, e in main_spans)``. ``context_spans`` hold one
    span per context sentence. ``text`` is the reconstructed, context-enriched chunk: subtitle,
    then context before the main range, main text, context after it. Sentence-free baselines
    (token windows) set ``from_idx``/``to_idx``/``main_ids`` to the sentences they overlap.

    Sizes, both of ``text``: ``n_words`` counts whitespace-separated words, for every chunker;
    ``n_tokens`` counts the tokens of the tokenizer named in ``tokenizer`` (the chunker's model,
    or the token splitter's tokenizer) and is None for chunkers without one.
    """

    book_id: str
    unit_id: str
    chunk_id: str
    method: str
    from_idx: int
    to_idx: int
    main_ids: list[int]
    context_ids: list[int]
    main_spans: list[tuple[int, int]]
    context_spans: list[tuple[int, int]]
    subtitle: str = ""
    main_text: str = ""
    context_before: str = ""
    context_after: str = ""
    text: str = ""
    n_words: int = 0  # counted from ``text`` when left at 0
    n_tokens: int | None = None
    tokenizer: str | None = None
    unit_title: str = ""
    unit_path: list[str] = field(default_factory=list)
    unit_kind: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    # the unit's matter reason (a preface, notes, ...; Unit.matter); "" for narrative and in old runs
    matter: str = ""

    def __post_init__(self) -> None:
        if not self.n_words:
            self.n_words = len(self.text.split())

    @property
    def start(self) -> int:
        """Start offset of the main range in the document."""
        return self.main_spans[0][0]

    @property
    def end(self) -> int:
        """End offset of the main range in the document."""
        return self.main_spans[-1][1]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["main_spans"] = [list(s) for s in self.main_spans]
        d["context_spans"] = [list(s) for s in self.context_spans]
        d["start"], d["end"] = self.start, self.end
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Chunk":
        names = set(cls.__dataclass_fields__)
        kw = {k: v for k, v in d.items() if k in names}
        if "tokenizer" not in d:  # a record from before n_words: its n_tokens counted words or tokens
            kw.pop("n_tokens", None)
        kw["main_spans"] = [tuple(s) for s in kw.get("main_spans", [])]
        kw["context_spans"] = [tuple(s) for s in kw.get("context_spans", [])]
        return cls(**kw)
