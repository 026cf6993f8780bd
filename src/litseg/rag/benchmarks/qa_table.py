"""NarrativeQA-style question tables (CSV, TSV, JSONL, JSON, XLSX or Parquet), columns mapped
by :class:`QAColumns` (``columns:`` in a suite's ``args``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litseg.rag.benchmarks import benchmark
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Question
from litseg.utils.tables import unique_nonempty, hub_rows, cell_text, read_table
from litseg.utils.config import from_dict

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
        yield cell_text(v.get("text"))
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _answer_values(x)
    else:
        yield cell_text(v)


@benchmark("narrativeqa", paths=("path", "texts_dir"))
def load_qa_table(path: str | Path | None = None, *, columns: QAColumns | Mapping[str, Any] = NARRATIVEQA_COLUMNS,
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
    with ``columns=NARRATIVEQA_HUB_COLUMNS`` for ``deepmind/narrativeqa``. A suite gives
    ``columns`` as a mapping of the same fields (``args: {columns: {question: q, ...}}``).
    """
    if not isinstance(columns, QAColumns):
        columns = from_dict(QAColumns, columns, "suite.args.columns")
    if hub is not None:
        rows = hub_rows(hub, hub_split)
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
        if split is not None and columns.split is not None and cell_text(_get(r, columns.split)) != split:
            continue
        b = cell_text(_get(r, columns.book_id))
        q = cell_text(_get(r, columns.question))
        if not b or not q:
            raise ValueError(f"{source} row {n}: missing book id or question")
        answers = unique_nonempty(a for c in columns.answers for a in _answer_values(_get(r, c)))
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
            books[b] = BenchmarkBook(book_id=b, title=cell_text(_get(r, columns.title)) if columns.title else "",
                                     text=text, path=fpath if text is None else None)
        per_book[b] += 1
        qid = cell_text(_get(r, columns.qid)) if columns.qid else f"{b}-q{per_book[b]}"
        questions.append(Question(qid=qid, book_id=b, question=q, answers=answers))
    return Benchmark(name=name + (f"/{split}" if split else ""), books=list(books.values()),
                     questions=questions, warnings=warnings, meta={"source": source})

