"""Lenient reading of model answers into the typed schemas.

Real models wrap their JSON in prose or Markdown fences, emit several objects, leave trailing
commas, use single quotes, stop mid-object at the token limit, write indices as strings or
floats, shape ``context_idx`` freely, swap ``from_idx``/``to_idx``, answer with a bare list of
segments or flatten the nested Lite answer. :func:`parse_answer` accepts all of that, and
records each leniency it applied as a note, so that a strict format check (``strict_ok``) stays
possible. Malformed JSON is mended with the ``json_repair`` library.

Every value is coerced by this module (the final model validation runs in pydantic's strict
mode), so nothing is converted silently: keys the schema does not know are noted (the answer is
then not ``strict_ok``), and so are duplicate keys and alias keys that collide with the real one.

Whatever the text, :func:`parse_answer` returns a :class:`ParseResult` and never raises, and its
work is bounded (docs/robustness.md measures it):

* a reply is read up to :data:`MAX_REPLY_CHARS` characters (1,000,000), the rest is noted as
  ignored; scanning, ``<think>`` removal and bracket matching are linear in the reply;
* at most :data:`_MAX_CANDIDATES` JSON values are fitted; bracketed prose such as an echoed
  ``[12] sentence`` never counts as one;
* ``json_repair`` (whose worst cases are super-linear) is given at most :data:`_MAX_MENDS`
  stretches of together :data:`_MAX_MEND_CHARS` characters, each nested at most
  :data:`_MAX_MEND_DEPTH` deep; bare keys are quoted before mending so that a value such as
  ``to_idx:-2`` keeps its sign;
* integers longer than :data:`_MAX_INT_DIGITS` digits (beyond Python's conversion limit, or
  simply no sentence index) are read as unusable values, never converted;
* a range such as ``"3-9"`` in ``context_idx`` is expanded only inside the unit when ``n`` is
  given (its out-of-unit ends are kept, so validation still reports them), and all expansions
  of a reply together produce at most :data:`_MAX_EXPANDED_INDICES` indices;
* strings are cleaned for storage (lone surrogates become U+FFFD, control characters are
  removed; :mod:`litseg.segmentation.textsafe`), with a note;
* notes and errors are capped in number, and values quoted in them are shortened.
"""

from __future__ import annotations

import json
import re
import reprlib
import typing
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import json_repair
from pydantic import BaseModel, ValidationError

from litseg.segmentation.schema import Segment, answer_segments, segments_path
from litseg.segmentation.textsafe import clean_text
from litseg.segmentation.validation import IssueCode, ValidationIssue

#: Characters of a reply that are read; the rest is ignored (with a note).
MAX_REPLY_CHARS = 1_000_000
_MAX_CANDIDATES = 64  # JSON values fitted per reply
_MAX_MENDS = 16  # stretches handed to json_repair per reply
_MAX_MEND_CHARS = 200_000  # characters handed to json_repair per reply, all stretches together
_MAX_MEND_DEPTH = 32  # deeper bracket nesting is not mended (answers nest 5 deep)
_MAX_INT_DIGITS = 100  # longer JSON integers are read as unusable values
_MAX_INDEX_TEXT = 64  # an index written as text is at most this long
_MAX_RANGE_EXPANSION = 10_000  # "3-5" in context_idx expands; without n, longer ranges are dropped
_MAX_EXPANDED_INDICES = 100_000  # indices produced by range expansion per reply
_MAX_NOTE_KINDS = 40  # distinct notes kept; further ones are counted
_MAX_MALFORMED = 20  # SEGMENT_MALFORMED errors listed one by one; further ones are counted

