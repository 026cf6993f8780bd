"""Lenient reading of model answers into the typed schemas.

Real models wrap their JSON in prose or Markdown fences, emit several objects, leave trailing
commas, use single quotes, stop mid-object at the token limit, write indices as strings or
floats, shape ``context_idx`` freely, swap ``from_idx``/``to_idx``, answer with a bare list of
segments or flatten the nested Lite answer. :func:`parse_answer` accepts all of that, and
records each leniency it applied as a note, so that a strict format check (``strict_ok``) stays
possible. Malformed JSON is mended with the ``json_repair`` library.

Every value is coerced by this module (the final model validation runs in pydantic's strict
mode), so nothing is converted silently.
"""

from __future__ import annotations

import json
import re
import typing
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import json_repair
from pydantic import BaseModel, ValidationError

from litseg.segmentation.schema import Segment, answer_segments, segments_path
from litseg.segmentation.validation import IssueCode, ValidationIssue

_MAX_CANDIDATES = 64  # JSON values considered per reply; bounds the work on pathological text
_MAX_RANGE_EXPANSION = 10_000  # "3-5" in context_idx expands; absurd ranges are dropped instead

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

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
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
    """Collects leniency notes; repeated notes are counted instead of listed again."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def add(self, msg: str) -> None:
        # One line per kind of leniency: list positions are folded into the count.
        self._counts[re.sub(r"\[\d+\]", "[*]", msg)] += 1

    def render(self) -> list[str]:
        return [m if c == 1 else f"{m} (x{c})" for m, c in self._counts.items()]


@dataclass(slots=True)
class _Candidate:
    value: Any
    start: int
    end: int
    repaired: bool = False
    surrounded: bool = False  # other text lay before or after it


def parse_answer(text: str, model: type[BaseModel]) -> ParseResult:
    """Read the answer of type ``model`` from a model's raw output ``text``."""
    if not isinstance(text, str):
        raise TypeError(f"expected the model's text, got {type(text).__name__}")
    global_notes: list[str] = []
    body = text
    if _THINK.search(body):
        body = _THINK.sub(" ", body)
        global_notes.append("removed <think> block")
    regions: list[str] = [m.group(1) for m in _FENCE.finditer(body) if m.group(1).strip()]
    if regions:
        global_notes.append("read JSON from a Markdown code fence")
    else:
        regions = [body]

    candidates: list[_Candidate] = []
    for region in regions:
        candidates.extend(_json_candidates(region))
    if not candidates:
        snippet = text.strip()[:80].replace("\n", " ")
        return ParseResult(None, [ValidationIssue(
            IssueCode.PARSE_ERROR, f"no JSON object found in the reply (starts: {snippet!r})")],
            global_notes)

    results = [(_fit_guarded(c, model), c) for c in candidates]
    best, chosen = max(results, key=lambda rc: (rc[0].value is not None, -len(rc[0].errors),
                                                len(rc[0].segments), rc[1].end - rc[1].start, rc[1].start))
    notes = list(global_notes)
    if len(candidates) > 1:
        notes.append(f"{len(candidates)} JSON values in the reply; used the best-fitting one")
    if chosen.surrounded:
        notes.append("ignored text around the JSON")
    if chosen.repaired:
        notes.append("repaired malformed or truncated JSON")
    best.notes = notes + best.notes
    return best


def _json_candidates(region: str) -> list[_Candidate]:
    """JSON values found in ``region``: strictly decoded where possible, mended otherwise."""
    stripped = region.strip()
    try:
        value = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):
        pass
    else:
        if isinstance(value, (dict, list)):
            return [_Candidate(value, 0, len(region))]
    found: list[_Candidate] = []
    decoder = json.JSONDecoder()
    pos = 0
    while len(found) < _MAX_CANDIDATES:
        starts = [i for i in (region.find("{", pos), region.find("[", pos)) if i >= 0]
        if not starts:
            break
        i = min(starts)
        try:
            value, end = decoder.raw_decode(region, i)
        except (json.JSONDecodeError, RecursionError):
            # Mend the bracketed stretch only, so that later values are still scanned.
            end = _bracket_extent(region, i)
            found.extend(_mended(region, i, end))
        else:
            if isinstance(value, (dict, list)) and value:
                found.append(_Candidate(value, i, end))
        pos = max(end, i + 1)
    for c in found:
        c.surrounded = bool(region[:c.start].strip() or region[c.end:].strip())
    return found


