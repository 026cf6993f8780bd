"""Project Gutenberg boilerplate: where the book proper starts and ends, and header metadata.

Nothing is cut out of the text; :func:`gutenberg_bounds` returns the offsets of the content
between the header (with its licence, or the old "small print") and the footer (the licence that
follows the "END OF THE PROJECT GUTENBERG EBOOK" line). Texts without markers keep everything.
All patterns are anchored, bounded and searched once, so the scan is linear in the text size.
"""

from __future__ import annotations

import re

# Header ends after one of these. The modern marker may wrap onto a second line before its
# closing asterisks (e.g. PG #43), hence the bounded [^*] run.
_START = re.compile(
    r"^[ \t]*\*{3}\s*START\s+OF\s+(?:THE|THIS)\s+(?:COPYRIGHTED\s+)?PROJECT\s+GUTENBERG"
    r"[^*]{0,300}\*{3}[^\r\n]*",
    re.I | re.M,
)
# Old texts (early 1990s): the header closes with the end of the "small print" licence.
_OLD_START = re.compile(r"^[ \t]*\*\s*END\s*\*?\s*THE\s+SMALL\s+PRINT[^\r\n]*", re.I | re.M)
# Footer starts at the first of these after the header.
_END = re.compile(
    r"^[ \t]*(?:"
    r"\*{3}\s*END\s+OF\s+(?:THE|THIS)\s+(?:COPYRIGHTED\s+)?PROJECT\s+GUTENBERG"
    r"|End\s+of\s+(?:the\s+|this\s+)?Project\s+Gutenberg"
    r"|\*{3}\s*START:\s*FULL\s+LICEN[SC]E"
    r"|\*{0,3}\s*START\*{0,2}\s*THE\s+SMALL\s+PRINT"
    r")",
    re.I | re.M,
)
# Transcriber credits right after the header are boilerplate, not the book.
_CREDIT = re.compile(
    r"(?:Produced|Prepared|Transcribed|Scanned|Digitized|Proofread|Converted)\s+(?:by|from)\b"
    r"|E-?text\s+(?:prepared|produced|created)\s+by\b"
    r"|This\s+(?:e-?text|e-?book|etext|file)\s+was\s+(?:prepared|produced|created|made)\b"
    r"|Updated\s+editions\s+will\s+replace"
    r"|Note:\s+Project\s+Gutenberg\s+also\s+has\b",
    re.I,
)
_BLANK_RUN = re.compile(r"(?:\r\n|\r(?!\n)|\n)[^\S\r\n]*(?:\r\n|\r(?!\n)|\n)\s*")
_TITLE = re.compile(r"^Title:[ \t]*([^\r\n]+(?:(?:\r\n|\r(?!\n)|\n)[ \t]+[^\r\n]+)*)", re.M)
_AUTHOR = re.compile(r"^Author:[ \t]*([^\r\n]+)", re.M)
_OLD_TITLE = re.compile(
    r"The\s+Project\s+Gutenberg\s+E-?(?:Book|text)\s+of\s+([^*\r\n]+(?:(?:\r\n|\r(?!\n)|\n)[^*\r\n]+)?)",
    re.I,
)


def gutenberg_frame(text: str, start: int = 0, end: int | None = None) -> tuple[int, int, bool]:
    """``(begin, end, marked)``: the text between the Project Gutenberg header and footer inside
    ``text[start:end]``, whitespace trimmed; ``marked`` says whether a header marker was found.
    Without markers the (trimmed) range is returned unchanged. Every character of this frame
    belongs either to a unit or to a recorded front/back-matter span."""
    end = len(text) if end is None else end
    begin = start
    half = start + (end - start) // 2
    header_end = None
    for pattern in (_START, _OLD_START):
        # A marker in the second half is a footer-side licence, not a header.
        m = pattern.search(text, start, min(end, half + 400))
        if m and m.start() < half and (header_end is None or m.end() > header_end):
            header_end = m.end()
    if header_end is not None:
        begin = header_end
    m = _END.search(text, begin, end)
    if m:
        end = m.start()
    begin, end = _trim(text, begin, end)
    return begin, end, header_end is not None


def header_end(text: str, limit: int) -> int | None:
    """End of the Project Gutenberg header marker inside ``text[:limit]``, or None."""
    ends = [m.end() for m in (p.search(text, 0, limit) for p in (_START, _OLD_START)) if m]
    return max(ends) if ends else None


def credit_spans(text: str, begin: int, end: int) -> list[tuple[int, int]]:
    """Leading paragraphs of ``text[begin:end]`` that are transcriber credits ("Produced by
    ...", "Note: Project Gutenberg also has an HTML version ..."), at most three, trimmed."""
    out: list[tuple[int, int]] = []
    pos = begin
    for _ in range(3):
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            break
        m = _BLANK_RUN.search(text, pos, min(end, pos + 2000))
        para_end = m.start() if m else min(end, pos + 2000)
        if not _CREDIT.match(text, pos, para_end):
            break
        out.append(_trim(text, pos, para_end))
        pos = m.end() if m else para_end
    return out


def gutenberg_bounds(text: str, start: int = 0, end: int | None = None) -> tuple[int, int]:
    """``(begin, end)`` of the book inside ``text[start:end]``: after the Project Gutenberg
    header and any leading transcriber credits, before the footer and licence. Whitespace at
    both ends is excluded. Without markers the (trimmed) range is returned unchanged."""
    begin, end, marked = gutenberg_frame(text, start, end)
    if marked:
        credits = credit_spans(text, begin, end)
        if credits:
            begin = credits[-1][1]
    return _trim(text, begin, end)


def _trim(text: str, begin: int, end: int) -> tuple[int, int]:
    while begin < end and text[begin].isspace():
        begin += 1
    while end > begin and text[end - 1].isspace():
        end -= 1
    return begin, end


def header_metadata(text: str) -> tuple[str, str]:
    """``(title, author)`` from a Project Gutenberg header (empty strings when absent)."""
    m = _START.search(text) or _OLD_START.search(text)
    head = text[: m.start()] if m else text[:6000]
    title = author = ""
    tm = _TITLE.search(head)
    if tm:
        title = " ".join(tm.group(1).split())
    am = _AUTHOR.search(head)
    if am:
        author = " ".join(am.group(1).split())
    if not title and (m or "Project Gutenberg" in head):
        om = _OLD_TITLE.search(head)
        if om:
            raw = " ".join(om.group(1).split()).strip(" *")
            title, _, by = raw.partition(", by ")
            author = author or by.strip()
    return title.strip(), author.strip()