# Other names models use for the segment fields.
_SEGMENT_ALIASES = {
    "from": "from_idx", "start": "from_idx", "start_idx": "from_idx", "from_index": "from_idx",
    "start_index": "from_idx", "begin": "from_idx", "from_id": "from_idx",
    "to": "to_idx", "end": "to_idx", "end_idx": "to_idx", "to_index": "to_idx",
    "end_index": "to_idx", "to_id": "to_idx",
    "context": "context_idx", "context_ids": "context_idx", "context_indices": "context_idx",
    "context_index": "context_idx", "context_idxs": "context_idx",
    "title": "subtitle", "sub_title": "subtitle", "name": "subtitle",
}
_WRAPPER_KEYS = {"answer", "result", "results", "output", "response", "json", "data", "segmentation"}

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
# Where a JSON value that could hold an object may start: "{", or "[" opening a list of
# objects or lists. "[12]" (an echoed sentence number) and "[a]" are prose.
_OPENER = re.compile(r"\{|\[(?=\s*[\[{])")
# Once the repair budget is spent only strict JSON can still be read: an object opening with a
# key or closing at once, or a list opening with one.
_STRICT_OPENER = re.compile(r'\{(?=\s*["}])|\[(?=\s*[\[{])')
_BRACKET_TOKENS = re.compile(r'[\\"{}\[\]]')
_QUOTE_TOKENS = re.compile(r"[\\\"']")
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*:)")
_POSITION = re.compile(r"\[\d+\]")
_FENCE = re.compile(r"```[ \t]*(?:json5?|JSON)?[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)
_INT_TEXT = re.compile(r"^[\[(]?\s*([+-]?\d+)(?:\.0*)?\s*[\])]?$")
_RANGE_GAP = re.compile(r"(?<=\d)\s*(-|\u2013|\.\.)\s*(?=[+-]?\d)|(?<=\d)\s+to\s+(?=\d)")
_RANGE_TEXT = re.compile(r"^([+-]?\d+)\s*(?:-|\u2013|\.\.|to)\s*([+-]?\d+)$")


@dataclass(slots=True)
class ParseResult:
    """Outcome of :func:`parse_answer`.

    ``value`` is the validated answer, or None when nothing usable was found (``errors`` then
    says why). ``errors`` may also be non-empty next to a value: segment entries that had to be
    dropped (``SEGMENT_MALFORMED``). ``notes`` lists every leniency applied. ``raw`` is the JSON
    value the answer was read from.
    """

    value: BaseModel | None
    errors: list[ValidationIssue] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: Any = None

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def strict_ok(self) -> bool:
        """The answer was exactly in the requested format: no error and no leniency needed."""
        return self.value is not None and not self.errors and not self.notes

    @property
    def segments(self) -> list[Segment]:
        return answer_segments(self.value) if self.value is not None else []

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "strict_ok": self.strict_ok,
                "errors": [e.to_dict() for e in self.errors], "notes": list(self.notes)}


class _Notes:
    """Collects leniency notes (repeated ones are counted instead of listed again) and carries
    what bounds the work on one reply: the unit size ``n`` when known and the range budget."""

    def __init__(self, n: int | None = None) -> None:
        self._counts: Counter[str] = Counter()
        self.overflow = 0
        self.n = n
        self.expand_left = _MAX_EXPANDED_INDICES

    def add(self, msg: str, count: int = 1) -> None:
        # One line per kind of leniency: list positions are folded into the count.
        key = _POSITION.sub("[*]", msg)
        if key not in self._counts and len(self._counts) >= _MAX_NOTE_KINDS:
            self.overflow += count
            return
        self._counts[key] += count

    def render(self) -> list[str]:
        out = [m if c == 1 else f"{m} (x{c})" for m, c in self._counts.items()]
        if self.overflow:
            out.append(f"... and {self.overflow} further note(s) of other kinds")
        return out


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 2, 48, 48
_SHORT.maxlist = _SHORT.maxdict = _SHORT.maxtuple = 4


def _short(value: Any) -> str:
    """A bounded, printable rendering of any value for notes and messages."""
    try:
        return _SHORT.repr(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__}>"


class _Reader:
    """Strict JSON decoding that notes duplicate keys and keeps over-long integers as text."""

    def __init__(self) -> None:
        self.duplicates: list[str] = []
        self.decoder = json.JSONDecoder(object_pairs_hook=self._object, parse_int=_json_int)

    def _object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    self.duplicates.append(key)
                seen.add(key)
        return out


def _json_int(digits: str) -> int | str:
    if len(digits) > _MAX_INT_DIGITS:
        return f"<a number of {len(digits)} digits>"
    return int(digits)


@dataclass(slots=True)
class _Budget:
    """Work left for json_repair on this reply, and what was refused."""

    mends: int = _MAX_MENDS
    chars: int = _MAX_MEND_CHARS
    refused: Counter[str] = field(default_factory=Counter)
    capped: bool = False  # stopped looking for JSON values after _MAX_CANDIDATES


