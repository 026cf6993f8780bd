"""Semantic validation of a segmentation against the zero-loss rules, with typed issues.

Rules (paper section 3.1.2, "Validation, Retry, and Fallback"), for a unit of ``n`` sentences
numbered ``1..n``:

* there is at least one segment;
* every main range lies inside ``1..n`` and has ``from_idx <= to_idx``;
* some segment starts at sentence 1 and some segment ends at sentence ``n``;
* every sentence lies in **at least one** main range. Main ranges may overlap: a sentence in
  two ranges appears in two chunks. Overlap is allowed, not an error, and it is counted
  (:func:`overlap_stats`; the runner records it per unit as ``overlap`` in the diagnostics);
* overlap has a limit: the distinct main ranges together hold at most :data:`MAX_SPREAD`
  sentences per sentence of the unit, and so do the context lists (each counted without
  repeats and without indices inside its own range). So the chunks of one unit hold at most
  ``2 * MAX_SPREAD`` times its text, whatever the answer (``spread_limit`` otherwise);
* every context index lies inside ``1..n`` and is itself covered by some main range.

So the zero-loss guarantee is *coverage*, not a partition: every sentence reaches at least one
chunk's main text. It is not "every sentence in exactly one chunk".

Validation is linear in ``n`` plus the size of the answer (coverage by a difference array,
repeated context indices by counting), and the messages it writes are bounded in length
(:data:`MAX_LISTED_RUNS`), so a pathological answer cannot produce a huge correction request.

Besides these *blocking* issues, which make an answer invalid and trigger a retry, three
*cosmetic* ones are reported so that repair can normalise them: segments out of source order,
repeated identical ranges, and context indices that repeat or fall inside their own main range.
A segmentation after :func:`litseg.segmentation.repair.repair_segments` has no issue of either
kind.
"""

from __future__ import annotations

from collections import Counter
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
    SPREAD_LIMIT = "spread_limit"  # main ranges or context repeat the unit's text too often
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


#: Runs of indices written out in one message; further runs are counted.
MAX_LISTED_RUNS = 20
#: Main ranges (and, separately, context lists) may hold at most this many sentences per
#: sentence of the unit: overlap is allowed up to a point, and one answer cannot make the
#: output of a unit quadratic in its size.
MAX_SPREAD = 4


def format_runs(indices: Iterable[int], limit: int = MAX_LISTED_RUNS) -> str:
    found = runs(indices)
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in found[:limit])
    if len(found) > limit:
        text += f" and {len(found) - limit} more"
    return text


def coverage_counts(segments: Sequence[Segment], n: int) -> list[int]:
    """``counts[i]``: how many well-formed main ranges (clipped to ``1..n``) hold sentence ``i``
    (index 0 unused). Linear in ``n`` plus the number of segments."""
    diff = [0] * (n + 2)
    for s in segments:
        a, b = max(1, s.from_idx), min(n, s.to_idx)
        if s.from_idx <= s.to_idx and a <= b:
            diff[a] += 1
            diff[b + 1] -= 1
    counts = [0] * (n + 1)
    running = 0
    for i in range(1, n + 1):
        running += diff[i]
        counts[i] = running
    return counts


def covered_indices(segments: Sequence[Segment], n: int) -> set[int]:
    """Sentences inside some well-formed main range (clipped to ``1..n``)."""
    counts = coverage_counts(segments, n)
    return {i for i in range(1, n + 1) if counts[i]}


def spread(segments: Sequence[Segment], n: int) -> tuple[int, int]:
    """Sentences held by the distinct main ranges (clipped to ``1..n``), and context sentences
    named by them (per distinct range: without repeats, out-of-unit indices, or indices inside
    the range), each summed over the ranges. Compared with :data:`MAX_SPREAD` ``* n``."""
    context: dict[tuple[int, int], set[int]] = {}
    for s in segments:
        extra = context.setdefault(s.span, set())
        extra.update(c for c in s.context_idx if 1 <= c <= n and not s.from_idx <= c <= s.to_idx)
    main = sum(max(0, min(n, b) - max(1, a) + 1) for a, b in context)
    return main, sum(len(v) for v in context.values())


