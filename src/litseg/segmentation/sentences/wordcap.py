"""The word cap: an overlong sentence cut greedily at clause boundaries."""

from __future__ import annotations

import re

from litseg.segmentation.sentences.chars import CLOSERS, DASHES, LINE_BREAK


_TOKEN = re.compile(r"\S+")
_INNER_DASH = re.compile(rf"{DASHES}(?=\w)")
_STRONG_END = re.compile(rf"(?:[;:]|{DASHES})[{re.escape(CLOSERS)}]*$")
_COMMA_END = re.compile(rf",[{re.escape(CLOSERS)}]*$")


def cap_words(text: str, span: tuple[int, int], max_words: int) -> list[tuple[int, int]]:
    """Cut an overlong sentence greedily at clause boundaries so no piece exceeds the cap."""
    s, e = span
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text, s, e)]
    if len(tokens) <= max_words:
        return [span]
    # Atoms: whitespace tokens, further cut after dashes inside a token ("summer--all").
    atoms: list[tuple[int, int, bool]] = []  # (start, end, starts a new word)
    for t_start, t_end in tokens:
        a = t_start
        for m in _INNER_DASH.finditer(text, t_start, t_end):
            if m.end() > a:
                atoms.append((a, m.end(), a == t_start))
                a = m.end()
        atoms.append((a, t_end, a == t_start))

    def rank(j: int) -> int:
        a_start, a_end, _ = atoms[j]
        piece = text[a_start:a_end]
        if _STRONG_END.search(piece):
            return 3
        if _COMMA_END.search(piece):
            return 2
        if j + 1 < len(atoms) and LINE_BREAK.search(text, a_end, atoms[j + 1][0]):
            return 2
        return 0

    pieces: list[tuple[int, int]] = []
    first = 0
    while first < len(atoms):
        words = 0
        best_j, best_key = -1, (-1, -1)
        j = first
        while j < len(atoms):
            if j == first or atoms[j][2]:
                words += 1
            if words > max_words:
                break
            if j + 1 < len(atoms):
                key = (rank(j) if 2 * words >= max_words else -1, j)
                if key > best_key:
                    best_j, best_key = j, key
            j += 1
        if j >= len(atoms):
            pieces.append((atoms[first][0], atoms[-1][1]))
            break
        pieces.append((atoms[first][0], atoms[best_j][1]))
        first = best_j + 1
    return pieces
