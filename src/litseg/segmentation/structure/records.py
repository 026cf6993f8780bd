"""The records of the analysis: blocks, heading candidates, structural units, the structure."""

from __future__ import annotations

from dataclasses import dataclass, field

from litseg.segmentation.types import MatterSpan


@dataclass(slots=True)
class Block:
    """A run of non-blank lines; offsets exclude the surrounding whitespace."""

    start: int
    end: int
    first: str  # first line, stripped
    n_lines: int
    n_words: int
    blank_before: int
    upper_only: bool
    prose: bool
    md_heading: bool
    first_end: int  # end offset of the first line (stripped)


@dataclass(slots=True)
class Heading:
    block: int
    start: int
    end: int  # end of the heading and its subtitle lines
    last_block: int  # last block consumed by the heading (subtitles included)
    kind: str  # chapter, book, ..., special kinds (prologue, ...), numeral_bare, ...
    family: str  # "kw", "numeral", "special", "apparatus", "md", "listed", "caps"
    rank: float
    number: int | None = None
    title: str = ""
    prefix: str = ""
    md_level: int = 0
    bare: bool = False  # no title on the heading line itself
    rest_words: int = 0  # body words in the heading's own block (heading glued to a paragraph)
    real: bool = False
    reason: str | None = None  # for apparatus: what kind of front/back matter it opens


@dataclass(slots=True)
class StructuralUnit:
    """A top-level narrative unit before word-cap splitting. ``children`` are the headings
    inside it (chapters of a story, numbered sections of a chapter) as ``(start, title)``:
    where an overlong unit is cut first."""

    start: int
    end: int
    kind: str
    title: str
    path: list[str] = field(default_factory=list)
    children: list[tuple[int, str]] = field(default_factory=list)


@dataclass(slots=True)
class Structure:
    body_start: int
    body_end: int
    segments: list[StructuralUnit]
    unit_kind: str = ""  # the heading kind chosen as unit ("" when none)
    front: tuple[int, int] | None = None  # front-matter span inside the stripped range
    back: tuple[int, int] | None = None  # back-matter span
    headings: list[Heading] = field(default_factory=list)  # all real candidates considered
    # front and back matter inside the analysed range, in text order: with the segments they
    # cover every non-whitespace character of it exactly once
    matter: list[MatterSpan] = field(default_factory=list)
    # the paragraphs (blank-line separated blocks) as (start, end, words), when they are exactly
    # what a blank-line split gives (not in Markdown texts): the word cap reuses them
    paragraphs: list[tuple[int, int, int]] = field(default_factory=list)
