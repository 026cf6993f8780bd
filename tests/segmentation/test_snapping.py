"""Cuts move to the nearest paragraph start after decoding (litseg.segmentation.snapping)."""

from hypothesis import given
from hypothesis import strategies as st

from litseg.segmentation.agreement import cuts
from litseg.segmentation.schema import Segment
from litseg.segmentation.snapping import nearest_start, snap_to_paragraphs
from litseg.segmentation.validation import validate_segments


def seg(a, b, subtitle="", context=()):
    return Segment(subtitle=subtitle or f"{a}-{b}", from_idx=a, to_idx=b, context_idx=list(context))


def paragraphs(n, starts):
    return [i == 1 or i in starts for i in range(1, n + 1)]


def test_nearest_start_prefers_the_earlier_on_a_tie():
    assert nearest_start(5, [3, 7]) == 3
    assert nearest_start(6, [3, 7]) == 7
    assert nearest_start(1, [3, 7]) == 3 and nearest_start(9, [3, 7]) == 7


def test_cuts_move_to_paragraph_starts_and_blocks_keep_their_subtitles():
    got, moved = snap_to_paragraphs([seg(1, 4, "Arrival"), seg(5, 8, "Quarrel", [2]), seg(9, 12, "Flight")], 12,
                                    paragraphs(12, {6, 9}))
    assert [(s.from_idx, s.to_idx, s.subtitle) for s in got] == [(1, 5, "Arrival"), (6, 8, "Quarrel"), (9, 12, "Flight")]
    assert got[1].context_idx == [2] and moved == 1


def test_cuts_that_land_on_one_start_merge_and_context_inside_the_new_range_goes():
    got, moved = snap_to_paragraphs([seg(1, 3, "A"), seg(4, 5, "B", [1]), seg(6, 10, "C", [2])], 10,
                                    paragraphs(10, {5}))
    assert [(s.from_idx, s.to_idx) for s in got] == [(1, 4), (5, 10)]
    assert got[0].subtitle == "A" and got[1].subtitle == "C"     # most shared sentences
    assert got[1].context_idx == [1, 2] and moved == 2


def test_a_unit_of_one_paragraph_or_an_answer_already_at_starts_is_unchanged():
    answer = [seg(1, 4), seg(5, 9)]
    assert snap_to_paragraphs(answer, 9, paragraphs(9, set())) == (answer, 0)
    assert snap_to_paragraphs(answer, 9, paragraphs(9, {5, 8})) == (answer, 0)


@given(st.integers(2, 60).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(2, n)), st.sets(st.integers(2, n)))))
def test_snapped_answers_stay_valid_and_cut_only_at_paragraph_starts(case):
    n, answer_cuts, starts = case
    bounds = [1, *sorted(answer_cuts), n + 1]
    answer = [seg(a, b - 1, context=[1] if a > 2 else []) for a, b in zip(bounds, bounds[1:])]
    got, moved = snap_to_paragraphs(answer, n, paragraphs(n, starts))
    assert not [i for i in validate_segments(got, n) if i.blocking]
    assert got[0].from_idx == 1 and got[-1].to_idx == n
    if starts:
        assert set(cuts(got)) <= starts
        assert snap_to_paragraphs(got, n, paragraphs(n, starts)) == (got, 0)   # idempotent
    else:
        assert got == answer and moved == 0
    assert all(not s.from_idx <= c <= s.to_idx for s in got for c in s.context_idx)
