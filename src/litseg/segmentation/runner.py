"""The validate-retry-fallback loop shared by LitSeg-Lite and stage 3 of the LitSeg teacher.

The loop knows nothing about models: it receives an ``ask`` callable that answers a chat
conversation with a :class:`~litseg.llm.base.Completion`. Each answer is parsed and validated;
an answer with blocking issues is shown back to the model together with a correction request,
up to ``max_retries`` times. The best attempt (least damage, see :func:`damage`) is then
repaired so that the result always covers the unit; when no attempt could be read at all the
unit-level fallback takes over: ``fallback="whole_unit"`` keeps the unit whole as one segment (the
paper's rule), ``fallback="pieces"`` splits it greedily under a word cap. Every try, issue,
leniency, repair and limit reached is recorded in the diagnostics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from litseg.errors import ModelUnreachable, is_unavailable
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.repair import Repair, RepairKind, repair_segments, whole_unit_segments
from litseg.segmentation.schema import SchemaLimits, Segment, answer_segments, limit_hits
from litseg.segmentation.textsafe import clean_text
from litseg.segmentation.validation import (
    IssueCode,
    ValidationIssue,
    blocking_issues,
    feedback_message,
    overlap_stats,
    validate_segments,
)



class ModelReply(Protocol):
    """What the loop reads of a model's answer (:class:`litseg.llm.base.Completion` has it): the
    segmentation layer sits below the LLM layer, so it names the fields instead of importing them."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    seconds: float
    finish_reason: str
    from_cache: bool
    error: str | None
    error_kind: str | None


Ask = Callable[[list[dict[str, str]]], ModelReply]
Fallback = Literal["none", "repair", "whole_unit"]
#: What becomes of a unit with no readable answer (``method.fallback``): kept whole as one
#: segment (the paper's rule), or split into pieces under ``fallback_max_words``.
UnitFallback = Literal["whole_unit", "pieces"]
UNIT_FALLBACKS: tuple[str, ...] = ("whole_unit", "pieces")
#: The shares a report gives per chunker, in this order (see :func:`fallback_category`).
FALLBACK_CATEGORIES: tuple[str, ...] = ("repair", "pieces", "whole_unit")


def check_unit_fallback(value: str) -> str:
    if value not in UNIT_FALLBACKS:
        raise ValueError(f"fallback must be one of {list(UNIT_FALLBACKS)}, got {value!r}")
    return value


def fallback_category(diagnostics: dict[str, Any]) -> str:
    """How a unit's chunks came about, from its diagnostics: ``none`` (the answer as given),
    ``repair`` (the answer mended), ``pieces`` (no usable answer; word-capped pieces),
    ``whole_unit`` (no usable answer; the unit as one chunk), or a chunker's own fallback name
    (e.g. LumberChunker's ``window_end``). Diagnostics written before ``unit_fallback`` existed
    say ``whole_unit`` for what were pieces, and are read as such."""
    fallback = str(diagnostics.get("fallback") or "none")
    if fallback == "whole_unit":
        return str(diagnostics.get("unit_fallback") or "pieces")
    return fallback

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
    limit_hits: list[dict[str, Any]] = field(default_factory=list)  # fields that reached a schema limit

    @property
    def issue_codes(self) -> list[str]:
        return [i["code"] for i in self.issues]


@dataclass(slots=True)
class SegmentationDiagnostics:
    tries: int = 0
    attempts: list[TryRecord] = field(default_factory=list)
    chosen_attempt: int | None = None  # the attempt whose segments were used
    fallback: Fallback = "none"
    unit_fallback: str | None = None  # with fallback "whole_unit": "whole_unit" (one segment) | "pieces"
    repairs: list[Repair] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    limit_hits: list[dict[str, Any]] = field(default_factory=list)  # of the chosen attempt
    # How much the final main ranges overlap (validation.overlap_stats): overlap is allowed.
    overlap: dict[str, Any] = field(default_factory=dict)

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
            "unit_fallback": self.unit_fallback,
            "first_try_valid": self.first_try_valid,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": self.seconds,
            "attempts": [{**asdict(a), "issue_codes": a.issue_codes} for a in self.attempts],
            "repairs": [r.to_dict() for r in self.repairs],
            "notes": list(self.notes),
            "limit_hits": list(self.limit_hits),
            "overlap": dict(self.overlap),
        }