def _mended(region: str, start: int, end: int) -> list[_Candidate]:
    try:
        mended = json_repair.loads(region[start:end])
    except (ValueError, RecursionError):
        return []
    if isinstance(mended, list) and region[start] == "{":
        # json_repair returns several top-level objects as a list.
        return [_Candidate(v, start, end, True) for v in mended if isinstance(v, dict) and v]
    if isinstance(mended, (dict, list)) and mended:
        return [_Candidate(mended, start, end, True)]
    return []


def _bracket_extent(text: str, start: int) -> int:
    """End of the bracketed value opening at ``start`` (end of text when it never closes)."""
    depth = 0
    in_string = False
    escaped = False
    for j in range(start, len(text)):
        ch = text[j]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


# --------------------------------------------------------------------------------------------
# Fitting one JSON value to the model


def _fit_guarded(candidate: _Candidate, model: type[BaseModel]) -> ParseResult:
    try:
        return _fit(candidate, model)
    except RecursionError:
        return ParseResult(None, [ValidationIssue(IssueCode.SCHEMA_ERROR, "JSON nested too deeply")],
                           [], None)


def _fit(candidate: _Candidate, model: type[BaseModel]) -> ParseResult:
    notes = _Notes()
    errors: list[ValidationIssue] = []
    data = _reshape(candidate.value, model, notes)
    if not isinstance(data, dict):
        return ParseResult(None, [ValidationIssue(
            IssueCode.SCHEMA_ERROR, f"expected a JSON object for {model.__name__}, got {type(data).__name__}")],
            notes.render(), candidate.value)
    coerced = _coerce_model(data, model, "", notes, errors)
    try:
        value = model.model_validate(coerced, strict=True)
    except ValidationError as exc:
        issues = [ValidationIssue(
            IssueCode.SCHEMA_ERROR,
            f"{'.'.join(str(p) for p in e['loc']) or model.__name__}: {e['msg']}") for e in exc.errors()]
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
        target = key
        if key not in fields:
            norm = _normalise_key(key)
            target = norm if norm in fields else aliases.get(norm, key)
            if target != key and target in fields and target not in data:
                notes.add(f"read {key!r} as {target!r}")
            else:
                target = key
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
        return value
    if isinstance(value, list):
        notes.add(f"{label} given as a list; joined into text")
        return "\n".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value)
    if isinstance(value, (dict, int, float, bool)):
        notes.add(f"{label} given as {type(value).__name__}; written as text")
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return value


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
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
    if isinstance(value, str):
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
    for v in items:
        number = _to_int(v)
        if number is not None:
            if not (isinstance(v, int) and not isinstance(v, bool)) and not isinstance(value, str):
                notes.add(f"{label} item given as {type(v).__name__}; read as integer")
            out.append(number)
            continue
        m = _RANGE_TEXT.match(v.strip()) if isinstance(v, str) else None
        if m and 0 <= int(m.group(2)) - int(m.group(1)) < _MAX_RANGE_EXPANSION:
            notes.add(f"{label} item {v!r} expanded as a range")
            out.extend(range(int(m.group(1)), int(m.group(2)) + 1))
        else:
            notes.add(f"{label} item {v!r} is not an index; dropped")
    return out


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
            _drop(item_model, label, k, f"entry {json.dumps(item, ensure_ascii=False)[:40]} is not an object",
                  notes, errors)
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
            return f"{key} {seg[key]!r} is not an integer"
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

