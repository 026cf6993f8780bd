"""LiteraryQA: one JSON record per book, texts from Project Gutenberg (no gold evidence)."""

from __future__ import annotations

from pathlib import Path

from litseg.rag.rows import text_of
from litseg.rag.benchmarks import benchmark
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Question
from litseg.utils.tables import unique_nonempty, hub_rows, cell_text, read_table


# ------------------------------------------------------------------------------------- LiteraryQA
@benchmark("literaryqa", paths=("path", "questions_file", "texts_dir"))
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
        records = hub_rows(hub, split)
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
        gid = cell_text(rec.get("gutenberg_id")) or cell_text(rec.get("document_id"))
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
            book_id=gid, title=cell_text(rec.get("title")) or text_of(man, "literaryqa_title"), text=text,
            path=fpath if text is None else None,
            meta={"document_id": cell_text(rec.get("document_id")), "summary": rec.get("summary") or "",
                  "metadata": rec.get("metadata") or {}, "source_title": text_of(man, "rcdm_title")}))
        for i, qa in enumerate(qas):
            q = cell_text(qa.get("question"))
            answers = unique_nonempty(cell_text(a) for a in qa.get("answers") or [])
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

