"""Matching gold evidence against chunks: evidence strings and character spans.

Two kinds of gold evidence exist in the benchmarks. GutenQA gives a string that the right chunk
must contain; its strings were typed with other quote and dash characters than the book text, so
matching goes through :func:`normalize_for_match`. FairytaleQA gives gold sections, i.e. spans of
the book text; a chunk is relevant when it overlaps a gold span enough
(:func:`span_overlap_relevant`), and :func:`evidence_recovered_chars` measures how much gold text a
reader gets within a fixed character budget, which does not reward large chunks the way Hit@k does.

Spans are half-open ``(start, end)`` character offsets, as everywhere in litseg.
"""

from __future__ import annotations

import numbers
import unicodedata
from collections.abc import Sequence
from typing import Union

Span = tuple[int, int]
SpanLike = Union[Span, Sequence[Span]]

# Every character that prints as a quotation mark or apostrophe. Evidence strings often swap
# single for double quotes or drop them around dialogue, so matching removes them all.
_QUOTES = frozenset("'\"`\u00b4\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2032\u2033\u2035\u2036"
                    "\u00ab\u00bb\u2039\u203a\u300c\u300d\u300e\u300f\uff02\uff07")
# Hyphen and dash variants, the minus sign and the box-drawing horizontal used in some scans.
_DASHES = frozenset("-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d\u2500")


def _char_forms(ch: str, casefold: bool, drop_quotes: bool) -> str:
    """What one source character becomes before the run-collapsing pass."""
    if ch in _QUOTES:
        if drop_quotes:
            return ""
        return '"' if ch in "\"\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb\uff02" else "'"
    if ch in _DASHES:
        return "-"
    if ch.isspace():
        return " "
    out = unicodedata.normalize("NFKC", ch)  # ellipsis -> "...", ligatures, no-break space
    if any(c.isspace() for c in out):
        return " "
    return out.casefold() if casefold else out


def normalize_with_offsets(text: str, *, casefold: bool = True, drop_quotes: bool = True
                           ) -> tuple[str, list[int]]:
    """Normalise ``text`` for matching and keep, per output character, its source offset.

    The rules (the same as :func:`normalize_for_match`):

    * NFKC compatibility forms (the ellipsis character becomes ``...``, no-break spaces become
      spaces, ligatures split);
    * every quotation mark and apostrophe is removed (``drop_quotes``) or unified to ``'``/``"``;
    * every hyphen/dash variant becomes ``-``, runs of them one ``-``, and whitespace around a
      dash is removed (``"then?--\\n\\nShe"`` and ``"then?\u2014She"`` compare equal);
    * whitespace runs become one space; a spaced ellipsis (``x . . .``) becomes ``x...``;
    * leading and trailing whitespace is dropped; ``casefold`` makes the match case-insensitive.
    """
    chars: list[str] = []
    offs: list[int] = []
    for i, ch in enumerate(text):
        for c in _char_forms(ch, casefold, drop_quotes):
            chars.append(c)
            offs.append(i)
    out_c: list[str] = []
    out_o: list[int] = []
    for c, o in zip(chars, offs):
        if c == " ":
            if not out_c or out_c[-1] in " -":
                continue  # leading space, space run, or space after a dash
        elif c == "-":
            if out_c and out_c[-1] == " ":
                out_c.pop()
                out_o.pop()
            if out_c and out_c[-1] == "-":
                continue
        elif c == ".":
            if len(out_c) >= 2 and out_c[-1] == " " and out_c[-2] == ".":
                out_c.pop()  # ". ." -> ".."
                out_o.pop()
            if len(out_c) >= 2 and out_c[-1] == "." and out_c[-2] == " ":
                del out_c[-2]  # "x .." -> "x..": a spaced ellipsis loses its leading space too
                del out_o[-2]
        out_c.append(c)
        out_o.append(o)
    if out_c and out_c[-1] == " ":
        out_c.pop()
        out_o.pop()
    return "".join(out_c), out_o


def normalize_for_match(text: str, *, casefold: bool = True, drop_quotes: bool = True) -> str:
    """The form in which evidence strings and chunk texts are compared; see
    :func:`normalize_with_offsets` for the rules."""
    return normalize_with_offsets(text, casefold=casefold, drop_quotes=drop_quotes)[0]


def _checked_evidence(evidence: str, casefold: bool, drop_quotes: bool) -> str:
    needle = normalize_for_match(evidence, casefold=casefold, drop_quotes=drop_quotes)
    if not needle:
        raise ValueError(f"evidence string {evidence!r} is empty after normalisation")
    return needle


def contains_evidence(chunk_text: str, evidence: str, *, casefold: bool = True,
                      drop_quotes: bool = True) -> bool:
    """True when the chunk contains the whole evidence string after normalisation (GutenQA's
    relevance criterion). An empty evidence string is an error, not a match."""
    needle = _checked_evidence(evidence, casefold, drop_quotes)
    return needle in normalize_for_match(chunk_text, casefold=casefold, drop_quotes=drop_quotes)


def locate_evidence(text: str, evidence: str, *, casefold: bool = True, drop_quotes: bool = True
                    ) -> list[Span]:
    """All non-overlapping places where ``evidence`` occurs in ``text`` after normalisation, as
    spans of the original ``text`` (from the first to the last matched source character)."""
    return TextMatcher(text, casefold=casefold, drop_quotes=drop_quotes).locate(evidence)


