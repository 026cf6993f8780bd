"""The text as blocks (runs of non-blank lines) and what is measured on them."""

from __future__ import annotations

import re
from collections import Counter

from litseg.segmentation.structure.patterns import (
    LISTY_HEAD,
    LISTY_PAGE,
    MARKDOWN,
    MD_LINE,
    SPEAKER,
)
from litseg.segmentation.structure.records import Block


# A line break followed by one or more blank lines (only horizontal whitespace on them).
_BLANK_RUN = re.compile(r"(?:\r\n|\r(?!\n)|\n)(?:[^\S\r\n]*(?:\r\n|\r(?!\n)|\n))+")


def scan_blocks(text: str, start: int, end: int) -> list[Block]:
    """Split ``text[start:end]`` into blocks. In Markdown texts every ``#`` heading line is a
    block of its own even without blank lines around it."""
    markdown = len(MD_LINE.findall(text, start, min(end, start + 200_000))) >= 2
    blocks: list[Block] = []
    pos = start
    blanks = 99  # the start of the range counts as the widest gap
    for m in _BLANK_RUN.finditer(text, start, end):
        _add_blocks(text, pos, m.start(), blanks, markdown, blocks)
        run = m.group()
        blanks = run.count("\n") + run.count("\r") - run.count("\r\n") - 1
        pos = m.end()
    _add_blocks(text, pos, end, blanks, markdown, blocks)
    return blocks


def _add_blocks(text: str, bs: int, be: int, blanks: int, markdown: bool, out: list[Block]) -> None:
    raw = text[bs:be]
    if not markdown or "#" not in raw:
        if not raw.isspace() and raw:
            out.append(_make_block(text, bs, be, blanks, markdown))
        return
    if not raw.strip():
        return
    if markdown and "#" in raw:
        # every Markdown heading line becomes a block of its own
        pos = bs
        piece_start = bs
        for line in raw.splitlines(keepends=True):
            if MARKDOWN.match(line.rstrip("\r\n")):
                if text[piece_start:pos].strip():
                    out.append(_make_block(text, piece_start, pos, blanks, markdown))
                    blanks = 0
                out.append(_make_block(text, pos, pos + len(line), blanks, markdown))
                blanks = 0
                piece_start = pos + len(line)
            pos += len(line)
        if text[piece_start:be].strip():
            out.append(_make_block(text, piece_start, be, blanks, markdown))
        return
    out.append(_make_block(text, bs, be, blanks, markdown))


# a word opening in lower case (counted on " " + text: every word follows whitespace)
_LOWER_WORD = re.compile(r"\s[\"'\u2018\u201c(_*]*[a-z\u00df-\u00ff]")


_LISTY_FIRST = frozenset("0123456789IVXLCDMivxlcdmBPASFbpasf")


def _is_listy(line: str) -> bool:
    # cheap character tests first: most lines of running text fail both
    head = line.lstrip()[:1]
    if head in _LISTY_FIRST and LISTY_HEAD.match(line):
        return True
    return line.rstrip()[-1:].isdigit() and bool(LISTY_PAGE.search(line))


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


_SAMPLE = 200  # characters of a block that tell running text from a title page or a list
_LIST_LINES = 24  # lines of a block that tell a list from running text


def _make_block(text: str, bs: int, be: int, blank_before: int, markdown: bool) -> Block:
    raw = text[bs:be]
    stripped = raw.strip()
    start = bs + raw.find(stripped[0])  # everything before the first non-blank is blank
    end = start + len(stripped)
    nl = _LINE_BREAK.search(stripped)
    first_raw = stripped[:nl.start()] if nl else stripped
    first = first_raw.strip()
    first_end = start + len(first_raw.rstrip())
    n_lines = (stripped.count("\n") + stripped.count("\r") - stripped.count("\r\n") + 1) if nl else 1
    n_words = len(stripped.split())
    upper_only = stripped.isupper()
    md_heading = markdown and n_lines == 1 and bool(MARKDOWN.match(first))
    # Running text (prose or verse) is mostly lower-case words; contents lists, title pages
    # and cast lists are mostly capitalised. The share is measured on the first few hundred
    # characters: enough to judge, and cheap.
    prose = False
    if not upper_only and not md_heading and n_words >= 3:
        sample = stripped[:_SAMPLE]
        sample_words = len(sample.split()) if len(stripped) > _SAMPLE else n_words
        lower = len(_LOWER_WORD.findall(" " + sample))
        if (n_words >= 8 and lower >= 0.4 * sample_words) or lower >= 0.6 * sample_words:
            # ... and not a list: few of its first lines open with a number or end with a page
            # number (a contents list is one from its first line)
            if n_lines == 1:
                listy = 1 if n_words < 12 and _is_listy(first) else 0
            else:
                lines = stripped.splitlines()[:_LIST_LINES]
                # a list is one throughout: when its first two lines and its last are not list
                # lines, the block is not a list (this spares testing every line of prose)
                if _is_listy(lines[0]) or _is_listy(lines[1]) or _is_listy(lines[-1]):
                    listy = sum(1 for ln in lines if _is_listy(ln))
                else:
                    listy = 0
            prose = listy < 0.3 * min(n_lines, _LIST_LINES)
    return Block(start=start, end=end, first=first, n_lines=n_lines, n_words=n_words,
                 blank_before=blank_before, upper_only=upper_only, prose=prose,
                 md_heading=md_heading, first_end=first_end)


def wide_gap(blocks: list[Block]) -> int:
    """Blank lines that set a title apart in this book: one more than the usual gap between its
    paragraphs (at least two)."""
    gaps = Counter(b.blank_before for b in blocks[1:] if b.prose)
    usual = gaps.most_common(1)[0][0] if gaps else 1
    return max(2, usual + 1)


def prose_prefix(blocks: list[Block]) -> list[int]:
    acc = [0]
    for b in blocks:
        acc.append(acc[-1] + (b.n_words if b.prose else 0))
    return acc


def block_at(blocks: list[Block], offset: int) -> int:
    lo, hi = 0, len(blocks)
    while lo < hi:
        mid = (lo + hi) // 2
        if blocks[mid].end <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


def is_dramatic(blocks: list[Block]) -> bool:
    """Plays: many paragraphs open with a speaker's name in capitals."""
    cues = total = 0
    for b in blocks[:: max(1, len(blocks) // 2000)]:
        total += 1
        if SPEAKER.match(b.first):
            cues += 1
    return total > 20 and cues >= 0.2 * total
