"""LitSeg-Lite chunker: prompt rendering, retries with feedback, batching, zero loss."""

from __future__ import annotations

import json
import threading
import time

import pytest
from omegaconf import OmegaConf

from litseg.chunkers.build import build_chunker_from_config
from litseg.chunkers.litseg_lite import LitSegLiteChunker
from litseg.chunkers.llm_common import number_sentences, render_single_pass_messages
from litseg.llm.base import ChatModel, ChatRequest, Completion
from litseg.llm.batching import run_batched
from litseg.llm.testing import ScriptedChatModel
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.types import Document
from litseg.testing.configs import feedback_config, prompt_config
from tests.conftest import REPO

PROMPT = prompt_config("litseg_lite")
FEEDBACK = feedback_config()

BOOK = """CHAPTER I

Anna walked to the mill at dawn. The river was high. She crossed the bridge and knocked.

Nobody answered. She went home again, puzzled.

CHAPTER II

In the city, Karl read the letter twice. Then he burned it. "She must never know," he said.

The train left at noon. He was on it.
"""


@pytest.fixture
def doc(tmp_path) -> Document:
    path = tmp_path / "tale.txt"
    path.write_text(BOOK, encoding="utf-8")
    return prepare_document(path)


def answer(segments: list[tuple[int, int]], ctx: dict[int, list[int]] | None = None) -> str:
    ctx = ctx or {}
    return json.dumps({
        "step1": {"step_1_events": "Anna visits the mill."},
        "step2": {"step_2_threads": "One thread."},
        "step3": {"chapter_title": "I", "step_3_turning_points": [],
                  "segments": [{"subtitle": f"Block {k}", "from_idx": a, "to_idx": b,
                                "context_idx": ctx.get(k, [])} for k, (a, b) in enumerate(segments)]},
    })


def test_numbering_and_prompt_rendering(doc: Document) -> None:
    unit = doc.units[0]
    texts = [doc.text[s.start:s.end] for s in unit.sentences]
    numbered = number_sentences(texts)
    assert numbered.splitlines()[0].startswith("[1] ")
    assert numbered.count("\n") == len(texts) - 1
    msgs = render_single_pass_messages(PROMPT, texts)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert numbered in msgs[1]["content"]
    assert f"{len(texts)}" in msgs[1]["content"]  # the last index is stated
    assert "{" not in msgs[0]["content"] or "}" in msgs[0]["content"]  # no stray placeholders


def test_valid_answer_gives_chunks_with_exact_spans(doc: Document) -> None:
    unit = doc.units[0]
    n = unit.n_sentences
    llm = ScriptedChatModel([answer([(1, 2), (3, n)], {1: [1]})])
    res = LitSegLiteChunker(llm, PROMPT).chunk_unit(doc, unit)
    assert res.diagnostics["fallback"] == "none" and res.diagnostics["tries"] == 1
    assert [(c.from_idx, c.to_idx) for c in res.chunks] == [(1, 2), (3, n)]
    for c in res.chunks:
        assert c.main_text == "".join(doc.text[s:e] for s, e in c.main_spans)
    assert res.chunks[1].context_ids == [1]
    assert res.chunks[1].context_before == doc.text[unit.sentences[0].start:unit.sentences[0].end]
    assert res.diagnostics["segments"][0]["from_idx"] == 1
    # The request carried the answer's JSON Schema with index bounds for constrained decoding.
    schema = llm.requests[0].json_schema
    seg = schema["properties"]["step3"]["properties"]["segments"]["items"]["properties"]
    assert seg["from_idx"]["maximum"] == n


def test_invalid_answer_is_retried_with_the_feedback_template(doc: Document) -> None:
    unit = doc.units[0]
    n = unit.n_sentences
    llm = ScriptedChatModel(["not json at all", answer([(1, 1)]), answer([(1, n)])])
    res = LitSegLiteChunker(llm, PROMPT, feedback=FEEDBACK, max_retries=2).chunk_unit(doc, unit)
    assert res.diagnostics["tries"] == 3 and res.diagnostics["fallback"] == "none"
    second = llm.requests[1].messages
    assert second[-2]["role"] == "assistant" and second[-2]["content"] == "not json at all"
    assert "retry 1 of 2" in second[-1]["content"]
    assert "retry 2 of 2" in llm.requests[2].messages[-1]["content"]


def test_retries_exhausted_falls_back_without_losing_a_sentence(doc: Document) -> None:
    unit = doc.units[1]
    llm = ScriptedChatModel(["{broken", "still broken", "nope"])
    res = LitSegLiteChunker(llm, PROMPT, max_retries=2, fallback="pieces", fallback_max_words=5).chunk_unit(doc, unit)
    assert res.diagnostics["fallback"] == "whole_unit"
    covered = {i for c in res.chunks for i in range(c.from_idx, c.to_idx + 1)}
    assert covered == set(range(1, unit.n_sentences + 1))
    assert len(res.chunks) > 1  # split under the 5-word cap


