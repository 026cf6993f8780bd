"""Documents for chunker tests: hand-cut units and a hypothesis strategy of messy random text."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from litseg.segmentation.sentences import split_spans
from litseg.segmentation.types import Document, Sentence, Unit

# Words, punctuation, quotes and non-Latin text, joined by every kind of whitespace and line end.
PIECES = ["the", "gull", "Maren", "said", "café", "naïve", "Tobias", "sea", "ha", "a", "—", "...",
          ".", ",", "!", "?", ";", '"', "\u201d", "'", "(", ")", "42", "3.14", "Mr.", "Ω", "日本"]
SPACES = [" ", " ", " ", "  ", "\n", "\n\n", "\r\n", "\r\n\r\n", "\t", " \n \n"]


def make_doc(text: str, cuts: Sequence[int] = (), book_id: str = "b") -> Document:
    """Units between the cut offsets, sentences from the project's splitter."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(text)}), len(text)]
    units = []
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        sents = [Sentence(i, s, e) for i, (s, e) in enumerate(split_spans(text, a, b), start=1)]
        units.append(Unit(book_id=book_id, unit_id=f"u{k + 1:03d}", index=k, start=a, end=b,
                          title=f"Part {k + 1}", kind="chapter", sentences=sents))
    return Document(book_id=book_id, text=text, units=units)


@st.composite
def documents(draw: st.DrawFn, max_pieces: int = 120) -> Document:
    """Random text of up to ``max_pieces`` pieces, cut into up to four units."""
    n = draw(st.integers(0, max_pieces))
    parts = [draw(st.sampled_from(SPACES))] if draw(st.booleans()) else []
    for _ in range(n):
        parts.append(draw(st.sampled_from(PIECES)))
        parts.append(draw(st.sampled_from(SPACES)) if draw(st.integers(0, 3)) else "")
    text = "".join(parts)
    cuts = draw(st.lists(st.integers(0, max(0, len(text))), max_size=3))
    return make_doc(text, cuts)
