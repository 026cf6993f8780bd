"""Turning sentence-index segments into chunk records with exact source spans.

Layout of ``Chunk.text`` (paper section 3.1.2, "Reconstruction"), blocks separated by one blank
line (``"\\n\\n"``), empty blocks left out::

    <subtitle>

    <context sentences that come before the main range>

    <main text: the source from the first to the last main sentence, verbatim>

    <context sentences that come after the main range>

Context sentences are taken in source order; the ones already inside the main range are left
out. Within a context block the sentences (each verbatim) are joined by a single space. With
``context_position="auto"`` a context sentence goes before the main text when it precedes the
main range and after it otherwise; ``"before"``/``"after"`` put them all on one side.

``main_text`` is always ``doc.text[start:end]`` of the single main span, whitespace and line
endings included, so a chunk can be found again in its source.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from litseg.segmentation.schema import Segment
from litseg.segmentation.types import Chunk, Document, NamedTokenizer, Sentence, Unit

ContextPosition = Literal["auto", "before", "after"]

BLOCK_SEPARATOR = "\n\n"


def chunk_text(subtitle: str, context_before: str, main_text: str, context_after: str) -> str:
    """The text a chunk is indexed by: subtitle, context before, main text, context after (empty
    parts left out)."""
    return BLOCK_SEPARATOR.join(p for p in (subtitle.strip(), context_before, main_text, context_after) if p)


CONTEXT_JOINER = " "


def chunk_id(book_id: str, unit_id: str, chunk_no: int) -> str:
    """``book:unit:NNN``; chunk numbers are 1-based within their unit."""
    return f"{book_id}:{unit_id}:{chunk_no:03d}"


def build_chunks(
    doc: Document, unit: Unit, segments: Sequence[Segment], *, method: str,
    tokenizer: NamedTokenizer | None = None, context_position: ContextPosition = "auto",
) -> list[Chunk]:
    """One chunk per segment, numbered 1.. in the given order; ``tokenizer`` (when the chunker has
    one) sizes each chunk in tokens beside its word count.

    Every range must lie inside ``1..unit.n_sentences`` with ``from_idx <= to_idx`` and every
    context index inside ``1..n`` (run :func:`~litseg.segmentation.repair.repair_segments` first
    on model output); a ``ValueError`` names the offending segment otherwise.
    """
    return [
        build_chunk(doc, unit, method=method, chunk_no=k, from_idx=s.from_idx, to_idx=s.to_idx,
                    context_ids=s.context_idx, subtitle=s.subtitle, tokenizer=tokenizer,
                    context_position=context_position)
        for k, s in enumerate(segments, start=1)
    ]


def build_chunk(
    doc: Document, unit: Unit, *, method: str, chunk_no: int, from_idx: int, to_idx: int,
    context_ids: Iterable[int] = (), subtitle: str = "", main_span: tuple[int, int] | None = None,
    tokenizer: NamedTokenizer | None = None, context_position: ContextPosition = "auto",
) -> Chunk:
    """A single chunk of ``unit``.

    By default the main text runs from the start of sentence ``from_idx`` to the end of
    sentence ``to_idx``. Chunkers whose windows do not follow sentences (token or character
    windows) pass ``main_span=(start, end)`` in document offsets instead: the main text is then
    exactly that span, and ``from_idx``/``to_idx``/``main_ids`` become the sentences that
    overlap it (the given ``from_idx``/``to_idx`` are kept only when no sentence does).
    """
    if context_position not in ("auto", "before", "after"):
        raise ValueError(f"context_position must be 'auto', 'before' or 'after', got {context_position!r}")
    sentences = unit.sentences
    n = len(sentences)
    where = f"{unit.unit_id} chunk {chunk_no}"
    if main_span is None:
        if not (1 <= from_idx <= to_idx <= n):
            raise ValueError(f"{where}: range {from_idx}-{to_idx} is not inside 1-{n} with from <= to")
        main_ids = list(range(from_idx, to_idx + 1))
        span = (sentences[from_idx - 1].start, sentences[to_idx - 1].end)
    else:
        s, e = main_span
        if not (0 <= s < e <= len(doc.text)):
            raise ValueError(f"{where}: main_span {main_span} is empty or outside the document "
                             f"(length {len(doc.text)})")
        span = (s, e)
        main_ids = [x.idx for x in sentences if x.start < e and x.end > s]
        if main_ids:
            from_idx, to_idx = main_ids[0], main_ids[-1]

    main_set = set(main_ids)
    context: list[Sentence] = []
    for c in sorted(set(context_ids)):
        if not 1 <= c <= n:
            raise ValueError(f"{where}: context index {c} is not inside 1-{n}")
        if c not in main_set:
            context.append(sentences[c - 1])

    if context_position == "auto":
        before = [x for x in context if x.end <= span[0]]
        after = [x for x in context if x.end > span[0]]
    elif context_position == "before":
        before, after = context, []
    else:
        before, after = [], context

    main_text = doc.text[span[0]:span[1]]
    context_before = CONTEXT_JOINER.join(doc.sentence_text(x) for x in before)
    context_after = CONTEXT_JOINER.join(doc.sentence_text(x) for x in after)
    text = chunk_text(subtitle, context_before, main_text, context_after)
    return Chunk(
        book_id=unit.book_id,
        unit_id=unit.unit_id,
        chunk_id=chunk_id(unit.book_id, unit.unit_id, chunk_no),
        method=method,
        from_idx=from_idx,
        to_idx=to_idx,
        main_ids=main_ids,
        context_ids=[x.idx for x in context],
        main_spans=[span],
        context_spans=[(x.start, x.end) for x in context],
        subtitle=subtitle.strip(),
        main_text=main_text,
        context_before=context_before,
        context_after=context_after,
        text=text,
        n_words=len(text.split()),
        n_tokens=tokenizer.count(text) if tokenizer is not None else None,
        tokenizer=tokenizer.name if tokenizer is not None else None,
        unit_title=unit.title,
        unit_path=list(unit.path),
        unit_kind=unit.kind,
        matter=unit.matter,
    )
