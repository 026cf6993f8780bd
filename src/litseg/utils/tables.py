"""Reading the files benchmarks and book sources ship as: text files, tables (CSV, TSV, JSONL, JSON,
XLSX, Parquet), hub datasets, and the small cell readers the loaders share. It sits at the bottom
of the layers so that the annotation layer (story files as book sources) and the benchmark
loaders of ``litseg.rag`` read a file the same way."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

Span = tuple[int, int]


# ------------------------------------------------------------------------------------ file input
def read_text_file(path: str | Path) -> str:
    """Decode a text file: UTF-8 (BOM removed) or, failing that, the encoding that
    charset-normalizer finds. Line endings are kept."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(raw).best()
        if best is None:
            raise ValueError(f"{path}: cannot determine the text encoding") from None
        return str(best)


def normalize_newlines(text: str) -> str:
    """``\\r\\n`` and bare ``\\r`` (used inside several FairytaleQA fields) become ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


_SINGLE_NL = re.compile(r"(?<=\S)[ \t]*\n[ \t]*(?=\S)")


def unwrap_hard_lines(text: str) -> str:
    """Join hard-wrapped lines: a single newline between two non-blank lines becomes a space.
    Blank lines (paragraph breaks) stay. Leading/trailing blanks of the joined lines go too."""
    return _SINGLE_NL.sub(" ", text)


def read_table(path: str | Path, sheet: str | int = 0) -> list[dict[str, Any]]:
    """Rows of a .csv/.tsv, .jsonl/.json, .xlsx or .parquet file as dicts keyed by header."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".csv", ".tsv"):
        with p.open(newline="", encoding="utf-8-sig") as fh:
            return [dict(r) for r in csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")]
    if suffix == ".jsonl":
        rows = []
        with p.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{p}:{n}: not valid JSON ({exc.msg})") from None
        return rows
    if suffix == ".json":
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{p}: expected a JSON list of records")
        return data
    if suffix == ".xlsx":
        from openpyxl import load_workbook

        wb = load_workbook(p, read_only=True, data_only=True)
        try:
            ws = wb.worksheets[sheet] if isinstance(sheet, int) else wb[sheet]
            it = ws.iter_rows(values_only=True)
            header = next(it, None)
            if header is None:
                return []
            names = [str(h).strip() if h is not None else f"col{i}" for i, h in enumerate(header)]
            return [dict(zip(names, r)) for r in it if any(v is not None for v in r)]
        finally:
            wb.close()
    if suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(p).to_dict(orient="records")
    raise ValueError(f"{p}: unsupported table format {suffix!r} (csv, tsv, jsonl, json, xlsx, parquet)")


def hub_rows(name: str, split: str, config: str | None = None) -> list[dict[str, Any]]:
    """Rows of a Hugging Face hub dataset (``datasets`` is imported here: it is optional)."""
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise ImportError("hub=... needs the `datasets` package (pip install datasets) and hub "
                          "access; or pass a local path instead") from exc
    return [dict(r) for r in load_dataset(name, config, split=split)]


def is_blank(v: Any, placeholders: bool = False) -> bool:
    """Empty cell. ``placeholders`` also treats the strings "None"/"nan" as empty, as GutenQA's
    tables write them in rows without a question; elsewhere "none" can be a real answer."""
    if v is None:
        return True
    if isinstance(v, float) and v != v:  # NaN from pandas
        return True
    if not isinstance(v, str):
        return False
    return v.strip().lower() in (("", "none", "nan") if placeholders else ("",))


def cell_text(v: Any) -> str:
    """A cell as stripped text; an empty cell is ``""``."""
    return "" if is_blank(v) else str(v).strip()


def gutenqa_cell(v: Any) -> str:
    """A GutenQA cell, its "None" placeholders read as empty."""
    return "" if is_blank(v, placeholders=True) else str(v).strip()


def unique_nonempty(items: Iterable[str]) -> list[str]:
    """The non-empty items, each once, in first-seen order."""
    seen: set[str] = set()
    out = []
    for x in items:
        if x and x not in seen:
            seen.add(x)
            out.append(x)
    return out


def join_sections(parts: Sequence[str], sep: str = "\n\n", headings: Sequence[str | None] | None = None
                   ) -> tuple[str, list[Span]]:
    """Join section texts with ``sep`` and return the text and each section's exact span; a
    heading, where given, is written on its own paragraph before its section."""
    chunks: list[str] = []
    spans: list[Span] = []
    pos = 0
    for i, part in enumerate(parts):
        head = headings[i] if headings is not None else None
        if head:
            if chunks:
                chunks.append(sep)
                pos += len(sep)
            chunks.append(head)
            pos += len(head)
        if chunks:
            chunks.append(sep)
            pos += len(sep)
        chunks.append(part)
        spans.append((pos, pos + len(part)))
        pos += len(part)
    return "".join(chunks), spans

