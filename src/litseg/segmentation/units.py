"""Narrative units of a document and the word-cap split of overlong units.

:func:`find_units` strips Project Gutenberg boilerplate, finds the structure and returns units
that tile the body: every non-whitespace character between ``doc.body_start`` and
``doc.body_end`` lies in exactly one unit. Units longer than ``max_words`` words are split at
paragraph (blank line) boundaries, then sentence boundaries, then line breaks and finally between
words, packing pieces greedily under the cap. Unit ids are zero-padded and sort in reading
order: ``"0007"`` for a whole unit, ``"0007-02"`` for the second piece of a split one.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

from litseg.segmentation import sentences as _sentences
from litseg.segmentation.gutenberg import gutenberg_bounds
from litseg.segmentation.structure import Segment, Structure, analyze_structure
from litseg.segmentation.types import Document, Unit

_PARAGRAPH_BREAK = re.compile(r"(?:\r\n|\r(?!\n)|\n)[^\S\r\n]*(?:\r\n|\r(?!\n)|\n)\s*")
_LINE_BREAK = re.compile(r"(?:\r\n|\r(?!\n)|\n)\s*")
_WORDS = re.compile(r"\S+")


def count_words(text: str, start: int = 0, end: int | None = None) -> int:
    """Whitespace-separated words in ``text[start:end]``."""
    return len(text[start:end].split())


def find_units(doc: Document, *, max_words: int = 2000, keep_front_matter: bool = False) -> list[Unit]:
    """Top-level narrative units of ``doc``, split under ``max_words`` words.

    The body is always derived from the whole ``doc.text`` (so calling this again gives the same
    units): ``doc.body_start``/``doc.body_end`` are set to the narrative body - licence, front
    matter and back matter excluded - and the units are returned (``doc.units`` is left alone).
    With ``keep_front_matter`` the text between the licence header and the first heading (title
    page, preface, contents) becomes a unit of kind ``"front_matter"`` and the body starts there.
    """
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"max_words must be a positive int, got {max_words!r}")
    start, end = gutenberg_bounds(doc.text)
    structure = analyze_structure(doc.text, start, end)
    return units_from_structure(doc, structure, max_words=max_words,
                                keep_front_matter=keep_front_matter)


def units_from_structure(doc: Document, structure: Structure, *, max_words: int = 2000,
                         keep_front_matter: bool = False) -> list[Unit]:
    """The second half of :func:`find_units`: set the body bounds from an analysed structure
    and build capped units from its segments."""
    segments = list(structure.segments)
    body_start, body_end = structure.body_start, structure.body_end
    if keep_front_matter and structure.front is not None:
        fs, fe = structure.front
        fe = _rstrip(doc.text, fs, fe)
        if fe > fs:
            segments.insert(0, Segment(fs, fe, "front_matter", "Front matter", []))
            body_start = fs
    doc.body_start, doc.body_end = body_start, max(body_start, body_end)
    return build_units(doc, segments, max_words=max_words)


def build_units(doc: Document, segments: list[Segment], *, max_words: int) -> list[Unit]:
    """Units from structure segments, with ids, indices and cap splitting."""
    units: list[Unit] = []
    width = max(4, len(str(len(segments))))
    for n, seg in enumerate(segments, 1):
        base = f"{n:0{width}d}"
        s, e = _strip(doc.text, seg.start, seg.end)
        if e <= s:
            continue
        pieces = split_by_cap(doc.text, s, e, max_words)
        if len(pieces) == 1:
            units.append(Unit(book_id=doc.book_id, unit_id=base, index=0, start=s, end=e,
                              title=seg.title, kind=seg.kind, path=list(seg.path)))
            continue
        pw = max(2, len(str(len(pieces))))
        for k, (ps, pe) in enumerate(pieces, 1):
            units.append(Unit(book_id=doc.book_id, unit_id=f"{base}-{k:0{pw}d}", index=0,
                              start=ps, end=pe, title=seg.title, kind=seg.kind,
                              path=list(seg.path), part=(k, len(pieces))))
    for i, u in enumerate(units):
        u.index = i
    return units


def split_by_cap(text: str, start: int, end: int, max_words: int) -> list[tuple[int, int]]:
    """Cut ``text[start:end]`` into spans of at most ``max_words`` words each (whitespace
    trimmed, together covering every non-whitespace character), preferring paragraph breaks,
    then sentence ends, then line breaks, then word boundaries; pieces are packed greedily."""
    start, end = _strip(text, max(0, start), min(end, len(text)))
    if end <= start:
        return []
    if count_words(text, start, end) <= max_words:
        return [(start, end)]
    return _pack(text, _pieces(text, start, end, max_words, level=0), max_words)


_LEVELS = ("paragraph", "sentence", "line", "word")


def _pieces(text: str, start: int, end: int, max_words: int, level: int) -> list[tuple[int, int, int]]:
    """``(start, end, words)`` pieces no longer than the cap, finest split only where needed."""
    spans = _split_level(text, start, end, _LEVELS[level], max_words)
    out: list[tuple[int, int, int]] = []
    for s, e in spans:
        n = count_words(text, s, e)
        if n > max_words and level + 1 < len(_LEVELS):
            out.extend(_pieces(text, s, e, max_words, level + 1))
        else:
            out.append((s, e, n))
    return out


def _split_level(text: str, start: int, end: int, level: str, max_words: int) -> list[tuple[int, int]]:
    if level == "paragraph":
        return _split_on(text, start, end, _PARAGRAPH_BREAK)
    if level == "line":
        return _split_on(text, start, end, _LINE_BREAK)
    if level == "sentence":
        spans = sentence_spans(text, start, end, max_words)
        return spans if len(spans) > 1 else [(start, end)]
    # word level: hard windows of max_words words
    words = [(m.start(), m.end()) for m in _WORDS.finditer(text, start, end)]
    return [(words[i][0], words[min(i + max_words, len(words)) - 1][1])
            for i in range(0, len(words), max_words)]


def _split_on(text: str, start: int, end: int, sep: re.Pattern[str]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = start
    for m in sep.finditer(text, start, end):
        s, e = _strip(text, pos, m.start())
        if e > s:
            out.append((s, e))
        pos = m.end()
    s, e = _strip(text, pos, end)
    if e > s:
        out.append((s, e))
    return out


def _pack(text: str, pieces: list[tuple[int, int, int]], max_words: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    cur_start = cur_end = -1
    cur_words = 0
    for s, e, n in pieces:
        if cur_start >= 0 and cur_words + n > max_words:
            out.append((cur_start, cur_end))
            cur_start = -1
            cur_words = 0
        if cur_start < 0:
            cur_start = s
        cur_end = e
        cur_words += n
    if cur_start >= 0:
        out.append((cur_start, cur_end))
    return out


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    return start, _rstrip(text, start, end)


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


# ---------------------------------------------------------------------------- sentence splitter

_ACCEPTS_MAX_WORDS: dict[Callable[..., object], bool] = {}


def splitter_caps_sentences() -> bool:
    """Whether the current sentence splitter accepts ``max_words`` (checked once per function)."""
    fn = _sentences.split_spans
    accepts = _ACCEPTS_MAX_WORDS.get(fn)
    if accepts is None:
        try:
            params = inspect.signature(fn).parameters
            accepts = "max_words" in params or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):
            accepts = False
        _ACCEPTS_MAX_WORDS[fn] = accepts
    return accepts


def sentence_spans(text: str, start: int, end: int, max_words: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans from :func:`litseg.segmentation.sentences.split_spans` (looked up at call
    time). ``max_words`` is passed only when given and the splitter accepts it."""
    fn = _sentences.split_spans
    if max_words is not None and splitter_caps_sentences():
        return fn(text, start, end, max_words=max_words)
    return fn(text, start, end)


__all__ = ["build_units", "count_words", "find_units", "sentence_spans", "split_by_cap",
           "splitter_caps_sentences", "units_from_structure"]
