"""The rule-based format reward: partial credit for a well-formed segmentation (table in
docs/training.md and :data:`DEFAULT_FORMAT_CREDITS`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from litseg.segmentation.parsing import ParseResult, parse_answer
from litseg.segmentation.schema import get_schema
from litseg.segmentation.validation import IssueCode, covered_indices, validate_segments
from litseg.training.rewards.base import REWARDS, RewardContext, RewardFn, column, log_metric, completion_text


#: Credit for each check (they add up to 1.0). See docs/training.md for the table.
DEFAULT_FORMAT_CREDITS: dict[str, float] = {
    "parses": 0.2,  # a JSON value was found in the reply
    "schema": 0.2,  # it fits the prompt's answer schema (half when only lenient reading made it fit)
    "indices": 0.2,  # every from/to/context index lies in 1..n, from <= to, no unusable segment entry
    "coverage": 0.2,  # share of the unit's sentences inside some main range
    "first": 0.1,  # some block starts at sentence 1
    "last": 0.1,  # some block ends at sentence n
}

_INDEX_FAULTS = {IssueCode.RANGE_OUT_OF_BOUNDS, IssueCode.FROM_AFTER_TO, IssueCode.CONTEXT_OUT_OF_BOUNDS,
                 IssueCode.CONTEXT_NOT_COVERED, IssueCode.EMPTY}


@dataclass
class FormatScore:
    total: float
    checks: dict[str, float]
    parsed: ParseResult


def format_score(text: str, n: int, schema: str, *, credits: Mapping[str, float] | None = None,
                 lenient_schema_share: float = 0.5) -> FormatScore:
    """Partial-credit format score of one answer for a unit of ``n`` sentences."""
    credits = dict(DEFAULT_FORMAT_CREDITS if credits is None else credits)
    unknown = set(credits) - set(DEFAULT_FORMAT_CREDITS)
    if unknown:
        raise ValueError(f"format reward: unknown check(s) {sorted(unknown)}; known: {sorted(DEFAULT_FORMAT_CREDITS)}")
    # parse_answer never raises on content (over-long integers included); with n it reads
    # context ranges the way the runner does, inside the unit.
    parsed = parse_answer(text, get_schema(schema), n=n if n > 0 else None)
    checks = dict.fromkeys(DEFAULT_FORMAT_CREDITS, 0.0)
    if not any(e.code is IssueCode.PARSE_ERROR for e in parsed.errors):
        checks["parses"] = 1.0
    if parsed.value is not None:
        checks["schema"] = 1.0 if parsed.strict_ok else lenient_schema_share
        segments = parsed.segments
        issues = validate_segments(segments, n)
        malformed = any(e.code is IssueCode.SEGMENT_MALFORMED for e in parsed.errors)
        swapped = any("swapped" in note for note in parsed.notes)
        if segments and not malformed and not swapped and not any(i.code in _INDEX_FAULTS for i in issues):
            checks["indices"] = 1.0
        if n > 0:
            checks["coverage"] = len(covered_indices(segments, n)) / n
        checks["first"] = float(any(s.from_idx == 1 for s in segments))
        checks["last"] = float(any(s.to_idx == n for s in segments))
    earned = dict.fromkeys(DEFAULT_FORMAT_CREDITS, 0.0) | credits  # a check the table leaves out earns 0
    total = sum(earned[k] * v for k, v in checks.items())
    return FormatScore(total=total, checks=checks, parsed=parsed)


def make_format_reward(credits: Mapping[str, float] | None = None, lenient_schema_share: float = 0.5,
                       name: str = "format") -> RewardFn:
    """The format reward with the given credit table (defaults: :data:`DEFAULT_FORMAT_CREDITS`)."""
    table = dict(DEFAULT_FORMAT_CREDITS if credits is None else credits)
    if any(v < 0 for v in table.values()):
        raise ValueError("format reward credits must be >= 0")

    def format_reward(completions: list[Any], **columns: Any) -> list[float]:
        n_col = column(columns, "n_sentences", len(completions))
        schema_col = column(columns, "schema", len(completions), default="lite")
        scores = [format_score(completion_text(c), int(n), str(s), credits=table,
                               lenient_schema_share=lenient_schema_share)
                  for c, n, s in zip(completions, n_col, schema_col)]
        log_metric(columns, f"{name}/unparsed", sum(sc.parsed.value is None for sc in scores))
        log_metric(columns, f"{name}/strict_ok", sum(sc.parsed.strict_ok for sc in scores) / max(1, len(scores)))
        return [sc.total for sc in scores]

    format_reward.__name__ = name
    return format_reward


@REWARDS.register("format")
def format_factory(name: str, params: Mapping[str, Any], context: RewardContext) -> RewardFn:
    return make_format_reward(name=name, **dict(params))
