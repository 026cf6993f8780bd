"""Reconstruction of chunk records from segments: spans, layout, context placement, ids."""

from __future__ import annotations

import json

import pytest

from litseg.segmentation.reconstruct import build_chunk, build_chunks, chunk_id
from litseg.segmentation.schema import Segment
from litseg.segmentation.types import Chunk, Document, NamedTokenizer, Sentence, Unit

HEADING = "CHAPTER I\r\n\r\n"
SENTENCES = ["Anna walked in.", "She smiled.", "The door closed!", "\u201cWho?\u201d he asked.",
             "Nobody answered.", "Rain fell on the caf\u00e9 roof."]
SEPARATORS = ["  ", "\r\n", "\n\n", "\t", " \r\n  "]


def make_unit_doc() -> tuple[Document, Unit]:
    text = HEADING
    spans = []
    for k, sentence in enumerate(SENTENCES):
        spans.append((len(text), len(text) + len(sentence)))
        text += sentence + (SEPARATORS[k] if k < len(SEPARATORS) else "")
    text += "\r\nTHE END"
    doc = Document(book_id="bk", text=text, title="Book")
    unit = Unit(book_id="bk", unit_id="u01", index=0, start=len(HEADING), end=spans[-1][1],
                title="CHAPTER I", kind="chapter", path=["PART ONE", "CHAPTER I"],
                sentences=[Sentence(i + 1, s, e) for i, (s, e) in enumerate(spans)])
    doc.units.append(unit)
    return doc, unit


def test_main_text_is_the_exact_source_span() -> None:
    doc, unit = make_unit_doc()
    chunks = build_chunks(doc, unit, [Segment(subtitle="Arrival", from_idx=1, to_idx=3),
                                      Segment(subtitle="Question", from_idx=3, to_idx=6)], method="litseg")
    first, second = chunks
    assert first.main_text == "Anna walked in.  She smiled.\r\nThe door closed!"
    assert first.main_spans == [(unit.sentences[0].start, unit.sentences[2].end)]
    assert doc.text[first.start:first.end] == first.main_text
    assert second.main_ids == [3, 4, 5, 6] and (second.from_idx, second.to_idx) == (3, 6)
    assert second.main_text.endswith("Rain fell on the caf\u00e9 roof.")
    assert "\t" in second.main_text and "\r\n" in second.main_text


def test_text_layout_with_context_on_both_sides() -> None:
    doc, unit = make_unit_doc()
    [chunk] = build_chunks(doc, unit, [Segment(subtitle=" The question ", from_idx=4, to_idx=4,
                                               context_idx=[6, 1, 4, 2, 1])], method="litseg")
    assert chunk.context_ids == [1, 2, 6]  # deduplicated, source order, main sentence left out
    assert chunk.context_before == "Anna walked in. She smiled."
    assert chunk.context_after == "Rain fell on the caf\u00e9 roof."
    assert chunk.subtitle == "The question"
    assert chunk.text == ("The question\n\nAnna walked in. She smiled.\n\n\u201cWho?\u201d he asked."
                          "\n\nRain fell on the caf\u00e9 roof.")
    assert chunk.context_spans == [(s.start, s.end) for s in (unit.sentences[0], unit.sentences[1], unit.sentences[5])]
    for s, e in chunk.context_spans:
        assert doc.text[s:e] in chunk.text


@pytest.mark.parametrize("position,before,after", [
    ("auto", "She smiled.", "Rain fell on the caf\u00e9 roof."),
    ("before", "She smiled. Rain fell on the caf\u00e9 roof.", ""),
    ("after", "", "She smiled. Rain fell on the caf\u00e9 roof."),
])
def test_context_position(position: str, before: str, after: str) -> None:
    doc, unit = make_unit_doc()
    [chunk] = build_chunks(doc, unit, [Segment(from_idx=3, to_idx=4, context_idx=[2, 6])], method="m",
                           context_position=position)  # type: ignore[arg-type]
    assert (chunk.context_before, chunk.context_after) == (before, after)
    parts = [p for p in (before, chunk.main_text, after) if p]
    assert chunk.text == "\n\n".join(parts)


def test_no_subtitle_no_context_means_text_is_main_text() -> None:
    doc, unit = make_unit_doc()
    [chunk] = build_chunks(doc, unit, [Segment(from_idx=1, to_idx=6)], method="m")
    assert chunk.text == chunk.main_text == doc.text[unit.start:unit.end]
    assert chunk.context_ids == [] and chunk.context_spans == []


