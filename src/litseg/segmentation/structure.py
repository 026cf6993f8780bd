"""Structure of a book: headings, front and back matter, and top-level narrative segments.

The text is read as blocks (runs of non-blank lines). Short blocks are matched against heading
patterns (``CHAPTER I.``, ``Chapter the First``, ``Book the First--Recalled to Life``, ``FIRST
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
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field, replace

from litseg.segmentation.types import MatterSpan

MIN_PROSE = 8  # words of body text that make a heading real (a contents entry has none)
MIN_CONTAINER_PROSE = 40  # an introduction under a PART heading this long becomes its own unit
MAX_FRONT_SHARE = 0.35  # a structure that leaves more of the book than this before its first
MAX_FRONT_WORDS = 5000  # heading (and more words than this) is probably a sub-structure
MAX_UNIT_SHARE = 0.6  # ... and so is one whose largest unit holds more than this share
# A paragraph of running text this long ends a contents, illustrations or cast list: lists are
# made of short lines and titles, not of sentences.
LIST_BREAK_WORDS = 25
# Unclaimed prose before the first heading is narrative (a unit) from this many words on; an
# epigraph, a dedication line or a copyright notice is shorter.
MIN_NARRATIVE_WORDS = 150
# A contents list is taken as the top level when at least this share of its titled entries is
# found, in order, in the body.
MIN_LISTED_SHARE = 0.5


# ---------------------------------------------------------------------------- numbers

_UNITS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen"]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_ORD_UNITS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"]
_ORD_TEENS = ["tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth",
              "sixteenth", "seventeenth", "eighteenth", "nineteenth"]
_ORD_TENS = ["twentieth", "thirtieth", "fortieth", "fiftieth", "sixtieth", "seventieth",
             "eightieth", "ninetieth"]
WORD_NUMBERS: dict[str, int] = {}
ORDINALS: dict[str, int] = {}
for _i, _w in enumerate(_UNITS, 1):
    WORD_NUMBERS[_w] = _i
for _i, _w in enumerate(_TEENS, 10):
    WORD_NUMBERS[_w] = _i
for _i, _w in enumerate(_ORD_UNITS, 1):
    ORDINALS[_w] = _i
for _i, _w in enumerate(_ORD_TEENS, 10):
    ORDINALS[_w] = _i
for _i, _w in enumerate(_TENS, 2):
    WORD_NUMBERS[_w] = _i * 10
    ORDINALS[_ORD_TENS[_i - 2]] = _i * 10
    for _j, _u in enumerate(_UNITS, 1):
        WORD_NUMBERS[f"{_w}-{_u}"] = _i * 10 + _j
        ORDINALS[f"{_w}-{_ORD_UNITS[_j - 1]}"] = _i * 10 + _j
_LAST_WORDS = {"last": None, "final": None}


def _alternation(words) -> str:
    return "|".join(sorted((re.escape(w).replace("\\-", "[- ]") for w in words), key=len,
                           reverse=True))


_ORD_ALT = _alternation(list(ORDINALS) + list(_LAST_WORDS))
_NUM_ALT = rf"[IVXLCDMivxlcdm]+|\d{{1,4}}|{_alternation(WORD_NUMBERS)}|{_ORD_ALT}"
_ROMAN = re.compile(r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def roman_to_int(s: str) -> int | None:
    """Value of a well-formed Roman numeral (either case), else None."""
    up = s.upper()
    if not up or not _ROMAN.fullmatch(up):
        return None
    total = 0
    for a, b in zip(up, up[1:] + " "):
        va, vb = _ROMAN_VALUES[a], _ROMAN_VALUES.get(b, 0)
        total += -va if va < vb else va
    return total


def parse_number(token: str) -> int | None | bool:
    """Integer value of a heading number (``"XIV"``, ``"14"``, ``"fourteen"``, ``"the last"``);
    ``None`` for "last"/"final" (no value but valid); ``False`` when it is not a number."""
    t = token.strip().lower().replace(" ", "-")
    if t.startswith("the-"):
        t = t[4:]
    if t.isdigit():
        return int(t)
    if t in WORD_NUMBERS:
        return WORD_NUMBERS[t]
    if t in ORDINALS:
        return ORDINALS[t]
    if t in _LAST_WORDS:
        return None
    raw = re.sub(r"(?i)^the\s+", "", token.strip())
    value = roman_to_int(raw)
    # Lower-case roman numerals are accepted only when small ("Chapter iv"), so that ordinary
    # words made of the letters (mix, dim, ...) never pass.
    if value is not None and (raw.isupper() or value <= 40):
        return value
    return False


# ---------------------------------------------------------------------------- heading patterns

# kind, rank: smaller ranks enclose larger ones.
KIND_RANK: dict[str, float] = {
    "volume": 0, "part": 1, "book": 2, "act": 3, "special": 3.5,
    "chapter": 4, "stave": 4, "fit": 4, "letter": 4, "canto": 4, "section": 4,
    "scene": 5, "numeral_titled": 6, "numeral_bare": 7, "listed_title": 8, "caps_title": 8,
}
_KEYWORDS = {
    "chapter": "chapter", "chap.": "chapter", "book": "book", "part": "part", "volume": "volume",
    "vol.": "volume", "act": "act", "scene": "scene", "canto": "canto", "stave": "stave",
    "fit": "fit", "letter": "letter", "section": "section",
}
_KW_ALT = r"chapter|chap\.|book|part|volume|vol\.|act|scene|canto|stave|fit|letter|section"
_SEP_TITLE = r"(?:\s*(?:[.:;,]+|--+|[\u2014\u2013]|\s-\s)\s*|\s+)(?P<title>\S.*?)"
_KW_HEADING = re.compile(
    rf"(?:(?P<prefix>[^\W\d_][\w'\u2019 ]{{0,30}}?)\s*:\s*)?"
    rf"(?P<kw>{_KW_ALT})\s+(?P<num>(?:the\s+)?(?:{_NUM_ALT}))(?![\w'\u2019])[.:,;]?"
    rf"(?:{_SEP_TITLE})?\s*",
    re.I,
)
_ORDINAL_FIRST = re.compile(
    rf"(?:the\s+)?(?P<num>{_ORD_ALT})\s+(?P<kw>book|part|act|scene|canto|volume|chapter|stave|fit)"
    rf"(?![\w'\u2019])[.:]?(?:{_SEP_TITLE})?\s*",
    re.I,
)
# A numeral, then a title after a period (``I. The Period``), after a wide gap (``I  The Old
# Pyncheon Family``) or after one space when the title reads as a title (see classify_line).
_NUMERAL = re.compile(r"(?P<num>[IVXLCDM]+|\d{1,3})(?P<dot>[.)]?)(?:(?P<gap>\s+)(?P<title>\S.*?))?\s*")
_SPECIAL = re.compile(
    r"(?:the\s+)?(?P<sp>prologue|epilogue|prelude|induction|interlude|intermission|conclusion"
    r"|finale|afterword|sequel|l['\u2019]envo[iy]|envo[iy]"
    r"|introduction\s+to\s+(?:the\s+\w+\s+)?(?:canto|book|part)\b"
    r"[^\r\n]{0,30}?)(?![\w'\u2019])(?P<rest>[^\r\n]{0,80}?)\s*",
    re.I,
)
_APPARATUS = re.compile(
    r"(?:[\w'\u2019.]+\s+){0,3}?(?:the\s+)?"
    r"(?P<ap>contents|table\s+of\s+contents|list\s+of\s+(?:chapters|plates|illustrations)|preface"
    r"|foreword|introduction|introductory|explanatory|dedication|memoir|biographical\s+(?:sketch|note|notice)"
    r"|(?:brief\s+)?life\s+of|illustrations|characters|dramatis\s+person(?:ae|\u00e6)|persons"
    r"|scenes\s+of\s+the\s+play|costumes?|stage\s+directions|etymology|extracts|advertisements?"
    r"|acknowledge?ments?|notes?|credits|glossary|vocabulary|appendix|appendices|addend(?:a|um)"
    r"|index|footnotes|endnotes|postscript|bibliography|errata|catalogue|technical\s+notes?"
    r"|transcriber['\u2019]?s?\s+notes?)(?![\w'\u2019])(?P<rest>[^\r\n]{0,60})",
    re.I,
)
# ``TO HIS BROTHER MIHAIL.``, ``TO MISS PEABODY``: the recipient heading of a letter.
_LETTER = re.compile(r"TO\s+(?:THE\s+)?[A-Z][^\r\n]{0,60}")
_MARKDOWN = re.compile(r"[ \t]{0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_MD_LINE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+\S", re.M)
_EMPHASIS = re.compile(r"^[*_~=]+|[*_~=]+$")
# Lines of a contents list: they open with a number or heading keyword, or end in a page number.
_LISTY_HEAD = re.compile(rf"^[ \t]*(?:(?:[IVXLCDM]+|\d+)[.):]?[ \t]|(?:{_KW_ALT})[ \t])", re.I | re.M)
_LISTY_PAGE = re.compile(r"(?:[ \t]{2,}|\.[ \t]?\.[ \t]?\.[ \t]*|\u2026[ \t]*)\d+[ \t]*$", re.M)
_SPEAKER = re.compile(r"^(?:\*\*)?[A-Z][A-Z'\u2019\-]+(?: [A-Z][A-Z'\u2019\-]+){0,3}(?:\*\*)?"
                      r"(?:\s*[(\[].*)?(?:[.:]\s|[.:]?\s*$)")
_WORD = re.compile(r"[^\W\d_]+")

# What an apparatus heading names, and why its text is front or back matter.
_REASON_WORDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"transcriber|redactor|producer['\u2019]?s|preparer|e-?text", re.I), "transcriber's note"),
    (re.compile(r"contents|list\s+of\s+chapters", re.I), "contents"),
    (re.compile(r"illustrations|plates", re.I), "illustrations"),
    (re.compile(r"characters|person|scenes\s+of|costume|stage\s+direction", re.I), "cast list"),
    (re.compile(r"dedicat", re.I), "dedication"),
    (re.compile(r"introduct|memoir|biographical|life\s+of", re.I), "introduction"),
    (re.compile(r"preface|foreword|acknowledg|explanatory", re.I), "preface"),
    (re.compile(r"etymology|extracts", re.I), "extracts"),
    (re.compile(r"index", re.I), "index"),
    (re.compile(r"glossary|vocabulary", re.I), "glossary"),
    (re.compile(r"appendi|addend|postscript|bibliography", re.I), "appendix"),
    (re.compile(r"catalogue|advertisement", re.I), "adverts"),
    (re.compile(r"credits", re.I), "credits"),
    (re.compile(r"notes?\b|errata", re.I), "notes"),
]
# Matter that claims only the list that follows it; the others claim everything up to the next
# heading (a preface is prose).
_LIST_REASONS = frozenset({"contents", "illustrations", "cast list"})
# Apparatus that belongs after the story; the rest is front matter.
_BACK_REASONS = frozenset({"notes", "appendix", "index", "glossary", "adverts", "transcriber's note"})



# ---------------------------------------------------------------------------- records

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
class Segment:
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
    segments: list[Segment]
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


# ---------------------------------------------------------------------------- blocks

# A line break followed by one or more blank lines (only horizontal whitespace on them).
_BLANK_RUN = re.compile(r"(?:\r\n|\r(?!\n)|\n)(?:[^\S\r\n]*(?:\r\n|\r(?!\n)|\n))+")


def scan_blocks(text: str, start: int, end: int) -> list[Block]:
    """Split ``text[start:end]`` into blocks. In Markdown texts every ``#`` heading line is a
    block of its own even without blank lines around it."""
    markdown = len(_MD_LINE.findall(text, start, min(end, start + 200_000))) >= 2
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
            if _MARKDOWN.match(line.rstrip("\r\n")):
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
    if head in _LISTY_FIRST and _LISTY_HEAD.match(line):
        return True
    return line.rstrip()[-1:].isdigit() and bool(_LISTY_PAGE.search(line))


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
    md_heading = markdown and n_lines == 1 and bool(_MARKDOWN.match(first))
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


# ---------------------------------------------------------------------------- classification

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


def _mostly_upper(s: str) -> bool:
    """Capitals, allowing a stray lower-case letter (``McWILLIAMSES``) or a bracketed note."""
    s = _BRACKETED.sub("", s)
    letters = [c for c in s if c.isalpha()]
    return len(letters) >= 2 and sum(c.isupper() for c in letters) >= 0.9 * len(letters)


def _heading_case(s: str) -> bool:
    """Written as a heading: in capitals, or in title case (most words of four letters or more
    capitalised), starting with a capital. ``Notes of the evening were`` is running text."""
    if _mostly_upper(s):
        return True
    s = _BRACKETED.sub("", s)  # "Introduction  (one page)"
    first = next((c for c in s if c.isalpha()), "")
    if not first.isupper():
        return False
    long_words = [w for w in _WORD.findall(s) if len(w) >= 4]
    return not long_words or sum(w[0].isupper() for w in long_words) >= 0.6 * len(long_words)


_ILLUSTRATION = re.compile(r"\[Illustration:\s*[=_*]*(.*?)[=_*]*\s*\]", re.I)
_FOOTNOTE_MARK = re.compile(r"\[\d{1,3}\]|\{\d{1,3}\}|\(\*\)")


def _special_rest_ok(rest: str | None) -> bool:
    """What may follow PROLOGUE / EPILOGUE ...: a capitalised title, or a short lower-case
    linking phrase into one ("in Heaven", "at the Theatre"); not running text."""
    if _title_ok(rest):
        return True
    words = _WORD.findall(rest or "")
    long_words = [w for w in words if len(w) >= 4]
    return (len(words) <= 6 and bool(long_words)
            and sum(w[0].isupper() for w in long_words) >= 0.5 * len(long_words))


def _clean(s: str) -> str:
    s = s.strip()
    m = _ILLUSTRATION.fullmatch(s)
    if m:  # "[Illustration: =Prelude at the Theatre=]": a heading printed as a picture caption
        s = m.group(1)
    s = s.replace("**", "").replace("__", "")
    return " ".join(_EMPHASIS.sub("", s).split())


def apparatus_reason(title: str) -> str | None:
    """The matter reason an apparatus heading names (``"contents"``, ``"preface"``, ...), or
    None when the title is not apparatus."""
    return _apparatus_reason(_clean(title))


def _apparatus_reason(s: str) -> str | None:
    m = _APPARATUS.fullmatch(s)
    if not m or not s[0].isupper() or len(s.split()) > 8 or s.endswith(","):
        return None
    rest = m.group("rest").strip()
    # "INTRODUCTORY: OF MODERN ENGLISH POETRY" is a titled piece, not an introduction
    if rest.startswith(":") and len(_WORD.findall(rest)) >= 2:
        return None
    if not _heading_case(s):
        return None
    words = m.group(0)[: m.end("ap") - m.start(0)]
    for pattern, reason in _REASON_WORDS:
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
    if title[-1:] in ",;:!?" or (title[-1:] == "." and not _mostly_upper(title)):
        return False
    return _heading_case(title) and len(_WORD.findall(title)) >= 2


def classify_line(line: str) -> tuple[str, str, float, int | None, str, str, bool] | None:
    """Classify one heading line: ``(kind, family, rank, number, title_rest, prefix, bare)`` or
    None. ``title_rest`` is the title text after the number (may be empty)."""
    s = _clean(line)
    if not s or len(s) > 120:
        return None
    m = _KW_HEADING.fullmatch(s)
    if m and _case_ok(m.group("kw")) and _title_ok(m.group("title")):
        value = parse_number(m.group("num"))
        if value is not False:
            kind = _KEYWORDS[m.group("kw").lower()]
            prefix = (m.group("prefix") or "").strip()
            return (kind, "kw", KIND_RANK[kind], value, m.group("title") or "", prefix,
                    not m.group("title"))
    m = _ORDINAL_FIRST.fullmatch(s)
    if m and _case_ok(m.group("num").split()[-1]) and _title_ok(m.group("title")):
        value = parse_number(m.group("num"))
        if value is not False:
            kind = _KEYWORDS[m.group("kw").lower()]
            return kind, "kw", KIND_RANK[kind], value, m.group("title") or "", "", not m.group("title")
    m = _NUMERAL.fullmatch(s)
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
    m = _SPECIAL.fullmatch(s)
    if m and _case_ok(m.group("sp")) and len(s.split()) <= 12 and _special_rest_ok(m.group("rest")):
        word = m.group("sp").lower()
        kind = ("introduction" if word.startswith("introduction")
                else "envoi" if "envo" in word else word)
        rest = (m.group("rest") or "").lstrip(" .:-\u2014\u2013")
        return kind, "special", KIND_RANK["special"], None, rest, "", not rest
    if _apparatus_reason(s) is not None:
        return "apparatus", "apparatus", 99, None, "", "", True
    if (s[:3] == "TO " and _LETTER.fullmatch(s) and _mostly_upper(s) and len(s.split()) <= 9
            and s[-1:] not in ";:!?"):
        return "letter", "kw", KIND_RANK["letter"], None, s[3:].strip(" .,"), "", False
    return None


def _title_like(b: Block) -> bool:
    """Could this block be the subtitle that follows a bare heading ("CHAPTER I" / "THE
    BEGINNING", "1" / "The Old Sea-dog at the Admiral Benbow")?"""
    if b.n_lines > 3 or b.n_words > 22 or b.blank_before > 3 or b.md_heading:
        return False
    if b.upper_only:
        return sum(c.isalpha() for c in b.first) >= 2
    if b.n_lines != 1 or b.n_words > 12:
        return False
    s = _clean(b.first)
    if not s or not s[0].isupper() or s[-1] in ",;:.!?":
        return False
    long_words = [w for w in _WORD.findall(s) if len(w) >= 4]
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
        m = _MARKDOWN.match(line)
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
        if b.blank_before >= gap and len(line) <= 100 and word.isupper() and word.lower() in _KEYWORDS:
            c = classify_line(line)  # set apart like a heading, not a summary paragraph
        if c and c[1] == "kw" and c[3] is not None and not c[6]:
            return Heading(block=i, start=b.start, end=b.first_end, last_block=i, kind=c[0],
                           family="kw", rank=c[2], number=c[3], title=_clean(line), prefix=c[5],
                           rest_words=b.n_words - len(b.first.split()))
        if len(b.first) > 40:
            return None
        c = c or classify_line(line)
        if not c or c[1] not in ("kw", "special", "apparatus") or not c[6]:
            return None
        words = len(b.first.split())
        return Heading(block=i, start=b.start, end=b.first_end, last_block=i, kind=c[0],
                       family=c[1], rank=c[2], number=c[3], title=_clean(line), prefix=c[5],
                       bare=True, rest_words=b.n_words - words,
                       reason=apparatus_reason(line) if c[1] == "apparatus" else None)
    if not md_level and b.prose and b.n_words > 30:
        return None  # a short paragraph of running text, not a heading with its title
    c = classify_line(line)
    if c is None:
        if md_level:
            title = _clean(line)
            return Heading(block=i, start=b.start, end=b.end, last_block=i, kind=f"md{md_level}",
                           family="md", rank=10 + md_level, title=title, md_level=md_level,
                           bare=False)
        return None
    kind, family, rank, number, rest, prefix, bare = c
    if family == "numeral" and b.n_lines > (1 if bare else 2):
        return None
    if family in ("special", "apparatus") and b.n_lines > 2:
        return None
    title = _clean(line)
    if b.n_lines > 1:
        rest = [_clean(ln) for ln in text[b.first_end:b.end].splitlines() if ln.strip()]
        # a title wrapped onto the next line continues it; under a bare "CHAPTER I" it is the title
        title = _join_title([title, *rest]) if bare else " ".join([title, *rest])
        bare = False
    return Heading(block=i, start=b.start, end=b.end, last_block=i, kind=kind, family=family,
                   rank=rank, number=number, title=title, prefix=prefix, md_level=md_level,
                   bare=bare, reason=apparatus_reason(line) if family == "apparatus" else None)


def _consume_subtitles(text: str, blocks: list[Block], h: Heading, limit: int = 2,
                       max_gap: int = 99) -> None:
    """Title lines right under a bare heading become its title (``CHAPTER I`` / ``THE
    BEGINNING``); under a PART a line set apart by a wide gap is the first chapter's title."""
    pieces = [h.title]
    j = h.block + 1
    while j < len(blocks) and j <= h.block + limit:
        nb = blocks[j]
        if not _title_like(nb) or nb.blank_before > max_gap:
            break
        c = classify_line(nb.first)
        if c and c[1] in ("kw", "numeral", "apparatus"):
            break
        pieces.append(" ".join(text[nb.start:nb.end].split()))
        h.end = nb.end
        h.last_block = j
        j += 1
    h.title = _join_title(pieces)


def _join_title(pieces: list[str]) -> str:
    out = ""
    for p in pieces:
        p = _clean(p)
        if not p:
            continue
        if not out:
            out = p
        elif out[-1] in ".:!?\u2014-":
            out += " " + p
        else:
            out += ". " + p
    return out


# ---------------------------------------------------------------------------- contents lists

@dataclass(slots=True)
class Entry:
    """One line of a contents list."""

    title: str
    key: str  # normalised title
    main: str  # normalised title without subtitle or author column (before "--", "(")
    short: str  # normalised title before its first comma, colon or semicolon
    indent: int
    raw: str  # normalised line with its number ("i am content")
    number: int | None  # the value of its number, when it has one
    numbered: bool  # opened with a number or a keyword and a number ("CHAPTER I.", "i.", "12")
    label: bool  # nothing but a number label ("FIRST STORY", "The Second Voice", "II.")
    reason: str | None  # apparatus (preface, index, ...) or None


_ENTRY_KW_NUM = re.compile(rf"(?:{_KW_ALT})\s+(?P<num>(?:the\s+)?[\w-]+)[.:]?(?=\s|$)\s*", re.I)
_ENTRY_NUM = re.compile(r"(?P<num>[IVXLCDM]+|[ivxlcdm]+|\d{1,3})[.):]?(?=\s|$)\s*")
_ENTRY_LEADER = re.compile(r"(?:\s*[.\u00b7\u2026]){3,}.*$")
_ENTRY_PAGE = re.compile(r"\s+(?:\d{1,4}|[ivxlcdm]{1,6}|_?[Ff]rontispiece_?)\s*$")
_SPLIT_FIELDS = re.compile(r"\s{2,}|\t")
_MAIN_CUT = re.compile(r"\s*(?:--|[\u2014\u2013(\[])\s*")
_SHORT_CUT = re.compile(r"\s*(?:--|[\u2014\u2013:;,(\[])\s*")
_NORM_DROP = re.compile(r"[^\w ]+")
_APOS = re.compile(r"['\u2019\u2018`]")
_STOPWORDS = frozenset({"the", "a", "an", "of", "to", "in", "on", "and"})
_SENTENCE = re.compile(r"[a-z][.!?][\"'\u201d\u2019)]?\s+[\"'\u201c\u2018(]?[A-Z]")


def _norm(s: str) -> str:
    """Lower case, accents, apostrophes, footnote marks and punctuation dropped."""
    s = _APOS.sub("", _FOOTNOTE_MARK.sub(" ", s).lower())
    if not s.isascii():
        s = "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c))
    return " ".join(_NORM_DROP.sub(" ", s).replace("_", " ").split())


def _ordinal_noun(key: str) -> str | None:
    """``first story`` -> ``story``, ``the second voice`` -> ``voice``: an ordinal and at most
    one more word (else None)."""
    words = key.split()
    if words[:1] == ["the"]:
        words = words[1:]
    if words and len(words) <= 2 and words[0] in ORDINALS:
        return words[1] if len(words) == 2 else ""
    return None


def _mark_ordinal_labels(entries: list[Entry]) -> None:
    """Entries that only count (``FIRST STORY``, ``SECOND STORY``) are labels of the parts of
    the entry above them - when they come as a series; ``Twelfth Night`` alone is a title."""
    series = Counter(n for e in entries if (n := _ordinal_noun(e.key)) is not None)
    for e in entries:
        n = _ordinal_noun(e.key)
        if n is not None and series[n] >= 2:
            e.label = e.numbered = True
            e.reason = None


def parse_entry(line: str) -> Entry | None:
    """A contents line as an entry: indentation, leading number, title (page numbers, dot
    leaders and author columns dropped). None for blank lines and ``PAGE`` headers."""
    expanded = line.expandtabs(4).rstrip()
    body = expanded.lstrip()
    if not body:
        return None
    indent = len(expanded) - len(body)
    m = _ILLUSTRATION.fullmatch(body)
    s = (m.group(1) if m else body).replace("**", "").replace("__", "")
    s = _ENTRY_PAGE.sub("", _ENTRY_LEADER.sub("", s)).strip()
    if not s or s.lower() in ("page", "pages", "contents", "contents:", "[illustration]"):
        return None
    numbered = False
    number = None
    raw = _norm(_clean(_SPLIT_FIELDS.split(s, maxsplit=1)[0]))
    m = _ENTRY_KW_NUM.match(s) or _ENTRY_NUM.match(s)
    if m:
        value = parse_number(m.group("num"))
        if value is None or (value is not False and value <= 400):
            numbered = True
            number = value if isinstance(value, int) else None
            s = s[m.end():]
    title = _clean(_SPLIT_FIELDS.split(s.strip(), maxsplit=1)[0]).strip(" .:;,\u2014\u2013-") if s.strip() else ""
    key = _norm(title)
    label = numbered and not key
    main = _norm(_MAIN_CUT.split(title, maxsplit=1)[0]) if title else ""
    short = _norm(_SHORT_CUT.split(title, maxsplit=1)[0]) if title else ""
    reason = apparatus_reason(title) if title and not label else None
    return Entry(title=title, key=key, main=main or key, short=short or main or key, indent=indent,
                 raw=raw, number=number,
                 numbered=numbered or label,
                 label=label, reason=reason)


def parse_contents(text: str, blocks: list[Block], cands: list[Heading],
                   book_title: str = "") -> tuple[list[Entry], int] | None:
    """Entries of the first contents list and the index of the first block after it (the
    book's title printed again after the list is not an entry)."""
    toc = next((h for h in cands if h.family == "apparatus" and h.reason == "contents"), None)
    if toc is None:
        return None
    # another apparatus heading ends the list, unless it is one of its lines ("INDEX ... 463")
    others = {h.block for h in cands if h.family == "apparatus" and h.block != toc.block
              and not (_ENTRY_PAGE.search(blocks[h.block].first) or _ENTRY_LEADER.search(blocks[h.block].first))}
    # a real heading (text follows it) is the body's first, not an entry
    real = {h.block for h in cands if h.real and h.block > toc.block and h.family != "apparatus"}
    others.update(real)
    cands_real = real.__contains__
    entries: list[Entry] = []
    seen: set[str] = set()
    if toc.rest_words:  # the list glued under its heading
        for ln in text[toc.end:blocks[toc.block].end].splitlines():
            e = parse_entry(ln)
            if e:
                entries.append(e)
                seen.update((e.key, e.main, e.short))
    j = toc.last_block + 1
    lines_seen = 0
    gap = 0  # widest gap between the list's blocks so far
    while j < len(blocks) and lines_seen < 1500:
        b = blocks[j]
        if j in others and entries and (b.blank_before > gap or cands_real(j)):
            break  # ILLUSTRATIONS, PREFACE ... set apart from the list: the list is over
        if entries:
            gap = max(gap, b.blank_before)
        if b.prose and b.n_words >= LIST_BREAK_WORDS and _SENTENCE.search(text, b.start, b.end):
            break  # running text
        line_start = max(text.rfind("\n", 0, b.start), text.rfind("\r", 0, b.start)) + 1
        lines = _join_wrapped_entries(text[line_start:b.end].splitlines())
        parsed = [e for e in map(parse_entry, lines) if e and e.key]
        if (b.n_lines <= 2 and parsed and all(e.key in seen for e in parsed)
                and not any(_ENTRY_PAGE.search(ln) for ln in lines)):
            break  # an entry seen again, without its page number: the body has begun
        for e in parsed:
            entries.append(e)
            seen.update((e.key, e.main, e.short))
        lines_seen += b.n_lines
        j += 1
    book = _norm(book_title)
    while entries and book and entries[-1].key == book:
        entries.pop()
    _mark_ordinal_labels(entries)
    return entries, j


_ENTRY_OPENS_NUMBERED = re.compile(rf"\s*(?:(?:{_KW_ALT})\s+)?(?:[IVXLCDM]+|[ivxlcdm]+|\d+)[.):]?\s", re.I)


def _join_wrapped_entries(lines: list[str]) -> list[str]:
    """Entries wrapped over several lines in a list with page numbers: a deeper-indented line
    that does not open with a number continues the entry above until a page number ends it
    (``III How Everything Turned Out Right for Oliver`` / ``in the End   65``). A line that
    introduces sub-entries (``THE THREE VOICES:--``) is not continued."""
    if len(lines) < 2 or not any(_LISTY_PAGE.search(ln) for ln in lines):
        return lines
    out: list[str] = []
    indent = 0
    open_entry = False
    for ln in lines:
        body = ln.expandtabs(4)
        ind = len(body) - len(body.lstrip())
        if (open_entry and out and ind > indent and body.strip()
                and not _ENTRY_OPENS_NUMBERED.match(body)):
            out[-1] = out[-1].rstrip() + " " + body.strip()
        else:
            out.append(ln)
            indent = ind
        tail = out[-1].rstrip()
        open_entry = bool(tail) and not _LISTY_PAGE.search(tail) and not tail.endswith((":", "\u2014", "-"))
    return out


def _entry_match(bk: str, e: Entry, caps: bool = False) -> bool:
    """Does a block's normalised text ``bk`` name the entry? Exactly, by its main title, with
    words added before or after (``Ford o' Kabul River``, ``THE ADVENTURES OF OLIVER TWIST``;
    anywhere in an upper-case title), or with one word in four misprinted."""
    if bk == e.key or bk == e.main or bk == e.short:
        return True
    ek = e.main  # partial matches use the title without its subtitle or author column
    if " " in ek and (bk.startswith(ek + " ") or bk.endswith(" " + ek)
                      or caps and f" {ek} " in f" {bk} "):
        return True
    if " " in bk and len(bk) >= 8 and ek.startswith(bk + " "):
        return True
    if bk.count(" ") >= 2 and ek.endswith(" " + bk):
        return True  # "In the Church at Stratford-on-Avon" / "THE CHURCH AT STRATFORD-ON-AVON."
    bw, ew = bk.split(), ek.split()
    # a misprint in one word of four ("Soldier an; Sailor Too" / "Soldier an' Salor Too")
    return len(bw) == len(ew) >= 3 and sum(a == b for a, b in zip(bw, ew)) >= 0.75 * len(ew)


def _significant(words: list[str]) -> str:
    return next((w for w in words if w not in _STOPWORDS), words[0])


def align_contents(text: str, blocks: list[Block], entries: list[Entry], from_block: int,
                   taken: set[int], word_for_word: set[int] | None = None) -> list[tuple[int, int]]:
    """``(entry index, block index)`` pairs: the longest in-order alignment of the entries with
    short blocks of the body (each entry and block used once; the earliest block wins)."""
    by_key: dict[str, set[int]] = {}
    by_first: dict[str, set[int]] = {}
    by_last: dict[str, set[int]] = {}
    by_raw: dict[str, set[int]] = {}
    for ei, e in enumerate(entries):
        if not e.key:
            continue
        if word_for_word is None or ei in word_for_word:
            by_raw.setdefault(e.raw, set()).add(ei)
        words = e.key.split()
        by_key.setdefault(e.key, set()).add(ei)
        by_key.setdefault(e.main, set()).add(ei)
        by_key.setdefault(e.short, set()).add(ei)
        by_first.setdefault(_significant(words), set()).add(ei)
        by_last.setdefault(words[-1], set()).add(ei)
    pairs: list[tuple[int, int]] = []
    for bi in range(from_block, len(blocks)):
        b = blocks[bi]
        if b.n_lines > 3 or b.n_words > 24:
            # a title glued to the text under it names its entry word for word
            if len(b.first) <= 60 and _heading_case(b.first):
                bk = _norm(_clean(b.first))
                pairs.extend((bi, ei) for ei in sorted(by_key.get(bk, ()), reverse=True))
            continue
        if bi in taken:  # a numbered heading names an entry only word for word ("I AM CONTENT.")
            pairs.extend((bi, ei) for ei in sorted(by_raw.get(_norm(_clean(b.first)), ()), reverse=True))
            continue
        keys = {_norm(_clean(b.first))}
        if b.n_lines > 1:
            keys.add(_norm(" ".join(text[b.start:b.end].split())))
        raw = text[b.start:b.end]
        columns = "    " in raw.strip()  # a cast list or table row, not a title: exact matches only
        caps = not columns and _mostly_upper(raw)
        hits: set[int] = set()
        for bk in keys:
            if not bk:
                continue
            if columns:
                hits.update(by_key.get(bk, set()))
                continue
            words = bk.split()
            pool = by_key.get(bk, set()) | by_first.get(_significant(words), set()) | by_last.get(words[-1], set())
            if caps and len(words) > 2:
                pool = pool | {ei for w in words for ei in by_first.get(w, ())}
            hits.update(ei for ei in pool if _entry_match(bk, entries[ei], caps))
        pairs.extend((bi, ei) for ei in sorted(hits, reverse=True))
    # longest increasing subsequence of entry indices along the blocks
    tails: list[int] = []
    tail_pair: list[int] = []
    prev = [-1] * len(pairs)
    for pi, (_bi, ei) in enumerate(pairs):
        k = bisect_left(tails, ei)
        if k < len(tails) and tails[k] == ei:
            continue  # this entry already ends a chain as long, at an earlier block
        if k == len(tails):
            tails.append(ei)
            tail_pair.append(pi)
        else:
            tails[k] = ei
            tail_pair[k] = pi
        prev[pi] = tail_pair[k - 1] if k else -1
    out: list[tuple[int, int]] = []
    pi = tail_pair[-1] if tail_pair else -1
    while pi >= 0:
        bi, ei = pairs[pi]
        out.append((ei, bi))
        pi = prev[pi]
    return out[::-1]


def _run_indents(entries: list[Entry]) -> None:
    """Numbers right-aligned in a column (``   III``, ``  VIII``) indent their lines unevenly: a
    run of consecutive numbered entries takes the indentation most of its lines have."""
    k = 0
    while k < len(entries):
        j = k
        while j < len(entries) and entries[j].numbered:
            j += 1
        if j > k:
            common = Counter(e.indent for e in entries[k:j]).most_common(1)[0][0]
            for e in entries[k:j]:
                e.indent = common
        k = j + 1


def _numbered_works(pairs: list[tuple[int, int]], entries: list[Entry], cands: list[Heading],
                    role) -> list[tuple[int, int]]:
    """Numbered works that the contents names by their first line while the body heads them
    with the number alone (``I. Fair Harvard, dear guide ...`` / ``I.``): such an entry takes
    the heading with its number between the works matched before and after it."""
    matched = dict(pairs)
    numbered = [h for h in cands if h.real and h.number is not None and h.family in ("kw", "numeral")]
    if not numbered:
        return pairs
    order = sorted(matched)
    out = dict(matched)
    for ei, e in enumerate(entries):
        if ei in matched or e.number is None or role(e) != "work":
            continue
        k = bisect_left(order, ei)
        lo = matched[order[k - 1]] if k > 0 else -1
        hi = matched[order[k]] if k < len(order) else 10**9
        lo = max([lo] + [b for x, b in out.items() if x < ei])
        h = next((h for h in numbered if lo < h.block < hi and h.number == e.number
                  and h.block not in out.values()), None)
        if h is not None:
            out[ei] = h.block
    return sorted(out.items())


def _author_names(author: str) -> set[str]:
    """Normalised names in a header's author field ("Charles Dickens and Hallie Erminie Rives")."""
    names = re.split(r"\s*(?:,|;|\band\b|&|\bwith\b|\btranslated by\b|\bedited by\b)\s*", author or "")
    return {_norm(n) for n in names if len(_norm(n).split()) >= 2}


@dataclass(slots=True)
class Works:
    """The top level read from a contents list: group and work headings in text order, the
    children found for numbered or deeper entries, and where back matter listed in the
    contents begins (a block index, or None)."""

    mains: list[Heading]
    children: list[Heading]
    back_block: int | None


def find_works(text: str, blocks: list[Block], acc: list[int], cands: list[Heading],
               contents: tuple[list[Entry], int] | None, author: str = "") -> Works | None:
    """Works named by the contents list, when it names most of them and they are found."""
    if contents is None:
        return None
    entries, after = contents
    _run_indents(entries)
    names = _author_names(author)
    for e in entries:
        if e.reason is None and not e.numbered and e.key in names:
            e.reason = "introduction"  # a section named after the author: a biographical note
    titled = [e for e in entries if e.key and not e.label and e.reason is None]
    unnumbered = [e for e in titled if not e.numbered]
    pool = unnumbered if len(unnumbered) >= 2 else titled
    if len(pool) < 2:
        return None
    counts = Counter(e.indent for e in pool)
    level = max(counts, key=lambda k: (counts[k], k))  # a tie goes to the deeper (items) level

    def role(e: Entry) -> str:
        if e.label or e.indent > level:
            return "child"
        return "group" if e.indent < level else "work"

    works_listed = [e for e in titled if role(e) == "work"]
    if len(works_listed) < 2:
        return None
    taken = {k for h in cands if h.number is not None or h.family in ("numeral", "md")
             for k in range(h.block, h.last_block + 1)}
    # in a list of titles, "I Am Content" read as numeral I is doubtful: such an entry may
    # name a numbered body heading word for word ("I AM CONTENT.")
    doubtful = ({ei for ei, e in enumerate(entries) if e.number == 1 and e.key}
                if sum(e.numbered for e in titled) < 0.2 * len(titled) else set())
    pairs = align_contents(text, blocks, entries, after, taken, doubtful)
    found_works = sum(1 for ei, _ in pairs if role(entries[ei]) == "work" and entries[ei].reason is None)
    if found_works < 2 or found_works < MIN_LISTED_SHARE * len(works_listed):
        return None
    pairs = _numbered_works(pairs, entries, cands, role)
    mains: list[Heading] = []
    children: list[Heading] = []
    for ei, bi in pairs:
        e, b = entries[ei], blocks[bi]
        r = role(e)
        glued = b.n_lines > 3 or b.n_words > 24  # a title on the first line of its text
        title = _clean(b.first if glued else " ".join(text[b.start:b.end].split()))
        if e.number is not None and e.title and _norm(e.title) not in _norm(title):
            title = _join_title([title, e.title])  # "I." headed in the body, titled in the contents
        h = Heading(block=bi, start=b.start, end=b.first_end if glued else b.end, last_block=bi,
                    kind="listed_group" if r == "group" else "listed_title", family="listed",
                    rank=7.5 if r == "group" else KIND_RANK["listed_title"],
                    title=title, real=True, reason=e.reason)
        (children if r == "child" else mains).append(h)
    # apparatus listed before the first work is front matter, from the first back-matter entry
    # after it everything is back matter; apparatus-like titles between works are works
    # ("A FAMILIAR PREFACE")
    first = next((k for k, h in enumerate(mains) if h.kind == "listed_title" and h.reason is None), None)
    if first is None:
        return None
    back_block = None
    for k, h in enumerate(mains):
        if k < first:
            continue
        if h.reason in _BACK_REASONS:
            back_block = h.block
            mains = mains[:k]
            break
        h.reason = None
    front = [h for h in mains[:first] if h.reason]
    mains = [h for h in mains if not h.reason]
    # a work with no text of its own before the next work only groups the works after it
    for k, h in enumerate(mains):
        nxt = mains[k + 1] if k + 1 < len(mains) else None
        if h.kind == "listed_title" and nxt is not None and nxt.kind == "listed_title":
            if acc[nxt.block] - acc[h.last_block + 1] < MIN_PROSE:
                h.kind, h.rank = "listed_group", 7.5
    if sum(h.kind == "listed_title" for h in mains) < 2:
        return None
    for h in front:  # kept as front-matter headings (their reason says why)
        h.real = False
    return Works(mains=mains, children=children + front, back_block=back_block)


# ---------------------------------------------------------------------------- upper-case titles

def wide_gap(blocks: list[Block]) -> int:
    """Blank lines that set a title apart in this book: one more than the usual gap between its
    paragraphs (at least two)."""
    gaps = Counter(b.blank_before for b in blocks[1:] if b.prose)
    usual = gaps.most_common(1)[0][0] if gaps else 1
    return max(2, usual + 1)


def caps_title_candidates(text: str, blocks: list[Block], min_gap: int | None = None,
                          taken: set[int] | None = None, min_count: int = 3) -> list[Heading]:
    """Short upper-case blocks set apart by a wider gap than the book's paragraphs."""
    gap = wide_gap(blocks) if min_gap is None else min_gap
    taken = taken or set()
    out: list[Heading] = []
    for k, b in enumerate(blocks):
        if (b.blank_before >= gap and k not in taken and b.n_lines <= 2 and b.n_words <= 15
                and (b.upper_only or _mostly_upper(b.first)) and sum(c.isalpha() for c in b.first) >= 2
                and (classify_line(b.first) or ("letter",))[0] == "letter"):
            h = Heading(block=k, start=b.start, end=b.end, last_block=k, kind="caps_title",
                        family="caps", rank=KIND_RANK["caps_title"], bare=True,
                        title=_clean(" ".join(text[b.start:b.end].split())))
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


# ---------------------------------------------------------------------------- realness

def _prose_prefix(blocks: list[Block]) -> list[int]:
    acc = [0]
    for b in blocks:
        acc.append(acc[-1] + (b.n_words if b.prose else 0))
    return acc


def mark_real(cands: list[Heading], blocks: list[Block], prose_acc: list[int]) -> None:
    """A structural candidate is real when body text follows it before the next candidate, or
    when the next candidate is deeper and real itself (``BOOK ONE`` then ``I.`` then text)."""
    nb = len(blocks)
    for i in range(len(cands) - 1, -1, -1):
        h = cands[i]
        if h.family == "apparatus":
            h.real = False
            continue
        nxt = cands[i + 1] if i + 1 < len(cands) else None
        stop = nxt.block if nxt else nb
        prose = prose_acc[stop] - prose_acc[h.last_block + 1] + h.rest_words
        if prose >= MIN_PROSE:
            h.real = True
        elif h.md_level and stop > h.last_block + 1:
            h.real = True  # an explicit Markdown heading needs only some text under it
        elif nxt is not None and nxt.family != "apparatus" and nxt.rank > h.rank and nxt.real:
            h.real = True
        else:
            h.real = False


def filter_sequences(cands: list[Heading]) -> None:
    """Unmark numbered candidates that break their kind's sequence.

    Numbers go up by one; 1 may restart a sequence anywhere (a new volume), and any number may
    start one right after an enclosing heading (``ACT III`` / ``SCENE II`` when the source lacks
    scene I); small gaps pass, and so does a misprint that the next heading corrects (III, VI,
    V, VI). Numbers before the first 1 of their kind with no enclosing heading before them are
    dropped when a 1 follows: that is the tail of a contents list."""
    real = [h for h in cands if h.real]
    numbered: dict[str, list[int]] = {}
    for k, h in enumerate(real):
        if h.family in ("kw", "numeral") and h.number is not None:
            numbered.setdefault(h.kind, []).append(k)
    for kind, positions in numbered.items():
        rank = KIND_RANK[kind]
        last: int | None = None
        enclosed = False
        seen = set(positions)
        next_pos = {p: q for p, q in zip(positions, positions[1:])}
        later_one = set()
        found_one = False
        for p in reversed(positions):
            if found_one:
                later_one.add(p)
            if real[p].number == 1:
                found_one = True
        for k, h in enumerate(real):
            if k not in seen:
                if h.rank < rank and h.family in ("kw", "special", "md"):
                    last, enclosed = None, True
                continue
            v = h.number
            if v is None:
                continue
            nxt_k = next_pos.get(k)
            nxt = real[nxt_k].number if nxt_k is not None else None
            if last is None:
                if v != 1 and not enclosed and k in later_one:
                    h.real = False  # tail of a contents list before the real first heading
                    continue
                last = v
            elif v == 1 or v == last + 1:
                last = v
            elif nxt is not None and nxt == last + 2:
                last = last + 1  # misprinted number; the next heading confirms the count
            elif last < v <= last + 3:
                last = v  # a heading or two missing
            else:
                h.real = False


# ---------------------------------------------------------------------------- the analysis

_CHAPTER_LIKE = ("scene", "chapter", "stave", "fit", "letter", "canto", "section")


def merge_numeral_kinds(cands: list[Heading]) -> None:
    """Titled and bare numerals that count on together (``III. THE RIDING FORTH``, ``IV.``,
    ``V. AT THE FORD``) are one sequence: the bare ones become titled headings without a title.
    Numbered sub-sections inside numbered stories restart at I and are left alone."""
    nums = [h for h in cands if h.real and h.family == "numeral" and h.number is not None]
    kinds = {h.kind for h in nums}
    if len(kinds) < 2 or len(nums) < 3:
        return
    def counts_on(seq: list[Heading]) -> bool:
        steps = sum(1 for a, b in zip(seq, seq[1:]) if b.number == a.number + 1)
        return len(seq) >= 2 and steps >= 0.8 * (len(seq) - 1)

    # only when neither kind counts on alone (twelve titled stories with numbered sections
    # inside some of them are two sequences, not one)
    if counts_on(nums) and not any(counts_on([h for h in nums if h.kind == k]) for k in kinds):
        for h in nums:
            h.kind, h.rank = "numeral_titled", KIND_RANK["numeral_titled"]



# ---------------------------------------------------------------------------- front and back matter

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


def _pattern_reason(text: str, b: Block) -> str | None:
    """Matter recognised by its wording rather than by a heading: a transcriber's note, a
    licence, a printer's colophon, a publisher's catalogue, a copyright notice."""
    head = _clean(text[b.start:min(b.end, b.start + 300)])
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


def _heading_reasons(heads: list[Heading]) -> dict[int, tuple[str, str]]:
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
            claim = "list" if cur in _LIST_REASONS else "prose"
            per.append((cur, title))
            evidence = i
            continue
        p = _pattern_reason(text, b)
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
        line = _clean(b.first)
        if (b.n_lines == 1 and b.n_words <= 16 and _END_LINE.fullmatch(line)
                and all(w[0].isupper() for w in line.split() if w[0].isalpha())):
            if i + 1 < g:
                g = i + 1  # keep looking: a later END line moves nothing back
            break
    for i in range(last_unit + 1, g):
        if _LICENCE.match(_clean(blocks[i].first)):
            g = i
            break
    i = g - 1
    while i > last_unit and (_pattern_reason(text, blocks[i]) in ("colophon", "adverts", "licence", "transcriber's note")
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
        if hr is not None and (hr[0] in _BACK_REASONS or cur == "back matter"):
            cur, title = hr
            per.append((cur, title))
            continue
        if hr is not None:
            per.append((cur, title))
            continue
        if blocks[i].n_lines == 1 and _SEPARATOR.fullmatch(blocks[i].first):
            per.append(None)
            continue
        p = _pattern_reason(text, blocks[i])
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


def _matter_spans(blocks: list[Block], spans: list[tuple[int, int, str, str]], where: str) -> list[MatterSpan]:
    return [MatterSpan(start=blocks[lo].start, end=blocks[hi - 1].end, reason=reason, title=title,
                       where=where) for lo, hi, reason, title in spans]



# ---------------------------------------------------------------------------- the analysis

_CHAPTER_LIKE = ("scene", "chapter", "stave", "fit", "letter", "canto", "section")
_CONTAINERS = ("volume", "part", "book", "act")
_CHILD_FAMILIES = frozenset({"kw", "numeral", "special", "listed", "caps", "md"})


def analyze_structure(text: str, start: int = 0, end: int | None = None, *,
                      author: str = "", title: str = "") -> Structure:
    """Find the top-level segments of ``text[start:end]`` and the front and back matter around
    them. ``author`` and ``title`` (from the header) let a section named after the author be
    read as a biographical introduction, and the book's title repeated after a contents list
    be told from its last entry."""
    end = len(text) if end is None else end
    blocks = scan_blocks(text, start, end)
    if not blocks:
        return Structure(start, start, [], "")
    acc = _prose_prefix(blocks)
    dramatic = _is_dramatic(blocks)
    cands = find_candidates(text, blocks, dramatic)
    _add_prefix_containers(text, blocks, cands)
    mark_real(cands, blocks, acc)
    merge_numeral_kinds(cands)
    filter_sequences(cands)

    contents = parse_contents(text, blocks, cands, title)
    if contents is not None:  # headings inside the contents list are its entries
        lo = next(h.block for h in cands if h.family == "apparatus" and h.reason == "contents")
        cands = [h for h in cands if not lo < h.block < contents[1]]
    works = find_works(text, blocks, acc, cands, contents, author)
    if works is None or not _works_win(works, cands, blocks, acc):
        works = _caps_works(text, blocks, acc, cands)
    back_block: int | None = None
    if works is not None:
        unit_kind = "listed_title"
        boundaries = works.mains
        taken = {h.block for h in works.mains + works.children}
        children = works.children + [h for h in cands if h.real and h.block not in taken]
        back_block = works.back_block
        known = cands + works.mains + works.children
    else:
        choice = _choose_units(cands, blocks, acc)
        choice, cands = _try_caps_titles(text, blocks, acc, cands, choice)
        known = cands
        if choice is None:
            return _unstructured(text, blocks, cands)
        unit_kind, boundaries = choice
        _absorb_leading_headings(cands, boundaries, acc)
        back_block, boundaries = _back_matter_start(cands, boundaries, unit_kind)
        chosen = {id(h) for h in boundaries}
        children = [h for h in cands if h.real and id(h) not in chosen]
    reasons = _heading_reasons(known)
    g = back_matter_start(text, blocks, boundaries[-1].block, back_block)
    body_end = blocks[-1].end if g is None else _trim_end(text, boundaries[0].start, blocks[g].start)
    segments = _build_segments(text, blocks, acc, boundaries, unit_kind, body_end, dramatic)
    first = _block_at(blocks, segments[0].start)
    spans, narrative = front_matter(text, blocks, reasons, first, narrative_ok=not dramatic)
    if narrative is not None:
        segments.insert(0, Segment(blocks[narrative].start, _trim_end(text, blocks[narrative].start,
                                                                      segments[0].start), "section", ""))
    _attach_children(segments, [h for h in children if h.family in _CHILD_FAMILIES])
    matter = _matter_spans(blocks, spans, "front")
    if g is not None:
        matter += _matter_spans(blocks, back_matter(text, blocks, reasons, g), "back")
    front = (matter[0].start, segments[0].start) if spans else None
    back = (blocks[g].start, blocks[-1].end) if g is not None else None
    return Structure(segments[0].start, segments[-1].end, segments, unit_kind, front, back,
                     headings=[h for h in known if h.real], matter=matter,
                     paragraphs=_paragraphs(blocks))


def _paragraphs(blocks: list[Block]) -> list[tuple[int, int, int]]:
    if any(b.md_heading for b in blocks):
        return []  # Markdown heading lines are blocks of their own without a blank line
    return [(b.start, b.end, b.n_words) for b in blocks]


def _unstructured(text: str, blocks: list[Block], cands: list[Heading]) -> Structure:
    """No usable headings: one segment, after a title page of short non-prose blocks (or up to
    an apparatus heading) and before back matter recognised by its wording."""
    reasons = _heading_reasons(cands)
    first = 0
    while (first < len(blocks) and first not in reasons
           and (_pattern_reason(text, blocks[first]) is not None
                or not (blocks[first].prose and blocks[first].n_words >= LIST_BREAK_WORDS))):
        first += 1
    if first >= len(blocks):
        first = 0  # nothing reads as running text: keep it all as the one segment
    spans, _ = front_matter(text, blocks, reasons, first, narrative_ok=False)
    g = back_matter_start(text, blocks, first, None)
    last = len(blocks) if g is None else g
    seg = Segment(blocks[first].start, blocks[last - 1].end, "section", "")
    matter = _matter_spans(blocks, spans, "front")
    if g is not None:
        matter += _matter_spans(blocks, back_matter(text, blocks, reasons, g), "back")
    return Structure(seg.start, seg.end, [seg], "", (matter[0].start, seg.start) if spans else None,
                     (blocks[g].start, blocks[-1].end) if g is not None else None,
                     headings=[h for h in cands if h.real], matter=matter,
                     paragraphs=_paragraphs(blocks))


def _block_at(blocks: list[Block], offset: int) -> int:
    lo, hi = 0, len(blocks)
    while lo < hi:
        mid = (lo + hi) // 2
        if blocks[mid].end <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _attach_children(segments: list[Segment], heads: list[Heading]) -> None:
    heads = sorted(heads, key=lambda h: h.start)
    starts = [h.start for h in heads]
    for seg in segments:
        k = bisect_left(starts, seg.start + 1)
        while k < len(heads) and heads[k].start < seg.end:
            seg.children.append((heads[k].start, heads[k].title))
            k += 1


def _caps_works(text: str, blocks: list[Block], acc: list[int], cands: list[Heading]) -> Works | None:
    """Stories of a collection without a contents list: upper-case titles set apart by wide
    gaps, with the numbered headings found starting over under them (a story in parts) and at
    least one story with no numbered part at all - else the titles only group chapters."""
    choice = _choose_units(cands, blocks, acc)
    if choice is None or choice[0] in _CONTAINERS or choice[0] in ("act", "scene") or choice[0].startswith("md"):
        return None
    units = [h for h in choice[1] if h.kind == choice[0]]
    if all(h.number is None for h in units):
        return None  # letters: nothing to start over
    taken = {k for h in cands for k in range(h.block, h.last_block + 1)}
    caps = caps_title_candidates(text, blocks, taken=taken, min_count=2)
    apparatus = [h.block for h in cands if h.family == "apparatus"]
    mains = []
    for h in caps:
        nxt = _next_block(caps, h, len(blocks))
        if acc[nxt] - acc[h.last_block + 1] < MIN_PROSE:
            continue
        if any(h.block < a < nxt for a in apparatus):
            continue  # a title page over an introduction or a contents list
        mains.append(h)
    if len(mains) < 2:
        return None
    for h in mains:
        h.kind, h.family, h.rank, h.real = "listed_title", "listed", KIND_RANK["listed_title"], True
    starts = [h.block for h in mains] + [len(blocks)]
    leaf = 0
    for a, b in zip(starts, starts[1:]):
        inside = [h for h in units if a < h.block < b]
        if not inside:
            # a story of its own, not a prefatory note ("EXPLANATORY" before Huckleberry Finn)
            leaf += acc[b] - acc[a] >= MIN_NARRATIVE_WORDS
        elif inside[0].number not in (1, None):
            return None
    if not leaf or units[0].block < mains[0].block:
        return None
    return Works(mains=mains, children=[], back_block=None)


def _next_block(heads: list[Heading], h: Heading, n: int) -> int:
    k = heads.index(h)
    return heads[k + 1].block if k + 1 < len(heads) else n


def _works_win(works: Works, cands: list[Heading], blocks: list[Block], acc: list[int]) -> bool:
    """Do the works of the contents list make the top level? Not when a heading kind found
    elsewhere starts before them, nor when its numbers run on across the works (chapters
    numbered through the whole book under part titles): then the titles only group them."""
    taken = {h.block for h in works.mains + works.children}
    rest = [h for h in cands if h.block not in taken]
    choice = _choose_units(rest, blocks, acc)
    if choice is None:
        return True
    kind, bounds = choice
    units = [h for h in bounds if h.kind == kind]
    if not units or units[0].block < works.mains[0].block:
        return not units
    starts = [h.block for h in works.mains if h.kind == "listed_title"] + [len(blocks)]
    ok = holding = 0
    for a, b in zip(starts, starts[1:]):
        inside = [h for h in units if a < h.block < b]
        holding += bool(inside)
        if not inside or inside[0].number in (1, None):
            ok += 1
    if holding == 1 and len(units) > len(starts) - 1:
        return False  # one "work" holds all the numbered units: the others are prefatory pieces
    return ok == len(starts) - 1


def _try_caps_titles(text: str, blocks: list[Block], acc: list[int], cands: list[Heading],
                     choice: tuple[str, list[Heading]] | None):
    """Upper-case titles set apart by wide gaps, when no heading kind was found or only
    containers were (``PART ONE`` over titled chapters): the titles are then the units."""
    if choice is not None and choice[0] not in _CONTAINERS:
        return choice, cands
    keep = [replace(h) for h in cands
            if h.family in ("apparatus", "special")
            or (choice is not None and h.real and h.kind in _CONTAINERS)]
    taken = {k for h in keep for k in range(h.block, h.last_block + 1)}
    taken.update(h.block for h in cands if h.kind != "letter")
    caps = caps_title_candidates(text, blocks, taken=taken)
    if not caps:
        return choice, cands
    merged = sorted(keep + caps, key=lambda h: h.block)
    mark_real(merged, blocks, acc)
    filter_sequences(merged)
    alt = _choose_units(merged, blocks, acc, only="caps_title")
    if alt is None:
        return choice, cands
    n_caps = sum(h.kind == "caps_title" for h in alt[1])
    if choice is None or n_caps >= 2 * len(choice[1]):
        return alt, merged
    return choice, cands


def _absorb_leading_headings(cands: list[Heading], boundaries: list[Heading], acc: list[int]) -> None:
    """A heading line that is not a boundary but sits right before one, with no text between
    (``THE WEDDING OF MRS FOX`` / ``FIRST STORY``, ``# INTERMISSION`` / ``### SCENE IV``),
    belongs to the unit that follows, not to the end of the previous one."""
    index = {id(h): k for k, h in enumerate(cands)}
    chosen = {id(h) for h in boundaries}
    for b in boundaries[1:]:
        k = index.get(id(b))
        if k is None:
            continue
        for _ in range(2):
            if k == 0:
                break
            prev = cands[k - 1]
            if (id(prev) in chosen or prev.family == "apparatus"
                    or acc[b.block] - acc[prev.last_block + 1] > 0):
                break
            b.start = prev.start
            if prev.family == b.family and prev.title and b.title:
                b.title = _join_title([prev.title, b.title])
            k -= 1


def _add_prefix_containers(text: str, blocks: list[Block], cands: list[Heading]) -> None:
    """``Inferno: Canto I`` names its container; a lone ``INFERNO`` line becomes a part heading."""
    prefixes = {h.prefix.lower() for h in cands if h.prefix}
    if not prefixes:
        return
    taken = {k for h in cands for k in range(h.block, h.last_block + 1)}
    for k, b in enumerate(blocks):
        if k in taken or b.n_lines != 1:
            continue
        if _clean(b.first).rstrip(".").lower() in prefixes:
            cands.append(Heading(block=k, start=b.start, end=b.end, last_block=k, kind="part",
                                 family="kw", rank=KIND_RANK["part"], title=_clean(b.first),
                                 bare=True))
    cands.sort(key=lambda h: h.block)


def _is_dramatic(blocks: list[Block]) -> bool:
    """Plays: many paragraphs open with a speaker's name in capitals."""
    cues = total = 0
    for b in blocks[:: max(1, len(blocks) // 2000)]:
        total += 1
        if _SPEAKER.match(b.first):
            cues += 1
    return total > 20 and cues >= 0.2 * total


def _choose_units(cands: list[Heading], blocks: list[Block], acc: list[int],
                  only: str | None = None) -> tuple[str, list[Heading]] | None:
    real = [h for h in cands if h.real]
    counts: dict[str, int] = {}
    for h in real:
        counts[h.kind] = counts.get(h.kind, 0) + 1
    options: list[str] = []
    if only is not None:
        options = [only]
    else:
        # one heading of a kind divides nothing; letters ("TO RAISE POULTRY" is a sketch's
        # title) need a run of them
        chapter_like = sorted((k for k in _CHAPTER_LIKE if counts.get(k, 0) >= (3 if k == "letter" else 2)),
                              key=lambda k: (-counts[k], _CHAPTER_LIKE.index(k)))
        options += chapter_like
        if counts.get("act"):
            options.append("act")
        options += [k for k in ("numeral_titled", "numeral_bare") if counts.get(k, 0) >= 2]
        # a single PART or BOOK heading (a title page's "Part 2.") divides nothing
        options += [k for k in ("book", "part", "volume") if counts.get(k, 0) >= 2]
        md_unit = _markdown_unit_level(real)
        if md_unit:
            options.append(md_unit)
    total = max(1, acc[-1])
    for kind in options:
        boundaries = _boundaries(real, kind)
        if not boundaries:
            continue
        front_words = acc[boundaries[0].block] - acc[0]
        if front_words > MAX_FRONT_SHARE * total and front_words > MAX_FRONT_WORDS:
            continue
        if len(boundaries) >= 3:
            cuts = [h.block for h in boundaries] + [len(blocks)]
            largest = max(acc[b] - acc[a] for a, b in zip(cuts, cuts[1:]))
            if largest > MAX_UNIT_SHARE * total:
                continue  # a handful of numbered sub-sections inside one story
        return kind, boundaries
    return None




def _markdown_unit_level(real: list[Heading]) -> str | None:
    md = [h for h in real if h.family == "md"]
    if not md:
        return None
    levels: dict[int, list[Heading]] = {}
    for h in md:
        levels.setdefault(h.md_level, []).append(h)
    multi = sorted(lv for lv, hs in levels.items() if len(hs) >= 2)
    if not multi:
        return f"md{min(levels)}" if len(md) >= 1 else None
    first = multi[0]
    if len(multi) >= 2:
        second = multi[1]
        outer, inner = levels[first], levels[second]
        if len(inner) >= 2 * len(outer):
            # every outer section must hold at least one inner heading to be a container
            starts = [h.block for h in outer] + [10**12]
            if all(any(s <= h.block < e for h in inner) for s, e in zip(starts, starts[1:])):
                return f"md{second}"
    return f"md{first}"


def _boundaries(real: list[Heading], unit_kind: str) -> list[Heading]:
    """Headings that cut the body: units, their containers, and special sections."""
    if unit_kind.startswith("md"):
        level = int(unit_kind[2:])
        md_title = _markdown_title(real)
        keep = [h for h in real if h is not md_title and (
            (h.family == "md" and h.md_level <= level) or h.family == "special")]
    else:
        rank = KIND_RANK[unit_kind]
        containers = {k for k in _CONTAINERS if KIND_RANK[k] < rank}
        if unit_kind == "numeral_bare":
            containers.add("numeral_titled")
        md_title = _markdown_title(real)
        keep = []
        for h in real:
            if h.kind == unit_kind or h.kind in containers or h.family == "special":
                keep.append(h)
            elif h.family == "md" and h is not md_title and not unit_kind.startswith("md"):
                keep.append(h)  # e.g. "# INTERMISSION" between scenes: a section of its own
    if not any(h.kind == unit_kind for h in keep):
        return []
    return keep


def _markdown_title(real: list[Heading]) -> Heading | None:
    """A single level-1 Markdown heading before everything else is the book's title."""
    md = [h for h in real if h.family == "md"]
    if md and md[0].md_level == 1 and sum(h.md_level == 1 for h in md) == 1 and md[0] is real[0]:
        return md[0]
    return None


_BACK_MATTER = re.compile(r"(?:.*\s)?(?:notes?|appendix|appendices|glossary|index|footnotes|endnotes"
                          r"|bibliography|errata|postscript)\b", re.I)


def _back_matter_start(cands: list[Heading], boundaries: list[Heading],
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


def _trim_end(text: str, lo: int, end: int) -> int:
    while end > lo and text[end - 1].isspace():
        end -= 1
    return end


def _build_segments(text: str, blocks: list[Block], acc: list[int], boundaries: list[Heading],
                    unit_kind: str, body_end: int, dramatic: bool) -> list[Segment]:
    rank_unit = KIND_RANK.get(unit_kind, 10 + int(unit_kind[2:]) if unit_kind.startswith("md") else 8)
    if unit_kind == "listed_title":
        rank_unit = KIND_RANK["listed_title"]
    unit_name = _unit_name(unit_kind, dramatic)
    segments: list[Segment] = []
    stack: list[tuple[float, str, int]] = []  # (rank, title, md_level)
    pending: int | None = None
    for i, h in enumerate(boundaries):
        seg_end = boundaries[i + 1].start if i + 1 < len(boundaries) else body_end
        seg_end = _trim_end(text, h.start, seg_end)
        next_block = boundaries[i + 1].block if i + 1 < len(boundaries) else len(blocks)
        own_prose = acc[next_block] - acc[h.last_block + 1] + h.rest_words
        title = h.title
        is_unit_kind = h.kind == unit_kind
        container_rank = _container_rank(h, unit_kind, rank_unit)
        if container_rank is not None and not is_unit_kind:
            nxt = boundaries[i + 1] if i + 1 < len(boundaries) else None
            # A prologue encloses the following units only when the Markdown levels say so
            # (the Shrew's "## PROLOGUE" over "### SCENE I"); with text of its own it is a unit.
            if h.family == "special" and (own_prose >= MIN_CONTAINER_PROSE or nxt is None
                                          or nxt.kind != unit_kind or not h.md_level
                                          or nxt.md_level <= h.md_level):
                container_rank = None
        if container_rank is not None and not is_unit_kind:
            while stack and stack[-1][0] >= container_rank:
                stack.pop()
            if own_prose >= MIN_CONTAINER_PROSE:
                segments.append(Segment(pending if pending is not None else h.start, seg_end,
                                        _kind_name(h, unit_name), title, [t for _, t, _ in stack]))
                pending = None
            elif pending is None:
                pending = h.start
            stack.append((container_rank, title, h.md_level))
            continue
        if h.family == "special" or (h.family == "md" and not unit_kind.startswith("md")):
            if h.md_level:
                while stack and stack[-1][2] and stack[-1][2] >= h.md_level:
                    stack.pop()
            elif h.family == "special":
                stack.clear()
        segments.append(Segment(pending if pending is not None else h.start, seg_end,
                                _kind_name(h, unit_name), title, [t for _, t, _ in stack]))
        pending = None
    if pending is not None and segments:
        # a container heading at the very end with no text: fold it into the last unit
        segments[-1].end = body_end
    elif pending is not None:
        segments.append(Segment(pending, body_end, unit_name, "", []))
    return segments


def _container_rank(h: Heading, unit_kind: str, rank_unit: float) -> float | None:
    if h.family == "special":
        return KIND_RANK["special"]
    if h.family == "md" and unit_kind.startswith("md"):
        return 10 + h.md_level if h.md_level < int(unit_kind[2:]) else None
    if h.family == "md":
        return None
    return h.rank if h.rank < rank_unit else None


def _unit_name(unit_kind: str, dramatic: bool) -> str:
    if unit_kind.startswith("numeral"):
        return "scene" if dramatic else "chapter"
    if unit_kind in ("listed_title", "caps_title"):
        return "episode"
    if unit_kind.startswith("md"):
        return "section"
    return unit_kind


def _kind_name(h: Heading, unit_name: str) -> str:
    if h.family in ("numeral", "listed", "caps"):
        return unit_name
    if h.family == "md":
        return "section"
    return h.kind