@dataclass(slots=True)
class _Candidate:
    value: Any
    start: int
    end: int
    repaired: bool = False
    surrounded: bool = False  # other text lay before or after it
    duplicates: list[str] = field(default_factory=list)


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
            [f"internal parser error: {type(exc).__name__}: {_short(str(exc))}"])


def _parse(text: str, model: type[BaseModel], n: int | None) -> ParseResult:
    global_notes: list[str] = []
    body = text
    if len(body) > MAX_REPLY_CHARS:
        global_notes.append(f"reply of {len(text):,} characters: only the first {MAX_REPLY_CHARS:,} were read")
        body = body[:MAX_REPLY_CHARS]
    body, removed = _strip_think(body)
    if removed:
        global_notes.append("removed <think> block")
    regions: list[str] = [m.group(1) for m in _FENCE.finditer(body) if m.group(1).strip()]
    if regions:
        global_notes.append("read JSON from a Markdown code fence")
    else:
        regions = [body]

    budget = _Budget()
    candidates: list[_Candidate] = []
    for region in regions:
        if len(candidates) >= _MAX_CANDIDATES:
            budget.capped = True
            break
        candidates.extend(_json_candidates(region, budget, _MAX_CANDIDATES - len(candidates)))
    global_notes.extend(f"{why}; not mended (x{k})" if k > 1 else f"{why}; not mended"
                        for why, k in budget.refused.items())
    if budget.capped:
        global_notes.append(f"stopped looking for JSON after {_MAX_CANDIDATES} values")
    if not candidates:
        snippet = clean_text(text.strip()[:80].replace("\n", " "))[0]
        return ParseResult(None, [ValidationIssue(
            IssueCode.PARSE_ERROR, f"no JSON object found in the reply (starts: {snippet!r})")],
            global_notes)

    results = [(_fit_guarded(c, model, n), c) for c in candidates]
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
        keys = ", ".join(sorted({_short(k) for k in chosen.duplicates})[:5])
        notes.append(f"duplicate key(s) {keys} in one object; the last value was used")
    best.notes = notes + best.notes
    return best


def _strip_think(body: str) -> tuple[str, bool]:
    """``body`` without its closed ``<think>...</think>`` blocks (linear; an unclosed tag stays)."""
    parts: list[str] = []
    pos = 0
    while True:
        opened = _THINK_OPEN.search(body, pos)
        if opened is None:
            break
        closed = _THINK_CLOSE.search(body, opened.end())
        if closed is None:
            break
        parts += [body[pos:opened.start()], " "]
        pos = closed.end()
    if not parts:
        return body, False
    parts.append(body[pos:])
    return "".join(parts), True


def _useful(value: Any) -> bool:
    """Could this JSON value fit an answer? Objects, or lists holding an object."""
    if isinstance(value, dict):
        return bool(value)
    return isinstance(value, list) and any(isinstance(v, dict) for v in value)


def _json_candidates(region: str, budget: _Budget, room: int) -> list[_Candidate]:
    """Up to ``room`` JSON values found in ``region``: strictly decoded where possible, mended
    otherwise. Linear in the region: every stretch is scanned once."""
    reader = _Reader()
    stripped = region.strip()
    try:
        value = reader.decoder.decode(stripped)
    except (ValueError, RecursionError):
        pass
    else:
        if isinstance(value, (dict, list)):
            return [_Candidate(value, 0, len(region), duplicates=reader.duplicates)]
    found: list[_Candidate] = []
    pos = 0
    while True:
        broad = budget.mends > 0 and budget.chars > 0
        opener = (_OPENER if broad else _STRICT_OPENER).search(region, pos)
        if opener is None:
            break
        if len(found) >= room:
            budget.capped = True
            break
        i = opener.start()
        # Decode the bracketed stretch only: a decoding error costs time proportional to the
        # text before it (line and column numbers), so decoding in place would be quadratic.
        end, depth = _bracket_extent(region, i)
        reader.duplicates = []
        try:
            value, used = reader.decoder.raw_decode(region[i:end])
        except (ValueError, RecursionError):
            # Mend the stretch only, so that later values are still scanned.
            found.extend(_mended(region, i, end, depth, budget)[: room - len(found)])
        else:
            if _useful(value):
                found.append(_Candidate(value, i, i + used, duplicates=reader.duplicates))
        pos = max(end, i + 1)
    for c in found:
        c.surrounded = bool(region[:c.start].strip() or region[c.end:].strip())
    return found


