"""Structure of a book: headings, front and back matter, and top-level narrative segments.

The text is read as blocks (runs of non-blank lines). Short blocks are matched against heading
patterns (``CHAPTER I.``, ``Chapter the First``, ``Book the First--The Long Night``, ``FIRST
ACT``, ``Inferno: Canto I``, bare or titled numerals such as ``XIV`` or ``I  The Old Pyncheon
Family``, letters ``TO MISS PEABODY``, Markdown ``## ACT I`` ...). A candidate heading only counts
when body text follows it - directly or through a deeper heading (``BOOK ONE`` -> ``I.`` ->
prose) - which is what tells a table of contents (a run of headings with nothing between them)
from the real headings later on. Numbered headings must also form a plausible sequence.

A contents list is evidence of the top level. Its entries are aligned, in order, with short
blocks of the body; when most of its titled entries are found, those titles are the units
(stories, essays, poems, letters, plays), entries listed above them group them (``Pussy
Tales``, ``ODES.--1818-28``) and numbered headings inside them (chapters of a story, cantos of
a poem, scenes of a play) are the units' children. Otherwise one heading kind is chosen as the
unit (scene before act, chapter-like kinds before numerals before books/parts/volumes);
shallower kinds become containers (``Unit.path``), deeper ones children. Without either,
upper-case titles after wider gaps than the book's paragraphs are tried; with no heading at all
the whole body is one segment.

Nothing between the Project Gutenberg markers is lost: what precedes the first unit and follows
the last one is split into matter spans with a reason (title page, contents, preface,
dedication, index, transcriber's note, adverts, licence, ...). Prose before the first heading
that no apparatus heading claims and no later front matter follows is narrative, and becomes a
unit of its own.

The package, in the order of the analysis: ``blocks`` (the text as blocks), ``numbers`` and
``patterns`` (what a heading looks like), ``headings`` (candidates), ``realness`` (which are
real), ``contents`` and ``works`` (the top level read from a contents list), ``choice`` (the
heading kind chosen as unit), ``matter`` (front and back matter), ``build`` (the units built)
and ``analysis`` (:func:`analyze_structure`, which runs them). ``records`` holds the dataclasses
and ``thresholds`` the word counts and shares.
"""

from __future__ import annotations

from litseg.segmentation.structure.analysis import analyze_structure
from litseg.segmentation.structure.blocks import scan_blocks, wide_gap
from litseg.segmentation.structure.contents import Entry, align_contents, parse_contents, parse_entry
from litseg.segmentation.structure.headings import (
    apparatus_reason,
    caps_title_candidates,
    classify_line,
    find_candidates,
)
from litseg.segmentation.structure.matter import back_matter, back_matter_start, front_matter
from litseg.segmentation.structure.numbers import ORDINALS, WORD_NUMBERS, parse_number, roman_to_int
from litseg.segmentation.structure.patterns import KIND_RANK
from litseg.segmentation.structure.realness import filter_sequences, mark_real, merge_numeral_kinds
from litseg.segmentation.structure.records import Block, Heading, StructuralUnit, Structure
from litseg.segmentation.structure.thresholds import (
    LIST_BREAK_WORDS,
    MAX_FRONT_SHARE,
    MAX_FRONT_WORDS,
    MAX_UNIT_SHARE,
    MIN_CONTAINER_PROSE,
    MIN_LISTED_SHARE,
    MIN_NARRATIVE_WORDS,
    MIN_PROSE,
)
from litseg.segmentation.structure.works import Works, find_works

__all__ = [
    "KIND_RANK", "LIST_BREAK_WORDS", "MAX_FRONT_SHARE", "MAX_FRONT_WORDS", "MAX_UNIT_SHARE",
    "MIN_CONTAINER_PROSE", "MIN_LISTED_SHARE", "MIN_NARRATIVE_WORDS", "MIN_PROSE", "ORDINALS",
    "WORD_NUMBERS", "Block", "Entry", "Heading", "StructuralUnit", "Structure", "Works",
    "align_contents", "analyze_structure", "apparatus_reason", "back_matter", "back_matter_start",
    "caps_title_candidates", "classify_line", "filter_sequences", "find_candidates", "find_works",
    "front_matter", "mark_real", "merge_numeral_kinds", "parse_contents", "parse_entry",
    "parse_number", "roman_to_int", "scan_blocks", "wide_gap",
]
