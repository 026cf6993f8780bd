"""Semantic validation of a segmentation against the zero-loss rules, with typed issues.

Rules (paper section 3.1.2, "Validation, Retry, and Fallback"), for a unit of ``n`` sentences
numbered ``1..n``:

* there is at least one segment;
* every main range lies inside ``1..n`` and has ``from_idx <= to_idx``;
* some segment starts at sentence 1 and some segment ends at sentence ``n``;
* every sentence lies in at least one main range (overlaps are allowed);
* every context index lies inside ``1..n`` and is itself covered by some main range.

Besides these *blocking* issues, which make an answer invalid and trigger a retry, three
*cosmetic* ones are reported so that repair can normalise them: segments out of source order,
repeated identical ranges, and context indices that repeat or fall inside their own main range.
A segmentation after :func:`litseg.segmentation.repair.repair_segments` has no issue of either
kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from litseg.segmentation.schema import Segment


class IssueCode(str, Enum):
    # The answer as a whole (raised by the parser).
    PARSE_ERROR = "parse_error"  # no JSON value could be read from the text
    SCHEMA_ERROR = "schema_error"  # JSON read, but it does not fit the answer schema
    SEGMENT_MALFORMED = "segment_malformed"  # one segment entry was unusable and dropped
    BACKEND_ERROR = "backend_error"  # the model call itself failed
    # The segmentation (raised by validate_segments).
    EMPTY = "empty"
    RANGE_OUT_OF_BOUNDS = "range_out_of_bounds"
    FROM_AFTER_TO = "from_after_to"
    FIRST_NOT_ONE = "first_not_one"
    LAST_NOT_N = "last_not_n"
    UNCOVERED = "uncovered"
    CONTEXT_OUT_OF_BOUNDS = "context_out_of_bounds"
    CONTEXT_NOT_COVERED = "context_not_covered"
    # Cosmetic: reported, repaired silently, never a reason to ask again.
    OUT_OF_ORDER = "out_of_order"
    DUPLICATE_RANGE = "duplicate_range"
    CONTEXT_REDUNDANT = "context_redundant"

    @property
    def blocking(self) -> bool:
        return self not in _COSMETIC


_COSMETIC = frozenset({IssueCode.OUT_OF_ORDER, IssueCode.DUPLICATE_RANGE, IssueCode.CONTEXT_REDUNDANT})


@dataclass(frozen=True, slots=True)
class ValidationIssue:
    """One problem found in an answer.

    ``segment`` is the 0-based position of the offending segment in the answer's list (None for
    answer-wide issues); ``indices`` are the sentence indices concerned (for ``UNCOVERED`` the
    whole gap).
    """

    code: IssueCode
    message: str
    segment: int | None = None
    indices: tuple[int, ...] = field(default_factory=tuple)

    @property
    def blocking(self) -> bool:
        return self.code.blocking

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code.value, "message": self.message, "segment": self.segment,
                "indices": list(self.indices)}


def blocking_issues(issues: Iterable[ValidationIssue]) -> list[ValidationIssue]:
    return [i for i in issues if i.blocking]


def is_valid(segments: Sequence[Segment], n: int) -> bool:
    """True when the segmentation has no blocking issue."""
    return not blocking_issues(validate_segments(segments, n))


def runs(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive integers, e.g. ``[1,2,3,7,8] -> [(1,3),(7,8)]``."""
    out: list[tuple[int, int]] = []
    for i in sorted(set(indices)):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def format_runs(indices: Iterable[int]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs(indices))


def covered_indices(segments: Sequence[Segment], n: int) -> set[int]:
    """Sentences inside some well-formed main range (clipped to ``1..n``)."""
    covered: set[int] = set()
    for s in segments:
        if s.from_idx <= s.to_idx:
            covered.update(range(max(1, s.from_idx), min(n, s.to_idx) + 1))
    return covered


