"""Heading candidates: one line classified, blocks read as headings with their subtitles, and
upper-case titles set apart by wide gaps.
"""

from __future__ import annotations

import re

from litseg.segmentation.structure.blocks import wide_gap
from litseg.segmentation.structure.numbers import parse_number
from litseg.segmentation.structure.patterns import (
    KIND_RANK,
    APPARATUS,
    EMPHASIS,
    KEYWORDS,
    KW_HEADING,
    LETTER,
    MARKDOWN,
    NUMERAL,
    ORDINAL_FIRST,
    REASON_WORDS,
    SPECIAL,
    WORD,
)
from litseg.segmentation.structure.records import Block, Heading


def _case_ok(word: str) -> bool:
    """Heading keywords are written in capitals or title case, never in lower case."""
    w = word.strip()
    return bool(w) and (w.isupper() or w[0].isupper())


def _title_ok(title: str | None) -> bool:
    """A title after a heading number may not start in lower case (that is running text)."""
    if not title:
        return True
    for ch in title:
        if ch.isalpha():
            return ch.isupper()
        if ch.isdigit():
            return True
    return True


_BRACKETED = re.compile(r"\[[^\]]*\]|\([^)]*\)")


def mostly_upper(s: str) -> bool:
    """Capitals, allowing a stray lower-case letter (``McWILLIAMSES``) or a bracketed note."""
    s = _BRACKETED.sub("", s)
    letters = [c for c in s if c.isalpha()]
    return len(letters) >= 2 and sum(c.isupper() for c in letters) >= 0.9 * len(letters)


def heading_case(s: str) -> bool:
    """Written as a heading: in capitals, or in title case (most words of four letters or more
    capitalised), starting with a capital. ``Notes of the evening were`` is running text."""
    if mostly_upper(s):
        return True
    s = _BRACKETED.sub("", s)  # "Introduction  (one page)"
    first = next((c for c in s if c.isalpha()), "")
    if not first.isupper():
        return False
    long_words = [w for w in WORD.findall(s) if len(w) >= 4]
    return not long_words or sum(w[0].isupper() for w in long_words) >= 0.6 * len(long_words)


ILLUSTRATION = re.compile(r"\[Illustration:\s*[=_*]*(.*?)[=_*]*\s*\]", re.I)
FOOTNOTE_MARK = re.compile(r"\[\d{1,3}\]|\{\d{1,3}\}|\(\*\)")


def _special_rest_ok(rest: str | None) -> bool:
    """What may follow PROLOGUE / EPILOGUE ...: a capitalised title, or a short lower-case
    linking phrase into one ("in Heaven", "at the Theatre"); not running text."""
    if _title_ok(rest):
        return True
    words = WORD.findall(rest or "")
    long_words = [w for w in words if len(w) >= 4]
    return (len(words) <= 6 and bool(long_words)
            and sum(w[0].isupper() for w in long_words) >= 0.5 * len(long_words))


def clean(s: str) -> str:
    s = s.strip()
    m = ILLUSTRATION.fullmatch(s)
    if m:  # "[Illustration: =Prelude at the Theatre=]": a heading printed as a picture caption
        s = m.group(1)
    s = s.replace("**", "").replace("__", "")
    return " ".join(EMPHASIS.sub("", s).split())


def apparatus_reason(title: str) -> str | None:
    """The matter reason an apparatus heading names (``"contents"``, ``"preface"``, ...), or
    None when the title is not apparatus."""
    return _apparatus_reason(clean(title))


def _apparatus_reason(s: str) -> str | None:
    m = APPARATUS.fullmatch(s)
    if not m or not s[0].isupper() or len(s.split()) > 8 or s.endswith(","):
        return None
    rest = m.group("rest").strip()
    # "INTRODUCTORY: OF MODERN ENGLISH POETRY" is a titled piece, not an introduction
    if rest.startswith(":") and len(WORD.findall(rest)) >= 2:
        return None
    if not heading_case(s):
        return None
    words = m.group(0)[: m.end("ap") - m.start(0)]
    for pattern, reason in REASON_WORDS:
        if pattern.search(words):
            return reason
    return "front matter"