def _mended(region: str, start: int, end: int, depth: int, budget: _Budget) -> list[_Candidate]:
    stretch = region[start:end]
    if "{" not in stretch:
        return []  # no object can come out of it
    if depth > _MAX_MEND_DEPTH:
        budget.refused[f"JSON nested more than {_MAX_MEND_DEPTH} deep"] += 1
        return []
    if budget.mends <= 0 or len(stretch) > budget.chars:
        budget.refused[f"broken JSON beyond the repair budget ({_MAX_MENDS} stretches, "
                       f"{_MAX_MEND_CHARS:,} characters)"] += 1
        return []
    budget.mends -= 1
    budget.chars -= len(stretch)
    try:
        mended = json_repair.loads(_quote_bare_keys(stretch))
    except (ValueError, RecursionError):
        return []
    if isinstance(mended, list) and region[start] == "{":
        # json_repair returns several top-level objects as a list.
        return [_Candidate(v, start, end, True) for v in mended if isinstance(v, dict) and v]
    if _useful(mended):
        return [_Candidate(mended, start, end, True)]
    return []


def _quote_bare_keys(text: str) -> str:
    """Put quotes round unquoted object keys outside strings (``{to_idx:-2}`` ->
    ``{"to_idx":-2}``): json_repair reads ``-2`` after a bare key as text and loses the sign."""
    if _BARE_KEY.search(text) is None:
        return text
    parts: list[str] = []
    start = 0  # start of the current piece
    quote = ""  # the quote character of the string we are in, "" outside strings
    skip = -1
    for m in _QUOTE_TOKENS.finditer(text):
        j = m.start()
        if j < skip:
            continue
        ch = text[j]
        if quote:
            if ch == "\\":
                skip = j + 2
            elif ch == quote:
                parts.append(text[start:j + 1])
                start, quote = j + 1, ""
        elif ch in "\"'":
            parts.append(_BARE_KEY.sub(r'\1"\2"\3', text[start:j]))
            start, quote = j, ch
    tail = text[start:]
    parts.append(tail if quote else _BARE_KEY.sub(r'\1"\2"\3', tail))
    return "".join(parts)


def _bracket_extent(text: str, start: int) -> tuple[int, int]:
    """End of the bracketed value opening at ``start`` (end of text when it never closes) and
    its deepest nesting. Visits only brackets, quotes and backslashes."""
    depth = deepest = 0
    in_string = False
    skip = -1
    for m in _BRACKET_TOKENS.finditer(text, start):
        j = m.start()
        if j < skip:
            continue
        ch = text[j]
        if in_string:
            if ch == "\\":
                skip = j + 2
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return j + 1, deepest
    return len(text), deepest


# --------------------------------------------------------------------------------------------
# Fitting one JSON value to the model


def _fit_guarded(candidate: _Candidate, model: type[BaseModel], n: int | None) -> ParseResult:
    try:
        return _fit(candidate, model, n)
    except RecursionError:
        return ParseResult(None, [ValidationIssue(IssueCode.SCHEMA_ERROR, "JSON nested too deeply")],
                           [], None)


def _fit(candidate: _Candidate, model: type[BaseModel], n: int | None) -> ParseResult:
    notes = _Notes(n)
    errors: list[ValidationIssue] = []
    data = _reshape(candidate.value, model, notes)
    if not isinstance(data, dict):
        return ParseResult(None, [ValidationIssue(
            IssueCode.SCHEMA_ERROR, f"expected a JSON object for {model.__name__}, got {type(data).__name__}")],
            notes.render(), candidate.value)
    coerced = _coerce_model(data, model, "", notes, errors)
    _count_malformed(errors)
    try:
        value = model.model_validate(coerced, strict=True)
    except ValidationError as exc:
        issues = [ValidationIssue(
            IssueCode.SCHEMA_ERROR,
            f"{'.'.join(str(p) for p in e['loc']) or model.__name__}: {e['msg']}") for e in exc.errors()[:8]]
        return ParseResult(None, errors + issues, notes.render(), candidate.value)
    return ParseResult(value, errors, notes.render(), candidate.value)


