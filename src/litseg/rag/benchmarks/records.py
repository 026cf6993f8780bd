"""The records every benchmark loader returns: a :class:`Benchmark` holding
:class:`BenchmarkBook` s (the text, or the path of a file holding it) and :class:`Question` s
with reference answers and gold :class:`Evidence` (a span of the book text, an evidence string,
or both).

Text conventions: texts built by a loader (FairytaleQA stories, GutenQA books rebuilt from
paragraphs) use ``\\n`` line endings and ``\\n\\n`` between sections; gold spans index that text.
Books given by path (LiteraryQA, NarrativeQA) are read by :meth:`BenchmarkBook.load_text`, which
only decodes (BOM removed, line endings untouched), like the segmentation pipeline does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from litseg.utils.tables import read_text_file

Span = tuple[int, int]


# --------------------------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True)
class Evidence:
    """Gold evidence for a question.

    ``kind="span"``: ``start``/``end`` delimit the gold text in the book (e.g. a FairytaleQA
    section); ``label`` names it. ``kind="string"``: ``text`` is a passage that a relevant chunk
    must contain (GutenQA's "Chunk Must Contain"); ``start``/``end`` are filled in when the loader
    found the passage in the book text, so span-based measures work for it too.
    """

    kind: Literal["span", "string"]
    start: int | None = None
    end: int | None = None
    text: str = ""
    label: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("span", "string"):
            raise ValueError(f"Evidence.kind must be 'span' or 'string', not {self.kind!r}")
        if self.kind == "span" and (self.start is None or self.end is None):
            raise ValueError("span evidence needs start and end")
        if self.kind == "string" and not self.text:
            raise ValueError("string evidence needs its text")
        if (self.start is None) != (self.end is None):
            raise ValueError("evidence start and end must be given together")
        if self.start is not None and self.end is not None and not 0 <= self.start <= self.end:
            raise ValueError(f"bad evidence span ({self.start}, {self.end})")

    @property
    def span(self) -> Span | None:
        return None if self.start is None or self.end is None else (self.start, self.end)


@dataclass(slots=True)
class BenchmarkBook:
    """One book (or story) of a benchmark: its ``text`` or the ``path`` of a file holding it.

    ``sections`` are the benchmark's own units as spans of ``text`` (FairytaleQA sections,
    GutenQA paragraphs), with ``section_labels`` beside them (section ids, chapter names).
    """

    book_id: str
    title: str = ""
    text: str | None = None
    path: Path | None = None
    sections: list[Span] | None = None
    section_labels: list[str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def has_text(self) -> bool:
        return self.text is not None or (self.path is not None and self.path.is_file())

    def load_text(self) -> str:
        """The book text: ``text`` if held, else the decoded file (BOM removed, line endings
        untouched). Raises ``FileNotFoundError`` when neither is available."""
        if self.text is not None:
            return self.text
        if self.path is None:
            raise FileNotFoundError(f"book {self.book_id!r} has neither text nor a path")
        return read_text_file(self.path)


@dataclass(slots=True)
class Question:
    qid: str
    book_id: str
    question: str
    answers: list[str]
    evidence: list[Evidence] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def gold_spans(self) -> list[Span]:
        """Spans of all evidence that has one (gold sections, located evidence strings)."""
        return [e.span for e in self.evidence if e.span is not None]

    @property
    def evidence_strings(self) -> list[str]:
        return [e.text for e in self.evidence if e.kind == "string"]


@dataclass(slots=True)
class Benchmark:
    name: str
    books: list[BenchmarkBook]
    questions: list[Question]
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = [b.book_id for b in self.books]
        dup = [k for k, v in Counter(ids).items() if v > 1]
        if dup:
            raise ValueError(f"{self.name}: duplicate book ids {dup[:5]}")
        qdup = [k for k, v in Counter(q.qid for q in self.questions).items() if v > 1]
        if qdup:
            raise ValueError(f"{self.name}: duplicate question ids {qdup[:5]}")
        known = set(ids)
        orphans = sorted({q.book_id for q in self.questions} - known)
        if orphans:
            raise ValueError(f"{self.name}: questions refer to unknown books {orphans[:5]}")

    def book(self, book_id: str) -> BenchmarkBook:
        for b in self.books:
            if b.book_id == book_id:
                return b
        raise KeyError(f"{self.name} has no book {book_id!r}")

    def questions_for(self, book_id: str) -> list[Question]:
        return [q for q in self.questions if q.book_id == book_id]

    def summary(self) -> dict[str, Any]:
        n_span = sum(1 for q in self.questions if q.gold_spans)
        return {
            "name": self.name,
            "books": len(self.books),
            "books_with_text": sum(1 for b in self.books if b.has_text),
            "questions": len(self.questions),
            "questions_with_gold_spans": n_span,
            "answers_per_question": (sum(len(q.answers) for q in self.questions) / len(self.questions)
                                     if self.questions else 0.0),
            **self.meta,
        }

    def check_spans(self) -> list[str]:
        """Problems with gold spans and sections (outside the text, empty); [] when all is well."""
        problems: list[str] = []
        texts: dict[str, str | None] = {}
        for b in self.books:
            texts[b.book_id] = b.load_text() if b.has_text else None
            for s, e in b.sections or []:
                t = texts[b.book_id]
                if t is not None and not 0 <= s < e <= len(t):
                    problems.append(f"book {b.book_id}: section ({s}, {e}) outside text of {len(t)}")
        for q in self.questions:
            t = texts[q.book_id]
            for s, e in q.gold_spans:
                if t is None:
                    problems.append(f"{q.qid}: gold span but book {q.book_id} has no text")
                elif not 0 <= s < e <= len(t):
                    problems.append(f"{q.qid}: gold span ({s}, {e}) outside text of {len(t)}")
        return problems