_RAW_NUMERAL_GAP = re.compile(r"\s*[*_~=]*(?:[IVXLCDM]+|\d{1,3})[.)]?(\s+)\S")


def _numeral_title_ok(title: str, dot: bool, gap: str, num: str = "") -> bool:
    """A title after a bare numeral: after a period any capitalised title; without one, the
    title must be set off by a wide gap (``I  The Old Pyncheon Family``) or read as a title
    (``IV The Riding Forth``, not ``I am here.``, ``I Thought so, too.`` or the subtitle ``I Go
    to Bristol``: after a single space a lone ``I`` is the pronoun)."""
    if not _title_ok(title) or len(title.split()) > 15:
        return False
    if dot:
        return True
    if "\t" in gap or len(gap) >= 2:
        return True
    if num == "I":
        return False
    if title[-1:] in ",;:!?" or (title[-1:] == "." and not mostly_upper(title)):
        return False
    return heading_case(title) and len(WORD.findall(title)) >= 2


def classify_line(line: str) -> tuple[str, str, float, int | None, str, str, bool] | None:
    """Classify one heading line: ``(kind, family, rank, number, title_rest, prefix, bare)`` or
    None. ``title_rest`` is the title text after the number (may be empty)."""
    s = clean(line)
    if not s or len(s) > 120:
        return None
    m = KW_HEADING.fullmatch(s)
    if m and _case_ok(m.group("kw")) and _title_ok(m.group("title")):
        value = parse_number(m.group("num"))
        if value is not False:
            kind = KEYWORDS[m.group("kw").lower()]
            prefix = (m.group("prefix") or "").strip()
            return (kind, "kw", KIND_RANK[kind], value, m.group("title") or "", prefix,
                    not m.group("title"))
    m = ORDINAL_FIRST.fullmatch(s)
    if m and _case_ok(m.group("num").split()[-1]) and _title_ok(m.group("title")):
        value = parse_number(m.group("num"))
        if value is not False:
            kind = KEYWORDS[m.group("kw").lower()]
            return kind, "kw", KIND_RANK[kind], value, m.group("title") or "", "", not m.group("title")
    m = NUMERAL.fullmatch(s)
    if m:
        value = parse_number(m.group("num"))
        title = m.group("title")
        if value not in (False, None) and value <= 999:
            if not title:
                return "numeral_bare", "numeral", KIND_RANK["numeral_bare"], value, "", "", True
            raw_gap = _RAW_NUMERAL_GAP.match(line)  # the gap as printed (cleaning collapses it)
            gap = raw_gap.group(1) if raw_gap else (m.group("gap") or "")
            if _numeral_title_ok(title, bool(m.group("dot")), gap, m.group("num")):
                return ("numeral_titled", "numeral", KIND_RANK["numeral_titled"], value, title,
                        "", False)
    m = SPECIAL.fullmatch(s)
    if m and _case_ok(m.group("sp")) and len(s.split()) <= 12 and _special_rest_ok(m.group("rest")):
        word = m.group("sp").lower()
        kind = ("introduction" if word.startswith("introduction")
                else "envoi" if "envo" in word else word)
        rest = (m.group("rest") or "").lstrip(" .:-\u2014\u2013")
        return kind, "special", KIND_RANK["special"], None, rest, "", not rest
    if _apparatus_reason(s) is not None:
        return "apparatus", "apparatus", 99, None, "", "", True
    if (s[:3] == "TO " and LETTER.fullmatch(s) and mostly_upper(s) and len(s.split()) <= 9
            and s[-1:] not in ";:!?"):
        return "letter", "kw", KIND_RANK["letter"], None, s[3:].strip(" .,"), "", False
    return None


_CONTAINER_KINDS = frozenset({"volume", "part", "book", "act"})


