"""Character classes shared by the layers: line breaks, horizontal space, terminals, closers,
quotes and dashes.
"""

from __future__ import annotations

import re


# Line breaks as str.splitlines() knows them; "\r\n" counts once.
_LB = r"(?:\r\n|\r(?!\n)|[\n\v\x85\u2028])"
# Horizontal whitespace: every whitespace character that is not a line or paragraph break.
_HWS = r"[^\S\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"
# The same set spelled out (a positive class scans several times faster than the negated one).
_HWS_CHARS = "\t\x1f \xa0\u1680\u2000-\u200a\u202f\u205f\u3000"
# The patterns scanned over whole texts open with one character class and dispatch on it with
# lookbehinds: Python's regex engine then skips ahead to candidates with a fast character-set
# search, which makes the scan several times quicker than a leading alternation.
# A blank line (two breaks with only horizontal space between) or a hard paragraph separator.
_PARA_BREAK = re.compile(
    r"[\n\r\v\x85\u2028\f\x1c\x1d\x1e\u2029]"
    r"(?:(?<=[\f\x1c\x1d\x1e\u2029])"
    rf"|(?<=\r)(?:\n|(?!\n))(?:{_HWS}*{_LB})+"  # "\r\n" is one break, never "\r" + "\n"
    rf"|(?<=[\n\v\x85\u2028])(?:{_HWS}*{_LB})+)"
)
_LINE_BREAK = re.compile(r"[\n\r\v\x85\u2028](?:(?<=\r)\n)?")

_CLOSERS = "\"'\u201d\u2019\u00bb\u203a)]}_*"
_TERMINALS = ".!?\u2026\u203c\u2047\u2048\u2049"
_QUOTES = "\"'\u201d\u2019\u00bb\u203a"
_DASHES = r"(?:-{2,}|[\u2014\u2015]+|\u2013)"
_QUOTE_SET = frozenset(_QUOTES)
_T = re.escape(_TERMINALS)
_Q = re.escape(_QUOTES)
