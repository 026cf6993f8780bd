"""The validate-retry-fallback loop shared by LitSeg-Lite and stage 3 of the LitSeg teacher.

The loop knows nothing about models: it receives an ``ask`` callable that answers a chat
conversation with a :class:`~litseg.llm.base.Completion`. Each answer is parsed and validated;
an answer with blocking issues is shown back to the model together with a correction request,
up to ``max_retries`` times. The best attempt (least damage, see :func:`damage`) is then
repaired so that the result always covers the unit; when no attempt could be read at all the
unit is split greedily under a word cap. Every try, issue, leniency and repair is recorded in
the diagnostics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.repair import Repair, RepairKind, repair_segments, whole_unit_segments
from litseg.segmentation.schema import Segment, answer_segments
from litseg.segmentation.validation import (
    IssueCode,
    ValidationIssue,
    blocking_issues,
    feedback_message,
    validate_segments,
)

if TYPE_CHECKING:  # only the type: the loop reads a completion's fields and imports no LLM code
    from litseg.llm.base import Completion

Ask = Callable[[list[dict[str, str]]], "Completion"]
Fallback = Literal["none", "repair", "whole_unit"]

CUT_OFF_NOTICE = "Your reply was cut off at the length limit: keep the text fields brief this time."


def damage(issues: Sequence[ValidationIssue], n: int) -> int:
    """How far an attempt is from valid: one per uncovered sentence (``n`` for an empty
    answer), so that a large gap weighs more than a small one, plus one per other blocking
    issue."""
    total = 0
    for issue in blocking_issues(issues):
        if issue.code is IssueCode.UNCOVERED:
            total += len(issue.indices)
        elif issue.code is IssueCode.EMPTY:
            total += n
        else:
            total += 1
    return total


@dataclass(slots=True)
class TryRecord:
    """One call to the model and what came of it."""

    attempt: int  # 0 is the first call, 1.. the retries
    parsed: bool
    valid: bool  # parsed, and no blocking issue
    n_segments: int
    issues: list[dict[str, Any]]
    notes: list[str]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0
    finish_reason: str = ""
    from_cache: bool = False
    error: str | None = None

    @property
    def issue_codes(self) -> list[str]:
        return [i["code"] for i in self.issues]


@dataclass(slots=True)
class SegmentationDiagnostics:
    tries: int = 0
    attempts: list[TryRecord] = field(default_factory=list)
    chosen_attempt: int | None = None  # the attempt whose segments were used
    fallback: Fallback = "none"
    repairs: list[Repair] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        return sum(a.prompt_tokens for a in self.attempts)

    @property
    def completion_tokens(self) -> int:
        return sum(a.completion_tokens for a in self.attempts)

    @property
    def seconds(self) -> float:
        return sum(a.seconds for a in self.attempts)

    @property
    def first_try_valid(self) -> bool:
        return bool(self.attempts) and self.attempts[0].valid

    def to_dict(self) -> dict[str, Any]:
        return {
            "tries": self.tries,
            "chosen_attempt": self.chosen_attempt,
            "fallback": self.fallback,
            "first_try_valid": self.first_try_valid,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": self.seconds,
            "attempts": [{**asdict(a), "issue_codes": a.issue_codes} for a in self.attempts],
            "repairs": [r.to_dict() for r in self.repairs],
            "notes": list(self.notes),
        }


@dataclass(slots=True)
class SegmentationOutcome:
    """Valid segments for the unit, the answer they came from, and how they were obtained."""

    segments: list[Segment]
    diagnostics: SegmentationDiagnostics
    answer: BaseModel | None = None  # parsed answer of the chosen attempt (None for whole_unit)
    text: str | None = None  # raw reply of the chosen attempt
    messages: list[dict[str, str]] = field(default_factory=list)  # the conversation as sent last


def segment_with_retries(
    ask: Ask,
    messages: list[dict[str, str]],
    *,
    n: int,
    answer_model: type[BaseModel],
    sentence_words: Sequence[int],
    max_fallback_words: int,
    extract_segments: Callable[[BaseModel], list[Segment]] = answer_segments,
    max_retries: int = 2,
    feedback: Callable[[Sequence[ValidationIssue], int], str] = feedback_message,
) -> SegmentationOutcome:
    """Ask for a segmentation of a unit of ``n`` sentences until it is valid or retries run out.

    On an invalid answer the conversation grows by the model's reply and a user message with
    ``feedback(issues, n)``; a failed backend call (``Completion.error``) is retried with the
    same conversation. The returned segments always pass :func:`validate_segments` cleanly.
    """
    if n < 1:
        raise ValueError(f"a unit to segment needs at least one sentence, got n={n}")
    if len(sentence_words) != n:
        raise ValueError(f"sentence_words has {len(sentence_words)} entries for {n} sentences")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")

    diag = SegmentationDiagnostics()
    conversation = list(messages)
    best: tuple[int, int, BaseModel, list[Segment], str] | None = None  # damage, attempt, ...

    for attempt in range(max_retries + 1):
        completion = ask(list(conversation))
        diag.tries += 1
        record = TryRecord(
            attempt=attempt, parsed=False, valid=False, n_segments=0, issues=[], notes=[],
            prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
            cached_tokens=completion.cached_tokens, seconds=completion.seconds,
            finish_reason=completion.finish_reason, from_cache=completion.from_cache,
            error=completion.error,
        )
        diag.attempts.append(record)
        if completion.error is not None:
            record.issues = [ValidationIssue(IssueCode.BACKEND_ERROR, completion.error).to_dict()]
            continue

        result = parse_answer(completion.text, answer_model)
        record.notes = result.notes
        issues: list[ValidationIssue] = list(result.errors)
        if result.value is not None:
            segments = extract_segments(result.value)
            issues += validate_segments(segments, n)
            record.parsed = True
            record.n_segments = len(segments)
            score = damage(issues, n)
            # Ties go to the later attempt: it has seen the feedback.
            if best is None or score <= best[0]:
                best = (score, attempt, result.value, segments, completion.text)
        if completion.finish_reason == "length":
            record.notes = [*record.notes, "reply cut at the token limit"]
        record.issues = [i.to_dict() for i in issues]
        record.valid = record.parsed and not blocking_issues(issues)
        if record.valid:
            break
        if attempt < max_retries:
            request = feedback(issues, n)
            if completion.finish_reason == "length":
                request += f"\n{CUT_OFF_NOTICE}"
            conversation += [
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": request},
            ]

    if best is None:
        segments = whole_unit_segments(n, sentence_words, max_fallback_words)
        diag.fallback = "whole_unit"
        diag.notes.append(f"no readable answer in {diag.tries} tries; unit split into "
                          f"{len(segments)} segment(s) under a cap of {max_fallback_words} words")
        return SegmentationOutcome(segments, diag, None, None, conversation)

    score, attempt, answer, raw_segments, text = best
    diag.chosen_attempt = attempt
    segments, diag.repairs = repair_segments(raw_segments, n, sentence_words=sentence_words,
                                             max_words=max_fallback_words)
    if any(r.kind is RepairKind.WHOLE_UNIT for r in diag.repairs):
        diag.fallback = "whole_unit"
    elif score > 0:
        diag.fallback = "repair"
    return SegmentationOutcome(segments, diag, answer, text, conversation)
