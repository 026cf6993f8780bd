"""The preprocessing pipeline: word cap, unit ids, sentence indices, and tiling properties."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litseg.testing.configs import preprocess_config
from litseg.segmentation.preprocess import index_sentences, load_documents, prepare_document
from litseg.segmentation.types import Document, Unit
from litseg.segmentation.units import count_words, find_units, split_by_cap
from tests.conftest import shared_data_dir

SENT = "The keeper climbed the tower and counted every step aloud."  # 10 words


def paragraph(n_sentences: int) -> str:
    return " ".join([SENT] * n_sentences)


def check_document(doc: Document, max_words: int | None = None,
                   max_sentence_words: int | None = None) -> None:
    """The invariants every prepared document keeps (matter units lie before or after the body,
    the narrative units tile it)."""
    text = doc.text
    assert 0 <= doc.body_start <= doc.body_end <= len(text)
    owner = [0] * len(text)
    prev_end = 0
    for i, u in enumerate(doc.units):
        assert u.index == i
        if u.matter:
            assert u.end <= doc.body_start or u.start >= doc.body_end
        else:
            assert doc.body_start <= u.start < u.end <= doc.body_end
        assert u.start >= prev_end  # sorted, disjoint
        prev_end = u.end
        assert not text[u.start].isspace() and not text[u.end - 1].isspace()
        for k in range(u.start, u.end):
            owner[k] += 1
        if max_words is not None:
            assert count_words(text, u.start, u.end) <= max_words
        assert [s.idx for s in u.sentences] == list(range(1, len(u.sentences) + 1))
        last = u.start
        covered = 0
        for s in u.sentences:
            assert u.start <= s.start < s.end <= u.end and s.start >= last
            last = s.end
            piece = text[s.start:s.end]
            assert piece and piece == piece.strip()
            covered += sum(not c.isspace() for c in piece)
            if max_sentence_words is not None:
                assert len(piece.split()) <= max_sentence_words
        # sentences cover every non-whitespace character of their unit
        assert covered == sum(not c.isspace() for c in text[u.start:u.end])
    for k in range(doc.body_start, doc.body_end):
        if not text[k].isspace():
            assert owner[k] == 1, (k, text[max(0, k - 20):k + 20])
    ids = [u.unit_id for u in doc.units]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


# ----------------------------------------------------------------------------- cap splitting

def test_cap_split_at_paragraphs_with_part_ids() -> None:
    text = "CHAPTER I\n\n" + "\n\n".join(paragraph(3) for _ in range(5)) + \
        "\n\nCHAPTER II\n\n" + paragraph(2) + "\n"
    doc = prepare_document(Document(book_id="b", text=text), max_words=70)
    assert [(u.unit_id, u.part, u.title) for u in doc.units] == [
        ("0001-01", (1, 3), "CHAPTER I"), ("0001-02", (2, 3), "CHAPTER I"),
        ("0001-03", (3, 3), "CHAPTER I"), ("0002", None, "CHAPTER II")]
    # greedy packing: the heading and two 30-word paragraphs fit under 70 words
    assert count_words(text, doc.units[0].start, doc.units[0].end) == 62
    assert all(u.start == text.index(paragraph(3), u.start) for u in doc.units[1:3])
    check_document(doc, max_words=70)


@pytest.mark.parametrize("nl", ["\n", "\r\n", "\r"])
def test_cap_split_cuts_only_at_blank_lines_whatever_the_line_ends(nl: str) -> None:
    wrapped = nl.join([SENT] * 3)  # a 30-word paragraph hard-wrapped over three lines
    text = (nl * 2).join([wrapped] * 4)
    spans = split_by_cap(text, 0, len(text), 65)
    assert [text[s:e] for s, e in spans] == [wrapped + nl * 2 + wrapped] * 2


def test_cap_split_falls_back_to_sentences_lines_and_words() -> None:
    one_paragraph = paragraph(12)  # 120 words, no blank line
    spans = split_by_cap(one_paragraph, 0, len(one_paragraph), 35)
    assert [count_words(one_paragraph, s, e) for s, e in spans] == [30, 30, 30, 30]
    assert all(one_paragraph[e - 1] == "." for _, e in spans)

    verse = "\n".join(["and the waves came rolling in over the sand"] * 6)  # 9 words a line
    spans = split_by_cap(verse, 0, len(verse), 20)
    assert all(count_words(verse, s, e) <= 20 for s, e in spans)
    assert all(verse[e - 1] == "d" for _, e in spans)  # cut at line ends

    run_on = " ".join(["word"] * 95)
    spans = split_by_cap(run_on, 0, len(run_on), 30)
    assert [count_words(run_on, s, e) for s, e in spans] == [30, 30, 30, 5]
    assert "".join(run_on[s:e] for s, e in spans).replace(" ", "") == run_on.replace(" ", "")


def test_split_by_cap_whitespace_only_and_short() -> None:
    assert split_by_cap("   \n\n ", 0, 6, 5) == []
    assert split_by_cap("  two words  ", 0, 13, 5) == [(2, 11)]


def test_invalid_max_words() -> None:
    with pytest.raises(ValueError):
        find_units(Document(book_id="b", text="x"), max_words=0, keep_front_matter=False, index_matter=True)


# ----------------------------------------------------------------------------- sentences

def test_sentences_are_indexed_per_unit_with_offsets() -> None:
    text = "CHAPTER I\r\n\r\nIt was late. The tide turned!\r\nShe ran.\r\n\r\nCHAPTER II\r\n\r\nMorning came, and the gulls rose over the harbour.\r\n"
    doc = prepare_document(Document(book_id="b", text=text))
    assert [doc.text[s.start:s.end] for s in doc.units[0].sentences][-3:] == [
        "It was late.", "The tide turned!", "She ran."]
    assert doc.units[1].sentences[0].idx == 1
    check_document(doc)


def test_overlong_sentence_is_capped() -> None:
    text = "CHAPTER I\n\n" + " ".join(["on and on"] * 100) + ".\n"
    doc = prepare_document(Document(book_id="b", text=text), preprocess_config(max_sentence_words=40))
    assert max(len(doc.text[s.start:s.end].split()) for s in doc.units[0].sentences) <= 40
    check_document(doc, max_sentence_words=40)


def test_sentence_cap_kept_with_a_splitter_that_lacks_max_words(monkeypatch) -> None:
    from litseg.segmentation import sentences

    def plain_split(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
        end = len(text) if end is None else end
        s, e = start, end
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        return [(s, e)] if e > s else []

    monkeypatch.setattr(sentences, "split_spans", plain_split)
    text = "\n".join(["one two three four five"] * 5)
    unit = Unit(book_id="b", unit_id="0001", index=0, start=0, end=len(text))
    got = index_sentences(text, unit, max_sentence_words=10)
    assert [text[s.start:s.end] for s in got] == ["one two three four five\none two three four five",
                                                  "one two three four five\none two three four five",
                                                  "one two three four five"]


def test_index_sentences_on_a_bare_unit() -> None:
    text = "One. Two three. Four five six."
    unit = Unit(book_id="b", unit_id="0001", index=0, start=0, end=len(text))
    assert [(s.idx, text[s.start:s.end]) for s in index_sentences(text, unit, max_sentence_words=120)] == [
        (1, "One."), (2, "Two three."), (3, "Four five six.")]


# ----------------------------------------------------------------------------- pipeline

def test_prepare_document_from_path_with_gutenberg_frame(tmp_path: Path) -> None:
    text = ("Title: Tides\r\nAuthor: A. Quill\r\n\r\n"
            "*** START OF THE PROJECT GUTENBERG EBOOK TIDES ***\r\n\r\nTIDES\r\n\r\n"
            "CONTENTS\r\n\r\nCHAPTER I. Ebb\r\n\r\nCHAPTER II. Flow\r\n\r\n\r\n"
            "CHAPTER I. Ebb\r\n\r\n" + paragraph(4) + "\r\n\r\nCHAPTER II. Flow\r\n\r\n" + paragraph(3)
            + "\r\n\r\n*** END OF THE PROJECT GUTENBERG EBOOK TIDES ***\r\nLicence.\r\n")
    p = tmp_path / "tides.txt"
    p.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    doc = prepare_document(p, book_id="tides")
    assert doc.text == text and (doc.title, doc.author, doc.book_id) == ("Tides", "A. Quill", "tides")
    assert [u.title for u in doc.units] == ["CHAPTER I. Ebb", "CHAPTER II. Flow"]
    assert doc.units[0].start == text.index("CHAPTER I. Ebb\r\n\r\nThe")
    assert all(u.book_id == "tides" for u in doc.units)
    check_document(doc)


def test_prepare_document_updates_a_document_in_place() -> None:
    doc = Document(book_id="b", text="Just one short paragraph of text.\n")
    out = prepare_document(doc, book_id="renamed")
    assert out is doc and doc.book_id == "renamed" and len(doc.units) == 1
    assert doc.units[0].kind == "section" and doc.units[0].sentences


def test_html_and_epub_books_through_the_pipeline(tmp_path: Path) -> None:
    from tests.segmentation.test_reading import make_epub

    html = ("<html><head><title>Tides</title></head><body>"
            "<p>*** START OF THE PROJECT GUTENBERG EBOOK TIDES ***</p><h1>TIDES</h1>"
            "<h2>CONTENTS</h2><p>CHAPTER I. Ebb<br/>CHAPTER II. Flow</p>"
            f"<h2>CHAPTER I. Ebb</h2><p>{paragraph(3)}</p><p>{paragraph(2)}</p>"
            f"<h2>CHAPTER II. Flow</h2><p>{paragraph(2)}</p>"
            "<p>*** END OF THE PROJECT GUTENBERG EBOOK TIDES ***</p><p>Licence.</p></body></html>")
    (tmp_path / "tides.html").write_text(html, encoding="utf-8")
    make_epub(tmp_path / "keeper.epub")
    docs = {d.book_id: d for d in load_documents(tmp_path, max_words=2000)}
    assert [u.title for u in docs["tides"].units] == ["CHAPTER I. Ebb", "CHAPTER II. Flow"]
    assert [(u.kind, u.title) for u in docs["keeper"].units] == [("chapter", "Chapter 1"),
                                                                ("chapter", "Chapter 2")]
    for d in docs.values():
        check_document(d)


# ----------------------------------------------------------------------------- properties

_words = st.sampled_from(["tide", "keeper", "Ship", "fog", "the", "and", "lamp", "Harbour",
                          "said", "night", "é", "—", "I", "“Yes”", "1820"])
_ends = st.sampled_from([".", "!", "?", "", ",", "...", ".\u201d"])
_newline = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def sentence(draw) -> str:
    return " ".join(draw(st.lists(_words, min_size=1, max_size=14))) + draw(_ends)


@st.composite
def paragraph_text(draw) -> str:
    sents = draw(st.lists(sentence(), min_size=1, max_size=6))
    nl = draw(_newline)
    wrap = draw(st.booleans())
    return (nl if wrap else " ").join(sents)


_headings = st.sampled_from([
    "CHAPTER I", "Chapter 2", "CHAPTER III. THE END", "BOOK ONE", "PART II", "VOLUME I",
    "ACT I", "SCENE II. A room.", "XIV", "1", "I.", "Fit the Ninth", "STAVE I: THE GHOST",
    "CONTENTS", "PREFACE", "EPILOGUE", "## ACT II", "### SCENE I", "# Title", "APPENDIX",
    "*** START OF THE PROJECT GUTENBERG EBOOK X ***", "*** END OF THE PROJECT GUTENBERG EBOOK X ***",
    "THE SILVER GULL", "Harbour: Canto I", "HARBOUR",
])


@st.composite
def book_text(draw) -> str:
    pieces = draw(st.lists(st.one_of(_headings, paragraph_text()), min_size=0, max_size=25))
    nl = draw(_newline)
    out = []
    for p in pieces:
        out.append(p)
        out.append(nl * draw(st.integers(min_value=1, max_value=5)))
    lead = draw(st.sampled_from(["", "\ufeff", "  ", nl]))
    return lead + "".join(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=book_text(), max_words=st.integers(min_value=1, max_value=60),
       max_sentence_words=st.integers(min_value=1, max_value=30),
       keep_front=st.booleans())
def test_units_tile_the_body_for_generated_books(text: str, max_words: int,
                                                 max_sentence_words: int, keep_front: bool) -> None:
    doc = Document(book_id="h", text=text)
    prepare_document(doc, preprocess_config(max_sentence_words=max_sentence_words, keep_front_matter=keep_front),
                     max_words=max_words)
    check_document(doc, max_words=max_words, max_sentence_words=max_sentence_words)
    again = [(u.start, u.end, u.unit_id) for u in find_units(doc, max_words=max_words,
                                                               keep_front_matter=keep_front, index_matter=True)]
    assert again == [(u.start, u.end, u.unit_id) for u in doc.units]


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400),
       max_words=st.integers(min_value=1, max_value=20))
def test_units_tile_the_body_for_arbitrary_text(text: str, max_words: int) -> None:
    doc = prepare_document(Document(book_id="h", text=text), preprocess_config(max_sentence_words=10),
                           max_words=max_words)
    check_document(doc, max_words=max_words, max_sentence_words=10)


# ----------------------------------------------------------------------------- shared texts

@pytest.mark.shared_data
def test_longest_novel_prepares_under_cap() -> None:
    path = shared_data_dir() / "texts" / "novel" / "2701_Moby_Dick_or_The_Whale.txt"
    doc = prepare_document(path, preprocess_config(max_sentence_words=120), max_words=2000)
    # the first chapter's heading as the book prints it (its last "CHAPTER 1." line: the first is the contents')
    heading = [line.strip() for line in doc.text.splitlines() if line.startswith("CHAPTER 1.")][-1]
    narrative = [u for u in doc.units if not u.matter]
    assert narrative[0].title == heading and narrative[-1].kind == "epilogue"
    assert len({u.unit_id.split("-")[0] for u in narrative}) == 136
    # the etymology and the extracts before the story stay retrievable, as matter units
    assert {u.matter for u in doc.units if u.matter} == {"extracts"} and doc.units[0].matter
    check_document(doc, max_words=2000, max_sentence_words=120)
