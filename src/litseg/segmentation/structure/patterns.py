"""Heading patterns and the words that name front and back matter."""

from __future__ import annotations

import re

from litseg.segmentation.structure.numbers import NUM_ALT, ORD_ALT


# kind, rank: smaller ranks enclose larger ones.
KIND_RANK: dict[str, float] = {
    "volume": 0, "part": 1, "book": 2, "act": 3, "special": 3.5,
    "chapter": 4, "stave": 4, "fit": 4, "letter": 4, "canto": 4, "section": 4,
    "scene": 5, "numeral_titled": 6, "numeral_bare": 7, "listed_title": 8, "caps_title": 8,
}
KEYWORDS = {
    "chapter": "chapter", "chap.": "chapter", "book": "book", "part": "part", "volume": "volume",
    "vol.": "volume", "act": "act", "scene": "scene", "canto": "canto", "stave": "stave",
    "fit": "fit", "letter": "letter", "section": "section",
}
KW_ALT = r"chapter|chap\.|book|part|volume|vol\.|act|scene|canto|stave|fit|letter|section"
_SEP_TITLE = r"(?:\s*(?:[.:;,]+|--+|[\u2014\u2013]|\s-\s)\s*|\s+)(?P<title>\S.*?)"
KW_HEADING = re.compile(
    rf"(?:(?P<prefix>[^\W\d_][\w'\u2019 ]{{0,30}}?)\s*:\s*)?"
    rf"(?P<kw>{KW_ALT})\s+(?P<num>(?:the\s+)?(?:{NUM_ALT}))(?![\w'\u2019])[.:,;]?"
    rf"(?:{_SEP_TITLE})?\s*",
    re.I,
)
ORDINAL_FIRST = re.compile(
    rf"(?:the\s+)?(?P<num>{ORD_ALT})\s+(?P<kw>book|part|act|scene|canto|volume|chapter|stave|fit)"
    rf"(?![\w'\u2019])[.:]?(?:{_SEP_TITLE})?\s*",
    re.I,
)
# A numeral, then a title after a period (``I. The Period``), after a wide gap (``I  The Old
# Pyncheon Family``) or after one space when the title reads as a title (see classify_line).
NUMERAL = re.compile(r"(?P<num>[IVXLCDM]+|\d{1,3})(?P<dot>[.)]?)(?:(?P<gap>\s+)(?P<title>\S.*?))?\s*")
SPECIAL = re.compile(
    r"(?:the\s+)?(?P<sp>prologue|epilogue|prelude|induction|interlude|intermission|conclusion"
    r"|finale|afterword|sequel|l['\u2019]envo[iy]|envo[iy]"
    r"|introduction\s+to\s+(?:the\s+\w+\s+)?(?:canto|book|part)\b"
    r"[^\r\n]{0,30}?)(?![\w'\u2019])(?P<rest>[^\r\n]{0,80}?)\s*",
    re.I,
)
APPARATUS = re.compile(
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
LETTER = re.compile(r"TO\s+(?:THE\s+)?[A-Z][^\r\n]{0,60}")
MARKDOWN = re.compile(r"[ \t]{0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
MD_LINE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+\S", re.M)
EMPHASIS = re.compile(r"^[*_~=]+|[*_~=]+$")
# Lines of a contents list: they open with a number or heading keyword, or end in a page number.
LISTY_HEAD = re.compile(rf"^[ \t]*(?:(?:[IVXLCDM]+|\d+)[.):]?[ \t]|(?:{KW_ALT})[ \t])", re.I | re.M)
LISTY_PAGE = re.compile(r"(?:[ \t]{2,}|\.[ \t]?\.[ \t]?\.[ \t]*|\u2026[ \t]*)\d+[ \t]*$", re.M)
SPEAKER = re.compile(r"^(?:\*\*)?[A-Z][A-Z'\u2019\-]+(?: [A-Z][A-Z'\u2019\-]+){0,3}(?:\*\*)?"
                      r"(?:\s*[(\[].*)?(?:[.:]\s|[.:]?\s*$)")
WORD = re.compile(r"[^\W\d_]+")

# What an apparatus heading names, and why its text is front or back matter.
REASON_WORDS: list[tuple[re.Pattern[str], str]] = [
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
LIST_REASONS = frozenset({"contents", "illustrations", "cast list"})
# Apparatus that belongs after the story; the rest is front matter.
BACK_REASONS = frozenset({"notes", "appendix", "index", "glossary", "adverts", "transcriber's note"})
