"""NovelQA-style needles over whole novels: one question per sampled passage, with an evidence
string that occurs once in the book (``shared/data/benchmarks/novelqa``, format in its README).

The books are read by the project's own reader (:func:`litseg.segmentation.reading.read_document`,
so title, author and text are what ``annotate.py`` gets from the same file) and every evidence
string is placed in that text: verbatim where it occurs so, else after
:func:`~litseg.rag.evidence.normalize_for_match`. The place found is checked against the
passage the question was written from (the README gives its span in the file with ``\\r\\n``
turned into ``\\n``); where a string occurs more than once, the occurrence inside the passage is
taken. The gold is the evidence span: a chunk is relevant when it holds the evidence or enough
of its span (``metrics.min_overlap`` of it, half by default), which a chunk holding the whole
string always does.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.rag.benchmarks import benchmark
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question, Span
from litseg.utils.tables import read_table
from litseg.rag.evidence import TextMatcher
from litseg.rag.rows import text_of
from litseg.segmentation.reading import read_document

log = logging.getLogger(__name__)

QUESTIONS_FILE = "questions.jsonl"
_FIELDS = ("book_id", "file", "qid", "question", "answer", "evidence")


@benchmark("novelqa", paths=("path", "texts"))
def load_novelqa(path: str | Path, *, texts: str | Path | None = None,
                 books: Sequence[str] | None = None) -> Benchmark:
    """The questions of ``path`` (the benchmark folder holding ``questions.jsonl``, or that file)
    over the books their ``file`` field names, relative to ``texts`` (default: the folder two
    levels above the benchmark folder, i.e. ``shared/data``).

    ``books`` keeps only these books (book ids such as ``46_A_Christmas_Carol``, or their
    Gutenberg numbers such as ``46``), with their questions; a name that matches no book is an
    error. ``meta`` counts how each evidence string was placed (``evidence_match``: exact /
    normalized / missing), how many lie inside their passage and how many occur more than once
    (verbatim in the book, or after normalisation in their passage).
    """
    qfile, root = _locations(path, texts)
    rows = read_table(qfile)
    if rows:
        missing = [c for c in _FIELDS if c not in rows[0]]
        if missing:
            raise ValueError(f"{qfile}: missing fields {missing} (found {list(rows[0])})")
    keep = _selected_books({text_of(r, "book_id") for r in rows}, books, qfile)
    rows = [r for r in rows if text_of(r, "book_id") in keep]
    out_books = _read_books(rows, root)
    texts_by_id = {b.book_id: str(b.text) for b in out_books}
    questions, warnings, counts = _placed_questions(rows, texts_by_id, qfile.name)
    meta: dict[str, Any] = {"evidence_match": {k: counts[k] for k in ("exact", "normalized", "missing")},
                            "evidence_in_passage": counts["in_passage"],
                            "evidence_repeated": counts["repeated"]}
    if books is not None:
        meta["books_selected"] = sorted(keep)
    log.info("novelqa: %d of %d evidence strings placed in the books as read (%d verbatim, %d after "
             "normalisation), %d inside their passage", counts["exact"] + counts["normalized"], len(questions),
             counts["exact"], counts["normalized"], counts["in_passage"])
    return Benchmark(name="novelqa", books=out_books, questions=questions, warnings=warnings, meta=meta)


def book_files(path: str | Path, *, texts: str | Path | None = None,
               books: Sequence[str] | None = None) -> dict[str, Path]:
    """Book id -> text file of the benchmark's books (those named by ``books``, else all), as
    :func:`load_novelqa` reads them, without reading them (e.g. to annotate them elsewhere)."""
    qfile, root = _locations(path, texts)
    rows = read_table(qfile)
    keep = _selected_books({text_of(r, "book_id") for r in rows}, books, qfile)
    return {text_of(r, "book_id"): root / text_of(r, "file") for r in rows if text_of(r, "book_id") in keep}


def _locations(path: str | Path, texts: str | Path | None) -> tuple[Path, Path]:
    """The questions file and the folder its ``file`` fields are relative to."""
    qfile = Path(path)
    if qfile.is_dir():
        qfile = qfile / QUESTIONS_FILE
    if not qfile.is_file():
        raise FileNotFoundError(f"no NovelQA questions file {qfile}")
    return qfile, Path(texts) if texts is not None else qfile.parent.parent.parent


def _selected_books(known: set[str], books: Sequence[str] | None, source: Path) -> set[str]:
    """The book ids kept: all, or those named by id or by Gutenberg number."""
    if books is None:
        return known
    if isinstance(books, str):
        books = [books]
    keep: set[str] = set()
    for name in (str(b) for b in books):
        hits = {k for k in known if k == name or k.split("_", 1)[0] == name}
        if not hits:
            raise ValueError(f"{source}: no book {name!r} (books: {', '.join(sorted(known))})")
        keep |= hits
    return keep


def _read_books(rows: Iterable[Mapping[str, Any]], root: Path) -> list[BenchmarkBook]:
    """Each book once, read by the project's reader, in the order of the questions."""
    files: dict[str, str] = {}
    for r in rows:
        bid, rel = text_of(r, "book_id"), text_of(r, "file")
        if files.setdefault(bid, rel) != rel:
            raise ValueError(f"book {bid}: questions name two files ({files[bid]!r}, {rel!r})")
    out: list[BenchmarkBook] = []
    for bid, rel in files.items():
        fpath = root / rel
        if not fpath.is_file():
            raise FileNotFoundError(f"book {bid}: no text file {fpath} (texts={root})")
        doc = read_document(fpath, book_id=bid)
        out.append(BenchmarkBook(book_id=bid, title=doc.title or bid, text=doc.text, path=fpath,
                                 meta={"author": doc.author, "source": str(fpath)}))
    return out


