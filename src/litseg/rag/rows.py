"""Readers of data records (a CSV row, a JSONL record, a summary dict): what a missing field reads
as, said once. Config values never come through here; they are typed (litseg.rag.config)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def text_of(row: Mapping[str, Any], key: str) -> str:
    """The field as text; ``""`` when absent or null (a blank cell)."""
    value = row.get(key)
    return "" if value is None else str(value)


def count_of(counts: Mapping[str, Any], key: str) -> Any:
    """The count under ``key``; 0 when absent (a category nobody chose)."""
    return counts[key] if key in counts else 0
