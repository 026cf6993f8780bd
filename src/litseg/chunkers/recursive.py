"""Recursive character splitter: LangChain's ``RecursiveCharacterTextSplitter`` run inside each
unit, with exact offsets.

The algorithm is LangChain's own (the reference implementation the paper compares against): split
on the first separator that occurs, keep pieces shorter than ``chunk_size``, recurse into longer
ones with the next separator, and greedily pack pieces into chunks of at most ``chunk_size``
characters, carrying up to ``chunk_overlap`` characters into the next chunk. Our default separators
follow the paper's description - paragraph breaks, newlines, sentence punctuation, clause
punctuation, whitespace, then single characters - as regular expressions, so that ``\\r\\n`` files
and closing quotes after a full stop split the same way as plain text.

Hard-wrapped text (most Project Gutenberg files break lines near 70 characters inside
paragraphs): the splitter tries the newline separator before sentence ends, as LangChain's does,
so within a paragraph it cuts at line breaks, mostly in the middle of sentences. That is the
baseline as published and stays the default. ``unwrap_lines=True`` is a sentence-respecting
variant: the splitter reads a copy of the unit in which each single line break between two
non-blank lines is replaced by as many spaces (the same length, so every offset still holds), so
within a paragraph it cuts at sentence ends first; paragraph breaks are kept.

Offsets: LangChain's ``add_start_index`` re-finds each chunk with ``str.find`` from a guessed
position, which can land on an earlier repeat of the same text when chunks overlap. Instead we run
the splitter with whitespace stripping off and separators kept, so that its chunks are exact,
consecutive slices of the unit; each chunk is then located at the earliest position allowed by the
overlap (no earlier than ``chunk_overlap`` characters before the previous chunk's end) and checked
character for character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from litseg.chunkers.base import (
    Chunker,
    ChunkerGroups,
    MethodConfig,
    UnitResult,
    method_settings,
    register,
)
from litseg.chunkers.spans import chunks_from_spans, span_stats, trim_span
from litseg.segmentation.types import Document, Unit

# Paragraph break, newline, end of sentence (with closing quotes/brackets), clause punctuation,
# whitespace, character. Non-capturing: LangChain wraps each separator in its own group.
DEFAULT_SEPARATORS: list[str] = [
    r"\n[^\S\n]*\n\s*",
    r"\n",
    r"(?<=[.!?\u2026])[\"'\u201d\u2019)\]]*\s+",
    r"(?<=[;:,\u2014])\s+",
    r"\s+",
    "",
]


# A single line break between two non-blank lines, with the blanks around it (``\r\n`` included).
_WRAPPED_BREAK = re.compile(r"(?<=\S)[^\S\n]*\n[^\S\n]*(?=\S)")


def unwrap_lines(text: str) -> str:
    """``text`` with every single line break inside a paragraph (and the blanks around it) turned
    into spaces, one for one: the same length, so offsets into it are offsets into ``text``."""
    return _WRAPPED_BREAK.sub(lambda m: " " * len(m.group()), text)


class RecursiveChunker(Chunker):
    name = "recursive"

    def __init__(self, **settings: Any) -> None:
        """``settings`` are fields of :class:`RecursiveConfig` (``conf/method/recursive.yaml``); one
        left out is read from that file, its one home (method_settings)."""
        config = method_settings(RecursiveConfig, "recursive", settings)
        chunk_size, chunk_overlap, separators = config.chunk_size, config.chunk_overlap, config.separators
        keep_separator = config.keep_separator
        if chunk_size < 1:
            raise ValueError(f"recursive splitter: chunk_size must be >= 1, got {chunk_size}")
        if not 0 <= chunk_overlap < chunk_size:
            raise ValueError(f"recursive splitter: chunk_overlap must be in [0, chunk_size), got {chunk_overlap}")
        if keep_separator not in (True, "start", "end"):
            # Dropping separators would drop source characters from every chunk.
            raise ValueError("recursive splitter: keep_separator must be 'start', 'end' or true")
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.separators = list(separators) if separators is not None else list(DEFAULT_SEPARATORS)
        self.is_separator_regex = separators is None if config.is_separator_regex is None else config.is_separator_regex
        self.keep_separator = keep_separator
        self.unwrap_lines = config.unwrap_lines
        self._splitter = RecursiveCharacterTextSplitter(
            separators=self.separators,
            is_separator_regex=self.is_separator_regex,
            keep_separator=keep_separator,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            length_function=len,
            strip_whitespace=False,
            add_start_index=False,
        )

    def split_offsets(self, text: str) -> list[tuple[int, int]]:
        """Exact ``[start, end)`` of each LangChain chunk of ``text`` (before trimming).

        Chunk k+1 starts after chunk k's start and no earlier than ``chunk_overlap`` characters
        before chunk k's end (LangChain carries at most that much over), and the last chunk ends
        at the end of the text. When repeated text makes a chunk fit several such positions, all
        are followed and the first consistent path is kept.
        """
        pieces = self._splitter.split_text(text)
        if not pieces:
            return []
        if not text.startswith(pieces[0]):
            raise RuntimeError(self._mapping_error(0))
        # layers[k] maps each feasible start of chunk k to a feasible start of chunk k-1.
        layers: list[dict[int, int]] = [{0: -1}]
        for k in range(1, len(pieces)):
            prev_len, piece = len(pieces[k - 1]), pieces[k]
            layer: dict[int, int] = {}
            for p_prev in layers[-1]:
                e_prev = p_prev + prev_len
                hi = e_prev + len(piece)
                q = text.find(piece, max(p_prev + 1, e_prev - self.chunk_overlap), hi)
                while q >= 0:
                    layer.setdefault(q, p_prev)
                    q = text.find(piece, q + 1, hi)
            if not layer:
                raise RuntimeError(self._mapping_error(k))
            layers.append(layer)
        ends = sorted(p for p in layers[-1] if p + len(pieces[-1]) == len(text))
        if not ends:
            raise RuntimeError("recursive splitter: langchain chunks do not reach the end of the text")
        starts = [ends[0]]
        for layer in reversed(layers[1:]):
            starts.append(layer[starts[-1]])
        starts.reverse()
        return [(p, p + len(piece)) for p, piece in zip(starts, pieces)]

    @staticmethod
    def _mapping_error(k: int) -> str:
        return (f"recursive splitter: chunk {k + 1} from langchain-text-splitters is not a slice of "
                "the text where its merging rule puts it; this langchain version changed its "
                "algorithm and the offset mapping must be revised")

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        text = doc.text[unit.start : unit.end]
        spans = []
        for s, e in self.split_offsets(unwrap_lines(text) if self.unwrap_lines else text):
            span = trim_span(doc.text, unit.start + s, unit.start + e)
            if span is not None:
                spans.append(span)
        chunks = chunks_from_spans(doc, unit, spans, method=self.name)
        return UnitResult(unit.book_id, unit.unit_id, chunks, span_stats(spans))

    def fingerprint(self) -> dict[str, Any]:
        fingerprint = {"name": self.name, "chunk_size": self.chunk_size, "chunk_overlap": self.chunk_overlap,
                       "separators": self.separators, "is_separator_regex": self.is_separator_regex,
                       "keep_separator": self.keep_separator}
        if self.unwrap_lines:  # only when on: the default's fingerprint (and its runs' keys) stay as they were
            fingerprint["unwrap_lines"] = True
        return fingerprint


@dataclass(kw_only=True)
class RecursiveConfig(MethodConfig):
    """conf/method/recursive.yaml."""

    chunk_size: int
    chunk_overlap: int
    separators: list[str] | None  # null: DEFAULT_SEPARATORS
    is_separator_regex: bool | None
    keep_separator: bool | str
    unwrap_lines: bool  # the sentence-respecting variant for hard-wrapped text


@register("recursive", config=RecursiveConfig)
def make_recursive(config: RecursiveConfig, groups: ChunkerGroups) -> RecursiveChunker:
    return RecursiveChunker(**config.options())
