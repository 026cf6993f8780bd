"""The structural layers: blocks between blank lines, and heading-like lines that stand alone."""

from __future__ import annotations

import re
from typing import Iterator

from litseg.segmentation.sentences.chars import (
    CLOSERS,
    HWS_CHARS,
    LINE_BREAK,
    PARA_BREAK,
    QUOTES,
    TERMINALS,
)


# Heading-like lines.
_HEADING_WORD = re.compile(
    r"(?:chapter|book|part|act|scene|canto|stave|volume|fit|letter|section|prologue|epilogue)"
    r"\s+(?:the\s+)?(?:[ivxlcdm]+\b|\d+|one|two|three|four|five|six|seven|eight|nine|ten|"
    r"eleven|twelve|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last)",
    re.IGNORECASE,
)
# A line break followed by a line that might be heading-like (a superset of what
# _is_heading_line accepts: a Markdown or emphasis opener, a heading word and number, or no
# lowercase ASCII letter at all); blocks without one skip the line-by-line test.
_LB_CHARS = "\n\r\v\x85\u2028"
_HEADING_CANDIDATE = re.compile(
    rf"[{_LB_CHARS}](?:(?<=\r)\n)?[{HWS_CHARS}]*(?:[#*_]|(?i:{_HEADING_WORD.pattern})"
    rf"|[^a-z{_LB_CHARS}]+(?:[{_LB_CHARS}]|\Z))"
)
_CONTINUATION_WORDS = frozenset(
    "A AN AND AS AT BUT BY FOR FROM IN INTO NOR NOT OF ON OR THAT THE THOSE TO WHICH WITH".split()
)
_INNER_STOP = re.compile(r"[.\u2026]\s")
_MAX_HEADING_WORDS = 12
MAX_TITLE_WORDS = 10


def strip_span(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def blocks(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Stripped, non-empty stretches between blank lines."""
    pos = start
    for m in PARA_BREAK.finditer(text, start, end):
        s, e = strip_span(text, pos, m.start())
        if e > s:
            yield s, e
        pos = m.end()
    s, e = strip_span(text, pos, end)
    if e > s:
        yield s, e


def _is_heading_line(line: str) -> bool:
    """A line that stands alone: never joined to the text before or after it."""
    first = line[0]
    if first == "#":
        return line.lstrip("#")[:1].isspace() or line.lstrip("#") == ""
    if first in "*_" and len(line) > 2 and line[-1] == first:
        inner = line.strip("*_ \t")
        # "**HAMLET**", "_Exit_"; not "_de gustibus._", which ends a sentence begun above
        return (bool(inner) and not inner[0].islower() and "*" not in inner and "_" not in inner
                and _n_words(inner) <= _MAX_HEADING_WORDS)
    if line.isupper():
        # not a wrapped line of capitals ("... WARRANTY OR CONTRACT," / "... EXCEPT THOSE")
        last = line.rstrip(CLOSERS).rsplit(None, 1)[-1] if line.rstrip(CLOSERS) else ""
        if line[-1] in ",;-\u2013\u2014" or last in _CONTINUATION_WORDS:
            return False
        letters = sum(1 for ch in line if ch.isalpha())
        return letters >= 2 and _n_words(line) <= _MAX_HEADING_WORDS
    if first.isalpha() and _HEADING_WORD.match(line):
        return _n_words(line) <= _MAX_HEADING_WORDS and line[-1] not in ",;"
    return False


def _n_words(line: str) -> int:
    """Words with a letter or digit (dot leaders in a table of contents do not count)."""
    return sum(1 for w in line.split() if any(ch.isalnum() for ch in w))


def _is_title_block(line: str) -> bool:
    """A block of one short line without end punctuation (``I. The Period``, ``1``).

    Not a line of dialogue cut short (``Maren. No, I truly cannot--``): no dash or comma at the
    end, no ``!``/``?``, and a period inside only after a leading number or label.
    """
    core = line.rstrip(CLOSERS + " \t")
    if (not core or core[-1] in TERMINALS + ",;:-\u2013\u2014" or "!" in line or "?" in line
            or line[0] in QUOTES + "\u201c\u2018"):
        return False
    first_word_end = len(line.split(None, 1)[0])  # the line is stripped
    if any(m.start() >= first_word_end for m in _INNER_STOP.finditer(line)):
        return False
    return _n_words(line) <= MAX_TITLE_WORDS


def block_runs(text: str, b_start: int, b_end: int) -> Iterator[tuple[int, int, bool]]:
    first_break = LINE_BREAK.search(text, b_start, b_end)
    if first_break is None:
        line = text[b_start:b_end]
        yield b_start, b_end, _is_heading_line(line) or _is_title_block(line)
        return
    # Most blocks are plain prose: no later line could be a heading and the first is not one.
    s, e = strip_span(text, b_start, first_break.start())
    if not _is_heading_line(text[s:e]) and not _HEADING_CANDIDATE.search(
            text, first_break.start(), b_end):
        yield b_start, b_end, False
        return

    lines: list[tuple[int, int]] = []
    pos = b_start
    for m in LINE_BREAK.finditer(text, b_start, b_end):
        lines.append((pos, m.start()))
        pos = m.end()
    lines.append((pos, b_end))

    run_start = run_end = -1
    for s, e in lines:
        s, e = strip_span(text, s, e)
        if e <= s:
            continue
        if _is_heading_line(text[s:e]):
            if run_start >= 0:
                yield run_start, run_end, False
                run_start = -1
            yield s, e, True
        else:
            if run_start < 0:
                run_start = s
            run_end = e
    if run_start >= 0:
        yield run_start, run_end, False