class TextMatcher:
    """A text normalised once, for locating many evidence strings in it (a whole book takes
    about a second to normalise; re-doing that per question would dominate loading)."""

    def __init__(self, text: str, *, casefold: bool = True, drop_quotes: bool = True) -> None:
        self.text = text
        self.casefold = casefold
        self.drop_quotes = drop_quotes
        self._norm: tuple[str, list[int]] | None = None  # computed on first use

    @property
    def normalized(self) -> str:
        return self._normalized()[0]

    def _normalized(self) -> tuple[str, list[int]]:
        if self._norm is None:
            self._norm = normalize_with_offsets(self.text, casefold=self.casefold,
                                                drop_quotes=self.drop_quotes)
        return self._norm

    def locate(self, evidence: str) -> list[Span]:
        """Like :func:`locate_evidence` on this text."""
        needle = _checked_evidence(evidence, self.casefold, self.drop_quotes)
        hay, offs = self._normalized()
        spans: list[Span] = []
        pos = hay.find(needle)
        while pos >= 0:
            spans.append((offs[pos], offs[pos + len(needle) - 1] + 1))
            pos = hay.find(needle, pos + len(needle))
        return spans

    def match(self, evidence: str) -> tuple[str, Span | None]:
        """``("exact", span)`` when the evidence occurs verbatim, ``("normalized", span)`` when
        only after normalisation, ``("missing", None)`` otherwise; the span is the first hit."""
        i = self.text.find(evidence) if evidence else -1
        if i >= 0:
            return "exact", (i, i + len(evidence))
        found = self.locate(evidence)
        return ("normalized", found[0]) if found else ("missing", None)


def evidence_match_kind(text: str, evidence: str) -> str:
    """``"exact"`` when the evidence occurs verbatim, ``"normalized"`` when it occurs only after
    :func:`normalize_for_match`, ``"missing"`` otherwise."""
    return TextMatcher(text).match(evidence)[0]


def _as_spans(spans: SpanLike) -> list[Span]:
    """Accept one span ``(s, e)`` or a sequence of spans (e.g. ``Chunk.main_spans``)."""
    if len(spans) == 2 and all(isinstance(x, numbers.Integral) for x in spans):  # type: ignore[arg-type]
        s, e = spans  # type: ignore[misc]
        out = [(int(s), int(e))]
    else:
        out = [(int(s), int(e)) for s, e in spans]  # type: ignore[misc]
    for s, e in out:
        if e < s:
            raise ValueError(f"span ({s}, {e}) ends before it starts")
    return out


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for s, e in sorted(x for x in spans if x[1] > x[0]):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _overlap(a: list[Span], b: list[Span]) -> int:
    total = 0
    for s1, e1 in a:
        for s2, e2 in b:
            total += max(0, min(e1, e2) - max(s1, s2))
    return total


def span_overlap(a: SpanLike, b: SpanLike) -> int:
    """Characters shared by two spans (or two span sets; each set is merged first)."""
    return _overlap(_merge(_as_spans(a)), _merge(_as_spans(b)))


def span_overlap_relevant(chunk_span: SpanLike, gold_span: SpanLike, min_frac: float = 0.5) -> bool:
    """Relevance by overlap: the chunk counts when it shares at least ``min_frac`` of the smaller
    of the two lengths with the gold span (so a small chunk inside a long gold section counts, and
    so does a long chunk that holds most of a short one), and the overlap is not empty."""
    if not 0.0 < min_frac <= 1.0:
        raise ValueError(f"min_frac must lie in (0, 1], got {min_frac}")
    a, b = _merge(_as_spans(chunk_span)), _merge(_as_spans(gold_span))
    la, lb = sum(e - s for s, e in a), sum(e - s for s, e in b)
    ov = _overlap(a, b)
    return ov > 0 and ov >= min_frac * min(la, lb)


def chunk_is_relevant(chunk_span: SpanLike, gold_spans: Sequence[Span], min_frac: float = 0.5) -> bool:
    """True when the chunk is relevant to any one of the question's gold spans."""
    return any(span_overlap_relevant(chunk_span, g, min_frac) for g in gold_spans)


def evidence_recovered_chars(ranked_chunk_spans: Sequence[SpanLike], gold_spans: Sequence[Span],
                             budget_chars: int = 1500) -> float:
    """Share of the gold evidence characters that a reader sees in the first ``budget_chars``
    characters of the ranked chunks.

    Chunks are read in rank order; each costs its length (the sum of its spans, read in the order
    given), and the chunk that crosses the budget is cut there. A gold character read twice counts
    once, but repeated text still spends budget. Returns a value in [0, 1]; a question without
    gold spans is an error (skip such questions before calling).
    """
    if budget_chars < 0:
        raise ValueError(f"budget_chars must be >= 0, got {budget_chars}")
    gold = _merge([(int(s), int(e)) for s, e in gold_spans])
    gold_len = sum(e - s for s, e in gold)
    if gold_len == 0:
        raise ValueError("no gold evidence characters: evidence_recovered_chars needs gold spans")
    left = budget_chars
    seen: list[Span] = []
    for chunk in ranked_chunk_spans:
        if left <= 0:
            break
        for s, e in _as_spans(chunk):
            if left <= 0:
                break
            take = min(e - s, left)
            seen.append((s, s + take))
            left -= take
    return _overlap(_merge(seen), gold) / gold_len