def test_record_fields_and_ids() -> None:
    doc, unit = make_unit_doc()
    chunks = build_chunks(doc, unit, [Segment(from_idx=1, to_idx=2), Segment(from_idx=3, to_idx=6)],
                          method="litseg_lite", tokenizer=NamedTokenizer("test-tok", lambda t: 1000 + len(t)))
    assert [c.chunk_id for c in chunks] == ["bk:u01:001", "bk:u01:002"]
    assert chunk_id("b", "u", 12) == "b:u:012"
    c = chunks[0]
    assert (c.book_id, c.unit_id, c.method) == ("bk", "u01", "litseg_lite")
    assert (c.unit_title, c.unit_path, c.unit_kind) == ("CHAPTER I", ["PART ONE", "CHAPTER I"], "chapter")
    assert (c.n_tokens, c.tokenizer, c.n_words) == (1000 + len(c.text), "test-tok", len(c.text.split()))
    assert c.unit_path is not unit.path  # a copy, not shared
    assert Chunk.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_without_a_tokenizer_a_chunk_is_sized_in_words_only() -> None:
    doc, unit = make_unit_doc()
    [chunk] = build_chunks(doc, unit, [Segment(subtitle="Two words", from_idx=1, to_idx=1)], method="m")
    assert (chunk.n_words, chunk.n_tokens, chunk.tokenizer) == (len(chunk.text.split()), None, None)
    assert chunk.n_words == 2 + len(doc.sentence_text(unit.sentences[0]).split())


def test_a_chunk_record_from_before_n_words_reads_with_its_words_counted() -> None:
    """Old records carry ``n_tokens`` only, words for some chunkers and tokens for others: the
    number is dropped rather than shown in the wrong unit, and the words are counted again."""
    doc, unit = make_unit_doc()
    [chunk] = build_chunks(doc, unit, [Segment(from_idx=1, to_idx=2)], method="m")
    old = {k: v for k, v in chunk.to_dict().items() if k not in ("n_words", "tokenizer")} | {"n_tokens": 7}
    read = Chunk.from_dict(old)
    assert (read.n_words, read.n_tokens, read.tokenizer) == (len(chunk.text.split()), None, None)


@pytest.mark.parametrize("segment,match", [
    (Segment(from_idx=0, to_idx=2), "range 0-2"),
    (Segment(from_idx=3, to_idx=7), "range 3-7"),
    (Segment(from_idx=4, to_idx=2), "range 4-2"),
    (Segment(from_idx=1, to_idx=2, context_idx=[9]), "context index 9"),
])
def test_invalid_segments_are_refused(segment: Segment, match: str) -> None:
    doc, unit = make_unit_doc()
    with pytest.raises(ValueError, match=match):
        build_chunks(doc, unit, [segment], method="m")
    with pytest.raises(ValueError, match="context_position"):
        build_chunks(doc, unit, [Segment(from_idx=1, to_idx=1)], method="m", context_position="middle")  # type: ignore[arg-type]


def test_build_chunk_with_a_character_window() -> None:
    doc, unit = make_unit_doc()
    s2, s4 = unit.sentences[1], unit.sentences[3]
    window = (s2.start + 4, s4.start + 3)  # starts inside sentence 2, ends inside sentence 4
    chunk = build_chunk(doc, unit, method="fixed_tokens", chunk_no=7, from_idx=0, to_idx=0, main_span=window,
                        context_ids=[1, 3])
    assert chunk.main_text == doc.text[window[0]:window[1]]
    assert chunk.main_spans == [window]
    assert chunk.main_ids == [2, 3, 4] and (chunk.from_idx, chunk.to_idx) == (2, 4)
    assert chunk.context_ids == [1]  # sentence 3 overlaps the window
    assert chunk.context_before == "Anna walked in."
    assert chunk.chunk_id == "bk:u01:007"


def test_build_chunk_window_without_sentences_keeps_given_indices() -> None:
    doc, unit = make_unit_doc()
    gap = (unit.sentences[2].end, unit.sentences[3].start)  # the blank lines between two sentences
    chunk = build_chunk(doc, unit, method="chars", chunk_no=1, from_idx=3, to_idx=3, main_span=gap)
    assert chunk.main_ids == [] and (chunk.from_idx, chunk.to_idx) == (3, 3)
    assert chunk.main_text == "\n\n"


@pytest.mark.parametrize("span", [(5, 5), (-1, 4), (0, 10_000)])
def test_build_chunk_refuses_bad_windows(span: tuple[int, int]) -> None:
    doc, unit = make_unit_doc()
    with pytest.raises(ValueError, match="main_span"):
        build_chunk(doc, unit, method="m", chunk_no=1, from_idx=1, to_idx=1, main_span=span)


def test_no_segments_no_chunks() -> None:
    doc, unit = make_unit_doc()
    assert build_chunks(doc, unit, [], method="m") == []
