"""Use any litseg chunker from LangChain or LlamaIndex (optional extras).

``LitsegTextSplitter`` (LangChain, needs ``langchain-text-splitters``) and ``LitsegNodeParser``
(LlamaIndex, needs ``llama-index-core``) are imported lazily, so this package costs nothing until
one of them is used. Both turn a plain string into a litseg :class:`Document` with
:func:`text_to_document` and report chunk offsets into that same string.

Which text offsets refer to: annotate.py's offsets index the decoded file with its line endings
as they are (``\r\n`` stays two characters; a byte-order mark is dropped; EPUB and HTML are
first converted to text). Python's ``open(path).read()`` turns ``\r\n`` into ``\n``, so a text read
that way is another text, with other offsets (and, for size-based chunkers, other cuts). Read a
book with :func:`read_book` and the adapters give exactly annotate.py's chunks and offsets.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from litseg.chunkers.base import Chunker
from litseg.chunkers.build import build_chunker
from litseg.segmentation.config import default_preprocess
from litseg.segmentation.reading import read_document
from litseg.segmentation.sentences import split_spans
from litseg.segmentation.types import Chunk, Document, Sentence, Unit
from litseg.segmentation.preprocess import prepare_document

if TYPE_CHECKING:
    from litseg.adapters.langchain import LitsegTextSplitter
    from litseg.adapters.llamaindex import LitsegNodeParser

__all__ = ["LitsegNodeParser", "LitsegTextSplitter", "chunk_text", "default_max_words", "read_book", "resolve_chunker",
           "text_to_document"]


def default_max_words() -> int:
    """The word cap of a unit that annotate.py uses by default: ``max_words`` of
    ``conf/preprocess/default.yaml``, read there so that the adapters hold no copy of it."""
    return default_preprocess().fixed_words()


def text_to_document(text: str, book_id: str = "text", *, preprocess: bool = True,
                     max_words: int | None = None) -> Document:
    """A litseg document over ``text`` exactly as given (no decoding or cleaning), so that chunk
    offsets are offsets into ``text``.

    With ``preprocess`` the project's preprocessing finds the units (chapters, ..., each under
    ``max_words`` words, None: :func:`default_max_words`; Project Gutenberg front matter and
    licence are left out of every unit) and their sentences; without it the whole text is one
    unit split into sentences.
    """
    doc = Document(book_id=book_id, text=text)
    if preprocess:
        return prepare_document(doc, max_words=default_max_words() if max_words is None else max_words)
    sentences = [Sentence(i, s, e) for i, (s, e) in enumerate(split_spans(text), start=1)]
    if sentences:
        doc.units = [Unit(book_id=book_id, unit_id="0001", index=0, start=0, end=len(text), sentences=sentences)]
    return doc


def read_book(path: str | Path) -> str:
    """The text of a book file exactly as annotate.py reads it (decoded, line endings kept, a BOM
    removed, EPUB/HTML converted to text): the text annotate.py's offsets refer to."""
    return read_document(path).text


def resolve_chunker(chunker: Chunker | str, params: dict[str, Any] | None = None) -> Chunker:
    if isinstance(chunker, Chunker):
        if params:
            raise ValueError("chunker parameters are only used with a chunker name, not a chunker object")
        return chunker
    return build_chunker(chunker, **(params or {}))


def chunk_text(text: str, chunker: Chunker, book_id: str = "text", *, preprocess: bool = True,
               max_words: int | None = None) -> tuple[Document, list[Chunk]]:
    """Chunk a plain string unit by unit; chunk offsets index into ``text`` (``max_words``: see
    :func:`text_to_document`)."""
    doc = text_to_document(text, book_id=book_id, preprocess=preprocess, max_words=max_words)
    chunks: list[Chunk] = []
    for result in chunker.chunk_units(doc, doc.units):
        if result.error is not None and not result.chunks:
            raise RuntimeError(f"chunker {chunker.name!r} failed on {book_id!r}: {result.error}")
        chunks.extend(result.chunks)
    return doc, chunks


def chunk_metadata(chunk: Chunk) -> dict[str, Any]:
    """Flat metadata of a chunk (scalars only, so vector stores accept it)."""
    return {
        "start_index": chunk.start,
        "end_index": chunk.end,
        "chunk_id": chunk.chunk_id,
        "subtitle": chunk.subtitle,
        "method": chunk.method,
        "unit_id": chunk.unit_id,
        "from_idx": chunk.from_idx,
        "to_idx": chunk.to_idx,
    }


def chunk_content(chunk: Chunk, content: str) -> str:
    if content == "main_text":
        return chunk.main_text
    if content == "text":
        return chunk.text or chunk.main_text
    raise ValueError(f"content must be 'main_text' or 'text', got {content!r}")


def __getattr__(name: str) -> Any:
    if name == "LitsegTextSplitter":
        from litseg.adapters.langchain import LitsegTextSplitter  # lazy: needs langchain-core, optional

        return LitsegTextSplitter
    if name == "LitsegNodeParser":
        from litseg.adapters.llamaindex import LitsegNodeParser  # lazy: needs llama-index-core, optional

        return LitsegNodeParser
    raise AttributeError(name)
