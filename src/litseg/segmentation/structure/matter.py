"""Front and back matter: spans with a reason around the units, and where the back matter begins."""

from __future__ import annotations

import re

from litseg.segmentation.structure.headings import clean, apparatus_reason
from litseg.segmentation.structure.patterns import BACK_REASONS, LIST_REASONS
from litseg.segmentation.structure.records import Block, Heading
from litseg.segmentation.structure.thresholds import LIST_BREAK_WORDS, MIN_NARRATIVE_WORDS
from litseg.segmentation.types import MatterSpan


_END_LINE = re.compile(r"(?:the\s+end|finis|end\s+of\s+(?!act\b|scene\b|part\b|book\b|chapter\b|volume\b)"
                       r"[^\r\n]{1,80})[.!]?", re.I)
_SEPARATOR = re.compile(r"[^\w]+")
_PRICE = re.compile(r"\b\d+s\.\s*(?:\d+d\.)?|\$\s?\d+(?:\.\d\d)?|\bprice\b|\bnet\b|\bcloth\b", re.I)
_ADVERTS = re.compile(r"(?:[\w.'\u2019 -]{0,40}\b)?(?:catalogue\b|by\s+the\s+same\s+author|works\s+by\b"
                      r"|new\s+(?:and\s+recent\s+)?books\b)|[\w.'\u2019 -]{3,40}['\u2019]s\s+books\s*$", re.I)
_TRANSCRIBER = re.compile(r"\[?\s*(?:transcriber|redactor|producer|preparer|editor)['\u2019]?s?\s+notes?\b"
                          r"|note:\s+project\s+gutenberg|project\s+gutenberg\s+also\s+has", re.I)
_LICENCE = re.compile(r"creative\s+commons|licen[cs]ed\s+under\b|public\s+licen[cs]e\b", re.I)
_COLOPHON = re.compile(r"printed\s+(?:by|in|at|for)\b|[\w.,&'\u2019 -]{0,60}\bprinters?\b", re.I)
_COPYRIGHT = re.compile(r"copyright\b|\(c\)\s*\d{4}|entered\s+according\s+to\s+act", re.I)


def pattern_reason(text: str, b: Block) -> str | None:
    """Matter recognised by its wording rather than by a heading: a transcriber's note, a
    licence, a printer's colophon, a publisher's catalogue, a copyright notice."""
    head = clean(text[b.start:min(b.end, b.start + 300)])
    if _TRANSCRIBER.match(head):
        return "transcriber's note"
    if _LICENCE.search(head):
        return "licence"
    if b.n_lines <= 3 and b.n_words <= 25 and _COLOPHON.match(head):
        return "colophon"
    if _ADVERTS.match(head) or (not b.prose and len(_PRICE.findall(text, b.start, min(b.end, b.start + 3000))) >= 2):
        return "adverts"
    if b.n_words <= 60 and _COPYRIGHT.match(head):
        return "title page"
    return None


def heading_reasons(heads: list[Heading]) -> dict[int, tuple[str, str]]:
    """Block index -> (reason, title) for every heading that names front or back matter."""
    out: dict[int, tuple[str, str]] = {}
    for h in heads:
        r = (h.reason if h.family in ("apparatus", "listed")
             else None if h.family == "kw" else apparatus_reason(h.title))
        if r:
            for k in range(h.block, h.last_block + 1):
                out[k] = (r, h.title)
    return out


def front_matter(text: str, blocks: list[Block], reasons: dict[int, tuple[str, str]], first: int,
                 narrative_ok: bool = True) -> tuple[list[tuple[int, int, str, str]], int | None]:
    """Split the blocks before the first unit (``blocks[:first]``) into matter spans
    ``(lo, hi, reason, title)``. An apparatus heading claims the text after it (a contents,
    illustrations or cast list only its list); recognised wording (licence, copyright,
    catalogue ...) marks its own block. Prose that nothing claims is front matter when more
    matter follows it, and narrative - returned as the block where a unit starts - when it runs
    up to the first unit and holds ``MIN_NARRATIVE_WORDS`` words or more."""
    per: list[tuple[str | None, str]] = []
    cur, claim, title = "title page", "title", ""
    evidence = -1  # last block that is matter by heading or wording
    for i in range(first):
        b = blocks[i]
        hr = reasons.get(i)
        if hr is not None and claim == "list" and b.n_lines == 1 and i + 1 < first and not blocks[i + 1].prose:
            hr = None  # "EXTRACTS (Supplied by ...)" as a line of the contents list
        if hr is not None:
            cur, title = hr
            claim = "list" if cur in LIST_REASONS else "prose"
            per.append((cur, title))
            evidence = i
            continue
        p = pattern_reason(text, b)
        if p is not None:
            per.append((p, ""))
            evidence = i
            if p == "adverts":
                cur, claim, title = p, "list", ""
            continue
        if claim == "prose":
            per.append((cur, title))
        elif b.prose and b.n_words >= LIST_BREAK_WORDS:
            per.append((None, ""))
            cur, claim, title = "front matter", "none", ""
        else:
            per.append((cur if claim == "list" else "title page", title if claim == "list" else ""))
    narrative = None
    tail = [i for i in range(evidence + 1, first) if per[i][0] is None]
    if narrative_ok and tail and sum(blocks[i].n_words for i in tail) >= MIN_NARRATIVE_WORDS:
        narrative = tail[0]
    spans: list[tuple[int, int, str, str]] = []
    stop = first if narrative is None else narrative
    for i in range(stop):
        reason, t = per[i]
        reason = reason or "front matter"
        if spans and spans[-1][2] == reason and (not t or t == spans[-1][3]):
            spans[-1] = (spans[-1][0], i + 1, reason, spans[-1][3])
        else:
            spans.append((i, i + 1, reason, t))
    return spans, narrative


