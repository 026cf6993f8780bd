"""The preprocessing pipeline: read -> strip boilerplate -> structure -> word cap -> sentences.

``prepare_document`` turns a book file (or an already read :class:`Document`) into a document
whose units carry 1-based sentence indices with exact offsets into ``doc.text``;
``load_documents`` does it for a batch, yielding a :class:`ReadFailure` for a book that fails
while the others go on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from litseg.segmentation.config import PreprocessConfig, default_preprocess
from litseg.segmentation.reading import ReadFailure, iter_input_paths, read_document
from litseg.segmentation.types import Document, Sentence, Unit
from litseg.segmentation.units import (
    pack,
    capped_pieces,
    find_units,
    sentence_spans,
    splitter_caps_sentences,
)

log = logging.getLogger(__name__)


def prepare_document(
    path_or_doc: str | Path | Document,
    preprocess: PreprocessConfig | None = None,
    *,
    max_words: int | None = None,
    book_id: str | None = None,
) -> Document:
    """Read (unless given a Document), strip, find units under ``max_words`` words (with the
    matter readers ask about as units of its own, ``preprocess.index_matter``; see
    :func:`~litseg.segmentation.units.find_units`) and index their sentences (at most
    ``preprocess.max_sentence_words`` words each). ``preprocess`` is the typed preprocess group
    (None: :func:`~litseg.segmentation.config.default_preprocess`, conf/preprocess/default.yaml);
    ``max_words`` replaces its ``max_words`` (a run's resolved cap when that says ``auto``).
    Returns the document with ``units`` filled in; a Document passed in is updated in place."""
    settings = preprocess if preprocess is not None else default_preprocess()
    if isinstance(path_or_doc, Document):
        doc = path_or_doc
        if book_id:
            doc.book_id = book_id
    else:
        doc = read_document(path_or_doc, book_id=book_id)
    cap = max_words if max_words is not None else settings.fixed_words()
    units = find_units(doc, max_words=cap, keep_front_matter=settings.keep_front_matter,
                       index_matter=settings.index_matter)
    for unit in units:
        unit.sentences = index_sentences(doc.text, unit, max_sentence_words=settings.max_sentence_words)
    doc.units = units
    return doc


def index_sentences(text: str, unit: Unit, *, max_sentence_words: int | None) -> list[Sentence]:
    """1-based sentences of a unit, offsets into ``text``. Overlong sentences are cut at line
    breaks or between words when the sentence splitter does not do it itself (None: no cap)."""
    spans = sentence_spans(text, unit.start, unit.end, max_sentence_words)
    if max_sentence_words is not None and not splitter_caps_sentences():
        capped: list[tuple[int, int]] = []
        for s, e in spans:
            if len(text[s:e].split()) > max_sentence_words:
                capped.extend(_cap_sentence(text, s, e, max_sentence_words))
            else:
                capped.append((s, e))
        spans = capped
    return [Sentence(idx=i, start=s, end=e) for i, (s, e) in enumerate(spans, 1)]


def paragraph_starts(text: str, spans: Sequence[tuple[int, int]]) -> list[bool]:
    """Whether each sentence opens a paragraph: the first one does, the others when the gap
    before them holds a blank line (``\\r`` ignored, so CRLF and CR texts read alike)."""
    out: list[bool] = []
    prev_end: int | None = None
    for start, _end in spans:
        if prev_end is None:
            out.append(True)
        else:
            gap = text[prev_end:start].replace("\r\n", "\n").replace("\r", "\n")
            out.append(gap.count("\n") >= 2)
        prev_end = _end
    return out


def _cap_sentence(text: str, start: int, end: int, max_words: int) -> list[tuple[int, int]]:
    # Skip the paragraph and sentence levels: this is already one sentence.
    return pack(text, capped_pieces(text, start, end, max_words, level=2), max_words)


def load_documents(spec: str | Path | Sequence[str | Path], **prepare_kwargs) -> Iterator[Document | ReadFailure]:
    """Prepare every book named by ``spec`` (see :func:`iter_input_paths`). A book that fails
    yields a :class:`ReadFailure` (logged) and the batch continues. Raises FileNotFoundError
    only when ``spec`` matches nothing at all."""
    for path in iter_input_paths(spec):
        try:
            yield prepare_document(path, **prepare_kwargs)
        except Exception as exc:  # one bad book must not stop the batch; the failure is reported
            log.warning("skipping %s: %s: %s", path, type(exc).__name__, exc)
            yield ReadFailure(path, exc)


__all__ = ["index_sentences", "load_documents", "paragraph_starts", "prepare_document"]
