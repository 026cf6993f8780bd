"""A size-fair answer stage (litseg.rag.context_budget): the generator and the judge read every
chunker's ranking up to one character budget, only the last chunk cut, and the report gives each
chunker's truncation."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from litseg.llm.testing import ScriptedChatModel
from litseg.rag.context_budget import ContextBudget, summarize_packs
from litseg.rag.judge import RagJudge
from tests.rag.test_rag_pipeline import CHUNKERS, eval_cfg, prompt, run, scripted_rag_model


def test_pack_fills_the_budget_and_cuts_only_the_last_chunk() -> None:
    b = ContextBudget(budget_chars=10)
    p = b.pack(["abcd", "", "efgh", "ijklmn", "zzz"], positions=[3, 4, 5, 6, 7])
    assert p.passages == ["abcd", "efgh", "ij"] and p.positions == [3, 5, 6]
    assert p.chars == 10 and p.full_chars == 14 and p.truncated and p.cut_chars == 4
    whole = b.pack(["abcde", "fghij", "k"])  # fits exactly: nothing cut, nothing after
    assert whole.passages == ["abcde", "fghij"] and not whole.truncated
    short = b.pack(["abc"])  # a book with less text than the budget
    assert short.chars == 3 and not short.truncated
    assert ContextBudget(budget_chars=100, max_chunks=2).pack(["a", "b", "c"]).passages == ["a", "b"]
    s = summarize_packs([p, whole, short], b)
    assert s["truncated_share"] == pytest.approx(1 / 3) and s["filled_share"] == pytest.approx(2 / 3)
    assert s["mean_chunks"] == pytest.approx(2.0) and s["cut_chars_share"] == pytest.approx(4 / (14 + 10 + 3))
    chunk = SimpleNamespace(text="[Title] body", main_text="body")
    assert ContextBudget(text="main_text").chunk_text(chunk) == "body" and b.chunk_text(chunk) == "[Title] body"
    with pytest.raises(ValueError):
        ContextBudget(budget_chars=0)
    with pytest.raises(ValueError, match="unknown keys"):
        ContextBudget.from_config({"top_n": 5})


def _components(cfg: dict[str, Any], llm: Any) -> Any:
    from litseg.rag.generate import AnswerGenerator
    from litseg.rag.evaluation.components import build_components

    comp = build_components({**cfg, "generation": {"enabled": False}}, cfg["suite"])
    comp.generator = AnswerGenerator(llm, prompt("rag_answer"), answer_style="phrase")
    comp.judge = RagJudge(llm, prompt("rag_judge"))
    return comp


def test_every_chunker_gets_the_same_context_budget(tmp_path: Path) -> None:
    """Small token windows and whole sections both reach the generator as 600 characters; the
    judge reads the very same passages; the report shows how often the last one was cut."""
    budget = 600
    llm = ScriptedChatModel(scripted_rag_model)
    cfg = eval_cfg(chunkers={"token": CHUNKERS["token"], "sections": CHUNKERS["sections"]},
                   generation={"enabled": True, "max_questions": None},
                   answer_context={"budget_chars": budget, "text": "text", "max_chunks": None})
    res = run(tmp_path, cfg, components=_components(cfg, llm))
    token, sections = res.results
    for r in res.results:
        assert all(q["context_chars"] == budget for q in r.per_question)  # each book holds > 600 characters
        ctx = r.summary["generation"]["context"]
        assert ctx["budget_chars"] == budget and ctx["filled_share"] == 1.0
    # about 170-character windows against 400-character sections: more chunks, all within one budget
    assert token.summary["generation"]["context"]["mean_chunks"] > sections.summary["generation"]["context"]["mean_chunks"]
    # what the generator read: numbered passages totalling the budget; the judge read the same text
    answering = [r for r in llm.requests if r.messages[0]["content"].startswith("You answer")]
    judging = [r for r in llm.requests if r.messages[0]["content"].startswith("You check")]
    assert len(answering) == len(judging) == 2 * 8
    for ans, jud in zip(answering, judging):
        refs = ans.messages[1]["content"].split("Passages:\n", 1)[1]
        passages = re.split(r"\n\n(?=\[\d+\] )", refs)
        texts = [re.sub(r"^\[\d+\] ", "", p) for p in passages]
        assert budget - 3 <= sum(len(t) for t in texts) <= budget  # the prompt strips a cut passage's edge spaces
        assert jud.messages[1]["content"].endswith("\n\n".join(texts))
    md = (tmp_path / "results.md").read_text()
    assert f"answer context in {budget} chars: chunks (questions with the last one cut, chunk text cut)" in md
    cut = token.summary["generation"]["context"]
    assert f"| {cut['mean_chunks']:.1f} ({100 * cut['truncated_share']:.0f}%, {100 * cut['cut_chars_share']:.0f}%) |" in md
    csv_text = (tmp_path / "results.csv").read_text()
    assert "context_truncated_share" in csv_text and "context_mean_chunks" in csv_text


def test_evaluate_config_has_one_budget_and_no_per_stage_cuts() -> None:
    from tests.rag.test_evaluate import composed

    cfg = composed()
    assert cfg.answer_context.budget_chars > 0 and cfg.answer_context.text == cfg.metrics.index_text
    assert "top_n" not in cfg.generation and "max_context_chars" not in cfg.generation
    assert "max_context_chars" not in cfg.judge


def test_judge_and_generator_no_longer_cut_on_their_own() -> None:
    from litseg.rag.generate import AnswerGenerator, AnswerInput

    long = "x" * 9000
    llm = ScriptedChatModel(lambda r: '{"rating": 2}')
    RagJudge(llm, prompt("rag_judge")).context_relevance(["q"], [long])
    assert all(long in r.messages[1]["content"] for r in llm.requests)
    gen_llm = ScriptedChatModel(lambda r: "an answer")
    AnswerGenerator(gen_llm, prompt("rag_answer")).answer([AnswerInput("q", "t", "q?", [long] * 6)])
    assert gen_llm.requests[0].messages[1]["content"].count(long) == 6
