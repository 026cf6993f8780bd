"""Matter readers ask about (introductions, prefaces, notes ...) is chunked as units flagged
``matter``; title pages, contents lists, credits, licence text and adverts are in no unit and so
in no chunk, whatever the settings (invented texts)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from litseg.chunkers import build_chunker
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.types import NEVER_INDEXED, Chunk, Document
from litseg.segmentation.units import find_units
from tests.segmentation.test_structure import _PIECES, PG_FOOT, PG_HEAD, book, covered_once, prose

BOOK = PG_HEAD + book(
    "HARBOUR TALES", "By A. Keeper", "CONTENTS", "CHAPTER I. The Tower\nCHAPTER II. The Fog",
    "INTRODUCTION", prose(220, 1), "PREFACE", prose(90, 2), "CHAPTER I. The Tower", prose(300, 3),
    "CHAPTER II. The Fog", prose(250, 4), "THE END", "NOTES", prose(140, 5),
    "BY THE SAME AUTHOR", "Gulls and Lanterns, cloth, 3s. 6d.\nThe Keeper's Net, cloth, 5s.") + PG_FOOT


def _never_indexed_spans(text: str) -> list[tuple[int, int, str]]:
    """Every span of matter that may never be in a unit (found with no matter indexed)."""
    doc = Document(book_id="m", text=text)
    find_units(doc, max_words=10**6, index_matter=False, keep_front_matter=False)
    return [(m.start, m.end, m.reason) for m in doc.matter if m.reason in NEVER_INDEXED]


def _overlaps(spans, units) -> list:
    return [(s, e, r, u.unit_id) for s, e, r in spans for u in units if u.start < e and s < u.end]


def test_introductions_prefaces_and_notes_are_units_flagged_as_matter() -> None:
    doc = Document(book_id="t", text=BOOK)
    units = find_units(doc, max_words=10**6, keep_front_matter=False, index_matter=True)
    assert [(u.unit_id, u.kind, u.matter, u.title) for u in units] == [
        ("0000-01", "front_matter", "introduction", "INTRODUCTION"),
        ("0000-02", "front_matter", "preface", "PREFACE"),
        ("0001", "chapter", "", "CHAPTER I. The Tower"),
        ("0002", "chapter", "", "CHAPTER II. The Fog"),
        ("0003", "back_matter", "notes", "NOTES")]
    assert [u.index for u in units] == list(range(5))
    assert [m.reason for m in doc.matter] == ["credits", "title page", "contents", "adverts"]
    assert doc.body_start == units[2].start and doc.body_end == units[3].end
    assert covered_once(doc, units) and _overlaps(_never_indexed_spans(BOOK), units) == []


def test_the_narrative_keeps_its_unit_ids_and_matter_can_be_left_out() -> None:
    with_matter = find_units(Document(book_id="t", text=BOOK), max_words=200, keep_front_matter=False, index_matter=True)
    doc = Document(book_id="t", text=BOOK)
    without = find_units(doc, max_words=200, index_matter=False, keep_front_matter=False)
    assert [(u.unit_id, u.start) for u in with_matter if not u.matter] == [(u.unit_id, u.start) for u in without]
    assert all(not u.matter for u in without)
    assert [m.reason for m in doc.matter] == ["credits", "title page", "contents", "introduction", "preface",
                                              "notes", "adverts"]
    # an overlong introduction is cut under the cap like a chapter, its pieces numbered in order
    front = [u for u in with_matter if u.kind == "front_matter"]
    assert [u.unit_id for u in front] == ["0000-01-01", "0000-01-02", "0000-02"]
    assert [u.unit_id for u in with_matter] == sorted(u.unit_id for u in with_matter)


def test_keep_front_matter_adds_an_epigraph_but_never_the_title_page_or_contents() -> None:
    text = PG_HEAD + book("HARBOUR TALES", "By A. Keeper", "CONTENTS", "CHAPTER I. The Tower\nCHAPTER II. The Fog",
                          prose(40, 7), "PREFACE", prose(90, 2), "CHAPTER I. The Tower", prose(300, 3),
                          "CHAPTER II. The Fog", prose(250, 4)) + PG_FOOT
    doc = Document(book_id="t", text=text)
    plain = [u.matter for u in find_units(doc, max_words=10**6, keep_front_matter=False, index_matter=True)]
    kept = [u.matter for u in find_units(doc, max_words=10**6, keep_front_matter=True, index_matter=True)]
    assert (plain, kept) == (["preface", "", ""], ["front matter", "preface", "", ""])
    assert [m.reason for m in doc.matter] == ["credits", "title page", "contents"]


def test_chunks_carry_the_matter_flag_and_old_records_read_without_it() -> None:
    doc = prepare_document(Document(book_id="t", text=BOOK), max_words=400)
    chunks = [c for r in build_chunker("recursive", chunk_size=600).chunk_units(doc, doc.units) for c in r.chunks]
    assert {c.matter for c in chunks} == {"", "introduction", "preface", "notes"}
    assert all(c.matter == u.matter for u in doc.units for c in chunks if c.unit_id == u.unit_id)
    for c in chunks:
        for s, e, reason in _never_indexed_spans(BOOK):
            assert not any(cs < e and s < ce for cs, ce in c.main_spans + c.context_spans), (reason, c.chunk_id)
    old = chunks[0].to_dict()
    del old["matter"]
    assert Chunk.from_dict(old).matter == ""


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES + ["INTRODUCTION", "NOTES", "DEDICATION", "CHARACTERS"]),
                          st.integers(1, 160).map(prose)), max_size=25),
       st.booleans(), st.booleans())
def test_no_unit_ever_holds_a_title_page_contents_licence_or_advert(pieces, keep, index) -> None:
    text = PG_HEAD + (book(*pieces) if pieces else "") + PG_FOOT
    doc = Document(book_id="p", text=text)
    units = find_units(doc, max_words=150, keep_front_matter=keep, index_matter=index)
    assert _overlaps(_never_indexed_spans(text), units) == []
    assert all(u.matter not in NEVER_INDEXED for u in units)
    assert covered_once(doc, units)