def _title_like(b: Block) -> bool:
    """Could this block be the subtitle that follows a bare heading ("CHAPTER I" / "THE
    BEGINNING", "1" / "The Old Keeper at the Lantern Inn")?"""
    if b.n_lines > 3 or b.n_words > 22 or b.blank_before > 3 or b.md_heading:
        return False
    if b.upper_only:
        return sum(c.isalpha() for c in b.first) >= 2
    if b.n_lines != 1 or b.n_words > 12:
        return False
    s = clean(b.first)
    if not s or not s[0].isupper() or s[-1] in ",;:.!?":
        return False
    long_words = [w for w in WORD.findall(s) if len(w) >= 4]
    return bool(long_words) and sum(w[0].isupper() for w in long_words) >= 0.6 * len(long_words)


def find_candidates(text: str, blocks: list[Block], dramatic: bool = False) -> list[Heading]:
    """Heading candidates among the blocks (keyword, numeral, special, apparatus, Markdown).
    In plays at most one subtitle line is taken (the next caps line is a speaker's name)."""
    out: list[Heading] = []
    i = 0
    n = len(blocks)
    gap = wide_gap(blocks)
    while i < n:
        b = blocks[i]
        h = _classify_block(text, b, i, gap)
        if h is None:
            i += 1
            continue
        if h.bare and h.rest_words == 0 and not h.md_level and h.family in ("kw", "numeral", "special"):
            # a play's next caps line is a speaker; a PART's second line may be its first title
            container = h.kind in ("part", "book", "volume")
            _consume_subtitles(text, blocks, h, 1 if dramatic or container else 2,
                               max_gap=gap - 1 if container else 99)
        out.append(h)
        i = h.last_block + 1
    return out


def _classify_block(text: str, b: Block, i: int, gap: int = 2) -> Heading | None:
    md_level = 0
    line = b.first
    head = line[:1]
    if not (head.isupper() or head.isdigit() or head in "#*_[=~"):
        return None  # cheap exit for running text: headings start with a capital or a mark
    if b.md_heading:
        m = MARKDOWN.match(line)
        if m is None:
            return None
        md_level, line = len(m.group(1)), m.group(2)
    elif b.n_lines > 3 or len(b.first) > 100:
        # A heading glued to its paragraph: accept only a bare keyword line ("CHAPTER I.",
        # "EPILOGUE"), an apparatus line ("Transcriber's Note:") or a keyword in capitals with
        # its number and a title that runs on ("SCENE V.--_Dark.--The Sleepy Hollow, ...").
        if b.first[:2] in ("**", "__") and b.first[-2:] in ("**", "__"):
            return None  # a bold name over a speech is a speaker ("**PROLOGUE**"), not a heading
        word = line.split(None, 1)[0] if line else ""
        c = None
        if word.isupper() and word.lower() in KEYWORDS and (
                (b.blank_before >= gap and len(line) <= 100)
                or (b.prose and len(line) <= 60 and mostly_upper(line))):
            # set apart like a heading, not a summary paragraph; or a whole line in capitals over
            # running text ("LETTER XII. FROM ANNA TO CLARA" over the date and greeting of its
            # letter), not a line of a list of illustrations
            c = classify_line(line)
        if c and c[1] == "kw" and c[3] is not None and not c[6]:
            return Heading(block=i, start=b.start, end=b.first_end, last_block=i, kind=c[0],
                           family="kw", rank=c[2], number=c[3], title=clean(line), prefix=c[5],
                           rest_words=b.n_words - len(b.first.split()))
        if len(b.first) > 40:
            return None
        c = c or classify_line(line)
        if not c or c[1] not in ("kw", "special", "apparatus") or not c[6]:
            return None
        words = len(b.first.split())
        return Heading(block=i, start=b.start, end=b.first_end, last_block=i, kind=c[0],
                       family=c[1], rank=c[2], number=c[3], title=clean(line), prefix=c[5],
                       bare=True, rest_words=b.n_words - words,
                       reason=apparatus_reason(line) if c[1] == "apparatus" else None)
    if not md_level and b.prose and b.n_words > 30:
        return None  # a short paragraph of running text, not a heading with its title
    c = classify_line(line)
    if c is None:
        if md_level:
            title = clean(line)
            return Heading(block=i, start=b.start, end=b.end, last_block=i, kind=f"md{md_level}",
                           family="md", rank=10 + md_level, title=title, md_level=md_level,
                           bare=False)
        return None
    kind, family, rank, number, rest, prefix, bare = c
    if family == "numeral" and b.n_lines > (1 if bare else 2):
        return None
    if family in ("special", "apparatus") and b.n_lines > 2:
        return None
    title = clean(line)
    if b.n_lines > 1:
        rest = [clean(ln) for ln in text[b.first_end:b.end].splitlines() if ln.strip()]
        # a title wrapped onto the next line continues it; under a bare "CHAPTER I" it is the title
        title = join_title([title, *rest]) if bare else " ".join([title, *rest])
        bare = False
    return Heading(block=i, start=b.start, end=b.end, last_block=i, kind=kind, family=family,
                   rank=rank, number=number, title=title, prefix=prefix, md_level=md_level,
                   bare=bare, reason=apparatus_reason(line) if family == "apparatus" else None)


