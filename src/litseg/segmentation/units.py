"""Narrative units of a document and the word-cap split of overlong units.

:func:`find_units` strips Project Gutenberg boilerplate, finds the structure and returns units
that tile the body: every non-whitespace character between ``doc.body_start`` and
``doc.body_end`` lies in exactly one unit, and every one between the Gutenberg markers lies in
a unit or in one of the recorded matter spans (``doc.matter``); the front and back matter
readers ask about (prefaces, introductions, notes, ...) is in units of its own, flagged
``Unit.matter``, before and after the body. Units longer than ``max_words``
words are split at their children's headings, then at paragraph (blank line) boundaries, then
sentence boundaries, then line breaks and finally between words, packing pieces greedily under
the cap. Unit ids are zero-padded and sort in reading
order: ``"0007"`` for a whole unit, ``"0007-02"`` for the second piece of a split one.
"""

from __future__ import annotations

import inspect
import re
from bisect import bisect_left
from collections.abc import Callable

from litseg.segmentation import sentences as _sentences
from litseg.segmentation.gutenberg import credit_spans, gutenberg_bounds, header_end, header_metadata
from litseg.segmentation.structure import StructuralUnit, Structure, analyze_structure
from litseg.segmentation.types import INDEXED_MATTER, NEVER_INDEXED, Document, MatterSpan, Unit

_PARAGRAPH_BREAK = re.compile(r"(?:\r\n|\r(?!\n)|\n)[^\S\r\n]*(?:\r\n|\r(?!\n)|\n)\s*")
_LINE_BREAK = re.compile(r"(?:\r\n|\r(?!\n)|\n)\s*")
_WORDS = re.compile(r"\S+")


def count_words(text: str, start: int = 0, end: int | None = None) -> int:
    """Whitespace-separated words in ``text[start:end]``."""
    return len(text[start:end].split())


def find_units(doc: Document, *, max_words: int, keep_front_matter: bool, index_matter: bool) -> list[Unit]:
    """Top-level narrative units of ``doc``, split under ``max_words`` words, and (with
    ``index_matter``) units made of the front and back matter readers ask about.

    The body is always derived from the whole ``doc.text`` (so calling this again gives the same
    units): ``doc.body_start``/``doc.body_end`` are set to the narrative body - licence, front
    matter and back matter excluded - and the units are returned (``doc.units`` is left alone).
    With ``index_matter`` every introduction, preface, dedication, extract, note, appendix,
    glossary and cast list (:data:`~litseg.segmentation.types.INDEXED_MATTER`) becomes a unit of
    kind ``"front_matter"`` or ``"back_matter"`` with ``Unit.matter`` set to its reason; with
    ``keep_front_matter`` so does every other front span that may be read (an epigraph, a note
    to the reader). Title pages, contents, credits, licence text, adverts and the like
    (:data:`~litseg.segmentation.types.NEVER_INDEXED`) are never in a unit. ``doc.matter`` gets
    the matter spans between the Project Gutenberg markers that are in no unit, with their
    reasons: units and those spans hold every non-whitespace character between the markers
    exactly once.
    """
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"max_words must be a positive int, got {max_words!r}")
    start, end = gutenberg_bounds(doc.text)
    # a document made from a string rather than read from a file: its header still names the book
    title, author = (doc.title, doc.author) if doc.title or doc.author else header_metadata(doc.text)
    structure = analyze_structure(doc.text, start, end, author=author, title=title)
    return units_from_structure(doc, structure, max_words=max_words, keep_front_matter=keep_front_matter,
                                index_matter=index_matter)


def indexed_matter(span: MatterSpan, *, keep_front_matter: bool, index_matter: bool) -> bool:
    """Does this matter span become a unit under these settings?"""
    if span.reason in NEVER_INDEXED:
        return False
    if span.where == "front" and keep_front_matter:
        return True
    return index_matter and span.reason in INDEXED_MATTER


def units_from_structure(doc: Document, structure: Structure, *, max_words: int, keep_front_matter: bool,
                         index_matter: bool) -> list[Unit]:
    """The second half of :func:`find_units`: set the body bounds and the matter spans from an
    analysed structure and build capped units from its segments (and its indexed matter)."""
    body_start, body_end = structure.body_start, structure.body_end
    matter = list(structure.matter)
    indexed = [m for m in matter if indexed_matter(m, keep_front_matter=keep_front_matter,
                                                   index_matter=index_matter)]
    credits = _credit_spans(doc.text, min([body_start] + [m.start for m in matter]))
    doc.matter = credits + [m for m in matter if m not in indexed]
    doc.body_start, doc.body_end = body_start, max(body_start, body_end)
    units = build_units(doc, list(structure.segments), max_words=max_words, paragraphs=structure.paragraphs)
    if indexed:
        units = _with_matter_units(doc, units, indexed, len(structure.segments), max_words,
                                   structure.paragraphs)
    return units


