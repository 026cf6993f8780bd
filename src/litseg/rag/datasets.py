"""Benchmark loaders: FairytaleQA, LiteraryQA, GutenQA and NarrativeQA-style question tables.

Every loader returns the same records: a :class:`Benchmark` holding :class:`BenchmarkBook` s
(the text, or the path of a file holding it) and :class:`Question` s with reference answers and
gold :class:`Evidence` (a span of the book text, an evidence string, or both).

Each loader reads a local copy. Users with access to the Hugging Face hub can pass ``hub=<name>``
instead; ``datasets`` is then imported inside the call (it is not a dependency of litseg, and the
hub path is not exercised by the test suite).

Text conventions: texts built by a loader (FairytaleQA stories, GutenQA books rebuilt from
paragraphs) use ``\\n`` line endings and ``\\n\\n`` between sections; gold spans index that text.
Books given by path (LiteraryQA, NarrativeQA) are read by :meth:`BenchmarkBook.load_text`, which
only decodes (BOM removed, line endings untouched), like the segmentation pipeline does.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from litseg.rag.evidence import TextMatcher

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


# ------------------------------------------------------------------------------------ file input
def read_text_file(path: str | Path) -> str:
    """Decode a text file: UTF-8 (BOM removed) or, failing that, the encoding that
    charset-normalizer finds. Line endings are kept."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(raw).best()
        if best is None:
            raise ValueError(f"{path}: cannot determine the text encoding") from None
        return str(best)


