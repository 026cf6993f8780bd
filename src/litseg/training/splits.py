"""Fixed book splits of the teacher data (``data.split``): which books train, select or score.

A split file (``src/litseg/data/splits/<name>.json``, made by ``benchmarks/teacher_split.py``)
lists the books of ``validation`` (model selection), ``test`` (held out for the results tables)
and ``excluded`` (kept out of every split, e.g. books another benchmark scores); every other book
trains. Splitting by book keeps chapters of one book out of both sides.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

SPLITS_DIR = Path(__file__).resolve().parents[1] / "data" / "splits"
LISTED = ("validation", "test", "excluded")


def kind_of_source(source: str) -> str:
    """The kind of text a teacher record's source path holds, as the split balances them:
    fairytale (FairytaleQA stories), play (Shakespeare and other plays), poem (narrative poems) or
    prose (novels, tales, letters, essays)."""
    if "fairytaleqa" in source:
        return "fairytale"
    if "shakespeare" in source or "/play/" in source:
        return "play"
    if "narrative_poem" in source:
        return "poem"
    return "prose"


def packaged_splits() -> list[str]:
    return sorted(p.stem for p in SPLITS_DIR.glob("*.json"))


def load_book_split(name_or_path: str) -> dict[str, list[str]]:
    """The book lists of a packaged split (by name) or of a split file (by path)."""
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        path = SPLITS_DIR / f"{name_or_path}.json"
    if not path.is_file():
        raise ValueError(f"data.split={name_or_path!r}: no such file and no packaged split of that name "
                         f"(packaged: {', '.join(packaged_splits()) or 'none'})")
    raw = json.loads(path.read_text(encoding="utf-8"))
    lists = {key: [str(b) for b in raw.get(key) or []] for key in LISTED}
    seen: dict[str, str] = {}
    for key, books in lists.items():
        for book in books:
            if book in seen and seen[book] != key:
                raise ValueError(f"split {path}: book {book!r} is in both {seen[book]!r} and {key!r}")
            seen[book] = key
    return lists


UNLISTED = "train"  # a book that no list of the split names is a training book


def assign_books(book_ids: Iterable[str], split: dict[str, list[str]]) -> dict[str, str]:
    """Each book's split: the list that names it, else ``train``."""
    where = {book: key for key in LISTED for book in split[key]}
    return {book: where.get(book, UNLISTED) for book in set(book_ids)}