def _reshape(value: Any, model: type[BaseModel], notes: _Notes) -> Any:
    """Bring the JSON value into the overall shape of ``model`` (unwrap, wrap, nest)."""
    fields = model.model_fields
    path = segments_path(model)
    if isinstance(value, list):
        dicts = [v for v in value if isinstance(v, dict)]
        if len(value) == 1 and dicts and (set(dicts[0]) & set(fields) or _wrapped_key(dicts[0], fields)):
            notes.add("unwrapped the answer from a one-element list")
            return _reshape(dicts[0], model, notes)
        if path and dicts:
            notes.add("wrapped a bare list of segments into the answer object")
            return _nest_at(path, value)
        return value
    if not isinstance(value, dict):
        return value
    key = _wrapped_key(value, fields)
    if key is not None:
        notes.add(f"unwrapped the answer from key {key!r}")
        return _reshape(value[key], model, notes)
    data = _nest_flat(value, model, notes)
    if path and _at_path(data, path) is None:
        found = _find_list(data, path[-1])
        if found is not None:
            where, segments = found
            notes.add(f"took {path[-1]} from {'.'.join(where)} instead of {'.'.join(path)}")
            data = _set_path(data, path, segments)
    return data


def _at_path(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _find_list(node: Any, key: str, where: tuple[str, ...] = ()) -> tuple[tuple[str, ...], list[Any]] | None:
    """First list stored under ``key`` anywhere in ``node`` (depth first)."""
    if isinstance(node, dict):
        if isinstance(node.get(key), list):
            return (*where, key), node[key]
        for k, v in node.items():
            hit = _find_list(v, key, (*where, str(k)))
            if hit is not None:
                return hit
    return None


def _set_path(data: dict[str, Any], path: tuple[str, ...], leaf: Any) -> dict[str, Any]:
    out = dict(data)
    node = out
    for key in path[:-1]:
        child = node.get(key)
        node[key] = dict(child) if isinstance(child, dict) else {}
        node = node[key]
    node[path[-1]] = leaf
    return out


def _wrapped_key(value: dict[str, Any], fields: dict[str, Any]) -> str | None:
    if len(value) == 1:
        (key, inner), = value.items()
        if key not in fields and key.strip().lower() in _WRAPPER_KEYS and isinstance(inner, (dict, list)):
            return key
    return None


def _nest_at(path: tuple[str, ...], leaf: Any) -> dict[str, Any]:
    node: Any = leaf
    for key in reversed(path):
        node = {key: node}
    return node


def _nest_flat(data: dict[str, Any], model: type[BaseModel], notes: _Notes) -> dict[str, Any]:
    """Move keys that belong to a missing sub-object (e.g. ``segments`` of ``step3``) into it."""
    out = dict(data)
    for name, info in model.model_fields.items():
        sub = _model_type(info.annotation)
        if sub is None or name in out:
            continue
        sub_keys = set(sub.model_fields)
        moved = {k: out.pop(k) for k in list(out) if _normalise_key(k) in sub_keys}
        if moved:
            notes.add(f"moved top-level {', '.join(sorted(moved))} into {name!r}")
            out[name] = _nest_flat(moved, sub, notes)
    return out


def _normalise_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", str(key).strip().lower())


def _model_type(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _list_item_type(annotation: Any) -> Any:
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation) or (Any,)
        return item
    return None


def _coerce_model(data: dict[str, Any], model: type[BaseModel], where: str, notes: _Notes,
                  errors: list[ValidationIssue]) -> dict[str, Any]:
    fields = model.model_fields
    aliases = _SEGMENT_ALIASES if model is Segment else {}
    renamed: dict[str, Any] = {}
    for key, value in data.items():
        if key in fields:
            if key in renamed:  # an alias came first and took the field: the real name wins
                notes.add(f"{where}{key} given under two names; used {key!r}")
            renamed[key] = value
            continue
        norm = _normalise_key(key)
        target = norm if norm in fields else aliases.get(norm)
        if target is None:
            notes.add(f"ignored unknown key {_short(key)}" + (f" in {where.rstrip('.')}" if where else ""))
        elif target in data or target in renamed:
            notes.add(f"{where}{target} given under two names; ignored {_short(key)}")
        else:
            notes.add(f"read {_short(key)} as {target!r}")
            renamed[target] = value
    out: dict[str, Any] = {}
    for name, info in fields.items():
        label = f"{where}{name}"
        if name not in renamed or renamed[name] is None:
            if not info.is_required():
                notes.add(f"{label} missing or null; default used")
            continue
        out[name] = _coerce_value(renamed[name], info.annotation, label, notes, errors)
    return out


def _coerce_value(value: Any, annotation: Any, label: str, notes: _Notes,
                  errors: list[ValidationIssue]) -> Any:
    sub = _model_type(annotation)
    if sub is not None:
        if isinstance(value, list) and len(segments_path(sub)) == 1:
            notes.add(f"{label} given as a bare list; wrapped")
            value = {segments_path(sub)[0]: value}
        if isinstance(value, dict):
            return _coerce_model(_nest_flat(value, sub, notes), sub, f"{label}.", notes, errors)
        return value
    if annotation is str:
        return _to_str(value, label, notes)
    if annotation is int:
        number = _to_int(value)
        if number is not None and not (isinstance(value, int) and not isinstance(value, bool)):
            notes.add(f"{label} given as {type(value).__name__}; read as integer")
        return number if number is not None else value
    item = _list_item_type(annotation)
    if item is int:
        return _to_int_list(value, label, notes)
    if item is not None and _model_type(item) is not None:
        return _coerce_model_list(value, _model_type(item), label, notes, errors)
    return value


def _to_str(value: Any, label: str, notes: _Notes) -> Any:
    if isinstance(value, str):
        text = value
    elif isinstance(value, list):
        notes.add(f"{label} given as a list; joined into text")
        text = "\n".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value)
    elif isinstance(value, (dict, int, float, bool)):
        notes.add(f"{label} given as {type(value).__name__}; written as text")
        text = json.dumps(value, ensure_ascii=False)
    else:
        return value
    cleaned, changed = clean_text(text)
    if changed:
        notes.add(f"{label}: {changed} lone surrogate or control character(s) replaced or removed")
    return cleaned


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None  # NaN and infinities are not
    if isinstance(value, str) and len(value) <= _MAX_INDEX_TEXT:
        m = _INT_TEXT.match(value.strip())
        return int(m.group(1)) if m else None
    return None


