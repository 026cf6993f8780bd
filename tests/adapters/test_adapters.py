"""LangChain and LlamaIndex adapters over litseg chunkers (optional extras)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from litseg.adapters import chunk_text, default_max_words, read_book, resolve_chunker, text_to_document
from litseg.chunkers.recursive import RecursiveChunker
from litseg.chunkers.token import TokenChunker

HAS_LANGCHAIN = importlib.util.find_spec("langchain_text_splitters") is not None
HAS_LLAMAINDEX = importlib.util.find_spec("llama_index") is not None and \
    importlib.util.find_spec("llama_index.core") is not None

# Repeated passages make naive offset recovery by text search go wrong.
TEXT = (
    "CHAPTER I.\r\n\r\nThe sea was calm. The sea was calm. Ahab paced the deck all night long, "
    "listening to the timbers.\r\n\r\n\u201cThere she blows!\u201d cried the lookout. The sea was calm.\n"
    "Everyone ran to the rail, and the boats were lowered at once."
)


@pytest.mark.parametrize("preprocess", [True, False])
def test_text_to_document_keeps_the_text_verbatim(preprocess: bool) -> None:
    text = "\ufeffBOM stays. Line\r\nendings too."
    doc = text_to_document(text, book_id="x", preprocess=preprocess)
    assert doc.text == text and doc.units[0].start == 0 and doc.units[-1].end == len(text)
    sents = doc.units[0].sentences
    assert sents and sents[0].start == 0 and sents[-1].end == len(text)
    _, chunks = chunk_text(text, TokenChunker(chunk_size=2, tokenizer="whitespace"), preprocess=preprocess)
    assert [c.main_text for c in chunks] == ["\ufeffBOM stays.", "Line\r\nendings", "too."]
    assert text_to_document("  \n", preprocess=preprocess).units == []


def test_preprocessing_keeps_chunks_inside_units() -> None:
    para = "The crew worked hard all day on the deck of the ship. " * 6
    text = "\n\n".join([para] * 8)
    doc, chunks = chunk_text(text, RecursiveChunker(chunk_size=500), max_words=150)
    assert len(doc.units) > 1
    bounds = {u.unit_id: (u.start, u.end) for u in doc.units}
    for c in chunks:
        lo, hi = bounds[c.unit_id]
        assert lo <= c.start < c.end <= hi and text[c.start : c.end] == c.main_text


def test_the_adapters_defaults_are_the_shipped_configs() -> None:
    """A chunker named to an adapter takes its settings from its config class (equal to
    conf/method), the unit cap from conf/preprocess/default.yaml: the adapters hold no copy."""
    from omegaconf import OmegaConf

    from litseg.utils.locations import config_dir

    assert default_max_words() == OmegaConf.load(config_dir() / "preprocess" / "default.yaml").max_words
    assert resolve_chunker("recursive").chunk_size == OmegaConf.load(  # type: ignore[attr-defined]
        config_dir() / "method" / "recursive.yaml").chunk_size
    para = "The crew worked hard all day on the deck of the ship. " * 6
    text = "\n\n".join([para] * 4)
    assert chunk_text(text, RecursiveChunker())[1] == chunk_text(text, RecursiveChunker(),
                                                                   max_words=default_max_words())[1]


def test_resolve_chunker_by_name_or_object() -> None:
    ch = RecursiveChunker(chunk_size=50)
    assert resolve_chunker(ch) is ch
    assert resolve_chunker("recursive", {"chunk_size": 77}).chunk_size == 77  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="only used with a chunker name"):
        resolve_chunker(ch, {"chunk_size": 3})
    with pytest.raises(ValueError, match="unknown chunker"):
        resolve_chunker("no-such-chunker")


@pytest.mark.skipif(not HAS_LANGCHAIN, reason="needs langchain-text-splitters (extra 'langchain')")
class TestLangChain:
    def test_split_text_returns_exact_pieces(self) -> None:
        from litseg.adapters.langchain import LitsegTextSplitter

        splitter = LitsegTextSplitter("recursive", chunker_params={"chunk_size": 60, "chunk_overlap": 20})
        pieces = splitter.split_text(TEXT)
        assert len(pieces) > 3 and all(p in TEXT for p in pieces)

    def test_documents_carry_exact_offsets(self) -> None:
        from langchain_core.documents import Document as LCDocument

        from litseg.adapters.langchain import LitsegTextSplitter

        splitter = LitsegTextSplitter(RecursiveChunker(chunk_size=40, chunk_overlap=15), book_id="moby")
        docs = splitter.create_documents([TEXT, "Second text. Short."], metadatas=[{"src": "a"}, {"src": "b"}])
        first = [d for d in docs if d.metadata["src"] == "a"]
        second = [d for d in docs if d.metadata["src"] == "b"]
        assert second and all(isinstance(d, LCDocument) for d in docs)
        for d in first:
            s, e = d.metadata["start_index"], d.metadata["end_index"]
            assert TEXT[s:e] == d.page_content
            assert d.metadata["main_spans"] == [[s, e]]
            assert d.metadata["chunk_id"].startswith("moby:0001:") and d.metadata["method"] == "recursive"
        starts = [d.metadata["start_index"] for d in first]
        assert starts == sorted(starts)
        # The repeated sentence occurs three times; each chunk is pinned to its own occurrence.
        calm = [d.metadata["start_index"] for d in first if d.page_content.startswith("The sea was calm")]
        assert len(set(calm)) == len(calm)
        # Every non-whitespace character of the input is in some chunk.
        covered = set()
        for d in first:
            covered.update(range(d.metadata["start_index"], d.metadata["end_index"]))
        assert all(i in covered for i, ch in enumerate(TEXT) if not ch.isspace())

    def test_split_documents_keeps_source_metadata(self) -> None:
        from langchain_core.documents import Document as LCDocument

        from litseg.adapters.langchain import LitsegTextSplitter

        splitter = LitsegTextSplitter(TokenChunker(chunk_size=8, overlap=2, tokenizer="whitespace"))
        out = splitter.split_documents([LCDocument(page_content=TEXT, metadata={"title": "Moby"})])
        assert out and all(d.metadata["title"] == "Moby" for d in out)
        assert all(TEXT[d.metadata["start_index"] : d.metadata["end_index"]] == d.page_content for d in out)

    def test_rejects_unknown_content(self) -> None:
        from litseg.adapters.langchain import LitsegTextSplitter

        with pytest.raises(ValueError, match="content"):
            LitsegTextSplitter("recursive", content="summary")

    def test_lazy_package_attribute(self) -> None:
        import litseg.adapters as adapters
        from litseg.adapters.langchain import LitsegTextSplitter

        assert adapters.LitsegTextSplitter is LitsegTextSplitter


@pytest.mark.skipif(not HAS_LLAMAINDEX, reason="needs llama-index-core (extra 'llamaindex')")
class TestLlamaIndex:
    def test_nodes_have_exact_char_indices(self) -> None:
        from llama_index.core import Document as LIDocument
        from llama_index.core.schema import NodeRelationship, TextNode

        from litseg.adapters.llamaindex import LitsegNodeParser

        parser = LitsegNodeParser("recursive", chunker_params={"chunk_size": 40, "chunk_overlap": 15})
        doc = LIDocument(text=TEXT, metadata={"title": "Moby"})
        nodes = parser.get_nodes_from_documents([doc])
        assert len(nodes) > 3 and all(isinstance(n, TextNode) for n in nodes)
        for n in nodes:
            assert TEXT[n.start_char_idx : n.end_char_idx] == n.text
            assert n.metadata["title"] == "Moby" and n.metadata["method"] == "recursive"
            assert n.relationships[NodeRelationship.SOURCE].node_id == doc.doc_id
            assert "chunk_id" in n.excluded_embed_metadata_keys
        calm = [n.start_char_idx for n in nodes if n.text.startswith("The sea was calm")]
        assert len(set(calm)) == len(calm)
        # Prev/next links follow the chunk order.
        assert nodes[1].relationships[NodeRelationship.PREVIOUS].node_id == nodes[0].node_id

    def test_context_enriched_text_keeps_offsets(self) -> None:
        from llama_index.core import Document as LIDocument

        from litseg.adapters.llamaindex import LitsegNodeParser

        parser = LitsegNodeParser(TokenChunker(chunk_size=6, tokenizer="whitespace"), content="text")
        nodes = parser.get_nodes_from_documents([LIDocument(text=TEXT)])
        assert parser.chunker_name == "token"
        assert all(TEXT[n.start_char_idx : n.end_char_idx] == n.text for n in nodes)  # baselines: text == main text

    def test_rejects_unknown_content(self) -> None:
        from litseg.adapters.llamaindex import LitsegNodeParser

        with pytest.raises(ValueError, match="content"):
            LitsegNodeParser("recursive", content="summary")


def _crlf_book(path: Path) -> Path:
    """A Markdown book with Windows line ends, long enough for several recursive chunks a chapter."""
    chapters = []
    for c in range(1, 4):
        paras = [" ".join(f"In chapter {c} the ferryman counted crossing {p}.{s} before the mist lifted."
                          for s in range(6)) for p in range(5)]
        chapters.append(f"## Chapter {c}\r\n\r\n" + "\r\n\r\n".join(paras))
    path.write_bytes(("# The Ferryman\r\n\r\n" + "\r\n\r\n".join(chapters) + "\r\n").encode("utf-8"))
    return path


@pytest.mark.skipif(not (HAS_LANGCHAIN and HAS_LLAMAINDEX), reason="needs both adapter extras")
def test_adapters_give_annotate_offsets_on_a_crlf_file(tmp_path: Path) -> None:
    """annotate.py and both adapters, on a file read with read_book, give the same spans; the
    file read with open() is another text (CRLF turned into LF), which is why read_book exists."""
    from hydra import compose, initialize_config_dir
    from llama_index.core import Document as LIDocument

    from litseg.adapters.langchain import LitsegTextSplitter
    from litseg.adapters.llamaindex import LitsegNodeParser
    from litseg.annotation.entry import run_annotate
    from litseg.annotation.store import CHUNKS
    from litseg.utils.jsonl import read_jsonl
    from tests.conftest import REPO

    book = _crlf_book(tmp_path / "ferry.md")
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=["method=recursive", f"input={book}", "print_table=0",
                                             "view=false", "export.enabled=false"])
    run_annotate(cfg, tmp_path / "run")
    expected = [tuple(c["main_spans"][0]) for c in read_jsonl(tmp_path / "run" / CHUNKS)]
    assert len(expected) > 6

    text = read_book(book)
    assert "\r\n" in text and "\r" not in book.open(encoding="utf-8").read()
    lc = LitsegTextSplitter("recursive").create_documents([text])
    assert [(d.metadata["start_index"], d.metadata["end_index"]) for d in lc] == expected
    nodes = LitsegNodeParser("recursive").get_nodes_from_documents([LIDocument(text=text)])
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == expected
    assert all(text[s:e] == d.page_content for (s, e), d in zip(expected, lc))