def validate_segments(segments: Sequence[Segment], n: int) -> list[ValidationIssue]:
    """All issues of ``segments`` for a unit of ``n`` sentences, blocking ones first."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    issues: list[ValidationIssue] = []
    cosmetic: list[ValidationIssue] = []
    if not segments:
        if n > 0:
            issues.append(ValidationIssue(IssueCode.EMPTY, f"no segments; sentences 1-{n} must be covered"))
        return issues

    for pos, s in enumerate(segments):
        if s.from_idx > s.to_idx:
            issues.append(ValidationIssue(
                IssueCode.FROM_AFTER_TO,
                f"segment {pos + 1}: from_idx {s.from_idx} is after to_idx {s.to_idx}",
                pos, (s.from_idx, s.to_idx)))
        bad = [i for i in (s.from_idx, s.to_idx) if not 1 <= i <= n]
        if bad:
            issues.append(ValidationIssue(
                IssueCode.RANGE_OUT_OF_BOUNDS,
                f"segment {pos + 1}: range {s.from_idx}-{s.to_idx} is outside 1-{n}",
                pos, (s.from_idx, s.to_idx)))

    if not any(s.from_idx == 1 for s in segments):
        first = min(s.from_idx for s in segments)
        issues.append(ValidationIssue(
            IssueCode.FIRST_NOT_ONE, f"no segment starts at sentence 1 (earliest start is {first})",
            None, (first,)))
    if not any(s.to_idx == n for s in segments):
        last = max(s.to_idx for s in segments)
        issues.append(ValidationIssue(
            IssueCode.LAST_NOT_N, f"no segment ends at sentence {n} (latest end is {last})",
            None, (last,)))

    covered = covered_indices(segments, n)
    for a, b in runs(set(range(1, n + 1)) - covered):
        where = f"sentence {a}" if a == b else f"sentences {a}-{b}"
        issues.append(ValidationIssue(
            IssueCode.UNCOVERED, f"{where} not inside any segment's from_idx-to_idx range",
            None, tuple(range(a, b + 1))))

    seen_ranges: dict[tuple[int, int], int] = {}
    for pos, s in enumerate(segments):
        outside = sorted({c for c in s.context_idx if not 1 <= c <= n})
        if outside:
            issues.append(ValidationIssue(
                IssueCode.CONTEXT_OUT_OF_BOUNDS,
                f"segment {pos + 1}: context_idx {format_runs(outside)} outside 1-{n}",
                pos, tuple(outside)))
        orphans = sorted({c for c in s.context_idx if 1 <= c <= n and c not in covered})
        if orphans:
            issues.append(ValidationIssue(
                IssueCode.CONTEXT_NOT_COVERED,
                f"segment {pos + 1}: context_idx {format_runs(orphans)} not inside any segment's range",
                pos, tuple(orphans)))
        inside = {c for c in s.context_idx if s.from_idx <= c <= s.to_idx}
        repeated = {c for c in s.context_idx if s.context_idx.count(c) > 1}
        if inside or repeated:
            cosmetic.append(ValidationIssue(
                IssueCode.CONTEXT_REDUNDANT,
                f"segment {pos + 1}: context_idx {format_runs(inside | repeated)} repeated or inside its own range",
                pos, tuple(sorted(inside | repeated))))
        if s.span in seen_ranges:
            cosmetic.append(ValidationIssue(
                IssueCode.DUPLICATE_RANGE,
                f"segment {pos + 1} repeats the range {s.from_idx}-{s.to_idx} of segment {seen_ranges[s.span] + 1}",
                pos, s.span))
        else:
            seen_ranges[s.span] = pos
        if pos and s.from_idx < segments[pos - 1].from_idx:
            cosmetic.append(ValidationIssue(
                IssueCode.OUT_OF_ORDER,
                f"segment {pos + 1} starts at {s.from_idx}, before segment {pos} ({segments[pos - 1].from_idx})",
                pos, (segments[pos - 1].from_idx, s.from_idx)))
    return issues + cosmetic


_MAX_FEEDBACK_LINES = 8


def feedback_message(issues: Sequence[ValidationIssue], n: int) -> str:
    """The correction request sent back to the model after an invalid answer.

    Lists the blocking problems (at most a handful, the rest counted) and restates the rules
    briefly. Cosmetic issues are left out: repair handles them.
    """
    problems = blocking_issues(issues) or list(issues)
    if any(i.code in (IssueCode.PARSE_ERROR, IssueCode.SCHEMA_ERROR, IssueCode.BACKEND_ERROR)
           for i in problems) and not any(i.code == IssueCode.SEGMENT_MALFORMED for i in problems):
        head = "Your previous reply could not be used: it was not JSON in the requested format."
    else:
        head = "Your previous segmentation has problems:"
    lines = [f"- {i.message}" for i in problems[:_MAX_FEEDBACK_LINES]]
    if len(problems) > _MAX_FEEDBACK_LINES:
        lines.append(f"- ... and {len(problems) - _MAX_FEEDBACK_LINES} more")
    rules = (
        f"The unit has sentences 1 to {n}. Every sentence must fall inside at least one segment's "
        f"from_idx-to_idx range; the first segment starts at 1, the last ends at {n}, and "
        "from_idx <= to_idx. context_idx may only name sentences that some segment's range "
        "already contains. Reply again with the complete corrected JSON object and nothing else."
    )
    return "\n".join([head, *lines, rules])
