"""Structure of a book: headings, front and back matter, and top-level narrative segments.

The text is read as blocks (runs of non-blank lines). Short blocks are matched against heading
patterns (``CHAPTER I.``, ``Chapter the First``, ``Book the First--Recalled to Life``, ``FIRST
ACT``, ``Inferno: Canto I``, bare numerals such as ``XIV``, Markdown ``## ACT I`` ...). A
candidate heading only counts when body text follows it - directly or through a deeper heading
(``BOOK ONE`` -> ``I.`` -> prose) - which is what tells a table of contents (a run of headings
with nothing between them) from the real headings later on. Numbered headings must also form a
plausible sequence, so a contents list that ends right before a cast list or a preface does not
survive either.

Then one heading kind is chosen as the unit (scene before act, chapter-like kinds before bare
numerals before books/parts/volumes); shallower kinds become containers (``Unit.path``), deeper
ones stay inside the units. Everything before the first kept heading is front matter; a
trailing appendix, notes or transcriber section after the last one is back matter. When no
keyword or numeral structure exists, titles listed in a contents block and then short upper-case
titles after a wide gap are tried. No heading at all: the whole body is one segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MIN_PROSE = 8  # words of body text that make a heading real (a contents entry has none)
MIN_CONTAINER_PROSE = 40  # an introduction under a PART heading this long becomes its own unit
MAX_FRONT_SHARE = 0.35  # a structure that leaves more of the book than this before its first
MAX_FRONT_WORDS = 5000  # heading (and more words than this) is probably a sub-structure
MAX_UNIT_SHARE = 0.6  # ... and so is one whose largest unit holds more than this share

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
    rf"(?P<kw>{_KW_ALT})\s+(?P<num>(?:the\s+)?(?:{_NUM_ALT}))(?![\w'\u2019])[.:]?"
    rf"(?:{_SEP_TITLE})?\s*",
    re.I,
)
_ORDINAL_FIRST = re.compile(
    rf"(?:the\s+)?(?P<num>{_ORD_ALT})\s+(?P<kw>book|part|act|scene|canto|volume|chapter|stave|fit)"
    rf"(?![\w'\u2019])[.:]?(?:{_SEP_TITLE})?\s*",
    re.I,
)
_NUMERAL = re.compile(r"(?P<num>[IVXLCDM]+|\d{1,3})(?P<dot>[.)]?)(?:\s+(?P<title>\S.*?))?\s*")
_SPECIAL = re.compile(
    r"(?:the\s+)?(?P<sp>prologue|epilogue|prelude|induction|interlude|intermission|conclusion"
    r"|finale|afterword|l['\u2019]envo[iy]|envo[iy]|introduction\s+to\s+(?:the\s+\w+\s+)?(?:canto|book|part)\b"
    r"[^\r\n]{0,30}?)(?![\w'\u2019])(?P<rest>[^\r\n]{0,80}?)\s*",
    re.I,
)
_APPARATUS = re.compile(
    r"(?:[\w'\u2019.]+\s+){0,3}?(?:the\s+)?"
    r"(?P<ap>contents|table\s+of\s+contents|preface|foreword|introduction|introductory|dedication"
    r"|illustrations|characters|dramatis\s+person(?:ae|\u00e6)|persons|scenes\s+of\s+the\s+play"
    r"|etymology|extracts|advertisement|acknowledge?ments?|notes?|credits|glossary|appendix"
    r"|appendices|index|footnotes|endnotes|postscript|bibliography|errata|technical\s+notes?"
    r"|transcriber['\u2019]?s?\s+notes?)(?![\w'\u2019])[^\r\n]{0,60}",
    re.I,
)
_MARKDOWN = re.compile(r"[ \t]{0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_MD_LINE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+\S", re.M)
_EMPHASIS = re.compile(r"^[*_]+|[*_]+$")
# Lines of a contents list: they open with a number or heading keyword, or end in a page number.
_LISTY_HEAD = re.compile(rf"^[ \t]*(?:(?:[IVXLCDM]+|\d+)[.):]?[ \t]|(?:{_KW_ALT})[ \t])", re.I | re.M)
_LISTY_PAGE = re.compile(r"(?:[ \t]{2,}|\.[ \t]?\.[ \t]?\.[ \t]*|\u2026[ \t]*)\d+[ \t]*$", re.M)
_SPEAKER = re.compile(r"^(?:\*\*)?[A-Z][A-Z'\u2019\-]+(?: [A-Z][A-Z'\u2019\-]+){0,3}(?:\*\*)?"
                      r"(?:\s*[(\[].*)?(?:[.:]\s|[.:]?\s*$)")
_WORD = re.compile(r"[^\W\d_]+")


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


@dataclass(slots=True)
class Segment:
    """A top-level narrative unit before word-cap splitting."""

    start: int
    end: int
    kind: str
    title: str
    path: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Structure:
    body_start: int
    body_end: int
    segments: list[Segment]
    unit_kind: str = ""  # the heading kind chosen as unit ("" when none)
    front: tuple[int, int] | None = None  # front-matter span inside the stripped range
    back: tuple[int, int] | None = None  # back-matter span
    headings: list[Heading] = field(default_factory=list)  # all real candidates considered


# ---------------------------------------------------------------------------- blocks

# A line break followed by one or more blank lines (only horizontal whitespace on them).
_BLANK_RUN = re.compile(r"(?:\r\n|\r(?!\n)|\n)(?:[^\S\r\n]*(?:\r\n|\r(?!\n)|\n))+")
_NEWLINE = re.compile(r"\r\n|\r|\n")


def scan_blocks(text: str, start: int, end: int) -> list[Block]:
    """Split ``text[start:end]`` into blocks. In Markdown texts every ``#`` heading line is a
    block of its own even without blank lines around it."""
    markdown = len(_MD_LINE.findall(text, start, min(end, start + 200_000))) >= 2
    blocks: list[Block] = []
    pos = start
    blanks = 99  # the start of the range counts as the widest gap
    for m in _BLANK_RUN.finditer(text, start, end):
        _add_blocks(text, pos, m.start(), blanks, markdown, blocks)
        blanks = len(_NEWLINE.findall(m.group())) - 1
        pos = m.end()
    _add_blocks(text, pos, end, blanks, markdown, blocks)
    return blocks


def _add_blocks(text: str, bs: int, be: int, blanks: int, markdown: bool, out: list[Block]) -> None:
    raw = text[bs:be]
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


_LOWER_WORD = re.compile(r"(?<!\S)[\"'\u2018\u201c(_*]*[a-z\u00df-\u00ff]")


_LISTY_FIRST = frozenset("0123456789IVXLCDMivxlcdmBPASFbpasf")


def _is_listy(line: str) -> bool:
    # cheap character tests first: most lines of running text fail both
    head = line.lstrip()[:1]
    if head in _LISTY_FIRST and _LISTY_HEAD.match(line):
        return True
    return line.rstrip()[-1:].isdigit() and bool(_LISTY_PAGE.search(line))


def _make_block(text: str, bs: int, be: int, blank_before: int, markdown: bool) -> Block:
    raw = text[bs:be]
    stripped = raw.strip()
    start = bs + (len(raw) - len(raw.lstrip()))
    end = bs + len(raw.rstrip())
    lines = stripped.splitlines()
    first = lines[0].strip()
    first_end = start + len(lines[0].rstrip())
    n_lines = len(lines)
    n_words = len(stripped.split())
    upper_only = stripped.isupper()
    md_heading = markdown and n_lines == 1 and bool(_MARKDOWN.match(first))
    if n_lines == 1:
        listy = 1 if n_words < 12 and _is_listy(first) else 0
    else:
        listy = sum(1 for ln in lines[:200] if _is_listy(ln))
    # Running text (prose or verse) is mostly lower-case words; contents lists, title pages
    # and cast lists are mostly capitalised. The share is measured on the first few hundred
    # characters: enough to judge, and cheap.
    sample = stripped[:300]
    sample_words = len(sample.split()) if len(stripped) > 300 else n_words
    lower = len(_LOWER_WORD.findall(sample)) if n_words >= 3 else 0
    prose = (not upper_only and not md_heading and listy < 0.3 * min(n_lines, 200)
             and ((n_words >= 8 and lower >= 0.4 * sample_words)
                  or (n_words >= 3 and lower >= 0.6 * sample_words)))
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


_ILLUSTRATION = re.compile(r"\[Illustration:\s*[=_*]*(.*?)[=_*]*\s*\]", re.I)


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
            if m.group("dot") and _title_ok(title) and len(title.split()) <= 15:
                return ("numeral_titled", "numeral", KIND_RANK["numeral_titled"], value, title,
                        "", False)
    m = _SPECIAL.fullmatch(s)
    if m and _case_ok(m.group("sp")) and len(s.split()) <= 12 and _special_rest_ok(m.group("rest")):
        word = m.group("sp").lower()
        kind = ("introduction" if word.startswith("introduction")
                else "envoi" if "envo" in word else word)
        return kind, "special", KIND_RANK["special"], None, m.group("rest") or "", "", not m.group("rest")
    m = _APPARATUS.fullmatch(s)
    if m and s[0].isupper() and len(s.split()) <= 8 and not s.endswith(","):
        return "apparatus", "apparatus", 99, None, "", "", True
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
    while i < n:
        b = blocks[i]
        h = _classify_block(text, b, i)
        if h is None:
            i += 1
            continue
        if h.bare and h.rest_words == 0 and not h.md_level and h.family in ("kw", "numeral", "special"):
            _consume_subtitles(text, blocks, h, 1 if dramatic else 2)
        out.append(h)
        i = h.last_block + 1
    return out


def _classify_block(text: str, b: Block, i: int) -> Heading | None:
    md_level = 0
    line = b.first
    if b.md_heading:
        m = _MARKDOWN.match(line)
        if m is None:
            return None
        md_level, line = len(m.group(1)), m.group(2)
    elif b.n_lines > 3 or len(b.first) > 100:
        # A heading glued to its paragraph: accept only a bare keyword line ("CHAPTER I.",
        # "EPILOGUE").
        if len(b.first) > 40 or (b.first[:2] in ("**", "__") and b.first[-2:] in ("**", "__")):
            return None  # a bold name over a speech is a speaker ("**PROLOGUE**"), not a heading
        c = classify_line(line)
        if not c or c[1] not in ("kw", "special") or not c[6]:
            return None
        words = len(b.first.split())
        return Heading(block=i, start=b.start, end=b.first_end, last_block=i, kind=c[0],
                       family=c[1], rank=c[2], number=c[3], title=_clean(line), prefix=c[5],
                       bare=True, rest_words=b.n_words - words)
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
                   bare=bare)


def _consume_subtitles(text: str, blocks: list[Block], h: Heading, limit: int = 2) -> None:
    pieces = [h.title]
    j = h.block + 1
    while j < len(blocks) and j <= h.block + limit:
        nb = blocks[j]
        if not _title_like(nb):
            break
        c = classify_line(nb.first)
        if c and c[1] in ("kw", "numeral"):
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


# ---------------------------------------------------------------------------- fallbacks

_NORM_NUM = re.compile(rf"^(?:(?:{_KW_ALT})\s+)?(?:[IVXLCDM]+|\d+)[.):]?\s+", re.I)
_NORM_PAGE = re.compile(r"[\s.\u00b7\u2026]*\d+\s*$")
_NORM_DROP = re.compile(r"[^\w ]+")


def _norm_title(s: str) -> str:
    s = _clean(s).replace("\u2019", "'")
    s = _NORM_NUM.sub("", s)
    s = _NORM_PAGE.sub("", s)
    s = _NORM_DROP.sub(" ", s.lower())
    return " ".join(s.split())


def listed_title_candidates(text: str, blocks: list[Block], cands: list[Heading]) -> list[Heading]:
    """Headings found by matching the entries of a contents list against later short blocks."""
    toc = next((h for h in cands if h.family == "apparatus" and "content" in h.title.lower()), None)
    if toc is None:
        return []
    found: dict[str, int] = {}  # entry -> indentation
    j = toc.last_block + 1
    lines_seen = 0
    while j < len(blocks) and lines_seen < 600:
        b = blocks[j]
        if b.prose:
            break
        line_start = max(text.rfind("\n", 0, b.start), text.rfind("\r", 0, b.start)) + 1
        lines = text[line_start:b.end].splitlines()
        keyed = [(len(ln) - len(ln.lstrip()), _norm_title(ln)) for ln in lines]
        if b.n_lines <= 2 and any(k in found for _, k in keyed):
            break  # an entry seen again: the list is over and the body has begun
        for indent, key in keyed:
            if len(key) >= 3:
                found.setdefault(key, indent)
        lines_seen += b.n_lines
        j += 1
    # Entries indented deeper than most are sub-entries (parts of one story).
    indents = list(found.values())
    usual = max(set(indents), key=indents.count) if indents else 0
    entries = {k for k, ind in found.items() if ind <= usual}
    if len(entries) < 2:
        return []
    out: list[Heading] = []
    for k in range(j, len(blocks)):
        b = blocks[k]
        if b.n_lines > 2 or b.n_words > 15:
            continue
        key = _norm_title(" ".join(text[b.start:b.end].split()))
        if key in entries:
            out.append(Heading(block=k, start=b.start, end=b.end, last_block=k,
                               kind="listed_title", family="listed", rank=KIND_RANK["listed_title"],
                               title=_clean(" ".join(text[b.start:b.end].split()))))
    return out if len(out) >= 2 and len(out) >= 0.3 * len(entries) else []


def caps_title_candidates(text: str, blocks: list[Block], min_gap: int = 3) -> list[Heading]:
    """Short upper-case blocks preceded by a wide gap (three or more blank lines)."""
    out: list[Heading] = []
    for k, b in enumerate(blocks):
        if (b.blank_before >= min_gap and b.upper_only and b.n_lines <= 2 and b.n_words <= 12
                and sum(c.isalpha() for c in b.first) >= 3 and classify_line(b.first) is None):
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
    return kept if len(kept) >= 3 and len(kept) <= max(3, len(blocks) // 3) else []


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
_CONTAINERS = ("volume", "part", "book", "act")


def analyze_structure(text: str, start: int = 0, end: int | None = None) -> Structure:
    """Find front matter, back matter and the top-level segments of ``text[start:end]``."""
    end = len(text) if end is None else end
    blocks = scan_blocks(text, start, end)
    if not blocks:
        return Structure(start, start, [], "")
    acc = _prose_prefix(blocks)
    dramatic = _is_dramatic(blocks)
    cands = find_candidates(text, blocks, dramatic)
    _add_prefix_containers(text, blocks, cands)
    mark_real(cands, blocks, acc)
    filter_sequences(cands)

    choice = _choose_units(cands, blocks, acc)
    if choice is None:
        for extra in (listed_title_candidates(text, blocks, cands),
                      caps_title_candidates(text, blocks)):
            if not extra:
                continue
            merged = _merge(cands, extra)
            mark_real(merged, blocks, acc)
            filter_sequences(merged)
            choice = _choose_units(merged, blocks, acc, only=extra[0].kind)
            if choice is not None:
                cands = merged
                break
    body_first, body_last = blocks[0].start, blocks[-1].end
    if choice is None:
        seg = Segment(body_first, body_last, "section", "")
        return Structure(body_first, body_last, [seg], "", headings=[h for h in cands if h.real])
    unit_kind, boundaries = choice
    _absorb_leading_headings(cands, boundaries, acc)
    struct_start = boundaries[0].start
    back_start, boundaries = _back_matter_start(cands, boundaries, unit_kind)
    body_end = blocks[-1].end
    back = None
    if back_start is not None:
        body_end = _trim_end(text, struct_start, back_start)
        back = (back_start, blocks[-1].end)
    segments = _build_segments(text, blocks, acc, boundaries, unit_kind, body_end, dramatic)
    front = (body_first, struct_start) if struct_start > body_first else None
    return Structure(struct_start, body_end, segments, unit_kind, front, back,
                     headings=[h for h in cands if h.real])


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


def _merge(cands: list[Heading], extra: list[Heading]) -> list[Heading]:
    """Fallback candidates plus the primary apparatus and special headings (the numbered ones
    were already found unusable as a structure: they stay inside the units)."""
    taken: set[int] = set()
    for h in extra:
        taken.update(range(h.block, h.last_block + 1))
    kept = [h for h in cands if h.family in ("apparatus", "special")
            and not any(k in taken for k in range(h.block, h.last_block + 1))]
    return sorted(kept + extra, key=lambda h: h.block)


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
        chapter_like = sorted((k for k in _CHAPTER_LIKE if counts.get(k)),
                              key=lambda k: (-counts[k], _CHAPTER_LIKE.index(k)))
        options += chapter_like
        if counts.get("act"):
            options.append("act")
        options += [k for k in ("numeral_titled", "numeral_bare") if counts.get(k, 0) >= 2]
        options += [k for k in ("book", "part", "volume") if counts.get(k)]
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
            return h.start, boundaries
        if not _BACK_MATTER.match(h.title):
            continue
        before = {(b.kind, b.number) for b in boundaries if b.block < h.block and b.number}
        numbered = [b for b in after if b.kind == unit_kind and b.number]
        if numbered and all((b.kind, b.number) in before for b in numbered):
            return h.start, [b for b in boundaries if b.block < h.block]
    return None, boundaries


def _trim_end(text: str, lo: int, end: int) -> int:
    while end > lo and text[end - 1].isspace():
        end -= 1
    return end


def _build_segments(text: str, blocks: list[Block], acc: list[int], boundaries: list[Heading],
                    unit_kind: str, body_end: int, dramatic: bool) -> list[Segment]:
    rank_unit = KIND_RANK.get(unit_kind, 10 + int(unit_kind[2:]) if unit_kind.startswith("md") else 8)
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

