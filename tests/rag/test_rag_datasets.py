"""Benchmark loaders and evidence matching (litseg.rag.benchmarks, litseg.rag.evidence).

The synthetic tests run everywhere; the ones marked ``shared_data`` read ../shared/data and skip
with a reason when it is absent.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litseg.rag.benchmarks import load_benchmark
from litseg.rag.benchmarks.fairytaleqa import load_fairytaleqa
from litseg.rag.benchmarks.gutenqa import load_gutenqa
from litseg.rag.benchmarks.literaryqa import load_literaryqa
from litseg.rag.benchmarks.qa_table import NARRATIVEQA_HUB_COLUMNS, load_qa_table
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question
from litseg.utils.tables import normalize_newlines, unwrap_hard_lines
from litseg.rag.evidence import (
    TextMatcher,
    chunk_is_relevant,
    contains_evidence,
    evidence_match_kind,
    evidence_recovered_chars,
    locate_evidence,
    normalize_for_match,
    normalize_with_offsets,
    span_overlap,
    span_overlap_relevant,
)
from tests.conftest import shared_data_dir


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


# ------------------------------------------------------------------------------- evidence.py
@pytest.mark.parametrize("raw, expected", [
    ("\u201cThis was surely hers,\u201d said Maren.", "this was surely hers, said maren."),
    ("'This was surely hers,' said Maren.", "this was surely hers, said maren."),
    ("then?\u2014\u201d\n\nShe could", "then?-she could"),
    ("then?\u2014She could", "then?-she could"),
    ("a -- b \u2013 c", "a-b-c"),
    ("to a\u00a0bride", "to a bride"),
    ("wait\u2026 now", "wait... now"),
    ("wait . . . now", "wait... now"),
    ("  Maren\u2019s   HOUSE \n", "marens house"),
])
def test_normalize_for_match_table(raw: str, expected: str) -> None:
    assert normalize_for_match(raw) == expected


def test_normalize_keeps_case_and_quotes_on_request() -> None:
    assert normalize_for_match("\u201cHi\u201d", casefold=False, drop_quotes=False) == '"Hi"'
    assert normalize_for_match("\u2018Hi\u2019", casefold=False, drop_quotes=False) == "'Hi'"


def test_locate_maps_back_to_source_offsets() -> None:
    text = "It was the end.\n\n\u201cThis was surely hers,\u201d said Maren.\u2014Then"
    spans = locate_evidence(text, "'This was surely hers,' said Maren.")
    assert len(spans) == 1
    s, e = spans[0]
    assert text[s:e] == "This was surely hers,\u201d said Maren."
    assert contains_evidence(text, "THIS WAS SURELY HERS, said maren")
    assert not contains_evidence(text, "this was not hers")
    assert locate_evidence("ab ab ab", "ab") == [(0, 2), (3, 5), (6, 8)]
    with pytest.raises(ValueError, match="empty"):
        contains_evidence(text, " \u201c\u201d ")


def test_evidence_match_kind() -> None:
    text = "She said \u201cno\u201d\u2014and left."
    assert evidence_match_kind(text, "and left.") == "exact"
    assert evidence_match_kind(text, 'She said "no"-and left.') == "normalized"
    assert evidence_match_kind(text, "she stayed") == "missing"
    m = TextMatcher(text)
    assert m.match("and left.") == ("exact", (text.index("and"), len(text)))


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab \n\u2014-'\"\u201c\u201dXY", max_size=40), st.data())
def test_offsets_are_monotone_and_substrings_are_found(text: str, data: st.DataObject) -> None:
    norm, offs = normalize_with_offsets(text)
    assert len(norm) == len(offs)
    assert offs == sorted(offs) and all(0 <= o < len(text) for o in offs)
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, len(text)))
    piece = text[i:j]
    if normalize_for_match(piece):
        assert contains_evidence(text, piece)


@pytest.mark.parametrize("chunk, gold, expected", [
    ((0, 100), (0, 100), True),
    ((0, 100), (40, 60), True),          # gold inside chunk: overlap 20 = all of the smaller
    ((0, 100), (90, 130), False),        # 10 of the smaller 40
    ((0, 100), (80, 120), True),         # 20 of the smaller 40 = exactly half
    ((0, 10), (10, 20), False),          # touching, no overlap
    ([(0, 10), (50, 60)], (0, 30), True),  # multi-span chunk: 10 of its 20 characters
    ([(0, 10), (50, 60)], (55, 58), True),
])
def test_span_overlap_relevant_table(chunk, gold, expected) -> None:
    assert span_overlap_relevant(chunk, gold) is expected


def test_span_helpers_edge_cases() -> None:
    assert span_overlap([(0, 10), (5, 15)], (0, 20)) == 15  # a span set is merged first
    assert chunk_is_relevant((0, 10), [(100, 120), (2, 9)])
    assert not chunk_is_relevant((0, 10), [])
    with pytest.raises(ValueError):
        span_overlap_relevant((0, 10), (0, 5), min_frac=0)
    with pytest.raises(ValueError):
        span_overlap((5, 1), (0, 3))


@pytest.mark.parametrize("ranked, gold, budget, expected", [
    ([(0, 1000), (1000, 2000)], [(500, 700)], 1500, 1.0),
    ([(1000, 2000), (0, 1000)], [(500, 700)], 1500, 0.0),   # second chunk cut at 500 chars
    ([(1000, 2000), (0, 1000)], [(400, 700)], 1500, 100 / 300),
    ([(0, 100), (0, 100), (100, 200)], [(0, 200)], 250, 150 / 200),  # repeats spend budget
    ([[(0, 50), (300, 400)]], [(0, 50), (300, 350)], 75, 75 / 100),  # spans read in order
    ([], [(0, 10)], 1500, 0.0),
])
def test_evidence_recovered_chars_table(ranked, gold, budget, expected) -> None:
    assert evidence_recovered_chars(ranked, gold, budget) == pytest.approx(expected)


def test_evidence_recovered_chars_needs_gold() -> None:
    with pytest.raises(ValueError, match="gold"):
        evidence_recovered_chars([(0, 10)], [], 100)


# ------------------------------------------------------------------------- records and helpers
def test_records_validate() -> None:
    with pytest.raises(ValueError):
        Evidence(kind="span")
    with pytest.raises(ValueError):
        Evidence(kind="string")
    with pytest.raises(ValueError):
        Evidence(kind="span", start=5, end=2)
    book = BenchmarkBook(book_id="b", text="0123456789")
    q = Question(qid="q", book_id="b", question="?", answers=["x"], evidence=[Evidence("span", 2, 20)])
    bench = Benchmark("t", [book], [q])
    assert bench.check_spans() == ["q: gold span (2, 20) outside text of 10"]
    with pytest.raises(ValueError, match="unknown books"):
        Benchmark("t", [book], [Question("q2", "nope", "?", ["x"])])
    with pytest.raises(ValueError, match="duplicate question"):
        Benchmark("t", [book], [q, q])


def test_newline_helpers_keep_length() -> None:
    raw = "One\r\ntwo\rthree\n\nfour\nfive"
    norm = normalize_newlines(raw)
    assert norm == "One\ntwo\nthree\n\nfour\nfive"
    unwrapped = unwrap_hard_lines(norm)
    assert unwrapped == "One two three\n\nfour five"
    assert len(unwrapped) == len(norm)


# ----------------------------------------------------------------------- synthetic loaders
@pytest.fixture
def tiny_fairytaleqa(tmp_path: Path) -> Path:
    split = tmp_path / "val"
    split.mkdir()
    (split / "fox-story.csv").write_bytes(
        b'section,text\r\n1,"The fox ran.\rIt was fast.\r\rThen it slept."\r\n\r\n'
        b'2,"  A hen woke up.  "\r\n3,"The end."\r\n')
    _write_csv(split / "fox-questions.csv",
               ["question_id", "local-or-sum", "cor_section", "attribute1", "attribute2", "question",
                "ex-or-im1", "answer1", "answer2", "answer3", "ex-or-im2", "answer4", "answer5", "answer6"],
               [["1", "local", "1", "action", "", "What ran?", "explicit", "the fox", "", "", "explicit", "the fox", "", ""],
                ["2", "summary", "1, 2", "action", "", "Who woke?", "explicit", "a hen", "", "", "explicit", "the hen", "", ""],
                ["2", "local", "3,9", "action", "", "How did it end?", "explicit", "it ended", "", "", "", "", "", ""],
                ["4", "local", "2", "action", "", "How many eggs?", "explicit", "none", "", "", "", "", "", ""]])
    return tmp_path


def test_fairytaleqa_synthetic(tiny_fairytaleqa: Path) -> None:
    bench = load_fairytaleqa(tiny_fairytaleqa, "validation")
    book = bench.book("fox")
    assert book.text == "The fox ran.\nIt was fast.\n\nThen it slept.\n\nA hen woke up.\n\nThe end."
    assert book.section_labels == ["1", "2", "3"]
    assert [book.text[s:e] for s, e in book.sections] == [
        "The fox ran.\nIt was fast.\n\nThen it slept.", "A hen woke up.", "The end."]
    q1, q2, q3, q4 = bench.questions
    assert q4.answers == ["none"]  # a real answer, not an empty cell
    assert q1.answers == ["the fox"]
    assert q2.answers == ["a hen", "the hen"]
    assert [book.text[s:e] for s, e in q2.gold_spans] == ["The fox ran.\nIt was fast.\n\nThen it slept.",
                                                            "A hen woke up."]
    assert q3.qid == "fox-q2.2" and len(q3.gold_spans) == 1  # repeated id kept, section 9 unknown
    assert any("repeated" in w for w in bench.warnings)
    assert any("'9' is not a section" in w for w in bench.warnings)
    assert q1.meta["local-or-sum"] == "local"
    assert bench.check_spans() == []
    unwrapped = load_fairytaleqa(tiny_fairytaleqa, "val", unwrap_lines=True).book("fox")
    assert unwrapped.text.startswith("The fox ran. It was fast.\n\nThen")
    assert unwrapped.sections == book.sections


def test_fairytaleqa_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_fairytaleqa(tmp_path, "val")
    with pytest.raises(ValueError, match="hub"):
        load_fairytaleqa(hub="WorkInTheDark/FairytaleQA")
    (tmp_path / "x-story.csv").write_text("id,body\n1,text\n", encoding="utf-8")
    with pytest.raises(ValueError, match="section,text"):
        load_fairytaleqa(tmp_path)


def test_gutenqa_published_schema_synthetic(tmp_path: Path) -> None:
    rows = [
        {"Book Name": "Tale_-_Anon", "Book ID": 7, "Chunk ID": 1, "Chapter": "CHAPTER I",
         "Chunk": "\u201cCome here,\u201d she said\u2014softly.", "Question": "None", "Answer": "None",
         "Chunk Must Contain": "None"},
        {"Book Name": "Tale_-_Anon", "Book ID": 7, "Chunk ID": 0, "Chapter": "CHAPTER I",
         "Chunk": "It began at night.", "Question": "When did it begin?", "Answer": "At night.",
         "Chunk Must Contain": "It began at night."},
        {"Book Name": "Tale_-_Anon", "Book ID": 7, "Chunk ID": 2, "Chapter": "CHAPTER II",
         "Chunk": "Nobody came.", "Question": "What did she say?", "Answer": "Come here.",
         "Chunk Must Contain": "'Come here,' she said--softly."},
    ]
    path = tmp_path / "gutenqa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bench = load_gutenqa(path)
    book = bench.book("Tale_-_Anon")
    assert book.text == ("CHAPTER I\n\nIt began at night.\n\n\u201cCome here,\u201d she said\u2014softly."
                         "\n\nCHAPTER II\n\nNobody came.")
    assert [q.qid for q in bench.questions] == ["Tale_-_Anon-q1", "Tale_-_Anon-q2"]
    assert bench.meta["evidence_match"] == {"exact": 1, "normalized": 1}
    s, e = bench.questions[1].gold_spans[0]
    assert book.text[s:e] == "Come here,\u201d she said\u2014softly."
    plain = load_gutenqa(path, chapter_headings=False).book("Tale_-_Anon")
    assert plain.text.startswith("It began at night.")
    (tmp_path / "bad.csv").write_text("Question,Answer\nq,a\n", encoding="utf-8")
    with pytest.raises(ValueError, match="Chunk Must Contain"):
        load_gutenqa(tmp_path / "bad.csv")


def test_narrativeqa_style_csv(tmp_path: Path) -> None:
    _write_csv(tmp_path / "qaps.csv",
               ["document_id", "set", "question", "answer1", "answer2"],
               [["d1", "valid", "Who?", "Ann", "ann"], ["d1", "valid", "Where?", "Rome", "In Rome"],
                ["d2", "train", "Why?", "Money", "For money"], ["d3", "valid", "When?", "Noon", "Noon"]])
    texts = tmp_path / "tmp"
    texts.mkdir()
    (texts / "d1.content").write_bytes("\ufeffOnce upon a time\r\nin Rome.".encode("utf-8"))
    bench = load_qa_table(tmp_path / "qaps.csv", split="valid", texts_dir=texts)
    assert bench.name == "narrativeqa/valid"
    assert [b.book_id for b in bench.books] == ["d1", "d3"]
    assert [q.answers for q in bench.questions] == [["Ann", "ann"], ["Rome", "In Rome"], ["Noon"]]
    assert bench.book("d1").load_text() == "Once upon a time\r\nin Rome."  # BOM gone, CRLF kept
    assert not bench.book("d3").has_text
    assert any("d3: no text" in w for w in bench.warnings)
    assert load_benchmark("narrativeqa", tmp_path / "qaps.csv").summary()["questions"] == 4


def test_narrativeqa_style_nested_jsonl(tmp_path: Path) -> None:
    recs = [{"document": {"id": "x9", "text": "Full text.", "summary": {"title": "X"}},
             "question": {"text": "What?"}, "answers": [{"text": "This"}, {"text": "that"}]}]
    path = tmp_path / "nqa.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    bench = load_qa_table(path, columns=NARRATIVEQA_HUB_COLUMNS)
    assert bench.books[0].title == "X" and bench.books[0].load_text() == "Full text."
    assert bench.questions[0].answers == ["This", "that"]
    with pytest.raises(ValueError, match="document_id"):
        load_qa_table(path)


def test_literaryqa_synthetic(tmp_path: Path) -> None:
    recs = [{"document_id": "aa", "gutenberg_id": "11", "title": "One", "summary": "s", "metadata": {},
             "qas": [{"question": "Q1?", "answers": ["A", "B"], "is_answer_modified": [False, False],
                      "is_question_modified": False}]},
            {"document_id": "bb", "gutenberg_id": "22", "title": "Two", "summary": "s", "metadata": {},
             "qas": [{"question": "Q2?", "answers": ["C", "C"]}]}]
    (tmp_path / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "11.txt").write_text("Book one.", encoding="utf-8")
    bench = load_literaryqa(tmp_path)
    assert [b.book_id for b in bench.books] == ["11"]
    assert bench.meta["books_without_text_dropped"] == 1
    assert bench.questions[0].answers == ["A", "B"] and bench.questions[0].qid == "11-q0"
    every = load_literaryqa(tmp_path, require_text=False)
    assert len(every.books) == 2 and every.questions[1].answers == ["C"]
    (tmp_path / "broken.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.jsonl:1"):
        load_literaryqa(questions_file=tmp_path / "broken.jsonl")


# ------------------------------------------------------------------------- shared benchmarks
@pytest.mark.shared_data
def test_fairytaleqa_validation_shared() -> None:
    root = shared_data_dir() / "benchmarks" / "fairytaleqa"
    bench = load_fairytaleqa(root, "val")
    assert len(bench.books) == 23
    assert len(bench.questions) == 1025
    assert bench.check_spans() == []
    assert bench.warnings == []
    assert all(q.answers and q.gold_spans for q in bench.questions)
    for book in bench.books:
        assert "\r" not in book.text
        # every gold span is exactly one of the book's sections
        assert set(book.sections) >= {s for q in bench.questions_for(book.book_id) for s in q.gold_spans}
    # a story stored with bare \r endings reads like the others
    peerifool = bench.book("peerifool").text
    assert "live in a tiny\ncottage" in peerifool
    multi = [q for q in bench.questions if len(q.gold_spans) > 1]
    assert len(multi) == 95  # 48 + 34 with two sections, 11 + 2 with three


@pytest.mark.shared_data
def test_fairytaleqa_train_shared() -> None:
    bench = load_fairytaleqa(shared_data_dir() / "benchmarks" / "fairytaleqa", "train")
    assert (len(bench.books), len(bench.questions)) == (232, 8548)
    assert bench.check_spans() == []
    assert any("remarkable-rocket" in w and "repeated" in w for w in bench.warnings)


@pytest.mark.shared_data
def test_literaryqa_shared() -> None:
    root = shared_data_dir() / "benchmarks" / "literaryqa"
    bench = load_literaryqa(root)
    assert (len(bench.books), len(bench.questions)) == (18, 530)
    assert bench.meta["books_without_text_dropped"] == 29
    assert all(1 <= len(q.answers) <= 2 and not q.gold_spans for q in bench.questions)
    assert all(b.has_text for b in bench.books)
    assert "Project Gutenberg" in bench.book("1230").load_text()[:500]
    assert bench.book("1661").title == "The Adventures of Sherlock Holmes"
    subset = load_literaryqa(root, questions_file=root / "validation_text_available_rcdm.jsonl")
    assert len(subset.questions) == 530
    everything = load_literaryqa(root, require_text=False)
    assert (len(everything.books), len(everything.questions)) == (47, 1417)


@pytest.mark.shared_data
def test_gutenqa_emma_shared() -> None:
    root = shared_data_dir() / "benchmarks" / "gutenqa_emma"
    bench = load_gutenqa(root / "Questions_-_Emma_-_Jane_Austen.xlsx",
                         paragraphs=root / "Emma_-_Jane_Austen_Paragraph.xlsx")
    assert [b.book_id for b in bench.books] == ["Emma_-_Jane_Austen"]
    book = bench.books[0]
    assert len(bench.questions) == 30 and all(q.answers for q in bench.questions)
    assert len(book.sections) == 2287
    assert book.text.startswith("VOLUME I. CHAPTER I\n\nEmma Woodhouse")
    assert book.text.count("CHAPTER ") == 55
    # 25 evidence strings occur verbatim, 4 only after normalising quotes/dashes/spaces, and one
    # leaves out a speech tag (a name and a pause) from the middle, so no normalisation finds it
    assert bench.meta["evidence_match"] == {"exact": 25, "normalized": 4, "missing": 1}
    assert bench.check_spans() == []
    for q in bench.questions:
        ev = q.evidence[0].text
        if q.meta["evidence_match"] == "missing":
            assert not q.gold_spans and "cried Emma" not in ev
            continue
        s, e = q.gold_spans[0]
        assert normalize_for_match(book.text[s:e]) == normalize_for_match(ev)
        assert contains_evidence(book.text[max(0, s - 200): e + 200], ev)
