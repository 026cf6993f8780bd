"""Character classes shared by the layers: line breaks, horizontal space, terminals, closers,
quotes and dashes.
"""

from __future__ import annotations

import re


# Line breaks as str.splitlines() knows them; "\r\n" counts once.
LB = r"(?:\r\n|\r(?!\n)|[\n\v\x85\u2028])"
# Horizontal whitespace: every whitespace character that is not a line or paragraph break.
HWS = r"[^\S\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"
# The same set spelled out (a positive class scans several times faster than the negated one).
HWS_CHARS = "\t\x1f \xa0\u1680\u2000-\u200a\u202f\u205f\u3000"
# The patterns scanned over whole texts open with one character class and dispatch on it with
# lookbehinds: Python's regex engine then skips ahead to candidates with a fast character-set
# search, which makes the scan several times quicker than a leading alternation.
# A blank line (two breaks with only horizontal space between) or a hard paragraph separator.
PARA_BREAK = re.compile(
    r"[\n\r\v\x85\u2028\f\x1c\x1d\x1e\u2029]"
    r"(?:(?<=[\f\x1c\x1d\x1e\u2029])"
    rf"|(?<=\r)(?:\n|(?!\n))(?:{HWS}*{LB})+"  # "\r\n" is one break, never "\r" + "\n"
    rf"|(?<=[\n\v\x85\u2028])(?:{HWS}*{LB})+)"
)
LINE_BREAK = re.compile(r"[\n\r\v\x85\u2028](?:(?<=\r)\n)?")

CLOSERS = "\"'\u201d\u2019\u00bb\u203a)]}_*"
TERMINALS = ".!?\u2026\u203c\u2047\u2048\u2049"
QUOTES = "\"'\u201d\u2019\u00bb\u203a"
DASHES = r"(?:-{2,}|[\u2014\u2015]+|\u2013)"
QUOTE_SET = frozenset(QUOTES)
T = re.escape(TERMINALS)
Q = re.escape(QUOTES)