def test_backend_errors_are_recorded_not_raised(doc: Document) -> None:
    unit = doc.units[0]
    err = Completion(text="", error="HTTP 500 after 3 tries", finish_reason="error")
    res = LitSegLiteChunker(ScriptedChatModel([err, err, err]), PROMPT).chunk_unit(doc, unit)
    assert res.diagnostics["fallback"] == "whole_unit"
    assert all("backend_error" in a["issue_codes"] for a in res.diagnostics["attempts"])


def test_prompt_without_schema_is_refused() -> None:
    with pytest.raises(ValueError, match="schema"):
        LitSegLiteChunker(ScriptedChatModel([]), {"system": "s", "user": "u"})


def test_built_from_config_groups(doc: Document) -> None:
    method = OmegaConf.load(REPO / "conf/method/litseg_lite.yaml")
    chunker = build_chunker_from_config(method, llm={"backend": "scripted", "answers": [answer([(1, 99)])]},
                                        prompt=PROMPT, feedback=FEEDBACK)
    assert isinstance(chunker, LitSegLiteChunker)
    assert chunker.fingerprint()["prompt"] == PROMPT.version


class _SlowBatchModel(ChatModel):
    """Answers after a delay and records the batch sizes it was sent."""

    def __init__(self, reply) -> None:
        self.reply = reply
        self.batches: list[int] = []
        self.lock = threading.Lock()

    def chat(self, request: ChatRequest) -> Completion:
        return self.chat_batch([request])[0]

    def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        with self.lock:
            self.batches.append(len(requests))
        time.sleep(0.01)
        return [Completion(text=self.reply(r)) for r in requests]


def test_units_are_batched_and_all_come_back(doc: Document) -> None:
    def reply(req: ChatRequest) -> str:
        n = req.messages[1]["content"].count("\n[") + 1
        return answer([(1, n)])

    llm = _SlowBatchModel(reply)
    chunker = LitSegLiteChunker(llm, PROMPT, workers=4)
    results = list(chunker.chunk_units(doc, doc.units))
    assert sorted(r.unit_id for r in results) == sorted(u.unit_id for u in doc.units)
    assert max(llm.batches) == len(doc.units)  # both units were asked in one batch


def test_run_batched_propagates_job_errors() -> None:
    def bad(ask):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        list(run_batched(ScriptedChatModel([]), [bad, bad], workers=2))


def test_run_batched_runs_every_job_once() -> None:
    llm = _SlowBatchModel(lambda r: r.messages[0]["content"])

    def job(k):
        return lambda ask: ask(ChatRequest(messages=[{"role": "user", "content": f"q{k}"}])).text

    out = list(run_batched(llm, [job(k) for k in range(20)], workers=5, max_batch=3))
    assert sorted(out) == sorted(f"q{k}" for k in range(20))
    assert max(llm.batches) <= 3


COMPACT = prompt_config("litseg_lite_compact")


def compact_answer(ranges: list[tuple[int, int]]) -> str:
    return json.dumps({"chapter_title": "I", "segments": [
        {"subtitle": f"Block {k}", "from_idx": a, "to_idx": b, "context_idx": []} for k, (a, b) in enumerate(ranges)]})


@pytest.mark.parametrize("cut_at_paragraphs, expected, snapped", [
    (True, [(1, 4), (5, 6)], 1),      # the cut at sentence 4 moves to the nearest paragraph start, 5
    (False, [(1, 3), (4, 6)], None),  # the model's own cut
])
def test_cuts_move_to_paragraph_starts_when_the_prompt_shows_paragraphs(doc, cut_at_paragraphs, expected, snapped):
    unit = doc.units[0]   # paragraphs: the heading (1), sentences 2-4 and 5-6
    llm = ScriptedChatModel([compact_answer([(1, 3), (4, 6)])])
    chunker = LitSegLiteChunker(llm, COMPACT, cut_at_paragraphs=cut_at_paragraphs)
    result = chunker.chunk_unit(doc, unit)
    assert [(c.from_idx, c.to_idx) for c in result.chunks] == expected
    assert [(s["from_idx"], s["to_idx"]) for s in result.diagnostics["segments"]] == expected
    assert result.diagnostics.get("snapped_cuts") == snapped
    assert [c.subtitle for c in result.chunks] == ["Block 0", "Block 1"]
    assert " ".join(c.main_text for c in result.chunks).split() == doc.text[unit.start:unit.end].split()
