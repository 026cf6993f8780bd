"""Semantic validation: one table row per rule, plus the feedback text."""

from __future__ import annotations

import pytest

from litseg.segmentation.schema import Segment
from litseg.segmentation.validation import (
    IssueCode,
    ValidationIssue,
    blocking_issues,
    feedback_message,
    format_runs,
    is_valid,
    runs,
    validate_segments,
)


def segs(*specs: tuple) -> list[Segment]:
    """``(from, to)`` or ``(from, to, [context])`` tuples to segments."""
    return [Segment(subtitle=f"s{k}", from_idx=s[0], to_idx=s[1], context_idx=list(s[2]) if len(s) > 2 else [])
            for k, s in enumerate(specs)]


C = IssueCode

# (description, segments, n, expected (code, segment position, indices) triples)
CASES = [
    ("clean partition", segs((1, 3), (4, 6)), 6, []),
    ("overlap is allowed", segs((1, 4), (3, 6)), 6, []),
    ("nested range is allowed", segs((1, 6), (2, 3)), 6, []),
    ("single sentence unit", segs((1, 1)), 1, []),
    ("context elsewhere is fine", segs((1, 3, [5]), (4, 6, [1, 2])), 6, []),
    ("empty answer", [], 5, [(C.EMPTY, None, ())]),
    ("gap in the middle", segs((1, 2), (5, 6)), 6, [(C.UNCOVERED, None, (3, 4))]),
    ("two gaps", segs((1, 1), (3, 3), (5, 5)), 5, [(C.UNCOVERED, None, (2,)), (C.UNCOVERED, None, (4,))]),
    ("first not one", segs((2, 6)), 6, [(C.FIRST_NOT_ONE, None, (2,)), (C.UNCOVERED, None, (1,))]),
    ("last not n", segs((1, 4)), 6, [(C.LAST_NOT_N, None, (4,)), (C.UNCOVERED, None, (5, 6))]),
    ("range past the end", segs((1, 7)), 6, [(C.RANGE_OUT_OF_BOUNDS, 0, (1, 7)), (C.LAST_NOT_N, None, (7,))]),
    ("range before the start", segs((0, 6)), 6,
     [(C.RANGE_OUT_OF_BOUNDS, 0, (0, 6)), (C.FIRST_NOT_ONE, None, (0,))]),
    ("swapped range", segs((1, 2), (6, 3)), 6,
     [(C.FROM_AFTER_TO, 1, (6, 3)), (C.LAST_NOT_N, None, (3,)), (C.UNCOVERED, None, (3, 4, 5, 6))]),
    ("context out of bounds", segs((1, 6, [0, 7, 9])), 6, [(C.CONTEXT_OUT_OF_BOUNDS, 0, (0, 7, 9))]),
    ("context only in context", segs((1, 3, [5]), (6, 6)), 6,
     [(C.UNCOVERED, None, (4, 5)), (C.CONTEXT_NOT_COVERED, 0, (5,))]),
    ("out of order (cosmetic)", segs((4, 6), (1, 3)), 6, [(C.OUT_OF_ORDER, 1, (4, 1))]),
    ("duplicate range (cosmetic)", segs((1, 3), (1, 3), (4, 6)), 6, [(C.DUPLICATE_RANGE, 1, (1, 3))]),
    ("context inside own range (cosmetic)", segs((1, 3, [2]), (4, 6)), 6, [(C.CONTEXT_REDUNDANT, 0, (2,))]),
    ("context repeated (cosmetic)", segs((1, 3, [5, 5]), (4, 6)), 6, [(C.CONTEXT_REDUNDANT, 0, (5,))]),
]


@pytest.mark.parametrize("what,segments,n,expected", CASES, ids=[c[0] for c in CASES])
def test_validation_table(what: str, segments: list[Segment], n: int, expected: list[tuple]) -> None:
    issues = validate_segments(segments, n)
    assert [(i.code, i.segment, i.indices) for i in issues] == expected
    assert all(i.message for i in issues)
    assert is_valid(segments, n) == (not [e for e in expected if e[0].blocking])


def test_blocking_issues_come_first() -> None:
    issues = validate_segments(segs((4, 6), (1, 2)), 6)
    codes = [i.code for i in issues]
    assert codes == [C.UNCOVERED, C.OUT_OF_ORDER]
    assert [i.blocking for i in issues] == [True, False]
    assert blocking_issues(issues) == issues[:1]


def test_every_code_has_a_severity() -> None:
    cosmetic = {c for c in IssueCode if not c.blocking}
    assert cosmetic == {C.OUT_OF_ORDER, C.DUPLICATE_RANGE, C.CONTEXT_REDUNDANT}


def test_zero_sentences() -> None:
    assert validate_segments([], 0) == []
    assert [i.code for i in validate_segments(segs((1, 1)), 0)][:1] == [C.RANGE_OUT_OF_BOUNDS]
    with pytest.raises(ValueError):
        validate_segments([], -1)


def test_issue_to_dict() -> None:
    issue = validate_segments(segs((1, 2)), 4)[-1]
    assert issue.to_dict() == {"code": "uncovered", "message": issue.message, "segment": None, "indices": [3, 4]}


def test_runs_and_format() -> None:
    assert runs([8, 1, 2, 3, 7, 3]) == [(1, 3), (7, 8)]
    assert format_runs([5, 1, 2, 3]) == "1-3, 5"
    assert runs([]) == []


def test_feedback_lists_problems_and_rules() -> None:
    issues = validate_segments(segs((2, 3), (6, 5), (4, 4, [9])), 8)
    text = feedback_message(issues, 8)
    assert text.startswith("Your previous segmentation has problems:")
    assert "no segment starts at sentence 1" in text
    assert "from_idx 6 is after to_idx 5" in text
    assert "context_idx 9 outside 1-8" in text
    assert "sentences 1 to 8" in text and "last ends at 8" in text
    assert "out_of_order" not in text


def test_feedback_is_capped() -> None:
    # Twenty separate gaps: the message names a few and counts the rest.
    issues = validate_segments(segs(*[(k, k) for k in range(1, 41, 2)]), 40)
    text = feedback_message(issues, 40)
    assert "... and" in text and "more" in text
    assert len(text.splitlines()) <= 11


def test_feedback_for_unreadable_reply() -> None:
    issue = ValidationIssue(IssueCode.PARSE_ERROR, "no JSON object found in the reply")
    text = feedback_message([issue], 3)
    assert text.startswith("Your previous reply could not be used")
    assert "no JSON object found" in text
