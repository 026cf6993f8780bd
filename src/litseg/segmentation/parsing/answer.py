""":func:`parse_answer`: a model's reply read into the answer schema, never raising."""

from __future__ import annotations

from pydantic import BaseModel

from litseg.segmentation.parsing.extract import (
    Budget,
    Candidate,
    FENCE,
    json_candidates,
    strip_think,
)
from litseg.segmentation.parsing.fit import fit_guarded
from litseg.segmentation.parsing.limits import MAX_REPLY_CHARS, MAX_CANDIDATES
from litseg.segmentation.parsing.result import ParseResult, short
from litseg.segmentation.textsafe import clean_text
from litseg.segmentation.validation import IssueCode, ValidationIssue


def parse_answer(text: str, model: type[BaseModel], *, n: int | None = None) -> ParseResult:
    """Read the answer of type ``model`` from a model's raw output ``text``.

    ``n`` is the number of sentences of the unit when known: ranges written in ``context_idx``
    are then expanded within ``1..n`` only. Never raises on content: anything unreadable is an
    error in the result.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected the model's text, got {type(text).__name__}")
    try:
        return _parse(text, model, n)
    except Exception as exc:  # noqa: BLE001 - a reply must never take the run down
        return ParseResult(None, [ValidationIssue(
            IssueCode.PARSE_ERROR, f"the reply could not be read ({type(exc).__name__})")],
            [f"internal parser error: {type(exc).__name__}: {short(str(exc))}"])


def _parse(text: str, model: type[BaseModel], n: int | None) -> ParseResult:
    global_notes: list[str] = []
    body = text
    if len(body) > MAX_REPLY_CHARS:
        global_notes.append(f"reply of {len(text):,} characters: only the first {MAX_REPLY_CHARS:,} were read")
        body = body[:MAX_REPLY_CHARS]
    body, removed = strip_think(body)
    if removed:
        global_notes.append("removed <think> block")
    regions: list[str] = [m.group(1) for m in FENCE.finditer(body) if m.group(1).strip()]
    if regions:
        global_notes.append("read JSON from a Markdown code fence")
    else:
        regions = [body]

    budget = Budget()
    candidates: list[Candidate] = []
    for region in regions:
        if len(candidates) >= MAX_CANDIDATES:
            budget.capped = True
            break
        candidates.extend(json_candidates(region, budget, MAX_CANDIDATES - len(candidates)))
    global_notes.extend(f"{why}; not mended (x{k})" if k > 1 else f"{why}; not mended"
                        for why, k in budget.refused.items())
    if budget.capped:
        global_notes.append(f"stopped looking for JSON after {MAX_CANDIDATES} values")
    if not candidates:
        snippet = clean_text(text.strip()[:80].replace("\n", " "))[0]
        return ParseResult(None, [ValidationIssue(
            IssueCode.PARSE_ERROR, f"no JSON object found in the reply (starts: {snippet!r})")],
            global_notes)

    results = [(fit_guarded(c, model, n), c) for c in candidates]
    best, chosen = max(results, key=lambda rc: (rc[0].value is not None, -len(rc[0].errors),
                                                len(rc[0].segments), rc[1].end - rc[1].start, rc[1].start))
    notes = list(global_notes)
    if len(candidates) > 1:
        notes.append(f"{len(candidates)} JSON values in the reply; used the best-fitting one")
    if chosen.surrounded:
        notes.append("ignored text around the JSON")
    if chosen.repaired:
        notes.append("repaired malformed or truncated JSON")
    if chosen.duplicates:
        keys = ", ".join(sorted({short(k) for k in chosen.duplicates})[:5])
        notes.append(f"duplicate key(s) {keys} in one object; the last value was used")
    best.notes = notes + best.notes
    return best
