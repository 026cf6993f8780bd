"""The paper's baseline set (``chunkers=paper_baselines``): composition, overlapping token windows
reported as such, margin sampling without a forced cut, and `+merge` rows that reuse their base
row's chunks instead of chunking twice (litseg.rag.derived_chunks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from litseg.rag.derived_chunks import ChunkSetBuilder, expand_derived, split_merge
from litseg.rag.chunk_quality import chunk_statistics, main_text_overlap
from litseg.rag.chunk_sets import ChunkerSpec
from litseg.annotation.entry import document_reader
from litseg.annotation.word_cap import resolve_word_cap
from litseg.testing.configs import preprocess_config
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook
from litseg.rag.evaluation.sources import ChunkerRuns, benchmark_sources, build_chunkset, read_books, resolve_chunkers
from tests.conftest import REPO
from tests.doc_strategies import make_doc

CONF = REPO / "conf"
PAPER_ROWS = ["token", "recursive", "semantic", "perplexity", "perplexity+merge", "margin_sampling",
              "margin_sampling+merge", "lumberchunker", "lumberchunker+merge"]


def composed(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="evaluate", overrides=list(overrides))


def test_paper_baselines_compose_the_papers_rows() -> None:
    cfg = composed("chunkers=paper_baselines")
    specs = resolve_chunkers(cfg.chunkers)
    assert [s.label for s in specs] == PAPER_ROWS
    by = {s.label: s.method for s in specs}
    assert by["token"]["overlap"] > 0  # the paper's token windows overlap
    assert by["margin_sampling"]["max_chunk_words"] is None  # no forced cut unless asked for
    for base in ("perplexity", "margin_sampling", "lumberchunker"):
        merged_base, merge = split_merge(by[f"{base}+merge"])
        assert merge and merge["target"] > 0
        assert merged_base == split_merge(by[base])[0]  # same chunker, only merged
        assert split_merge(by[base])[1] is None
    # an override of a base row carries over to its +merge row
    cfg = composed("chunkers=paper_baselines", "chunkers.lumberchunker.token_budget=300")
    by = {s.label: s.method for s in resolve_chunkers(cfg.chunkers)}
    assert by["lumberchunker"]["token_budget"] == by["lumberchunker+merge"]["token_budget"] == 300


def test_margin_sampling_asks_the_model_at_every_sentence_by_default() -> None:
    from litseg.chunkers.margin import MarginSamplingChunker
    from litseg.llm.scoring import ScoreUsage

    class AlwaysKeep:
        usage = ScoreUsage()

        def answer_probabilities(self, prompt: Any, answers: Any) -> list[float]:
            self.usage.calls += 1
            return [0.1, 0.9]

        def identity(self) -> dict[str, Any]:
            return {"backend": "stub"}

        def count_tokens(self, text: str) -> int:
            return len(text.split())

        def chunk_tokenizer(self) -> None:
            return None

    text = " ".join(f"Sentence {k} tells of the long road home once more." for k in range(1, 61))  # 600 words
    doc = make_doc(text)
    template = OmegaConf.to_container(OmegaConf.load(CONF / "prompt" / "margin_sampling.yaml"))
    scorer = AlwaysKeep()
    res = MarginSamplingChunker(scorer, template, dynamic_threshold=False).chunk_unit(doc, doc.units[0])
    assert len(res.chunks) == 1 and res.diagnostics["forced_splits"] == 0
    assert scorer.usage.calls == len(doc.units[0].sentences) - 1
    assert OmegaConf.load(CONF / "method" / "margin_sampling.yaml").max_chunk_words is None


def test_expand_derived_checks_its_reference() -> None:
    node = {"a": {"name": "token", "chunk_size": 8, "label": "A"}, "b": {"from": "a", "label": "B", "merge": {"target": 5}}}
    out = expand_derived(node)
    assert out["b"] == {"name": "token", "chunk_size": 8, "label": "B", "merge": {"target": 5}}
    assert out["a"] == node["a"]
    with pytest.raises(ValueError, match="names no chunker"):
        expand_derived({"b": {"from": "missing"}})
    with pytest.raises(ValueError, match="itself derived"):
        expand_derived({"a": {"name": "token"}, "b": {"from": "a"}, "c": {"from": "b"}})


def _doc():
    text = "\n\n".join(" ".join(f"Word{p}x{k} said the tale, and more." for k in range(1, 9)) for p in range(1, 6))
    return make_doc(text, cuts=[len(text) // 2])


def _bench_and_runs(tmp_path: Path) -> tuple[Benchmark, dict[str, Any], ChunkerRuns]:
    """One book of five paragraphs, cut into units of at most 100 words, and where its chunkers run."""
    doc = _doc()
    bench = Benchmark(name="tiny", books=[BenchmarkBook(book_id=doc.book_id, text=doc.text)], questions=[])
    preprocess = preprocess_config(max_words=100)
    runs = ChunkerRuns(tmp_path, preprocess, groups={}, window_units=256)
    docs = read_books(benchmark_sources(bench, document_reader(preprocess, resolve_word_cap(preprocess))))
    assert len(docs[doc.book_id].units) > 1
    return bench, docs, runs


def test_merge_rows_reuse_the_base_chunks_and_equal_chunking_with_merge(tmp_path: Path) -> None:
    bench, docs, runs = _bench_and_runs(tmp_path)
    calls: list[str] = []

    def counting(spec: ChunkerSpec, bench: Any, docs: Any, **kw: Any):
        calls.append(spec.label)
        return build_chunkset(spec, bench, docs, **kw)

    base = {"name": "token", "chunk_size": 9, "overlap": 3, "tokenizer": "whitespace", "merge": None}
    merged = {**base, "merge": {"target": 30, "measure": "words"}}
    builder = ChunkSetBuilder(counting)
    plain = builder(ChunkerSpec("token", "method", base), bench, docs, runs=runs)
    derived = builder(ChunkerSpec("token+merge", "method", merged), bench, docs, runs=runs)
    assert calls == ["token"] and builder.reused == {"token+merge": "token"}
    direct = build_chunkset(ChunkerSpec("direct", "method", merged), bench, docs, runs=runs)
    assert [(c.unit_id, c.main_spans, c.main_text, c.method) for c in derived.chunks] == \
        [(c.unit_id, c.main_spans, c.main_text, c.method) for c in direct.chunks]
    assert derived.method == "token+merge" and len(derived.chunks) < len(plain.chunks)
    assert derived.config["merged_from_run_row"] == "token"
    # a merge row whose base is not in the run chunks the base once, under its own label
    calls.clear()
    other = ChunkSetBuilder(counting)
    again = other(ChunkerSpec("token+merge", "method", merged), bench, docs, runs=runs)
    assert calls == ["token+merge (before merge)"]
    assert [c.main_spans for c in again.chunks] == [c.main_spans for c in direct.chunks]
    # every chunker ran as an annotation run, in a folder of its own
    assert sorted(p.name for p in tmp_path.iterdir()) == ["direct", "token", "token-merge-before-merge"]


def test_overlapping_token_windows_are_measured_and_reported() -> None:
    from litseg.chunkers import build_chunker

    doc = _doc()
    tiles = [c for u in doc.units for c in build_chunker("token", chunk_size=9, tokenizer="whitespace").chunk_unit(doc, u).chunks]
    windows = [c for u in doc.units
               for c in build_chunker("token", chunk_size=9, overlap=3, tokenizer="whitespace").chunk_unit(doc, u).chunks]
    assert main_text_overlap(tiles) == {"share_overlapping": 0.0, "overlap_chars_share": 0.0}
    ov = main_text_overlap(windows)
    assert ov["share_overlapping"] == 1.0 and 0.2 < ov["overlap_chars_share"] < 0.6
    assert chunk_statistics(windows)["share_overlapping"] == 1.0
    # by hand: [0, 10) and [5, 20) share 5 of 20 covered characters; [30, 40) stands alone
    rows = [{"book_id": "b", "main_spans": [[0, 10]]}, {"book_id": "b", "main_spans": [[5, 20]]},
            {"book_id": "b", "main_spans": [[30, 40]]}, {"book_id": "c", "main_spans": [[5, 9]]}]
    got = main_text_overlap(rows)
    assert got["share_overlapping"] == pytest.approx(2 / 4) and got["overlap_chars_share"] == pytest.approx(5 / 34)


def test_report_has_an_overlap_column_only_when_chunks_overlap() -> None:
    from litseg.rag.results import ChunkerResult, EvalSettings, EvaluationResult
    from litseg.rag.report import main_table

    def result(label: str, share: float) -> ChunkerResult:
        summary = {"metrics": {}, "chunks": {"share_overlapping": share, "overlap_chars_share": share / 4}}
        return ChunkerResult(label, label, summary, [], [])

    res = EvaluationResult("s", {}, [result("token", 1.0), result("recursive", 0.0)], [], EvalSettings(), 0.0)
    head, rows = main_table(res)
    col = head.index("overlapping chunks (text read twice)")
    assert rows[0][col] == "100% (25%)" and rows[1][col] == "0% (0%)"
    res = EvaluationResult("s", {}, [result("recursive", 0.0)], [], EvalSettings(), 0.0)
    assert "overlapping chunks (text read twice)" not in main_table(res)[0]
