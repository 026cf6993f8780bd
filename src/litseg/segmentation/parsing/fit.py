"""One JSON value fitted to the answer model: reshaped (unwrapped, wrapped, nested), keys
renamed, values coerced, unusable segment entries dropped.
"""

from __future__ import annotations

import re
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from litseg.segmentation.parsing.extract import Candidate
from litseg.segmentation.parsing.limits import MAX_MALFORMED
from litseg.segmentation.parsing.result import ParseResult, Notes, short
from litseg.segmentation.parsing.values import to_int, to_int_list, to_str
from litseg.segmentation.schema import Segment, segments_path
from litseg.segmentation.validation import IssueCode, ValidationIssue


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


def fit_guarded(candidate: Candidate, model: type[BaseModel], n: int | None) -> ParseResult:
    try:
        return _fit(candidate, model, n)
    except RecursionError:
        return ParseResult(None, [ValidationIssue(IssueCode.SCHEMA_ERROR, "JSON nested too deeply")],
                           [], None)


def _fit(candidate: Candidate, model: type[BaseModel], n: int | None) -> ParseResult:
    notes = Notes(n)
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


def _reshape(value: Any, model: type[BaseModel], notes: Notes) -> Any:
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


def _nest_flat(data: dict[str, Any], model: type[BaseModel], notes: Notes) -> dict[str, Any]:
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


def _coerce_model(data: dict[str, Any], model: type[BaseModel], where: str, notes: Notes,
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
            notes.add(f"ignored unknown key {short(key)}" + (f" in {where.rstrip('.')}" if where else ""))
        elif target in data or target in renamed:
            notes.add(f"{where}{target} given under two names; ignored {short(key)}")
        else:
            notes.add(f"read {short(key)} as {target!r}")
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


def _coerce_value(value: Any, annotation: Any, label: str, notes: Notes,
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
        return to_str(value, label, notes)
    if annotation is int:
        number = to_int(value)
        if number is not None and not (isinstance(value, int) and not isinstance(value, bool)):
            notes.add(f"{label} given as {type(value).__name__}; read as integer")
        return number if number is not None else value
    item = _list_item_type(annotation)
    if item is int:
        return to_int_list(value, label, notes)
    if item is not None and _model_type(item) is not None:
        return _coerce_model_list(value, _model_type(item), label, notes, errors)
    return value


def _coerce_model_list(value: Any, item_model: type[BaseModel], label: str, notes: Notes,
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
            _drop(item_model, label, k, f"entry {short(item)} is not an object", notes, errors)
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
            return f"{key} {short(seg[key])} is not an integer"
    if "subtitle" in seg and not isinstance(seg["subtitle"], str):  # optional: absent is fine
        return "subtitle is not text"
    return None


def _drop(item_model: type[BaseModel], label: str, k: int, why: str, notes: Notes,
          errors: list[ValidationIssue]) -> None:
    if item_model is Segment:
        errors.append(ValidationIssue(IssueCode.SEGMENT_MALFORMED,
                                      f"segment entry {k + 1} unusable ({why}); it was ignored", k))
    else:
        notes.add(f"{label}[{k}] dropped: {why}")


def _count_malformed(errors: list[ValidationIssue]) -> None:
    """Keep the first :data:`MAX_MALFORMED` unusable-entry errors; fold the rest into one."""
    malformed = [i for i, e in enumerate(errors) if e.code is IssueCode.SEGMENT_MALFORMED]
    if len(malformed) <= MAX_MALFORMED:
        return
    extra = malformed[MAX_MALFORMED:]
    first_extra = errors[extra[0]]
    keep = set(extra)
    errors[:] = [e for i, e in enumerate(errors) if i not in keep]
    errors.append(ValidationIssue(IssueCode.SEGMENT_MALFORMED,
                                  f"{len(extra)} more segment entries unusable; they were ignored",
                                  first_extra.segment))
