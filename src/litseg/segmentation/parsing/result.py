"""What reading a reply returns (:class:`ParseResult`) and the notes that record each leniency."""

from __future__ import annotations

import re
import reprlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from litseg.segmentation.parsing.limits import MAX_EXPANDED_INDICES, MAX_NOTE_KINDS
from litseg.segmentation.schema import Segment, answer_segments
from litseg.segmentation.validation import ValidationIssue


_POSITION = re.compile(r"\[\d+\]")


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


class Notes:
    """Collects leniency notes (repeated ones are counted instead of listed again) and carries
    what bounds the work on one reply: the unit size ``n`` when known and the range budget."""

    def __init__(self, n: int | None = None) -> None:
        self._counts: Counter[str] = Counter()
        self.overflow = 0
        self.n = n
        self.expand_left = MAX_EXPANDED_INDICES

    def add(self, msg: str, count: int = 1) -> None:
        # One line per kind of leniency: list positions are folded into the count.
        key = _POSITION.sub("[*]", msg)
        if key not in self._counts and len(self._counts) >= MAX_NOTE_KINDS:
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


def short(value: Any) -> str:
    """A bounded, printable rendering of any value for notes and messages."""
    try:
        return _SHORT.repr(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__}>"