def _to_int_list(value: Any, label: str, notes: _Notes) -> list[int]:
    if isinstance(value, bool):
        notes.add(f"{label} was a boolean; read as empty")
        return []
    if isinstance(value, (int, float)):
        number = _to_int(value)
        notes.add(f"{label} given as a single number; read as a list")
        return [number] if number is not None else []
    from_text = isinstance(value, str)
    if from_text:
        notes.add(f"{label} given as text; read as a list")
        text = _RANGE_GAP.sub(lambda m: m.group(1) or "-", value.strip().strip("[]()"))
        items: list[Any] = [t for t in re.split(r"[,;\s]+", text) if t]
    elif isinstance(value, list):
        items = []
        for v in value:
            if isinstance(v, list):
                notes.add(f"{label} held nested lists; flattened")
                items.extend(v)
            else:
                items.append(v)
    else:
        notes.add(f"{label} of type {type(value).__name__} ignored")
        return []
    out: list[int] = []
    converted: Counter[str] = Counter()  # item types read as integers
    for v in items:
        if type(v) is int:
            out.append(v)
            continue
        number = _to_int(v)
        if number is not None:
            if not from_text:
                converted[type(v).__name__] += 1
            out.append(number)
            continue
        m = _RANGE_TEXT.match(v.strip()) if isinstance(v, str) and len(v) <= _MAX_INDEX_TEXT else None
        if m is None or int(m.group(1)) > int(m.group(2)):
            notes.add(f"{label} item {_short(v)} is not an index; dropped")
        else:
            _expand_range(v, int(m.group(1)), int(m.group(2)), out, label, notes)
    for kind, count in converted.items():
        notes.add(f"{label} item given as {kind}; read as integer", count)
    return out


