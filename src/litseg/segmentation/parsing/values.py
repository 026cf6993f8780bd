"""Scalar and index-list values coerced to the types of the answer schema, each leniency noted."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from litseg.segmentation.parsing.limits import (
    MAX_EXPANDED_INDICES,
    MAX_INDEX_TEXT,
    MAX_RANGE_EXPANSION,
)
from litseg.segmentation.parsing.result import Notes, short
from litseg.segmentation.textsafe import clean_text


_INT_TEXT = re.compile(r"^[\[(]?\s*([+-]?\d+)(?:\.0*)?\s*[\])]?$")
_RANGE_GAP = re.compile(r"(?<=\d)\s*(-|\u2013|\.\.)\s*(?=[+-]?\d)|(?<=\d)\s+to\s+(?=\d)")
_RANGE_TEXT = re.compile(r"^([+-]?\d+)\s*(?:-|\u2013|\.\.|to)\s*([+-]?\d+)$")


def to_str(value: Any, label: str, notes: Notes) -> Any:
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


def to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None  # NaN and infinities are not
    if isinstance(value, str) and len(value) <= MAX_INDEX_TEXT:
        m = _INT_TEXT.match(value.strip())
        return int(m.group(1)) if m else None
    return None


def to_int_list(value: Any, label: str, notes: Notes) -> list[int]:
    if isinstance(value, bool):
        notes.add(f"{label} was a boolean; read as empty")
        return []
    if isinstance(value, (int, float)):
        number = to_int(value)
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
        number = to_int(v)
        if number is not None:
            if not from_text:
                converted[type(v).__name__] += 1
            out.append(number)
            continue
        m = _RANGE_TEXT.match(v.strip()) if isinstance(v, str) and len(v) <= MAX_INDEX_TEXT else None
        if m is None or int(m.group(1)) > int(m.group(2)):
            notes.add(f"{label} item {short(v)} is not an index; dropped")
        else:
            _expand_range(v, int(m.group(1)), int(m.group(2)), out, label, notes)
    for kind, count in converted.items():
        notes.add(f"{label} item given as {kind}; read as integer", count)
    return out


def _expand_range(item: str, a: int, b: int, out: list[int], label: str, notes: Notes) -> None:
    """Append the indices of the range ``a..b`` (``a <= b``): within ``1..n`` when the unit size
    is known, keeping an end that lies outside so that validation still reports it."""
    if notes.n is None:
        if b - a >= MAX_RANGE_EXPANSION:
            notes.add(f"{label} item {short(item)} is not an index; dropped")
            return
        lo, hi, before, after = a, b, [], []
    else:
        lo, hi = max(a, 1), min(b, notes.n)
        if lo > hi:  # wholly outside the unit: its ends, for validation to report
            out.extend([a] if a == b else [a, b])
            notes.add(f"{label} item {short(item)} lies outside the unit; kept its ends")
            return
        before = [a] if a < lo else []
        after = [b] if b > hi else []
    size = hi - lo + 1
    if size > notes.expand_left:
        notes.add(f"{label} item {short(item)} not expanded: the reply's budget of "
                  f"{MAX_EXPANDED_INDICES:,} range indices is spent")
        out.extend(before + after)
        return
    notes.expand_left -= size
    out.extend(before)
    out.extend(range(lo, hi + 1))
    out.extend(after)
    clipped = " within the unit" if before or after else ""
    notes.add(f"{label} item {short(item)} expanded as a range{clipped}")