def back_matter_start(text: str, blocks: list[Block], last_unit: int, start: int | None) -> int | None:
    """First block of the back matter, given the block of the last unit heading and a start
    found from headings (apparatus after the last unit), if any. Adds: what follows the last
    ``THE END`` / ``FINIS`` line, a licence, and trailing blocks recognised by their wording
    (colophon, catalogue, transcriber's note)."""
    n = len(blocks)
    g = n if start is None else start
    for i in range(last_unit + 1, g):
        b = blocks[i]
        line = clean(b.first)
        if (b.n_lines == 1 and b.n_words <= 16 and _END_LINE.fullmatch(line)
                and all(w[0].isupper() for w in line.split() if w[0].isalpha())):
            if i + 1 < g:
                g = i + 1  # keep looking: a later END line moves nothing back
            break
    for i in range(last_unit + 1, g):
        if _LICENCE.match(clean(blocks[i].first)):
            g = i
            break
    i = g - 1
    while i > last_unit and (pattern_reason(text, blocks[i]) in ("colophon", "adverts", "licence", "transcriber's note")
                             or _SEPARATOR.fullmatch(blocks[i].first) and blocks[i].n_lines == 1):
        g = i
        i -= 1
    return g if g < n else None


def back_matter(text: str, blocks: list[Block], reasons: dict[int, tuple[str, str]],
                g: int) -> list[tuple[int, int, str, str]]:
    """Matter spans ``(lo, hi, reason, title)`` of ``blocks[g:]``. A separator line (``-----``,
    ``* * *``) belongs to the matter after it."""
    per: list[tuple[str, str] | None] = []
    cur, title = "back matter", ""
    for i in range(g, len(blocks)):
        hr = reasons.get(i)
        # a front-matter word inside the back matter ("INTRODUCTION" to the notes on a canto)
        # heads a part of what is already running
        if hr is not None and (hr[0] in BACK_REASONS or cur == "back matter"):
            cur, title = hr
            per.append((cur, title))
            continue
        if hr is not None:
            per.append((cur, title))
            continue
        if blocks[i].n_lines == 1 and _SEPARATOR.fullmatch(blocks[i].first):
            per.append(None)
            continue
        p = pattern_reason(text, blocks[i])
        if p is not None and p != "title page":
            per.append((p, ""))
            if p in ("adverts", "licence", "transcriber's note"):
                cur, title = p, ""
        else:
            per.append((cur, title))
    nxt = (cur, title)
    for k in range(len(per) - 1, -1, -1):
        if per[k] is None:
            per[k] = (nxt[0], "")
        nxt = per[k]
    spans: list[tuple[int, int, str, str]] = []
    for i, (reason, t) in enumerate(per, g):
        if spans and spans[-1][2] == reason and (not t or t == spans[-1][3]):
            spans[-1] = (spans[-1][0], i + 1, reason, spans[-1][3])
        else:
            spans.append((i, i + 1, reason, t))
    return spans


def matter_spans(blocks: list[Block], spans: list[tuple[int, int, str, str]], where: str) -> list[MatterSpan]:
    return [MatterSpan(start=blocks[lo].start, end=blocks[hi - 1].end, reason=reason, title=title,
                       where=where) for lo, hi, reason, title in spans]


_BACK_MATTER = re.compile(r"(?:.*\s)?(?:notes?|appendix|appendices|glossary|index|footnotes|endnotes"
                          r"|bibliography|errata|postscript)\b", re.I)


def find_back_matter_start(cands: list[Heading], boundaries: list[Heading],
                       unit_kind: str) -> tuple[int | None, list[Heading]]:
    """Where the back matter begins, and the boundaries that remain before it.

    Back matter is an apparatus heading after the last boundary, or a NOTES / APPENDIX /
    GLOSSARY heading after which the units only repeat numbers seen before it (editors' notes
    arranged canto by canto)."""
    first = boundaries[0].block
    for h in cands:
        if h.family != "apparatus" or h.block <= first:
            continue
        after = [b for b in boundaries if b.block > h.block]
        if not after:
            return h.block, boundaries
        if not _BACK_MATTER.match(h.title):
            continue
        before = {(b.kind, b.number) for b in boundaries if b.block < h.block and b.number}
        numbered = [b for b in after if b.kind == unit_kind and b.number]
        if numbered and all((b.kind, b.number) in before for b in numbered):
            return h.block, [b for b in boundaries if b.block < h.block]
    return None, boundaries