def _expand_range(item: str, a: int, b: int, out: list[int], label: str, notes: _Notes) -> None:
    """Append the indices of the range ``a..b`` (``a <= b``): within ``1..n`` when the unit size
    is known, keeping an end that lies outside so that validation still reports it."""
    if notes.n is None:
        if b - a >= _MAX_RANGE_EXPANSION:
            notes.add(f"{label} item {_short(item)} is not an index; dropped")
            return
        lo, hi, before, after = a, b, [], []
    else:
        lo, hi = max(a, 1), min(b, notes.n)
        if lo > hi:  # wholly outside the unit: its ends, for validation to report
            out.extend([a] if a == b else [a, b])
            notes.add(f"{label} item {_short(item)} lies outside the unit; kept its ends")
            return
        before = [a] if a < lo else []
        after = [b] if b > hi else []
    size = hi - lo + 1
    if size > notes.expand_left:
        notes.add(f"{label} item {_short(item)} not expanded: the reply's budget of "
                  f"{_MAX_EXPANDED_INDICES:,} range indices is spent")
        out.extend(before + after)
        return
    notes.expand_left -= size
    out.extend(before)
    out.extend(range(lo, hi + 1))
    out.extend(after)
    clipped = " within the unit" if before or after else ""
    notes.add(f"{label} item {_short(item)} expanded as a range{clipped}")


def _coerce_model_list(value: Any, item_model: type[BaseModel], label: str, notes: _Notes,
                       errors: list[ValidationIssue]) -> list[Any]:
    if isinstance(value, dict):
        notes.add(f"{label} given as one object; read as a list")
        value = [value]
    if not isinstance(value, list):
        errors.append(ValidationIssue(IssueCode.SCHEMA_ERROR,
                                      f"{label} should be a list, got {type(value).__name__}"))
        return []
    out: list[Any] = []
    for k, item in enumerate(value):
        if not isinstance(item, dict):
            _drop(item_model, label, k, f"entry {_short(item)} is not an object", notes, errors)
            continue
        coerced = _coerce_model(item, item_model, f"{label}[{k}].", notes, errors)
        if item_model is Segment:
            problem = _segment_problem(coerced)
            if problem:
                _drop(item_model, label, k, problem, notes, errors)
                continue
            if coerced["from_idx"] > coerced["to_idx"]:
                notes.add(f"{label}[{k}] had from_idx > to_idx; swapped")
                coerced["from_idx"], coerced["to_idx"] = coerced["to_idx"], coerced["from_idx"]
        else:
            try:
                item_model.model_validate(coerced, strict=True)
            except ValidationError as exc:
                notes.add(f"{label}[{k}] dropped: {exc.errors()[0]['msg']}")
                continue
        out.append(coerced)
    return out


def _segment_problem(seg: dict[str, Any]) -> str | None:
    for key in ("from_idx", "to_idx"):
        if key not in seg:
            return f"{key} missing"
        if not isinstance(seg[key], int) or isinstance(seg[key], bool):
            return f"{key} {_short(seg[key])} is not an integer"
    if not isinstance(seg.get("subtitle", ""), str):
        return "subtitle is not text"
    return None


def _drop(item_model: type[BaseModel], label: str, k: int, why: str, notes: _Notes,
          errors: list[ValidationIssue]) -> None:
    if item_model is Segment:
        errors.append(ValidationIssue(IssueCode.SEGMENT_MALFORMED,
                                      f"segment entry {k + 1} unusable ({why}); it was ignored", k))
    else:
        notes.add(f"{label}[{k}] dropped: {why}")


def _count_malformed(errors: list[ValidationIssue]) -> None:
    """Keep the first :data:`_MAX_MALFORMED` unusable-entry errors; fold the rest into one."""
    malformed = [i for i, e in enumerate(errors) if e.code is IssueCode.SEGMENT_MALFORMED]
    if len(malformed) <= _MAX_MALFORMED:
        return
    extra = malformed[_MAX_MALFORMED:]
    first_extra = errors[extra[0]]
    keep = set(extra)
    errors[:] = [e for i, e in enumerate(errors) if i not in keep]
    errors.append(ValidationIssue(IssueCode.SEGMENT_MALFORMED,
                                  f"{len(extra)} more segment entries unusable; they were ignored",
                                  first_extra.segment))