def normalize_newlines(text: str) -> str:
    """``\\r\\n`` and bare ``\\r`` (used inside several FairytaleQA fields) become ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


_SINGLE_NL = re.compile(r"(?<=\S)[ \t]*\n[ \t]*(?=\S)")


def unwrap_hard_lines(text: str) -> str:
    """Join hard-wrapped lines: a single newline between two non-blank lines becomes a space.
    Blank lines (paragraph breaks) stay. Leading/trailing blanks of the joined lines go too."""
    return _SINGLE_NL.sub(" ", text)


def read_table(path: str | Path, sheet: str | int = 0) -> list[dict[str, Any]]:
    """Rows of a .csv/.tsv, .jsonl/.json, .xlsx or .parquet file as dicts keyed by header."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".csv", ".tsv"):
        with p.open(newline="", encoding="utf-8-sig") as fh:
            return [dict(r) for r in csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")]
    if suffix == ".jsonl":
        rows = []
        with p.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{p}:{n}: not valid JSON ({exc.msg})") from None
        return rows
    if suffix == ".json":
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{p}: expected a JSON list of records")
        return data
    if suffix == ".xlsx":
        from openpyxl import load_workbook

        wb = load_workbook(p, read_only=True, data_only=True)
        try:
            ws = wb.worksheets[sheet] if isinstance(sheet, int) else wb[sheet]
            it = ws.iter_rows(values_only=True)
            header = next(it, None)
            if header is None:
                return []
            names = [str(h).strip() if h is not None else f"col{i}" for i, h in enumerate(header)]
            return [dict(zip(names, r)) for r in it if any(v is not None for v in r)]
        finally:
            wb.close()
    if suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(p).to_dict(orient="records")
    raise ValueError(f"{p}: unsupported table format {suffix!r} (csv, tsv, jsonl, json, xlsx, parquet)")


def _hub_rows(name: str, split: str, config: str | None = None) -> list[dict[str, Any]]:
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise ImportError("hub=... needs the `datasets` package (pip install datasets) and hub "
                          "access; or pass a local path instead") from exc
    return [dict(r) for r in load_dataset(name, config, split=split)]


def _blank(v: Any, placeholders: bool = False) -> bool:
    """Empty cell. ``placeholders`` also treats the strings "None"/"nan" as empty, as GutenQA's
    tables write them in rows without a question; elsewhere "none" can be a real answer."""
    if v is None:
        return True
    if isinstance(v, float) and v != v:  # NaN from pandas
        return True
    if not isinstance(v, str):
        return False
    return v.strip().lower() in (("", "none", "nan") if placeholders else ("",))


def _s(v: Any) -> str:
    return "" if _blank(v) else str(v).strip()


def _g(v: Any) -> str:
    """A GutenQA cell, its "None" placeholders read as empty."""
    return "" if _blank(v, placeholders=True) else str(v).strip()


def _dedup(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in items:
        if x and x not in seen:
            seen.add(x)
            out.append(x)
    return out


def _join_sections(parts: Sequence[str], sep: str = "\n\n", headings: Sequence[str | None] | None = None
                   ) -> tuple[str, list[Span]]:
    """Join section texts with ``sep`` and return the text and each section's exact span; a
    heading, where given, is written on its own paragraph before its section."""
    chunks: list[str] = []
    spans: list[Span] = []
    pos = 0
    for i, part in enumerate(parts):
        head = headings[i] if headings is not None else None
        if head:
            if chunks:
                chunks.append(sep)
                pos += len(sep)
            chunks.append(head)
            pos += len(head)
        if chunks:
            chunks.append(sep)
            pos += len(sep)
        chunks.append(part)
        spans.append((pos, pos + len(part)))
        pos += len(part)
    return "".join(chunks), spans


# ------------------------------------------------------------------------------------ FairytaleQA
_FTQA_SPLITS = {"validation": "val", "valid": "val", "dev": "val"}
_FTQA_QCOLS = ("question", "cor_section", "answer1")


def load_fairytaleqa(path: str | Path | None = None, split: str = "val", *, unwrap_lines: bool = False,
                     hub: str | None = None) -> Benchmark:
    """FairytaleQA from the per-story CSVs of its GitHub release.

    ``path`` is the folder holding ``train/``, ``val/`` (and ``test/``), or one split folder.
    Each ``<story>-story.csv`` has columns ``section,text``; the story text is the sections joined
    by a blank line, with line endings normalised (several stories use bare ``\\r``).
    ``unwrap_lines`` also joins hard-wrapped lines inside paragraphs; it replaces one character by
    one, so offsets stay valid either way. Each ``<story>-questions.csv`` gives ``question``,
    ``answer1``..``answer6`` (two annotators, up to three answers each) and ``cor_section``, the
    comma-separated gold section ids, which become span evidence.

    The hub copy (``WorkInTheDark/FairytaleQA``) holds only each question's section text, not
    whole stories with section ids, so ``hub=`` is refused with an explanation.
    """
    if hub is not None:
        raise ValueError("FairytaleQA on the hub stores only the text of each question's own "
                         "section(s), not whole stories with section ids; download the per-story "
                         "CSVs (github.com/WorkInTheDark/FairytaleQA_Dataset, split_for_training/) "
                         "and pass their folder as `path`")
    if path is None:
        raise ValueError("load_fairytaleqa needs the folder of the per-story CSVs")
    root = Path(path)
    split = _FTQA_SPLITS.get(split, split)
    folder = root / split if (root / split).is_dir() else root
    story_files = sorted(folder.glob("*-story.csv"))
    if not story_files:
        raise FileNotFoundError(f"no *-story.csv files in {folder}")
    books: list[BenchmarkBook] = []
    questions: list[Question] = []
    warnings: list[str] = []
    for sf in story_files:
        story_id = sf.name[: -len("-story.csv")]
        ids, parts = _read_story_sections(sf, unwrap_lines, warnings)
        text, spans = _join_sections(parts)
        books.append(BenchmarkBook(book_id=story_id, title=story_id.replace("-", " "), text=text,
                                   sections=spans, section_labels=ids, meta={"source": str(sf)}))
        qf = sf.with_name(f"{story_id}-questions.csv")
        if not qf.is_file():
            warnings.append(f"{story_id}: no questions file {qf.name}")
            continue
        by_id: dict[str, list[Span]] = {}
        for sid, span in zip(ids, spans):
            by_id.setdefault(sid, []).append(span)
        questions.extend(_read_story_questions(qf, story_id, by_id, warnings))
    return Benchmark(name=f"fairytaleqa/{split}", books=books, questions=questions, warnings=warnings,
                     meta={"split": split})


def fairytaleqa_story_text(path: str | Path) -> str:
    """One story's text exactly as :func:`load_fairytaleqa` builds it (sections, blank line between)."""
    _ids, parts = _read_story_sections(Path(path), False, [])
    return _join_sections(parts)[0]


def _read_story_sections(path: Path, unwrap_lines: bool, warnings: list[str]) -> tuple[list[str], list[str]]:
    rows = read_table(path)
    if rows and not {"section", "text"} <= set(rows[0]):
        raise ValueError(f"{path}: expected columns 'section,text', found {list(rows[0])}")
    ids: list[str] = []
    parts: list[str] = []
    for n, r in enumerate(rows, 2):
        sid, txt = _s(r.get("section")), r.get("text") or ""
        if not sid and not txt.strip():
            continue  # blank CSV line
        if not sid:
            raise ValueError(f"{path}:{n}: section text without a section id")
        if sid in ids:
            warnings.append(f"{path.name}:{n}: section id {sid!r} repeated; a cor_section naming it "
                            "gets every section with that id as evidence")
        body = normalize_newlines(txt).strip()
        if unwrap_lines:
            body = unwrap_hard_lines(body)
        ids.append(sid)
        parts.append(body)
    if not parts:
        raise ValueError(f"{path}: no sections")
    return ids, parts


def _read_story_questions(path: Path, story_id: str, section_spans: Mapping[str, list[Span]],
                          warnings: list[str]) -> list[Question]:
    rows = read_table(path)
    if not rows:
        return []
    missing = [c for c in _FTQA_QCOLS if c not in rows[0]]
    if missing:
        raise ValueError(f"{path}: missing columns {missing} (found {list(rows[0])})")
    out: list[Question] = []
    used: Counter[str] = Counter()
    for n, r in enumerate(rows, 2):
        qtext = _s(r.get("question"))
        if not qtext:
            warnings.append(f"{path.name}:{n}: empty question skipped")
            continue
        raw_id = _s(r.get("question_id")) or str(n - 1)
        used[raw_id] += 1
        qid = f"{story_id}-q{raw_id}" + (f".{used[raw_id]}" if used[raw_id] > 1 else "")
        if used[raw_id] > 1:
            warnings.append(f"{path.name}:{n}: question_id {raw_id} repeated; kept as {qid}")
        evidence = []
        for sec in (x.strip() for x in _s(r.get("cor_section")).split(",")):
            if not sec:
                continue
            if sec not in section_spans:
                warnings.append(f"{path.name}:{n}: cor_section {sec!r} is not a section of the story")
                continue
            for s, e in section_spans[sec]:
                evidence.append(Evidence(kind="span", start=s, end=e, label=f"section {sec}"))
        answers = _dedup(_s(r.get(f"answer{i}")) for i in range(1, 7))
        meta = {k: _s(r.get(k)) for k in ("question_id", "local-or-sum", "attribute1", "attribute2",
                                          "ex-or-im1", "ex-or-im2", "cor_section") if k in r}
        out.append(Question(qid=qid, book_id=story_id, question=qtext, answers=answers,
                            evidence=evidence, meta=meta))
    return out


# ------------------------------------------------------------------------------------- LiteraryQA
def load_literaryqa(path: str | Path | None = None, split: str = "validation", *,
                    questions_file: str | Path | None = None, texts_dir: str | Path | None = None,
                    require_text: bool = True, hub: str | None = None) -> Benchmark:
    """LiteraryQA: one JSON record per book (``document_id``, ``gutenberg_id``, ``title``,
    ``summary``, ``qas`` = [{``question``, ``answers`` (two references)}, ...]).

    ``path`` is the folder holding ``<split>.jsonl`` (or pass ``questions_file``) and
    ``texts/<gutenberg_id>.txt`` with ``texts/manifest.tsv``. Books are keyed by Gutenberg id.
    With ``require_text`` (default) books whose text file is absent are left out, with their
    questions, and counted in ``meta``. LiteraryQA has no gold spans. ``hub=<name>`` reads the
    same records through ``datasets.load_dataset``; a ``text`` field, where present, is used.
    """
    if hub is not None:
        records = _hub_rows(hub, split)
        root = Path(path) if path is not None else None
        source = hub
    else:
        if path is None and questions_file is None:
            raise ValueError("load_literaryqa needs `path` (the benchmark folder) or `questions_file`")
        root = Path(path) if path is not None else Path(questions_file).parent  # type: ignore[arg-type]
        qf = Path(questions_file) if questions_file is not None else root / f"{split}.jsonl"
        if not qf.is_file():
            raise FileNotFoundError(f"no LiteraryQA questions file {qf}")
        records = read_table(qf)
        source = str(qf)
    tdir = Path(texts_dir) if texts_dir is not None else (root / "texts" if root is not None else None)
    manifest = _read_manifest(tdir / "manifest.tsv") if tdir is not None else {}
    books: list[BenchmarkBook] = []
    questions: list[Question] = []
    warnings: list[str] = []
    dropped_books = dropped_q = 0
    for n, rec in enumerate(records, 1):
        gid = _s(rec.get("gutenberg_id")) or _s(rec.get("document_id"))
        if not gid:
            raise ValueError(f"{source} record {n}: neither gutenberg_id nor document_id")
        qas = rec.get("qas") or []
        text = rec.get("text") if isinstance(rec.get("text"), str) else None
        fpath = tdir / f"{gid}.txt" if tdir is not None else None
        if text is None and (fpath is None or not fpath.is_file()):
            if require_text:
                dropped_books += 1
                dropped_q += len(qas)
                continue
            fpath = None
            warnings.append(f"book {gid}: no text available")
        man = manifest.get(gid, {})
        books.append(BenchmarkBook(
            book_id=gid, title=_s(rec.get("title")) or man.get("literaryqa_title", ""), text=text,
            path=fpath if text is None else None,
            meta={"document_id": _s(rec.get("document_id")), "summary": rec.get("summary") or "",
                  "metadata": rec.get("metadata") or {}, "source_title": man.get("rcdm_title", "")}))
        for i, qa in enumerate(qas):
            q = _s(qa.get("question"))
            answers = _dedup(_s(a) for a in qa.get("answers") or [])
            if not q or not answers:
                warnings.append(f"book {gid} question {i}: empty question or no answers, skipped")
                continue
            questions.append(Question(
                qid=f"{gid}-q{i}", book_id=gid, question=q, answers=answers,
                meta={k: qa[k] for k in ("is_answer_modified", "is_question_modified") if k in qa}))
    return Benchmark(name=f"literaryqa/{split}", books=books, questions=questions, warnings=warnings,
                     meta={"split": split, "books_without_text_dropped": dropped_books,
                           "questions_without_text_dropped": dropped_q})


def _read_manifest(path: Path) -> dict[str, dict[str, str]]:
    if not path.is_file():
        return {}
    return {r["gutenberg_id"]: r for r in read_table(path) if r.get("gutenberg_id")}


# ----------------------------------------------------------------------------------------- GutenQA
GUTENQA_BOOK = "Book Name"
GUTENQA_CHUNK = "Chunk"
GUTENQA_CHUNK_ID = "Chunk ID"
GUTENQA_CHAPTER = "Chapter"
GUTENQA_QUESTION = "Question"
GUTENQA_ANSWER = "Answer"
GUTENQA_EVIDENCE = "Chunk Must Contain"


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
        rows = _hub_rows(hub, split)
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
        b = _g(r.get(GUTENQA_BOOK)) or default_id
        if not b:
            raise ValueError(f"{qname}: no '{GUTENQA_BOOK}' column; pass book_id=...")
        return b

    by_book: dict[str, list[Mapping[str, Any]]] = {}
    for r in para_rows:
        if not _blank(r.get(GUTENQA_CHUNK), placeholders=True):
            by_book.setdefault(bid(r), []).append(r)
    books: list[BenchmarkBook] = []
    texts: dict[str, str] = {}
    for b, prs in by_book.items():
        if GUTENQA_CHUNK_ID in prs[0]:
            prs = sorted(prs, key=lambda r: float(_g(r.get(GUTENQA_CHUNK_ID)) or 0))
        parts = [normalize_newlines(str(r[GUTENQA_CHUNK])).strip() for r in prs]
        chapters = [_g(r.get(GUTENQA_CHAPTER)) for r in prs]
        heads: list[str | None] | None = None
        if chapter_headings and any(chapters):
            heads = [c if c and (i == 0 or c != chapters[i - 1]) else None for i, c in enumerate(chapters)]
        text, spans = _join_sections(parts, headings=heads)
        texts[b] = text
        books.append(BenchmarkBook(book_id=b, title=b.replace("_", " ").replace(" - ", " / "), text=text,
                                   sections=spans, section_labels=chapters,
                                   meta={"source": str(paragraphs or qname)}))
    questions_out: list[Question] = []
    warnings: list[str] = []
    kinds: Counter[str] = Counter()
    counter: Counter[str] = Counter()
    matchers: dict[str, TextMatcher] = {}
    for n, r in enumerate(rows, 2):
        qtext = _g(r.get(GUTENQA_QUESTION))
        if not qtext:
            continue  # chunk rows without a question
        b = bid(r)
        if b not in texts:
            raise ValueError(f"{qname}:{n}: question for book {b!r} but no text rows for it")
        counter[b] += 1
        ev_text = _g(r.get(GUTENQA_EVIDENCE))
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
        answer = _g(r.get(GUTENQA_ANSWER))
        questions_out.append(Question(
            qid=f"{b}-q{counter[b]}", book_id=b, question=qtext, answers=[answer] if answer else [],
            evidence=evidence, meta={"evidence_match": kind, "row": n}))
    return Benchmark(name="gutenqa", books=books, questions=questions_out, warnings=warnings,
                     meta={"evidence_match": dict(kinds)})


def _gutenqa_id_from_filename(name: str) -> str:
    stem = Path(name).stem
    for prefix in ("Questions_-_", "Gemini_Chunks_-_"):
        if stem.startswith(prefix):
            stem = stem[len(prefix):]
    return re.sub(r"_(Paragraph|Langchain|Semantic|Propositions|Fixed_Length_\d+)$", "", stem)


# ---------------------------------------------------------------------- NarrativeQA-style tables
@dataclass(frozen=True, slots=True)
class QAColumns:
    """Where a question table keeps each field. Names may be dotted paths into nested records
    (``"question.text"``); ``answers`` lists columns whose values are strings, lists of strings,
    or lists of ``{"text": ...}`` dicts. ``text``, when set, names a column holding the whole
    book text; otherwise texts are looked up as files (see :func:`load_qa_table`)."""

    book_id: str = "document_id"
    question: str = "question"
    answers: tuple[str, ...] = ("answer1", "answer2")
    qid: str | None = None
    split: str | None = "set"
    title: str | None = None
    text: str | None = None


#: NarrativeQA's own release (qaps.csv: document_id, set, question, answer1, answer2, ...).
NARRATIVEQA_COLUMNS = QAColumns()
#: The hub copy ``deepmind/narrativeqa`` (nested: document.id/.text, question.text, answers[].text).
NARRATIVEQA_HUB_COLUMNS = QAColumns(book_id="document.id", question="question.text", answers=("answers",),
                                    split=None, title="document.summary.title", text="document.text")


def _get(rec: Mapping[str, Any], dotted: str) -> Any:
    if dotted in rec:
        return rec[dotted]
    cur: Any = rec
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _answer_values(v: Any) -> Iterator[str]:
    if isinstance(v, Mapping):
        yield _s(v.get("text"))
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _answer_values(x)
    else:
        yield _s(v)


def load_qa_table(path: str | Path | None = None, *, columns: QAColumns = NARRATIVEQA_COLUMNS,
                  name: str = "narrativeqa", split: str | None = None,
                  texts_dir: str | Path | None = None, text_name: str = "{book_id}.content",
                  hub: str | None = None, hub_split: str = "validation") -> Benchmark:
    """Questions from a NarrativeQA-style table (CSV, TSV, JSONL, JSON, XLSX or Parquet).

    ``columns`` maps fields to column names (default: NarrativeQA's ``qaps.csv``). ``split``
    keeps only rows whose ``columns.split`` value equals it (NarrativeQA's ``set`` column:
    train/valid/test). Book text comes from ``columns.text`` when set, else from
    ``texts_dir/text_name`` (NarrativeQA's downloader writes ``tmp/<document_id>.content``); books
    without text are kept with a warning (retrieval needs text, answer metrics do not).
    ``hub=<name>`` reads rows through ``datasets.load_dataset(name, split=hub_split)``; pair it
    with ``columns=NARRATIVEQA_HUB_COLUMNS`` for ``deepmind/narrativeqa``.
    """
    if hub is not None:
        rows = _hub_rows(hub, hub_split)
        source = hub
    elif path is not None:
        rows = read_table(path)
        source = str(path)
    else:
        raise ValueError("load_qa_table needs a path (or hub=...)")
    if rows and _get(rows[0], columns.book_id) is None:
        raise ValueError(f"{source}: no column {columns.book_id!r} (columns: {list(rows[0])}); "
                         "pass columns=QAColumns(...) to map yours")
    tdir = Path(texts_dir) if texts_dir is not None else None
    books: dict[str, BenchmarkBook] = {}
    questions: list[Question] = []
    warnings: list[str] = []
    per_book: Counter[str] = Counter()
    for n, r in enumerate(rows, 1):
        if split is not None and columns.split is not None and _s(_get(r, columns.split)) != split:
            continue
        b = _s(_get(r, columns.book_id))
        q = _s(_get(r, columns.question))
        if not b or not q:
            raise ValueError(f"{source} row {n}: missing book id or question")
        answers = _dedup(a for c in columns.answers for a in _answer_values(_get(r, c)))
        if not answers:
            warnings.append(f"{source} row {n}: no reference answer")
        if b not in books:
            text = _get(r, columns.text) if columns.text else None
            fpath = tdir / text_name.format(book_id=b) if tdir is not None else None
            if not isinstance(text, str) or not text:
                text = None
                if fpath is None or not fpath.is_file():
                    warnings.append(f"book {b}: no text available")
                    fpath = None
            books[b] = BenchmarkBook(book_id=b, title=_s(_get(r, columns.title)) if columns.title else "",
                                     text=text, path=fpath if text is None else None)
        per_book[b] += 1
        qid = _s(_get(r, columns.qid)) if columns.qid else f"{b}-q{per_book[b]}"
        questions.append(Question(qid=qid, book_id=b, question=q, answers=answers))
    return Benchmark(name=name + (f"/{split}" if split else ""), books=list(books.values()),
                     questions=questions, warnings=warnings, meta={"source": source})


LOADERS: dict[str, Callable[..., Benchmark]] = {
    "fairytaleqa": load_fairytaleqa,
    "literaryqa": load_literaryqa,
    "gutenqa": load_gutenqa,
    "narrativeqa": load_qa_table,
}


def load_benchmark(name: str, *args: Any, **kwargs: Any) -> Benchmark:
    """Dispatch by benchmark name (``fairytaleqa``, ``literaryqa``, ``gutenqa``, ``narrativeqa``)."""
    try:
        loader = LOADERS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(LOADERS))}") from None
    return loader(*args, **kwargs)
