"""FairytaleQA story files (``*-story.csv``): one story's sections, read the same way by the
annotation run (a story file as a book source, :mod:`litseg.annotation.importing`) and by the
benchmark loader above it (:mod:`litseg.rag.benchmarks.fairytaleqa`), so a teacher record and a
benchmark question point into the same text."""

from __future__ import annotations

from pathlib import Path

from litseg.utils.tables import cell_text, join_sections, normalize_newlines, read_table, unwrap_hard_lines


def fairytaleqa_story_text(path: str | Path) -> str:
    """One story's text exactly as the benchmark loader builds it (sections, blank line between)."""
    _ids, parts = read_story_sections(Path(path), False, [])
    return join_sections(parts)[0]


def read_story_sections(path: Path, unwrap_lines: bool, warnings: list[str]) -> tuple[list[str], list[str]]:
    """The section ids and texts of a ``*-story.csv`` (repeated ids are kept, with a warning)."""
    rows = read_table(path)
    if rows and not {"section", "text"} <= set(rows[0]):
        raise ValueError(f"{path}: expected columns 'section,text', found {list(rows[0])}")
    ids: list[str] = []
    parts: list[str] = []
    for n, r in enumerate(rows, 2):
        sid, txt = cell_text(r.get("section")), r.get("text") or ""
        if not sid and not txt.strip():
            continue  # blank CSV line
        if not sid:
            raise ValueError(f"{path}:{n}: section text without a section id")
        if sid in ids:
            warnings.append(f"{path.name}:{n}: section id {sid!r} repeated; a cor_section naming it "
                            "gets every section with that id as evidence")
        body = normalize_newlines(txt).strip()
        if unwrap_lines:
            body = unwrap_hard_lines(body)
        ids.append(sid)
        parts.append(body)
    if not parts:
        raise ValueError(f"{path}: no sections")
    return ids, parts