@dataclass(slots=True)
class SegmentationOutcome:
    """Valid segments for the unit, the answer they came from, and how they were obtained."""

    segments: list[Segment]
    diagnostics: SegmentationDiagnostics
    answer: BaseModel | None = None  # parsed answer of the chosen attempt (None for whole_unit)
    text: str | None = None  # raw reply of the chosen attempt
    messages: list[dict[str, str]] = field(default_factory=list)  # the conversation as sent last


# The best attempt so far: damage, attempt, parsed answer, its segments, the raw reply.
_Best = tuple[int, int, BaseModel, list[Segment], str]


def segment_with_retries(
    ask: Ask,
    messages: list[dict[str, str]],
    *,
    n: int,
    answer_model: type[BaseModel],
    sentence_words: Sequence[int],
    max_fallback_words: int,
    extract_segments: Callable[[BaseModel], list[Segment]] = answer_segments,
    fallback: str,
    max_retries: int,
    feedback: Callable[[Sequence[ValidationIssue], int], str] = feedback_message,
    limits: SchemaLimits | None = None,
) -> SegmentationOutcome:
    """Ask for a segmentation of a unit of ``n`` sentences until it is valid or retries run out.

    On an invalid answer the conversation grows by the model's reply and a user message with
    ``feedback(issues, n)``; a failed backend call (``Completion.error``) is retried with the
    same conversation, except when the model never saw the request (``error_kind ==
    "unavailable"``: connection, timeout, server error after the backend's own retries): then
    :class:`~litseg.errors.ModelUnreachable` is raised at once, with the diagnostics so far, and
    no feedback turn or fallback is spent on it (the caller fails the unit). The returned segments always pass :func:`validate_segments` cleanly.
    ``fallback`` decides what a unit without any usable answer becomes (:data:`UNIT_FALLBACKS`);
    with ``limits`` (the limits the answer was decoded under) every parsed answer is checked for
    fields that reached them (``limit_hits`` on the try, and on the diagnostics for the chosen one).
    """
    _check_arguments(n, sentence_words, max_retries, fallback)
    diag = SegmentationDiagnostics()
    conversation = list(messages)
    best: _Best | None = None
    for attempt in range(max_retries + 1):
        completion = ask(list(conversation))
        record = _record_try(diag, attempt, completion)
        if completion.error is not None:
            _backend_failed(diag, record, attempt, completion)
            continue
        issues, best = _read_reply(completion, record, attempt, best, n=n, answer_model=answer_model,
                                   extract_segments=extract_segments, limits=limits)
        if record.valid:
            break
        if attempt < max_retries:
            conversation += _feedback_turn(completion, feedback(issues, n))
    if best is None:
        return _without_answer(diag, conversation, n=n, sentence_words=sentence_words,
                               max_fallback_words=max_fallback_words, fallback=fallback)
    return _from_best(best, diag, conversation, n=n, sentence_words=sentence_words,
                      max_fallback_words=max_fallback_words, fallback=fallback)


def _check_arguments(n: int, sentence_words: Sequence[int], max_retries: int, fallback: str) -> None:
    check_unit_fallback(fallback)
    if n < 1:
        raise ValueError(f"a unit to segment needs at least one sentence, got n={n}")
    if len(sentence_words) != n:
        raise ValueError(f"sentence_words has {len(sentence_words)} entries for {n} sentences")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")


def _record_try(diag: SegmentationDiagnostics, attempt: int, completion: ModelReply) -> TryRecord:
    """Count the call and start its record with what the backend reported."""
    diag.tries += 1
    record = TryRecord(
        attempt=attempt, parsed=False, valid=False, n_segments=0, issues=[], notes=[],
        prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
        cached_tokens=completion.cached_tokens, seconds=completion.seconds,
        finish_reason=completion.finish_reason, from_cache=completion.from_cache,
        error=completion.error,
    )
    diag.attempts.append(record)
    return record


def _backend_failed(diag: SegmentationDiagnostics, record: TryRecord, attempt: int,
                    completion: ModelReply) -> None:
    """Record a failed call; raise :class:`ModelUnreachable` when the model never saw it."""
    record.issues = [ValidationIssue(IssueCode.BACKEND_ERROR, completion.error).to_dict()]
    if is_unavailable(completion):
        diag.notes.append(f"try {attempt + 1}: the model could not be reached; the unit is not segmented")
        raise ModelUnreachable(completion.error, diag.to_dict())


