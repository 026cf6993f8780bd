"""A LlamaIndex node parser over any litseg chunker.

Each chunk becomes a ``TextNode`` with ``start_char_idx``/``end_char_idx`` set to the chunk's exact
main range in the parent text (kept as computed by the chunker, not re-found by text search) and
the chunk fields (``chunk_id``, ``subtitle``, ``method``, ``unit_id``, ``from_idx``/``to_idx``) in
its metadata; those fields are hidden from the embedding and LLM views except the subtitle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from llama_index.core.node_parser.interface import NodeParser
    from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeRelationship, TextNode
    from llama_index.core.utils import get_tqdm_iterable
    from pydantic import Field, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("litseg.adapters.llamaindex needs llama-index-core: pip install 'litseg[llamaindex]'") from exc

from litseg.adapters import chunk_content, chunk_metadata, chunk_text, resolve_chunker
from litseg.chunkers.base import Chunker

_HIDDEN_KEYS = ["start_index", "end_index", "chunk_id", "method", "unit_id", "from_idx", "to_idx"]


class LitsegNodeParser(NodeParser):
    chunker_name: str = Field(default="recursive", description="Registry name of the litseg chunker.")
    chunker_params: dict[str, Any] = Field(default_factory=dict, description="Parameters of the chunker.")
    content: str = Field(default="main_text", description="'main_text' (source slice) or 'text' (with context).")
    preprocess: bool = Field(default=True, description="Find units with the litseg preprocessing (else one unit).")
    max_words: int | None = Field(default=None, description="Word cap of a unit when preprocessing "
                                  "(None: max_words of conf/preprocess/default.yaml).")
    _chunker: Chunker = PrivateAttr()

    def __init__(self, chunker: Chunker | str = "recursive", chunker_params: dict[str, Any] | None = None,
                 content: str = "main_text", **kwargs: Any) -> None:
        if content not in ("main_text", "text"):
            raise ValueError(f"content must be 'main_text' or 'text', got {content!r}")
        name = chunker if isinstance(chunker, str) else chunker.name
        super().__init__(chunker_name=name, chunker_params=dict(chunker_params or {}), content=content, **kwargs)
        self._chunker = resolve_chunker(chunker, chunker_params)

    @classmethod
    def class_name(cls) -> str:
        return "LitsegNodeParser"

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        out: list[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Chunking with litseg"):
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            _, chunks = chunk_text(text, self._chunker, book_id=node.node_id, preprocess=self.preprocess,
                                   max_words=self.max_words)
            source = {NodeRelationship.SOURCE: node.as_related_node_info()}
            for i, c in enumerate(chunks):
                out.append(TextNode(
                    id_=self.id_func(i, node),
                    text=chunk_content(c, self.content),
                    start_char_idx=c.start,
                    end_char_idx=c.end,
                    metadata=chunk_metadata(c),
                    excluded_embed_metadata_keys=[*node.excluded_embed_metadata_keys, *_HIDDEN_KEYS],
                    excluded_llm_metadata_keys=[*node.excluded_llm_metadata_keys, *_HIDDEN_KEYS],
                    metadata_separator=node.metadata_separator,
                    metadata_template=node.metadata_template,
                    text_template=node.text_template,
                    relationships=dict(source),
                ))
        return out

    def _postprocess_parsed_nodes(self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]) -> list[BaseNode]:
        # The base class re-finds each node's text in its parent and overwrites the offsets (wrong
        # for repeated passages, and impossible for context-enriched text): keep ours.
        offsets = [(n.start_char_idx, n.end_char_idx) if isinstance(n, TextNode) else None for n in nodes]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for n, off in zip(nodes, offsets):
            if off is not None:
                n.start_char_idx, n.end_char_idx = off
        return nodes
