"""Records for ``method=imported`` written from a book as the project reads it: one record per
unit, its sentences as spans, one segment over the whole unit. Tests that need an imported run
of a book of their own write it with this."""

from __future__ import annotations

import json
from pathlib import Path

from litseg.segmentation.preprocess import prepare_document


def write_whole_unit_records(book: Path, path: Path, *, uid_prefix: str, subtitle: str) -> Path:
    """``path`` (JSONL) with a record per unit of ``book``; each record's one block covers its unit."""
    doc = prepare_document(book)
    with path.open("w", encoding="utf-8") as fh:
        for u in doc.units:
            spans = [[s.start - u.start, s.end - u.start] for s in u.sentences]
            fh.write(json.dumps({"uid": f"{uid_prefix}-{u.unit_id}", "source": str(book), "text": doc.text[u.start:u.end],
                                 "sentences": spans, "annotation": {"segments": [
                                     {"subtitle": subtitle, "from_idx": 1, "to_idx": len(spans)}]}}) + "\n")
    return path