def _with_matter_units(doc: Document, units: list[Unit], spans: list[MatterSpan], n_segments: int,
                       max_words: int, paragraphs: list[tuple[int, int, int]]) -> list[Unit]:
    """The narrative units with the matter units before and after them. The narrative units keep
    their ids (a run made before matter was indexed resumes): front matter is numbered under
    segment 0 (``0000-01``, ``0000-02``), back matter after the last segment."""
    width = _id_width(n_segments)
    cap = _Paragraphs(doc.text, paragraphs).split
    front = [m for m in spans if m.where == "front"]
    back = [m for m in spans if m.where != "front"]
    before: list[Unit] = []
    for k, m in enumerate(front, 1):
        before += _matter_pieces(doc, m, f"{0:0{width}d}-{k:02d}", cap(m.start, m.end, max_words))
    after: list[Unit] = []
    for k, m in enumerate(back, 1):
        after += _matter_pieces(doc, m, f"{n_segments + k:0{width}d}", cap(m.start, m.end, max_words))
    out = before + units + after
    for i, u in enumerate(out):
        u.index = i
    return out


def _matter_pieces(doc: Document, span: MatterSpan, base: str, pieces: list[tuple[int, int]]) -> list[Unit]:
    kind = "front_matter" if span.where == "front" else "back_matter"
    title = span.title or span.reason.capitalize()
    if len(pieces) == 1:
        s, e = pieces[0]
        return [Unit(book_id=doc.book_id, unit_id=base, index=0, start=s, end=e, title=title, kind=kind,
                     matter=span.reason)]
    pw = max(2, len(str(len(pieces))))
    return [Unit(book_id=doc.book_id, unit_id=f"{base}-{k:0{pw}d}", index=0, start=s, end=e, title=title,
                 kind=kind, part=(k, len(pieces)), matter=span.reason) for k, (s, e) in enumerate(pieces, 1)]


def _id_width(n_segments: int) -> int:
    return max(4, len(str(n_segments)))


def _credit_spans(text: str, before: int) -> list[MatterSpan]:
    """Transcriber credits between the Gutenberg header and ``before`` (the analysed range)."""
    begin = header_end(text, before)
    if begin is None:
        return []
    return [MatterSpan(s, e, "credits", "", "front") for s, e in credit_spans(text, begin, before)]


class _Paragraphs:
    """Cap splitting that reuses the paragraphs (and their word counts) the structure pass
    already found, instead of splitting and counting the text again; spans that do not start
    and end on those paragraphs fall back to :func:`split_by_cap`."""

    def __init__(self, text: str, paragraphs: list[tuple[int, int, int]]) -> None:
        self.text = text
        self.paras = paragraphs
        self.starts = [p[0] for p in paragraphs]
        self.acc = [0]
        for _, _, n in paragraphs:
            self.acc.append(self.acc[-1] + n)

    def split(self, start: int, end: int, max_words: int) -> list[tuple[int, int]]:
        text = self.text
        start, end = _strip(text, max(0, start), min(end, len(text)))
        if end <= start:
            return []
        lo = bisect_left(self.starts, start)
        hi = bisect_left(self.starts, end)
        if lo >= len(self.paras) or self.starts[lo] != start or self.paras[hi - 1][1] != end:
            return split_by_cap(text, start, end, max_words)  # not on paragraph boundaries
        if self.acc[hi] - self.acc[lo] <= max_words:
            return [(start, end)]
        pieces: list[tuple[int, int, int]] = []
        for ps, pe, n in self.paras[lo:hi]:
            if n > max_words:
                pieces.extend(capped_pieces(text, ps, pe, max_words, level=1))
            else:
                pieces.append((ps, pe, n))
        return pack(text, pieces, max_words)