def overlap_stats(segments: Sequence[Segment], n: int) -> dict[str, Any]:
    """How much the main ranges overlap: sentences in two or more ranges, their share of the
    unit, and the most ranges any sentence is in."""
    counts = coverage_counts(segments, n)
    several = sum(1 for c in counts[1:] if c > 1)
    return {"sentences_in_several_ranges": several, "overlap_share": several / n if n else 0.0,
            "max_ranges_per_sentence": max(counts[1:], default=0)}


def validate_segments(segments: Sequence[Segment], n: int) -> list[ValidationIssue]:
    """All issues of ``segments`` for a unit of ``n`` sentences, blocking ones first."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not segments:
        if n > 0:
            return [ValidationIssue(IssueCode.EMPTY, f"no segments; sentences 1-{n} must be covered")]
        return []
    issues = _range_issues(segments, n) + _end_issues(segments, n) + _spread_issues(segments, n)
    covered = covered_indices(segments, n)
    issues += _uncovered_issues(covered, n)
    context, cosmetic = _per_segment_issues(segments, n, covered)
    return issues + context + cosmetic


def _range_issues(segments: Sequence[Segment], n: int) -> list[ValidationIssue]:
    """Main ranges written backwards or reaching outside ``1..n``."""
    issues: list[ValidationIssue] = []
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
    return issues


def _end_issues(segments: Sequence[Segment], n: int) -> list[ValidationIssue]:
    """No segment starting at sentence 1, or none ending at sentence ``n``."""
    issues: list[ValidationIssue] = []
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
    return issues


def _spread_issues(segments: Sequence[Segment], n: int) -> list[ValidationIssue]:
    """Main ranges, or context lists, that repeat the unit's text more than :data:`MAX_SPREAD` times."""
    issues: list[ValidationIssue] = []
    main_total, context_total = spread(segments, n)
    if main_total > MAX_SPREAD * n:
        issues.append(ValidationIssue(
            IssueCode.SPREAD_LIMIT,
            f"the main ranges hold {main_total} sentences for a unit of {n}: they overlap too much "
            f"(at most {MAX_SPREAD} ranges per sentence on average)", None, (main_total,)))
    if context_total > MAX_SPREAD * n:
        issues.append(ValidationIssue(
            IssueCode.SPREAD_LIMIT,
            f"the context_idx lists name {context_total} sentences for a unit of {n}: keep only the "
            "few sentences each block really needs", None, (context_total,)))
    return issues


def _uncovered_issues(covered: set[int], n: int) -> list[ValidationIssue]:
    """One issue per run of sentences that no main range holds."""
    issues: list[ValidationIssue] = []
    for a, b in runs(set(range(1, n + 1)) - covered):
        where = f"sentence {a}" if a == b else f"sentences {a}-{b}"
        issues.append(ValidationIssue(
            IssueCode.UNCOVERED, f"{where} not inside any segment's from_idx-to_idx range",
            None, tuple(range(a, b + 1))))
    return issues


def _per_segment_issues(segments: Sequence[Segment], n: int,
                        covered: set[int]) -> tuple[list[ValidationIssue], list[ValidationIssue]]:
    """Context indices outside the unit or uncovered (blocking), and the cosmetic issues:
    redundant context, repeated ranges, segments out of order."""
    issues: list[ValidationIssue] = []
    cosmetic: list[ValidationIssue] = []
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
        repeated = {c for c, k in Counter(s.context_idx).items() if k > 1}
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
    return issues, cosmetic


_MAX_FEEDBACK_LINES = 8
_MAX_FEEDBACK_LINE_CHARS = 300


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
    lines = [f"- {_clip(i.message)}" for i in problems[:_MAX_FEEDBACK_LINES]]
    if len(problems) > _MAX_FEEDBACK_LINES:
        lines.append(f"- ... and {len(problems) - _MAX_FEEDBACK_LINES} more")
    rules = (
        f"The unit has sentences 1 to {n}. Every sentence must fall inside at least one segment's "
        f"from_idx-to_idx range; the first segment starts at 1, the last ends at {n}, and "
        "from_idx <= to_idx. context_idx may only name sentences that some segment's range "
        "already contains. Reply again with the complete corrected JSON object and nothing else."
    )
    return "\n".join([head, *lines, rules])


def _clip(message: str, limit: int = _MAX_FEEDBACK_LINE_CHARS) -> str:
    return message if len(message) <= limit else message[: limit - 15] + " ... (shortened)"