def _read_reply(completion: ModelReply, record: TryRecord, attempt: int, best: _Best | None, *,
                n: int, answer_model: type[BaseModel],
                extract_segments: Callable[[BaseModel], list[Segment]],
                limits: SchemaLimits | None) -> tuple[list[ValidationIssue], _Best | None]:
    """Parse and validate one reply into its record; the issues, and the best attempt so far."""
    result = parse_answer(completion.text, answer_model, n=n)
    record.notes = result.notes
    issues: list[ValidationIssue] = list(result.errors)
    if result.value is not None:
        segments = extract_segments(result.value)
        issues += validate_segments(segments, n)
        record.parsed = True
        if limits is not None:
            record.limit_hits = [h.to_dict() for h in limit_hits(result.value, limits, n)]
        record.n_segments = len(segments)
        score = damage(issues, n)
        # Ties go to the later attempt: it has seen the feedback.
        if best is None or score <= best[0]:
            best = (score, attempt, result.value, segments, completion.text)
    if completion.finish_reason == "length":
        record.notes = [*record.notes, "reply cut at the token limit"]
    record.issues = _recorded_issues(issues)
    record.valid = record.parsed and not blocking_issues(issues)
    return issues, best


def _feedback_turn(completion: ModelReply, request: str) -> list[dict[str, str]]:
    """The model's reply and the correction request, to be appended to the conversation."""
    if completion.finish_reason == "length":
        request += f"\n{CUT_OFF_NOTICE}"
    return [
        # A lone surrogate in the reply could not be sent (or cached) again.
        {"role": "assistant", "content": clean_text(completion.text)[0]},
        {"role": "user", "content": request},
    ]


def _without_answer(diag: SegmentationDiagnostics, conversation: list[dict[str, str]], *, n: int,
                    sentence_words: Sequence[int], max_fallback_words: int,
                    fallback: str) -> SegmentationOutcome:
    """No attempt could be read: the unit-level fallback (whole unit, or pieces under a cap)."""
    diag.fallback, diag.unit_fallback = "whole_unit", fallback
    if fallback == "pieces":
        segments = whole_unit_segments(n, sentence_words, max_fallback_words)
        diag.notes.append(f"no readable answer in {diag.tries} tries; unit split into "
                          f"{len(segments)} segment(s) under a cap of {max_fallback_words} words")
    else:
        segments = [Segment(from_idx=1, to_idx=n)]
        diag.notes.append(f"no readable answer in {diag.tries} tries; the unit is kept whole as one chunk")
    diag.overlap = overlap_stats(segments, n)
    return SegmentationOutcome(segments, diag, None, None, conversation)


def _from_best(best: _Best, diag: SegmentationDiagnostics, conversation: list[dict[str, str]], *,
               n: int, sentence_words: Sequence[int], max_fallback_words: int,
               fallback: str) -> SegmentationOutcome:
    """The best attempt, repaired so that it covers the unit, with what was done recorded."""
    score, attempt, answer, raw_segments, text = best
    diag.chosen_attempt = attempt
    segments, diag.repairs = repair_segments(raw_segments, n, sentence_words=sentence_words,
                                             max_words=max_fallback_words if fallback == "pieces" else None)
    if any(r.kind is RepairKind.WHOLE_UNIT for r in diag.repairs):
        diag.fallback, diag.unit_fallback = "whole_unit", fallback
    elif score > 0:
        diag.fallback = "repair"
    diag.limit_hits = list(diag.attempts[attempt].limit_hits)
    for hit in diag.limit_hits:
        diag.notes.append(f"{hit['field']} reached its limit of {hit['limit']} {hit['unit']} "
                          "(schema_limits); the answer may have been cut there")
    diag.overlap = overlap_stats(segments, n)
    return SegmentationOutcome(segments, diag, answer, text, conversation)


#: Issues kept per try in the diagnostics; further ones are counted in one entry.
MAX_RECORDED_ISSUES = 40


def _recorded_issues(issues: Sequence[ValidationIssue]) -> list[dict[str, Any]]:
    out = [i.to_dict() for i in issues[:MAX_RECORDED_ISSUES]]
    for d in out:
        if len(d["indices"]) > MAX_RECORDED_ISSUES:
            d["indices"] = d["indices"][:MAX_RECORDED_ISSUES]
    if len(issues) > MAX_RECORDED_ISSUES:
        rest = issues[MAX_RECORDED_ISSUES:]
        codes = sorted({i.code.value for i in rest})
        out.append({"code": rest[0].code.value, "message": f"... and {len(rest)} more issues ({', '.join(codes)})",
                    "segment": None, "indices": []})
    return out
