"""The entry points: sentence spans and strings, and the structural runs alone."""

from __future__ import annotations

from typing import Iterator

from litseg.segmentation.sentences.lines import block_runs, blocks
from litseg.segmentation.sentences.punctuation import split_run
from litseg.segmentation.sentences.wordcap import cap_words


def split_spans(
    text: str, start: int = 0, end: int | None = None, *, max_words: int | None = None
) -> list[tuple[int, int]]:
    """Sentence spans ``[(s, e), ...]`` inside ``text[start:end]``, offsets into ``text``.

    Spans are sorted, disjoint, stripped of surrounding whitespace and together cover every
    non-whitespace character of the range; only ``text[start:end]`` is read. With ``max_words``
    no span holds more than that many whitespace-separated words.
    """
    end = _check_range(text, start, end)
    if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int)
                                  or max_words < 1):
        raise ValueError(f"max_words must be None or an int >= 1, got {max_words!r}")

    spans: list[tuple[int, int]] = []
    for b_start, b_end in blocks(text, start, end):
        for r_start, r_end, atomic in block_runs(text, b_start, b_end):
            if atomic:
                spans.append((r_start, r_end))
            else:
                split_run(text, r_start, r_end, spans)
    if max_words is not None:
        # n words need at least 2n - 1 characters: shorter spans skip the count altogether
        short = 2 * max_words
        capped: list[tuple[int, int]] = []
        for s, e in spans:
            if e - s <= short or len(text[s:e].split()) <= max_words:
                capped.append((s, e))
            else:
                capped.extend(cap_words(text, (s, e), max_words))
        spans = capped
    return spans


def _check_range(text: str, start: int, end: int | None) -> int:
    """Validate the arguments; return the resolved ``end``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    end = len(text) if end is None else end
    for name, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"need 0 <= start <= end <= len(text); got start={start}, end={end}, "
                         f"len(text)={len(text)}")
    return end


def split_sentences(
    text: str, start: int = 0, end: int | None = None, *, max_words: int | None = None
) -> list[str]:
    """The sentence strings of ``text[start:end]`` (see :func:`split_spans`)."""
    return [text[s:e] for s, e in split_spans(text, start, end, max_words=max_words)]


def iter_runs(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, bool]]:
    """The structural layer alone: ``(start, end, atomic)`` stretches of ``text[start:end]``.

    Atomic stretches (headings, speaker labels, title lines) are whole sentences; the others are
    runs of ordinary lines that punctuation splits further. Exposed so that benchmarks can put a
    library splitter inside the same structure.
    """
    end = _check_range(text, start, end)
    for b_start, b_end in blocks(text, start, end):
        yield from block_runs(text, b_start, b_end)
