"""Reading one field out of a short model reply (the judge's rating, the reranker's verdict)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_FLAT_OBJECT = re.compile(r"\{[^{}]*\}")
#: Returned by :func:`json_field` when no JSON object of the reply has the key.
MISSING = object()


def json_field(text: str, key: str) -> Any:
    """``key`` of the first JSON object that holds it: the whole reply, else any flat ``{...}``
    inside it (models wrap their JSON in prose); :data:`MISSING` when none does."""
    t = text.strip()
    for candidate in (t, *_FLAT_OBJECT.findall(t)):
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, Mapping) and key in data:
            return data[key]
    return MISSING