class _LfOffsets:
    """Offsets of the text with ``\\r\\n`` turned into ``\\n`` mapped back to the text as read
    (the README gives passage spans in the former; a bare ``\\r`` keeps its length)."""

    def __init__(self, text: str) -> None:
        crlf, pos = [], text.find("\r\n")
        while pos >= 0:
            crlf.append(pos - len(crlf))  # where the pair's "\n" lands once the "\r"s before it go
            pos = text.find("\r\n", pos + 2)
        self._at = crlf

    def raw(self, offset: int) -> int:
        return offset + bisect_left(self._at, offset)


def _occurrences(text: str, needle: str) -> list[Span]:
    out: list[Span] = []
    pos = text.find(needle)
    while pos >= 0:
        out.append((pos, pos + len(needle)))
        pos = text.find(needle, pos + 1)
    return out


def _place(matcher: TextMatcher, evidence: str, passage: Span | None) -> tuple[str, Span | None, int]:
    """``(kind, span, occurrences)``: verbatim when possible, else after normalisation (in the
    passage first: normalising a whole book takes about a second); of several occurrences the
    one inside the passage (else the first)."""
    found = _occurrences(matcher.text, evidence)
    kind = "exact"
    if not found and passage is not None:
        s, e = passage
        found = [(s + a, s + b) for a, b in TextMatcher(matcher.text[s:e]).locate(evidence)]
        kind = "normalized"
    if not found:
        found, kind = matcher.locate(evidence), "normalized"
    if not found:
        return "missing", None, 0
    inside = [s for s in found if passage is not None and passage[0] <= s[0] and s[1] <= passage[1]]
    return kind, (inside or found)[0], len(found)


def _passage(row: Mapping[str, Any], offsets: _LfOffsets) -> Span | None:
    s, e = row.get("passage_start"), row.get("passage_end")
    if not isinstance(s, int) or not isinstance(e, int):
        return None
    return offsets.raw(s), offsets.raw(e)


def _placed_questions(rows: Sequence[Mapping[str, Any]], texts: Mapping[str, str], source: str
                      ) -> tuple[list[Question], list[str], Counter[str]]:
    questions: list[Question] = []
    warnings: list[str] = []
    counts: Counter[str] = Counter()
    matchers = {bid: TextMatcher(t) for bid, t in texts.items()}
    offsets = {bid: _LfOffsets(t) for bid, t in texts.items()}
    for n, r in enumerate(rows, 1):
        bid, qid, ev = text_of(r, "book_id"), text_of(r, "qid"), text_of(r, "evidence")
        if not ev.strip():
            raise ValueError(f"{source}:{n}: question {qid} has no evidence string")
        passage = _passage(r, offsets[bid])
        kind, span, occurrences = _place(matchers[bid], ev, passage)
        counts[kind] += 1
        evidence: list[Evidence] = []
        if span is None:
            warnings.append(f"{qid}: evidence not found in {bid}: {ev[:60]!r}")
        else:
            # One gold record: its span (relevance by overlap, evidence@budget) and its string.
            evidence.append(Evidence(kind="span", start=span[0], end=span[1], text=ev, label="evidence"))
            in_passage = passage is not None and passage[0] <= span[0] and span[1] <= passage[1]
            counts["in_passage"] += in_passage
            if not in_passage:
                warnings.append(f"{qid}: evidence placed at {span}, outside its passage {passage}")
        if occurrences > 1:
            counts["repeated"] += 1
            warnings.append(f"{qid}: evidence occurs {occurrences} times in {bid}; the one in its passage is gold")
        answer = text_of(r, "answer").strip()
        questions.append(Question(qid=qid, book_id=bid, question=text_of(r, "question"),
                                  answers=[answer] if answer else [], evidence=evidence,
                                  meta={"evidence_match": kind, "passage": list(passage) if passage else None}))
    return questions, warnings, counts