def build_units(doc: Document, segments: list[StructuralUnit], *, max_words: int,
                paragraphs: list[tuple[int, int, int]] | None = None) -> list[Unit]:
    """Units from structure segments, with ids, indices and cap splitting. An overlong segment
    with children (the chapters of a story, the sections of a chapter) is cut at them first;
    its pieces carry the segment's title in their path and the child's title as their own.
    ``paragraphs`` (from the structure) spare splitting and counting the text again."""
    units: list[Unit] = []
    width = _id_width(len(segments))
    cap = _Paragraphs(doc.text, paragraphs or []).split
    for n, seg in enumerate(segments, 1):
        base = f"{n:0{width}d}"
        s, e = _strip(doc.text, seg.start, seg.end)
        if e <= s:
            continue
        pieces = [(ps, pe, seg.title) for ps, pe in cap(s, e, max_words)]
        path = list(seg.path)
        if len(pieces) > 1 and seg.children:
            pieces = _split_at_children(doc.text, s, e, seg, max_words, cap)
            path = path + [seg.title] if seg.title else path
        if len(pieces) == 1:
            units.append(Unit(book_id=doc.book_id, unit_id=base, index=0, start=s, end=e,
                              title=seg.title, kind=seg.kind, path=list(seg.path)))
            continue
        pw = max(2, len(str(len(pieces))))
        for k, (ps, pe, title) in enumerate(pieces, 1):
            units.append(Unit(book_id=doc.book_id, unit_id=f"{base}-{k:0{pw}d}", index=0,
                              start=ps, end=pe, title=title, kind=seg.kind,
                              path=list(path), part=(k, len(pieces))))
    for i, u in enumerate(units):
        u.index = i
    return units


def _split_at_children(text: str, start: int, end: int, seg: StructuralUnit, max_words: int,
                       cap: Callable[[int, int, int], list[tuple[int, int]]] | None = None,
                       ) -> list[tuple[int, int, str]]:
    """Pieces of an overlong segment cut at its children's headings, each child capped on its
    own, then packed greedily under the cap; a piece is titled after the child it starts in."""
    cuts = [(start, seg.title)] + [(c, t) for c, t in seg.children if start < c < end]
    if len(cuts) > 1 and count_words(text, start, cuts[1][0]) <= count_words(seg.title) + 3:
        cuts = [(start, cuts[1][1])] + cuts[2:]  # only the title before the first child
    sections = [(a, b, t) for (a, t), (b, _) in zip(cuts, cuts[1:] + [(end, "")])]
    pieces: list[tuple[int, int, int, str]] = []
    cap = cap or (lambda a, b, n: split_by_cap(text, a, b, n))
    for a, b, title in sections:
        for ps, pe in cap(a, b, max_words):
            pieces.append((ps, pe, count_words(text, ps, pe), title))
    out: list[tuple[int, int, str]] = []
    words = 0
    for ps, pe, n, title in pieces:
        if out and words + n <= max_words:
            out[-1] = (out[-1][0], pe, out[-1][2])
            words += n
        else:
            out.append((ps, pe, title or seg.title))
            words = n
    return out


def split_by_cap(text: str, start: int, end: int, max_words: int) -> list[tuple[int, int]]:
    """Cut ``text[start:end]`` into spans of at most ``max_words`` words each (whitespace
    trimmed, together covering every non-whitespace character), preferring paragraph breaks,
    then sentence ends, then line breaks, then word boundaries; pieces are packed greedily."""
    start, end = _strip(text, max(0, start), min(end, len(text)))
    if end <= start:
        return []
    if (end - start + 1) // 2 <= max_words or count_words(text, start, end) <= max_words:
        return [(start, end)]  # (a word takes a character and a space: no count needed)
    return pack(text, capped_pieces(text, start, end, max_words, level=0), max_words)


_LEVELS = ("paragraph", "sentence", "line", "word")


def capped_pieces(text: str, start: int, end: int, max_words: int, level: int) -> list[tuple[int, int, int]]:
    """``(start, end, words)`` pieces no longer than the cap, finest split only where needed."""
    spans = _split_level(text, start, end, _LEVELS[level], max_words)
    out: list[tuple[int, int, int]] = []
    for s, e in spans:
        n = count_words(text, s, e)
        if n > max_words and level + 1 < len(_LEVELS):
            out.extend(capped_pieces(text, s, e, max_words, level + 1))
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


def pack(text: str, pieces: list[tuple[int, int, int]], max_words: int) -> list[tuple[int, int]]:
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


__all__ = ["build_units", "count_words", "find_units", "indexed_matter", "sentence_spans", "split_by_cap",
           "splitter_caps_sentences", "units_from_structure"]