def _consume_subtitles(text: str, blocks: list[Block], h: Heading, limit: int = 2,
                       max_gap: int = 99) -> None:
    """Title lines right under a bare heading become its title (``CHAPTER I`` / ``THE
    BEGINNING``, and ``CHAPTER I`` / ``INTRODUCTION``: a chapter titled with a word of front
    matter is still a chapter); under a PART a line set apart by a wide gap is the first
    chapter's title."""
    pieces = [h.title]
    chapter = h.family in ("kw", "numeral") and h.kind not in _CONTAINER_KINDS
    j = h.block + 1
    while j < len(blocks) and j <= h.block + limit:
        nb = blocks[j]
        if not _title_like(nb) or nb.blank_before > max_gap:
            break
        c = classify_line(nb.first)
        if c and (c[1] in ("kw", "numeral") or (c[1] == "apparatus" and not chapter)):
            break
        pieces.append(" ".join(text[nb.start:nb.end].split()))
        h.end = nb.end
        h.last_block = j
        j += 1
    h.title = join_title(pieces)


def join_title(pieces: list[str]) -> str:
    out = ""
    for p in pieces:
        p = clean(p)
        if not p:
            continue
        if not out:
            out = p
        elif out[-1] in ".:!?\u2014-":
            out += " " + p
        else:
            out += ". " + p
    return out


def caps_title_candidates(text: str, blocks: list[Block], min_gap: int | None = None,
                          taken: set[int] | None = None, min_count: int = 3) -> list[Heading]:
    """Short upper-case blocks set apart by a wider gap than the book's paragraphs."""
    gap = wide_gap(blocks) if min_gap is None else min_gap
    taken = taken or set()
    out: list[Heading] = []
    for k, b in enumerate(blocks):
        if (b.blank_before >= gap and k not in taken and b.n_lines <= 2 and b.n_words <= 15
                and (b.upper_only or mostly_upper(b.first)) and sum(c.isalpha() for c in b.first) >= 2
                and (classify_line(b.first) or ("letter",))[0] == "letter"):
            h = Heading(block=k, start=b.start, end=b.end, last_block=k, kind="caps_title",
                        family="caps", rank=KIND_RANK["caps_title"], bare=True,
                        title=clean(" ".join(text[b.start:b.end].split())))
            out.append(h)
    # subtitles ("CALLIOPE" / "FATE AND SYMPATHY")
    for h in out:
        _consume_subtitles(text, blocks, h)
    kept: list[Heading] = []
    last = -1
    for h in out:
        if h.block > last:
            kept.append(h)
            last = h.last_block
    return kept if min_count <= len(kept) <= max(3, len(blocks) // 3) else []
