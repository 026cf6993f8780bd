"""The NovelQA loader: books read by the project's reader, evidence strings placed in the text as
read (verbatim, else after normalisation), passages checked, book filter; the shared 200."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litseg.rag.benchmarks.novelqa import load_novelqa
from litseg.rag.config import DEFAULT_CONF_DIR
from litseg.rag.evaluation.run import load_suite
from tests.conftest import shared_data_dir

BOOK = ("The Project Gutenberg eBook of The Lantern Keeper\n\nTitle: The Lantern Keeper\n\n"
        "Author: Nobody Inparticular\n\n*** START OF THE PROJECT GUTENBERG EBOOK THE LANTERN KEEPER ***\n\n"
        "CHAPTER I.\n\nOld Maren kept the lantern on the quay for\nforty winters and never once let it out.\n\n"
        "\u201cNot tonight,\u201d she said to the ferryman, who wanted his supper.\n\n"
        "CHAPTER II.\n\nThe ferryman rowed eleven passengers across before the fog came down.\n\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK THE LANTERN KEEPER ***\n")


def _write(tmp: Path, rows: list[dict], text: str, crlf: bool = True) -> Path:
    bench = tmp / "benchmarks" / "novelqa"
    bench.mkdir(parents=True)
    (tmp / "texts").mkdir()
    (tmp / "texts" / "7_Lantern.txt").write_bytes(text.replace("\n", "\r\n" if crlf else "\n").encode())
    with (bench / "questions.jsonl").open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return bench


def _row(n: int, evidence: str, text: str, passage: str) -> dict:
    start = text.index(passage)  # offsets of the LF text, as the README gives them
    return {"book_id": "7_Lantern", "file": "texts/7_Lantern.txt", "qid": f"7_Lantern-{n:02d}",
            "question": f"Question {n}?", "answer": f"Answer {n}.", "evidence": evidence,
            "passage_start": start, "passage_end": start + len(passage)}


def test_evidence_placed_in_the_text_as_read(tmp_path: Path) -> None:
    p1 = "Old Maren kept the lantern on the quay for\nforty winters and never once let it out."
    p2 = "\u201cNot tonight,\u201d she said to the ferryman, who wanted his supper."
    p3 = "The ferryman rowed eleven passengers across before the fog came down."
    rows = [_row(1, "kept the lantern on the quay for forty winters", BOOK, p1),  # a line break inside
            _row(2, '"Not tonight," she said', BOOK, p2),  # other quotation marks
            _row(3, "eleven passengers", BOOK, p3),  # verbatim
            _row(4, "a sentence the book never holds", BOOK, p3)]
    bench = load_novelqa(_write(tmp_path, rows, BOOK))
    text = bench.books[0].text
    assert "\r\n" in text  # the text as read: line endings kept
    assert bench.books[0].title == "The Lantern Keeper"
    assert bench.books[0].meta["author"] == "Nobody Inparticular"
    assert bench.meta["evidence_match"] == {"exact": 1, "normalized": 2, "missing": 1}
    assert bench.meta["evidence_in_passage"] == 3
    q1, q2, q3, q4 = bench.questions
    s, e = q1.gold_spans[0]
    assert text[s:e] == "kept the lantern on the quay for\r\nforty winters"
    s, e = q2.gold_spans[0]
    assert text[s:e] == "Not tonight,\u201d she said"  # from the first to the last matched character
    s, e = q3.gold_spans[0]
    assert text[s:e] == "eleven passengers"
    assert q4.evidence == [] and any("7_Lantern-04" in w for w in bench.warnings)
    assert bench.check_spans() == []


def test_repeated_evidence_takes_the_passage_and_books_filter(tmp_path: Path) -> None:
    text = BOOK.replace("before the fog came down.", "before the fog came down. The ferryman rowed.")
    p3 = "The ferryman rowed eleven passengers across before the fog came down. The ferryman rowed."
    rows = [_row(1, "The ferryman rowed", text, p3)]
    bench = load_novelqa(_write(tmp_path, rows, text, crlf=False))
    (s, _e), = bench.questions[0].gold_spans
    assert s == bench.books[0].text.index(p3)
    assert bench.meta["evidence_repeated"] == 1
    assert load_novelqa(tmp_path / "benchmarks" / "novelqa", books=["7"]).meta["books_selected"] == ["7_Lantern"]
    with pytest.raises(ValueError, match="no book '8'"):
        load_novelqa(tmp_path / "benchmarks" / "novelqa", books=["8"])


def test_shared_novelqa_places_every_evidence_string() -> None:
    data = shared_data_dir()
    bench = load_novelqa(data / "benchmarks" / "novelqa")
    assert (len(bench.books), len(bench.questions)) == (8, 200)
    placed = sum(bool(q.gold_spans) for q in bench.questions)
    assert placed == 200, bench.warnings[:5]
    assert bench.meta["evidence_in_passage"] == 200
    assert bench.meta["evidence_match"]["missing"] == 0
    assert bench.check_spans() == []
    suite = load_suite({"name": "novelqa", "loader": "novelqa",
                        "args": {"path": str(data / "benchmarks" / "novelqa"), "texts": str(data),
                                 "books": ["46"]}})
    assert [b.book_id for b in suite.books] == ["46_A_Christmas_Carol"] and len(suite.questions) == 25
    assert (DEFAULT_CONF_DIR / "suite" / "novelqa.yaml").is_file()
