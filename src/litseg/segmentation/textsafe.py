"""Text and values that can always be written: the guard between model output and the disk.

A model's reply may carry strings no file can hold as UTF-8: a lone surrogate (``"\\ud83d"``, or
the first half of an emoji's escape pair cut at ``max_tokens``), and control characters (NUL,
escape, ...) that break terminals, HTML and downstream tools. JSON numbers of thousands of digits
cannot be turned into text at all under Python's integer conversion limit.

:func:`clean_text` replaces lone surrogates with U+FFFD (a proper surrogate pair becomes its
character) and removes C0 control characters other than tab, line feed and carriage return, plus
DEL. :func:`clean_value` does the same for every string (and dict key) inside a JSON-like value,
turns integers too long to print into a short description, and counts what it changed, so that
the caller can record a note. Both are no-ops, and cheap, on clean input.
"""

from __future__ import annotations

import re
from typing import Any

#: Characters :func:`clean_text` changes: C0 controls except \t \n \r, DEL, and surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Integers longer than this (in bits) are not written as numbers: ~3,900 decimal digits, under
#: Python's default limit of 4,300 digits for int <-> str conversion.
MAX_INT_BITS = 13_000


def has_unsafe_chars(text: str) -> bool:
    return _UNSAFE.search(text) is not None


def clean_text(text: str) -> tuple[str, int]:
    """``text`` with lone surrogates replaced by U+FFFD and control characters removed, and the
    number of characters changed."""
    if _UNSAFE.search(text) is None:
        return text, 0
    fixed = text
    if _SURROGATE.search(fixed) is not None:
        # UTF-16 round trip: a high+low pair becomes its character, a lone half becomes U+FFFD.
        fixed = fixed.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    fixed = _CONTROL.sub("", fixed)
    return fixed, len(_UNSAFE.findall(text))


def describe_long_int(value: int) -> str:
    return f"<integer of about {int(value.bit_length() * 0.30103) + 1} digits>"


def clean_value(value: Any) -> tuple[Any, int]:
    """A copy of the JSON-like ``value`` whose strings pass :func:`clean_text` and whose integers
    can be printed, and the number of changes. Works iteratively (no recursion limit)."""
    changes = 0

    def leaf(v: Any) -> Any:
        nonlocal changes
        if isinstance(v, str):
            fixed, k = clean_text(v)
            changes += k
            return fixed
        if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > MAX_INT_BITS:
            changes += 1
            return describe_long_int(v)
        return v

    if not isinstance(value, (dict, list, tuple)):
        return leaf(value), changes
    root: list[Any] = [None]
    # Each task fills one slot of a container already created: (source, target, slot).
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        src, target, slot = stack.pop()
        if isinstance(src, dict):
            out: dict[Any, Any] = {}
            target[slot] = out
            for k, v in src.items():
                key = leaf(k) if isinstance(k, str) else k
                if isinstance(v, (dict, list, tuple)):
                    out[key] = None
                    stack.append((v, out, key))
                else:
                    out[key] = leaf(v)
        elif isinstance(src, (list, tuple)):
            items: list[Any] = [None] * len(src)
            target[slot] = items
            for i, v in enumerate(src):
                if isinstance(v, (dict, list, tuple)):
                    stack.append((v, items, i))
                else:
                    items[i] = leaf(v)
        else:
            target[slot] = leaf(src)
    return root[0], changes
