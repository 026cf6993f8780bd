"""GutenQA in its published schema (gold evidence: strings the right chunk must contain)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.rag.benchmarks import benchmark
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question
from litseg.utils.tables import is_blank, gutenqa_cell, hub_rows, join_sections, normalize_newlines, read_table
from litseg.rag.evidence import TextMatcher


# ----------------------------------------------------------------------------------------- GutenQA
GUTENQA_BOOK = "Book Name"
GUTENQA_CHUNK = "Chunk"
GUTENQA_CHUNK_ID = "Chunk ID"
GUTENQA_CHAPTER = "Chapter"
GUTENQA_QUESTION = "Question"
GUTENQA_ANSWER = "Answer"
GUTENQA_EVIDENCE = "Chunk Must Contain"


@benchmark("gutenqa", paths=("questions", "paragraphs"))
def load_gutenqa(questions: str | Path | None = None, *, paragraphs: str | Path | None = None,
                 book_id: str | None = None, chapter_headings: bool = True,
                 hub: str | None = None, split: str = "train") -> Benchmark:
    """GutenQA in its published schema: ``Book Name``, ``Book ID``, ``Chunk ID``, ``Chapter``,
    ``Chunk``, ``Question``, ``Answer``, ``Chunk Must Contain`` (one row per chunk; 30 rows per
    book carry a question).

    ``questions`` is a table with at least ``Question``, ``Answer`` and ``Chunk Must Contain``.
    The book text is rebuilt from ``Chunk`` rows in order: those of ``paragraphs`` when given
    (e.g. ``Emma_-_Jane_Austen_Paragraph.xlsx``), else those of the questions table itself. The
    paragraphs are joined by blank lines; with ``chapter_headings`` a chapter's name is written
    as a heading paragraph where the ``Chapter`` value changes, so chapter detection can find it.
    Paragraph spans become the book's ``sections``.

    The book id comes from ``Book Name``, else ``book_id``, else the file name
    (``Questions_-_Emma_-_Jane_Austen.xlsx`` -> ``Emma_-_Jane_Austen``). Each evidence string is
    searched in the text (exactly, then after :func:`~litseg.rag.evidence.normalize_for_match`);
    where found its span is stored; ``meta["evidence_match"]`` counts exact/normalized/missing.
    """
    if hub is not None:
        rows = hub_rows(hub, split)
        qname = hub
    else:
        if questions is None:
            raise ValueError("load_gutenqa needs a questions table (or hub=...)")
        rows = read_table(questions)
        qname = Path(questions).name
    if rows:
        missing = [c for c in (GUTENQA_QUESTION, GUTENQA_ANSWER, GUTENQA_EVIDENCE) if c not in rows[0]]
        if missing:
            raise ValueError(f"{qname}: missing GutenQA columns {missing} (found {list(rows[0])})")
    default_id = book_id or (_gutenqa_id_from_filename(Path(questions).name) if questions else None)
    para_rows = read_table(paragraphs) if paragraphs is not None else rows
    if para_rows and GUTENQA_CHUNK not in para_rows[0]:
        raise ValueError(f"{paragraphs or qname}: no '{GUTENQA_CHUNK}' column to rebuild the book text from")
    if paragraphs is not None and book_id is None:
        default_id = default_id or _gutenqa_id_from_filename(Path(paragraphs).name)

    def bid(r: Mapping[str, Any]) -> str:
        b = gutenqa_cell(r.get(GUTENQA_BOOK)) or default_id
        if not b:
            raise ValueError(f"{qname}: no '{GUTENQA_BOOK}' column; pass book_id=...")
        return b

    books = _gutenqa_books(para_rows, bid, chapter_headings, str(paragraphs or qname))
    texts = {b.book_id: str(b.text) for b in books}
    questions_out, warnings, kinds = _gutenqa_questions(rows, bid, texts, qname)
    return Benchmark(name="gutenqa", books=books, questions=questions_out, warnings=warnings,
                     meta={"evidence_match": dict(kinds)})


def _gutenqa_books(para_rows: Sequence[Mapping[str, Any]], bid: Callable[[Mapping[str, Any]], str],
                   chapter_headings: bool, source: str) -> list[BenchmarkBook]:
    """Each book's text rebuilt from its ``Chunk`` rows in order, paragraphs as sections."""
    by_book: dict[str, list[Mapping[str, Any]]] = {}
    for r in para_rows:
        if not is_blank(r.get(GUTENQA_CHUNK), placeholders=True):
            by_book.setdefault(bid(r), []).append(r)
    books: list[BenchmarkBook] = []
    for b, prs in by_book.items():
        if GUTENQA_CHUNK_ID in prs[0]:
            prs = sorted(prs, key=lambda r: float(gutenqa_cell(r.get(GUTENQA_CHUNK_ID)) or 0))
        parts = [normalize_newlines(str(r[GUTENQA_CHUNK])).strip() for r in prs]
        chapters = [gutenqa_cell(r.get(GUTENQA_CHAPTER)) for r in prs]
        heads: list[str | None] | None = None
        if chapter_headings and any(chapters):
            heads = [c if c and (i == 0 or c != chapters[i - 1]) else None for i, c in enumerate(chapters)]
        text, spans = join_sections(parts, headings=heads)
        books.append(BenchmarkBook(book_id=b, title=b.replace("_", " ").replace(" - ", " / "), text=text,
                                   sections=spans, section_labels=chapters, meta={"source": source}))
    return books


def _gutenqa_questions(rows: Sequence[Mapping[str, Any]], bid: Callable[[Mapping[str, Any]], str],
                       texts: Mapping[str, str], qname: str) -> tuple[list[Question], list[str], Counter[str]]:
    """The question rows, each evidence string located in its book's text."""
    questions_out: list[Question] = []
    warnings: list[str] = []
    kinds: Counter[str] = Counter()
    counter: Counter[str] = Counter()
    matchers: dict[str, TextMatcher] = {}
    for n, r in enumerate(rows, 2):
        qtext = gutenqa_cell(r.get(GUTENQA_QUESTION))
        if not qtext:
            continue  # chunk rows without a question
        b = bid(r)
        if b not in texts:
            raise ValueError(f"{qname}:{n}: question for book {b!r} but no text rows for it")
        counter[b] += 1
        ev_text = gutenqa_cell(r.get(GUTENQA_EVIDENCE))
        evidence = []
        kind = "none"
        if ev_text:
            if b not in matchers:
                matchers[b] = TextMatcher(texts[b])
            kind, span = matchers[b].match(ev_text)
            if kind == "missing":
                warnings.append(f"{qname}:{n}: evidence string not found in book {b}: {ev_text[:60]!r}")
            s, e = span if span else (None, None)
            evidence.append(Evidence(kind="string", text=ev_text, start=s, end=e))
        kinds[kind] += 1
        answer = gutenqa_cell(r.get(GUTENQA_ANSWER))
        questions_out.append(Question(
            qid=f"{b}-q{counter[b]}", book_id=b, question=qtext, answers=[answer] if answer else [],
            evidence=evidence, meta={"evidence_match": kind, "row": n}))
    return questions_out, warnings, kinds


def _gutenqa_id_from_filename(name: str) -> str:
    stem = Path(name).stem
    for prefix in ("Questions_-_", "Gemini_Chunks_-_"):
        if stem.startswith(prefix):
            stem = stem[len(prefix):]
    return re.sub(r"_(Paragraph|Langchain|Semantic|Propositions|Fixed_Length_\d+)$", "", stem)

