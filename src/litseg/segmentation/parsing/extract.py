"""JSON values found in a reply: fences and ``<think>`` blocks removed, bracketed stretches
decoded strictly, broken ones mended by ``json_repair`` within the reply's budget.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import json_repair

from litseg.segmentation.parsing.limits import (
    MAX_INT_DIGITS,
    MAX_MENDS,
    MAX_MEND_CHARS,
    MAX_MEND_DEPTH,
)


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


FENCE = re.compile(r"```[ \t]*(?:json5?|JSON)?[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)


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
    if len(digits) > MAX_INT_DIGITS:
        return f"<a number of {len(digits)} digits>"
    return int(digits)


@dataclass(slots=True)
class Budget:
    """Work left for json_repair on this reply, and what was refused."""

    mends: int = MAX_MENDS
    chars: int = MAX_MEND_CHARS
    refused: Counter[str] = field(default_factory=Counter)
    capped: bool = False  # stopped looking for JSON values after _MAX_CANDIDATES


@dataclass(slots=True)
class Candidate:
    value: Any
    start: int
    end: int
    repaired: bool = False
    surrounded: bool = False  # other text lay before or after it
    duplicates: list[str] = field(default_factory=list)


def strip_think(body: str) -> tuple[str, bool]:
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


def json_candidates(region: str, budget: Budget, room: int) -> list[Candidate]:
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
            return [Candidate(value, 0, len(region), duplicates=reader.duplicates)]
    found: list[Candidate] = []
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
                found.append(Candidate(value, i, i + used, duplicates=reader.duplicates))
        pos = max(end, i + 1)
    for c in found:
        c.surrounded = bool(region[:c.start].strip() or region[c.end:].strip())
    return found


def _mended(region: str, start: int, end: int, depth: int, budget: Budget) -> list[Candidate]:
    stretch = region[start:end]
    if "{" not in stretch:
        return []  # no object can come out of it
    if depth > MAX_MEND_DEPTH:
        budget.refused[f"JSON nested more than {MAX_MEND_DEPTH} deep"] += 1
        return []
    if budget.mends <= 0 or len(stretch) > budget.chars:
        budget.refused[f"broken JSON beyond the repair budget ({MAX_MENDS} stretches, "
                       f"{MAX_MEND_CHARS:,} characters)"] += 1
        return []
    budget.mends -= 1
    budget.chars -= len(stretch)
    try:
        mended = json_repair.loads(_quote_bare_keys(stretch))
    except (ValueError, RecursionError):
        return []
    if isinstance(mended, list) and region[start] == "{":
        # json_repair returns several top-level objects as a list.
        return [Candidate(v, start, end, True) for v in mended if isinstance(v, dict) and v]
    if _useful(mended):
        return [Candidate(mended, start, end, True)]
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
