"""Where the books of an annotation run come from: files, globs, directories or a dataset.

``input=`` accepts

* a file, a directory (searched recursively) or a glob of ``.txt`` / ``.md`` / ``.epub`` /
  ``.html`` books, or a comma-free list of those (the reading layer's rules);
* ``hf:NAME[:SPLIT[:TEXT_COLUMN]]``: a Hugging Face dataset, loaded with
  ``datasets.load_dataset(NAME, split=SPLIT)`` (default split ``train``, column ``text``);
* ``dataset:PATH[:SPLIT[:TEXT_COLUMN]]``: a local dataset, either a directory written by
  ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``, or data files (``.jsonl``, ``.json``,
  ``.parquet``, ``.csv``, a directory or glob of them) read with the matching ``datasets`` builder.

Each dataset row is one book. Its id comes from ``id_column`` (default: the first of ``id``,
``book_id``, ``gutenberg_id`` that exists, else the row number), its title from ``title_column``
when present. Rows are read lazily, one at a time, so a corpus never has to fit in memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litseg.segmentation.reading import scan_inputs, slugify as _slug
from litseg.segmentation.types import Document

DATASET_PREFIXES = ("hf:", "dataset:")
_ID_COLUMNS = ("id", "book_id", "gutenberg_id")
_DATA_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}

Prepare = Callable[[Any], Document]


@dataclass
class BookSource:
    """One book to annotate, not read yet.

    ``label`` names it in logs, summaries and ``documents.jsonl``; ``load()`` reads and indexes it
    (raising on unreadable input); ``content_id()`` is a cheap hash of its raw content, used to
    skip a finished book on restart without reading it again; ``stored_text``: the decoded text
    is saved beside the outputs because it is not a file on disk.
    """

    label: str
    load: Callable[[], Document]
    content_id: Callable[[], str]
    stored_text: bool = False
    skip_reason: str | None = None  # a file named by the input that is not read (reported as skipped)

    @classmethod
    def skipped(cls, label: str, why: str) -> BookSource:
        """An input that is listed in the run's summary as skipped, with why, and never read."""

        def never() -> Any:
            raise RuntimeError(f"{label} is skipped ({why}); it is not read")

        return cls(label, never, never, skip_reason=why)


@dataclass(frozen=True)
class DatasetSpec:
    kind: str  # "hf" | "dataset"
    name: str
    split: str | None = None
    text_column: str = "text"


def parse_dataset_spec(spec: str) -> DatasetSpec:
    """``hf:NAME[:SPLIT[:COLUMN]]`` / ``dataset:PATH[:SPLIT[:COLUMN]]`` (empty parts: defaults)."""
    kind, _, rest = spec.partition(":")
    parts = rest.split(":")
    if not parts[0]:
        raise ValueError(f"input={spec!r}: name the dataset, e.g. {kind}:NAME[:SPLIT[:TEXT_COLUMN]]")
    if len(parts) > 3:
        raise ValueError(f"input={spec!r}: expected {kind}:NAME[:SPLIT[:TEXT_COLUMN]]")
    split = parts[1] if len(parts) > 1 and parts[1] else None
    column = parts[2] if len(parts) > 2 and parts[2] else "text"
    return DatasetSpec(kind, parts[0], split, column)


def is_dataset_spec(spec: Any) -> bool:
    return isinstance(spec, str) and spec.startswith(DATASET_PREFIXES)


def file_sources(spec: str | Path | Sequence[str | Path], prepare: Prepare) -> list[BookSource]:
    """The books ``spec`` names, then the files it names that are not books (skipped, with why)."""
    scan = scan_inputs(spec)
    return ([BookSource(str(p), (lambda p=p: prepare(p)), (lambda p=p: file_hash(p))) for p in scan.books]
            + [BookSource.skipped(str(p), why) for p, why in scan.skipped])


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_dataset_rows(spec: DatasetSpec) -> Any:
    """The ``datasets.Dataset`` a spec names (``datasets`` is imported only here)."""
    try:
        import datasets
    except ImportError as exc:
        raise ImportError("input=hf:/dataset: needs the `datasets` package: pip install datasets") from exc
    if spec.kind == "hf":
        return datasets.load_dataset(spec.name, split=spec.split or "train")
    path = Path(spec.name).expanduser()
    if path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists()):
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            split = spec.split or ("train" if "train" in loaded else next(iter(loaded)))
            if split not in loaded:
                raise ValueError(f"{path} has splits {sorted(loaded)}, not {split!r}")
            return loaded[split]
        return loaded
    files = sorted(p for p in path.rglob("*") if p.suffix in _DATA_BUILDERS) if path.is_dir() else None
    patterns = [str(p) for p in files] if files is not None else [str(path)]
    suffixes = {Path(p).suffix for p in patterns}
    builders = {_DATA_BUILDERS.get(s) for s in suffixes}
    if not patterns or None in builders or len(builders) != 1:
        raise ValueError(f"dataset:{spec.name}: expected a save_to_disk directory or data files of one "
                         f"kind ({', '.join(_DATA_BUILDERS)}); found {sorted(suffixes) or 'nothing'}")
    return datasets.load_dataset(builders.pop(), data_files=patterns, split=spec.split or "train")


def dataset_sources(spec_text: str, prepare: Prepare, *, id_column: str | None = None,
                    title_column: str | None = "title") -> Iterator[BookSource]:
    """One source per row of the dataset named by ``spec_text``."""
    spec = parse_dataset_spec(spec_text)
    rows = load_dataset_rows(spec)
    columns = list(rows.column_names)
    if spec.text_column not in columns:
        raise ValueError(f"{spec_text}: no text column {spec.text_column!r}; columns: {columns} "
                         f"(name it as {spec.kind}:{spec.name}:SPLIT:COLUMN)")
    if id_column is not None and id_column not in columns:
        raise ValueError(f"{spec_text}: no id column {id_column!r}; columns: {columns}")
    id_col = id_column or next((c for c in _ID_COLUMNS if c in columns), None)
    title_col = title_column if title_column in columns else None
    base = _slug(Path(spec.name).name or spec.name)
    split = spec.split or "train"

    def row_document(i: int, label: str) -> Document:
        row = rows[i]
        text = row[spec.text_column]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{label}: the {spec.text_column!r} column is empty or not text")
        book_id = _slug(str(row[id_col])) if id_col and row[id_col] is not None else f"{base}-{i:06d}"
        title = str(row[title_col] or "") if title_col else ""
        return Document(book_id=book_id, text=text.lstrip("\ufeff"), title=title, source_path=label,
                        encoding="dataset")

    for i in range(len(rows)):
        label = f"{spec.kind}:{spec.name}:{split}#{i}"
        yield BookSource(label, (lambda i=i, label=label: prepare(row_document(i, label))),
                         (lambda i=i: _text_hash(rows[i][spec.text_column])), stored_text=True)


def _text_hash(text: Any) -> str:
    return hashlib.sha256(str(text or "").encode("utf-8", "surrogatepass")).hexdigest()
