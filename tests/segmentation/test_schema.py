"""The answer schemas and their JSON Schema export for constrained decoding."""

from __future__ import annotations

import json
from typing import Any

import pytest

from litseg.segmentation.schema import (
    SCHEMAS,
    LiteAnswer,
    Segment,
    Stage1Answer,
    Step3Answer,
    answer_segments,
    get_schema,
    has_segments,
    json_schema,
)

ALLOWED_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "description",
                    "minimum", "maximum"}

SEGMENTS = [{"subtitle": "Arrival", "from_idx": 1, "to_idx": 4, "context_idx": []},
            {"subtitle": "The quarrel", "from_idx": 5, "to_idx": 9, "context_idx": [2]}]
TURNING = [{"type": "reversal", "description": "the letter is found"}]

# One complete answer per registered schema, in the exact shape its prompt asks for.
EXAMPLES: dict[str, dict[str, Any]] = {
    "lite": {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
             "step3": {"chapter_title": "I", "step_3_turning_points": TURNING, "segments": SEGMENTS}},
    "stage1": {"step_1_events": "e"},
    "stage2": {"step_2_threads": "t"},
    "stage3": {"chapter_title": "I", "step_3_turning_points": TURNING, "segments": SEGMENTS},
    "segments": {"chapter_title": "I", "segments": SEGMENTS},
    "segments_range_first": {"chapter_title": "I", "segments": [
        {"from_idx": s["from_idx"], "to_idx": s["to_idx"], "context_idx": s["context_idx"], "subtitle": s["subtitle"]}
        for s in SEGMENTS]},
    "lite_no_theory": {"segments": SEGMENTS},
    "lite_no_step1": {"step2": {"step_2_threads": "t"},
                      "step3": {"chapter_title": "I", "step_3_turning_points": TURNING, "segments": SEGMENTS}},
    "lite_no_step2": {"step1": {"step_1_events": "e"},
                      "step3": {"chapter_title": "I", "step_3_turning_points": TURNING, "segments": SEGMENTS}},
    "lite_no_turning_points": {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                               "step3": {"chapter_title": "I", "segments": SEGMENTS}},
}


def _walk(node: Any, path: str = "$"):
    yield path, node
    if isinstance(node, dict):
        for key, sub in node.get("properties", {}).items():
            yield from _walk(sub, f"{path}.{key}")
        if "items" in node:
            yield from _walk(node["items"], f"{path}[]")


def test_every_schema_has_an_example() -> None:
    assert set(EXAMPLES) == set(SCHEMAS)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_example_validates_and_segments_are_found(name: str) -> None:
    model = get_schema(name)
    answer = model.model_validate(EXAMPLES[name], strict=True)
    segments = answer_segments(answer)
    if has_segments(model):
        assert [s.span for s in segments] == [(1, 4), (5, 9)]
        assert segments[1].context_idx == [2]
    else:
        assert segments == []


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("n", [None, 37])
def test_exported_schema_is_portable(name: str, n: int | None) -> None:
    schema = json_schema(get_schema(name), n_sentences=n)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    assert schema["type"] == "object"
    for path, node in _walk(schema):
        assert set(node) <= ALLOWED_KEYWORDS, (path, set(node) - ALLOWED_KEYWORDS)
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path
            assert "description" not in node, path


def test_index_bounds_only_on_sentence_indices() -> None:
    schema = json_schema(LiteAnswer, n_sentences=12)
    seg = schema["properties"]["step3"]["properties"]["segments"]["items"]["properties"]
    for key in ("from_idx", "to_idx"):
        assert (seg[key]["minimum"], seg[key]["maximum"]) == (1, 12)
    assert (seg["context_idx"]["items"]["minimum"], seg["context_idx"]["items"]["maximum"]) == (1, 12)
    bounded = [p for p, node in _walk(schema) if "minimum" in node or "maximum" in node]
    assert sorted(bounded) == sorted([
        "$.step3.segments[].from_idx", "$.step3.segments[].to_idx", "$.step3.segments[].context_idx[]"])
    assert not [p for p, node in _walk(json_schema(LiteAnswer)) if "minimum" in node]


def test_schema_order_follows_the_prompt() -> None:
    schema = json_schema(LiteAnswer)
    assert list(schema["properties"]) == ["step1", "step2", "step3"]
    step3 = schema["properties"]["step3"]["properties"]
    assert list(step3) == ["chapter_title", "step_3_turning_points", "segments"]
    assert list(step3["segments"]["items"]["properties"]) == ["subtitle", "from_idx", "to_idx", "context_idx"]


def test_descriptions_can_be_left_out() -> None:
    schema = json_schema(Step3Answer, descriptions=False)
    assert not [p for p, node in _walk(schema) if "description" in node and isinstance(node["description"], str)]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="n_sentences"):
        json_schema(LiteAnswer, n_sentences=0)
    with pytest.raises(ValueError, match="unknown answer schema 'nope'"):
        get_schema("nope")


def test_models_ignore_extra_keys_but_need_segments() -> None:
    seg = Segment.model_validate({"from_idx": 2, "to_idx": 3, "confidence": 0.9})
    assert (seg.subtitle, seg.context_idx) == ("", [])
    with pytest.raises(ValueError):
        Step3Answer.model_validate({"chapter_title": "x"})
    with pytest.raises(ValueError):
        Stage1Answer.model_validate({})


def _example_json(name: str) -> str:
    return json.dumps(EXAMPLES[name])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_xgrammar_compiles_and_enforces(name: str) -> None:
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    model = get_schema(name)
    grammar = xgr.Grammar.from_json_schema(json.dumps(json_schema(model, n_sentences=9)), strict_mode=True)
    assert _is_grammar_accept_string(grammar, _example_json(name))
    if has_segments(model):
        assert not _is_grammar_accept_string(grammar, _example_json(name).replace('"from_idx": 5', '"from_idx": 0'))
        assert not _is_grammar_accept_string(grammar, _example_json(name).replace('"context_idx": [2]',
                                                                                  '"context_idx": ["2"]'))


def test_bounded_schema_limits_free_text_and_lists_under_xgrammar() -> None:
    # Bounds make every constrained answer end: a subtitle longer than its maxLength is refused.
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    limits = {"text": {"subtitle": 200, "chapter_title": 200}, "lists": {"context_idx": None}}
    schema = json_schema(get_schema("lite"), n_sentences=9, bounded=limits)
    grammar = xgr.Grammar.from_json_schema(json.dumps(schema), strict_mode=True)
    assert _is_grammar_accept_string(grammar, _example_json("lite"))
    long_title = "x" * (limits["text"]["subtitle"] + 1)
    assert not _is_grammar_accept_string(grammar, _example_json("lite").replace('"Arrival"', f'"{long_title}"'))
    seg_items = schema["properties"]["step3"]["properties"]["segments"]
    assert seg_items["maxItems"] == 9
