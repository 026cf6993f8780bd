"""A LangChain ``TextSplitter`` over any litseg chunker.

``split_text`` returns chunk texts; ``create_documents`` / ``split_documents`` return LangChain
Documents whose metadata holds exact offsets into the input text (``start_index`` as LangChain's
own splitters name it, ``end_index``, ``main_spans``) plus ``chunk_id``, ``subtitle``, ``method``,
``unit_id``, ``from_idx``/``to_idx`` and ``context_ids``.

``content="main_text"`` (default) makes ``page_content`` the main range, i.e. the input sliced at
the chunk's spans; ``content="text"`` gives the context-enriched chunk text (subtitle and context
sentences included) that LitSeg produces. ``preprocess`` (default on) runs the project's
preprocessing on each text (units under ``max_words`` words; Gutenberg boilerplate left out);
off, each text is one unit.
"""

from __future__ import annotations

import copy
from typing import Any

try:
    from langchain_core.documents import Document as LCDocument
    from langchain_text_splitters import TextSplitter
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "litseg.adapters.langchain needs langchain-text-splitters: pip install 'litseg[langchain]'"
    ) from exc

from litseg.adapters import chunk_content, chunk_metadata, chunk_text, resolve_chunker
from litseg.chunkers.base import Chunker
from litseg.segmentation.types import Chunk


class LitsegTextSplitter(TextSplitter):
    def __init__(
        self,
        chunker: Chunker | str = "recursive",
        *,
        chunker_params: dict[str, Any] | None = None,
        content: str = "main_text",
        book_id: str = "text",
        preprocess: bool = True,
        max_words: int | None = None,  # None: conf/preprocess/default.yaml's (default_max_words)
        **kwargs: Any,
    ) -> None:
        # LangChain's own size/overlap settings do not apply: the chunker decides.
        kwargs.setdefault("chunk_overlap", 0)
        super().__init__(**kwargs)
        self.chunker = resolve_chunker(chunker, chunker_params)
        if content not in ("main_text", "text"):
            raise ValueError(f"content must be 'main_text' or 'text', got {content!r}")
        self.content = content
        self.book_id = book_id
        self.preprocess = preprocess
        self.max_words = max_words

    def _chunks(self, text: str) -> list[Chunk]:
        return chunk_text(text, self.chunker, book_id=self.book_id, preprocess=self.preprocess,
                          max_words=self.max_words)[1]

    def split_text(self, text: str) -> list[str]:
        return [chunk_content(c, self.content) for c in self._chunks(text)]

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None) -> list[LCDocument]:
        metadatas = metadatas or [{}] * len(texts)
        if len(metadatas) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(metadatas)} metadata dicts")
        documents: list[LCDocument] = []
        for text, meta in zip(texts, metadatas):
            for c in self._chunks(text):
                md = copy.deepcopy(meta)
                md.update(chunk_metadata(c))
                md["main_spans"] = [list(s) for s in c.main_spans]
                md["context_ids"] = list(c.context_ids)
                documents.append(LCDocument(page_content=chunk_content(c, self.content), metadata=md))
        return documents

