"""The fallback repair: each rule, the recorded diagnostics, and the postcondition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litseg.segmentation.repair import RepairKind, repair_segments, whole_unit_segments
from litseg.segmentation.schema import Segment
from litseg.segmentation.validation import validate_segments

K = RepairKind


def segs(*specs: tuple) -> list[Segment]:
    return [Segment(subtitle=f"s{k}", from_idx=s[0], to_idx=s[1], context_idx=list(s[2]) if len(s) > 2 else [])
            for k, s in enumerate(specs)]


def shape(segments: list[Segment]) -> list[tuple]:
    return [(s.from_idx, s.to_idx, s.context_idx) for s in segments]


# (id, segments, n, expected result shape, expected repair kinds in order)
CASES = [
    ("valid stays", segs((1, 3, [5]), (4, 6)), 6, [(1, 3, [5]), (4, 6, [])], []),
    ("gap joins the left segment", segs((1, 2), (5, 6)), 6, [(1, 4, []), (5, 6, [])], [K.FILLED_GAP]),
    ("leading gap joins the right segment", segs((3, 4), (5, 6)), 6, [(1, 4, []), (5, 6, [])], [K.FILLED_GAP]),
    ("trailing gap joins the last segment", segs((1, 2), (3, 4)), 6, [(1, 2, []), (3, 6, [])], [K.FILLED_GAP]),
    ("three gaps", segs((2, 2), (4, 4)), 5, [(1, 3, []), (4, 5, [])], [K.FILLED_GAP] * 3),
    ("swapped range", segs((1, 2), (6, 3)), 6, [(1, 2, []), (3, 6, [])], [K.SWAPPED_RANGE]),
    ("clamped range", segs((-2, 3), (4, 9)), 6, [(1, 3, []), (4, 6, [])], [K.CLAMPED_RANGE, K.CLAMPED_RANGE]),
    ("range wholly outside is dropped", segs((1, 6), (7, 9), (-3, 0)), 6, [(1, 6, [])],
     [K.DROPPED_RANGE, K.DROPPED_RANGE]),
    ("duplicates merged, contexts pooled", segs((1, 3, [5]), (1, 3, [6]), (4, 6)), 6,
     [(1, 3, [5, 6]), (4, 6, [])], [K.MERGED_DUPLICATE]),
    ("sorted into source order", segs((4, 6), (1, 3)), 6, [(1, 3, []), (4, 6, [])], [K.SORTED]),
    ("bad context dropped", segs((1, 3, [0, 2, 5, 5, 99]), (4, 6)), 6, [(1, 3, [5]), (4, 6, [])],
     [K.DROPPED_CONTEXT]),
    ("context swallowed by a filled gap", segs((1, 2, [3, 4]), (4, 6)), 6, [(1, 3, [4]), (4, 6, [])],
     [K.FILLED_GAP, K.DROPPED_CONTEXT]),
    ("nothing usable: whole unit", segs((8, 9), (12, 10)), 6, [(1, 6, [])],
     [K.DROPPED_RANGE, K.SWAPPED_RANGE, K.DROPPED_RANGE, K.WHOLE_UNIT]),
    ("empty list: whole unit", [], 4, [(1, 4, [])], [K.WHOLE_UNIT]),
]


@pytest.mark.parametrize("case_id,segments,n,expected,kinds", CASES, ids=[c[0] for c in CASES])
def test_repair_table(case_id: str, segments: list[Segment], n: int, expected: list[tuple],
                      kinds: list[RepairKind]) -> None:
    repaired, repairs = repair_segments(segments, n)
    assert shape(repaired) == expected
    assert [r.kind for r in repairs] == kinds
    assert validate_segments(repaired, n) == []
    assert all(r.message for r in repairs)


def test_gap_goes_to_the_segment_ending_just_before_it() -> None:
    # Both (1, 3) and the nested (2, 3) end before the gap; the later one in source order takes it.
    repaired, repairs = repair_segments(segs((1, 3), (2, 3), (6, 7)), 7)
    assert shape(repaired) == [(1, 3, []), (2, 5, []), (6, 7, [])]
    assert repairs[0].kind is K.FILLED_GAP and repairs[0].segment == 1 and repairs[0].indices == (4, 5)
    assert "preceding segment 2" in repairs[0].message


def test_subtitles_follow_their_segments() -> None:
    repaired, _ = repair_segments(segs((4, 6), (1, 3)), 6)
    assert [s.subtitle for s in repaired] == ["s1", "s0"]
    merged, _ = repair_segments([Segment(from_idx=1, to_idx=2), Segment(subtitle="named", from_idx=1, to_idx=2)], 2)
    assert [s.subtitle for s in merged] == ["named"]


def test_repair_does_not_mutate_its_input() -> None:
    original = segs((6, 3, [9]), (1, 2))
    before = [s.model_dump() for s in original]
    repair_segments(original, 6)
    assert [s.model_dump() for s in original] == before


def test_whole_unit_fallback_uses_the_word_cap() -> None:
    repaired, repairs = repair_segments([], 5, sentence_words=[4, 4, 4, 4, 4], max_words=8)
    assert [s.span for s in repaired] == [(1, 2), (3, 4), (5, 5)]
    assert repairs[-1].kind is K.WHOLE_UNIT and repairs[-1].indices == (1, 3, 5)


@pytest.mark.parametrize("words,cap,expected", [
    ([3, 3, 3], 100, [(1, 3)]),
    ([3, 3, 3], 6, [(1, 2), (3, 3)]),
    ([10, 1, 1, 10, 1], 5, [(1, 1), (2, 3), (4, 4), (5, 5)]),  # an oversized sentence stands alone
    ([0, 0, 5], 5, [(1, 3)]),
    ([], 5, []),
])
def test_whole_unit_segments(words: list[int], cap: int, expected: list[tuple[int, int]]) -> None:
    result = whole_unit_segments(len(words), words, cap, subtitle="Unit")
    assert [s.span for s in result] == expected
    assert all(s.subtitle == "Unit" for s in result)
    if words:
        assert validate_segments(result, len(words)) == []


def test_whole_unit_segments_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="entries"):
        whole_unit_segments(3, [1, 2], 10)
    with pytest.raises(ValueError, match="max_words"):
        whole_unit_segments(2, [1, 2], 0)
    with pytest.raises(ValueError):
        repair_segments([], -1)


def test_zero_sentences_gives_no_segments() -> None:
    repaired, repairs = repair_segments(segs((1, 2)), 0)
    assert repaired == [] and [r.kind for r in repairs] == [K.DROPPED_RANGE]


def test_repairs_serialise() -> None:
    _, repairs = repair_segments(segs((2, 3, [9])), 4)
    assert [r.to_dict()["kind"] for r in repairs] == ["filled_gap", "filled_gap", "dropped_context"]
    assert repairs[0].to_dict()["indices"] == [1]


index = st.integers(min_value=-5, max_value=45)
raw_segment = st.builds(
    lambda a, b, ctx, title: Segment(subtitle=title, from_idx=a, to_idx=b, context_idx=ctx),
    index, index, st.lists(index, max_size=6), st.text(max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(raw_segment, max_size=12), st.integers(min_value=0, max_value=40))
def test_repair_always_yields_a_clean_segmentation(segments: list[Segment], n: int) -> None:
    repaired, repairs = repair_segments(segments, n)
    assert validate_segments(repaired, n) == []
    if n:
        covered = set().union(*(range(s.from_idx, s.to_idx + 1) for s in repaired))
        assert covered == set(range(1, n + 1))
    # Repair is idempotent: a clean segmentation needs no further change.
    again, more = repair_segments(repaired, n)
    assert again == repaired and more == []
    # A segmentation that was already clean is left exactly as it was.
    if validate_segments(segments, n) == []:
        assert repaired == list(segments) and repairs == []
