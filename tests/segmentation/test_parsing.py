"""Lenient parsing: every leniency is a table row with the segments expected and the note left."""

from __future__ import annotations

import json

import pytest

from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.schema import (
    LiteAnswer,
    LiteAnswerNoStep1,
    LiteAnswerNoTheory,
    Stage1Answer,
    Stage2Answer,
    Stage3Answer,
)
from litseg.segmentation.validation import IssueCode

GOOD_STAGE3 = {"chapter_title": "I", "step_3_turning_points": [{"type": "setback", "description": "d"}],
               "segments": [{"subtitle": "a", "from_idx": 1, "to_idx": 4, "context_idx": []},
                            {"subtitle": "b", "from_idx": 5, "to_idx": 8, "context_idx": [2]}]}
GOOD_LITE = {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"}, "step3": GOOD_STAGE3}
EXPECTED = [(1, 4, []), (5, 8, [2])]


def seg_json(*parts: str) -> str:
    return "[" + ", ".join(parts) + "]"


# (id, model, reply text, expected (from, to, context) per segment, substrings expected in the notes)
CASES = [
    ("exact lite", LiteAnswer, json.dumps(GOOD_LITE), EXPECTED, []),
    ("exact stage3", Stage3Answer, json.dumps(GOOD_STAGE3), EXPECTED, []),
    ("json fence with prose", Stage3Answer,
     "Sure! Here is the segmentation:\n```json\n" + json.dumps(GOOD_STAGE3, indent=2) + "\n```\nHope it helps.",
     EXPECTED, ["code fence"]),
    ("prose without fence", Stage3Answer, "Result: " + json.dumps(GOOD_STAGE3) + " -- end",
     EXPECTED, ["ignored text around"]),
    ("think block", Stage3Answer, "<think>maybe {\"segments\": []}</think>\n" + json.dumps(GOOD_STAGE3),
     EXPECTED, ["<think>"]),
    ("trailing commas", Stage3Answer,
     '{"segments": [{"subtitle": "a", "from_idx": 1, "to_idx": 4, "context_idx": [],},'
     ' {"subtitle": "b", "from_idx": 5, "to_idx": 8, "context_idx": [2,]},],}',
     EXPECTED, ["repaired"]),
    ("single quotes", Stage3Answer,
     "{'segments': [{'subtitle': 'a', 'from_idx': 1, 'to_idx': 4, 'context_idx': []},"
     " {'subtitle': 'b', 'from_idx': 5, 'to_idx': 8, 'context_idx': [2]}]}",
     EXPECTED, ["repaired"]),
    ("truncated mid segment", Stage3Answer,
     '{"segments": [{"subtitle": "a", "from_idx": 1, "to_idx": 4, "context_idx": []},'
     ' {"subtitle": "b", "from_idx": 5, "to_idx": 8, "context_idx": [2',
     EXPECTED, ["repaired"]),
    ("indices as strings and floats", Stage3Answer,
     '{"segments": [{"subtitle": "a", "from_idx": "1", "to_idx": 4.0, "context_idx": []},'
     ' {"subtitle": "b", "from_idx": "[5]", "to_idx": " 8 ", "context_idx": ["2"]}]}',
     EXPECTED, ["from_idx given as str", "to_idx given as float", "context_idx item given as str"]),
    ("context null, missing, int, comma string", Stage3Answer,
     seg_json('{"subtitle": "a", "from_idx": 1, "to_idx": 2, "context_idx": null}',
              '{"subtitle": "b", "from_idx": 3, "to_idx": 4}',
              '{"subtitle": "c", "from_idx": 5, "to_idx": 6, "context_idx": 2}',
              '{"subtitle": "d", "from_idx": 7, "to_idx": 8, "context_idx": "3, 5"}'),
     [(1, 2, []), (3, 4, []), (5, 6, [2]), (7, 8, [3, 5])],
     ["context_idx missing or null", "single number", "given as text", "bare list"]),
    ("context ranges", Stage3Answer,
     seg_json('{"from_idx": 1, "to_idx": 4, "context_idx": "6-8"}',
              '{"from_idx": 5, "to_idx": 8, "context_idx": ["1 - 2", 3, "3 to 4"]}'),
     [(1, 4, [6, 7, 8]), (5, 8, [1, 2, 3, 3, 4])], ["expanded as a range"]),
    ("swapped range", Stage3Answer,
     seg_json('{"from_idx": 4, "to_idx": 1}', '{"from_idx": 5, "to_idx": 8, "context_idx": [2]}'),
     EXPECTED, ["swapped"]),
    ("bare list of segments", LiteAnswer, json.dumps(GOOD_STAGE3["segments"]), EXPECTED, ["bare list"]),
    ("flat lite answer", LiteAnswer,
     json.dumps({"step_1_events": "e", "step_2_threads": "t", **GOOD_STAGE3}), EXPECTED,
     ["moved top-level step_1_events into 'step1'", "into 'step3'"]),
    ("lite with step3 as a list", LiteAnswer,
     json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                 "step3": GOOD_STAGE3["segments"]}), EXPECTED, ["step3 given as a bare list"]),
    ("lite without steps 1 and 2", LiteAnswer, json.dumps({"step3": GOOD_STAGE3}), EXPECTED,
     ["step1 missing", "step2 missing"]),
    ("segments under the wrong step", LiteAnswer,
     json.dumps({"step1": {"step_1_events": "e"},
                 "step2": {"step_2_threads": "t", "segments": GOOD_STAGE3["segments"]}}),
     EXPECTED, ["took segments from step2.segments instead of step3.segments"]),
    ("wrapped in answer key", Stage3Answer, json.dumps({"answer": GOOD_STAGE3}), EXPECTED, ["unwrapped"]),
    ("one-element list", Stage3Answer, json.dumps([GOOD_STAGE3]), EXPECTED, ["one-element list"]),
    ("key aliases", Stage3Answer,
     seg_json('{"title": "a", "start": 1, "end": 4}', '{"From_Idx": 5, "to": 8, "context": [2]}'),
     EXPECTED, ["read 'start' as 'from_idx'", "read 'From_Idx' as 'from_idx'"]),
    ("several objects, the valid one wins", Stage3Answer,
     'Draft: {"segments": [{"from_idx": "x"}]}\nFinal: ' + json.dumps(GOOD_STAGE3), EXPECTED,
     ["JSON values in the reply"]),
    ("several objects, the largest valid wins", Stage3Answer,
     json.dumps({"segments": [{"from_idx": 1, "to_idx": 8}]}) + "\n" + json.dumps(GOOD_STAGE3), EXPECTED,
     ["JSON values in the reply"]),
    ("extra keys ignored", Stage3Answer,
     json.dumps({**GOOD_STAGE3, "confidence": 0.8, "segments": [dict(s, score=1) for s in GOOD_STAGE3["segments"]]}),
     EXPECTED, []),
]


@pytest.mark.parametrize("case_id,model,text,expected,note_parts", CASES, ids=[c[0] for c in CASES])
def test_leniencies(case_id: str, model: type, text: str, expected: list[tuple], note_parts: list[str]) -> None:
    result = parse_answer(text, model)
    assert result.ok, result.errors
    assert result.errors == []
    assert [(s.from_idx, s.to_idx, s.context_idx) for s in result.segments] == expected
    joined = " | ".join(result.notes)
    for part in note_parts:
        assert part in joined, (part, result.notes)
    assert result.strict_ok == (not result.notes)
    if not note_parts and case_id.startswith("exact"):
        assert result.strict_ok


def test_exact_answer_keeps_reasoning_fields() -> None:
    result = parse_answer(json.dumps(GOOD_LITE), LiteAnswer)
    assert result.strict_ok
    answer = result.value
    assert isinstance(answer, LiteAnswer)
    assert (answer.step1.step_1_events, answer.step2.step_2_threads) == ("e", "t")
    assert answer.step3.step_3_turning_points[0].type == "setback"
    assert result.raw == GOOD_LITE


@pytest.mark.parametrize("text", ["", "   ", "I cannot segment this text.", "[1] [2] [3]", "null", "42",
                                  '"just a string"'])
def test_nothing_usable_is_a_parse_or_schema_error(text: str) -> None:
    result = parse_answer(text, Stage3Answer)
    assert result.value is None
    assert result.errors and {e.code for e in result.errors} <= {IssueCode.PARSE_ERROR, IssueCode.SCHEMA_ERROR}
    assert result.segments == []


def test_missing_required_field_is_a_schema_error() -> None:
    result = parse_answer('{"chapter_title": "I"}', Stage3Answer)
    assert result.value is None
    assert [e.code for e in result.errors] == [IssueCode.SCHEMA_ERROR]
    assert "segments" in result.errors[0].message


def test_unusable_segments_are_dropped_and_reported() -> None:
    text = seg_json('{"from_idx": 1, "to_idx": 4}', '{"from_idx": "Integer start index", "to_idx": 8}',
                    '"not an object"', '{"from_idx": 5}', '{"from_idx": true, "to_idx": 8}',
                    '{"from_idx": 2.5, "to_idx": 8}')
    result = parse_answer(text, Stage3Answer)
    assert result.ok and not result.strict_ok
    assert [s.span for s in result.segments] == [(1, 4)]
    assert [(e.code, e.segment) for e in result.errors] == [(IssueCode.SEGMENT_MALFORMED, k) for k in (1, 2, 3, 4, 5)]
    assert "to_idx missing" in result.errors[2].message


def test_template_echo_yields_no_segments() -> None:
    # A small model copying the prompt's field explanations instead of numbers.
    echo = {"segments": [{"subtitle": "<short title>", "from_idx": "<first index>",
                          "to_idx": "<last index>", "context_idx": "<helpful indices>"}]}
    result = parse_answer(json.dumps(echo), Stage3Answer)
    assert result.segments == []
    assert [e.code for e in result.errors] == [IssueCode.SEGMENT_MALFORMED]


def test_junk_context_items_dropped_with_note() -> None:
    text = seg_json('{"from_idx": 1, "to_idx": 8, "context_idx": [2, "x", null, [3, 4], "1-999999999"]}')
    result = parse_answer(text, Stage3Answer)
    assert result.segments[0].context_idx == [2, 3, 4]
    joined = " | ".join(result.notes)
    assert "'x' is not an index" in joined and "nested lists" in joined and "'1-999999999'" in joined


def test_repeated_notes_are_counted() -> None:
    text = seg_json(*[f'{{"from_idx": "{k}", "to_idx": {k}}}' for k in range(1, 6)])
    notes = parse_answer(text, Stage3Answer).notes
    assert "segments[*].from_idx given as str; read as integer (x5)" in " | ".join(notes)


@pytest.mark.parametrize("value,expected", [("events", "events"), (["a", "b"], "a\nb"),
                                            ([{"event": "x"}], '{"event": "x"}'), (7, "7")])
def test_stage_text_fields(value: object, expected: str) -> None:
    result = parse_answer(json.dumps({"step_1_events": value}), Stage1Answer)
    assert result.ok and result.value.step_1_events == expected
    assert result.strict_ok == isinstance(value, str)


def test_stage2_and_ablation_shapes() -> None:
    assert parse_answer('{"step_2_threads": "A and B"}', Stage2Answer).value.step_2_threads == "A and B"
    flat = {"step_2_threads": "t", "step_3_turning_points": [], "chapter_title": "I",
            "segments": GOOD_STAGE3["segments"]}
    result = parse_answer(json.dumps(flat), LiteAnswerNoStep1)
    assert [s.span for s in result.segments] == [(1, 4), (5, 8)]
    assert result.value.step2.step_2_threads == "t"
    no_theory = parse_answer(json.dumps({"segments": GOOD_STAGE3["segments"]}), LiteAnswerNoTheory)
    assert no_theory.ok and len(no_theory.segments) == 2


def test_turning_point_with_wrong_shape_is_dropped_not_fatal() -> None:
    answer = dict(GOOD_STAGE3, step_3_turning_points=["a plain string", {"type": "climax", "description": "d"}])
    result = parse_answer(json.dumps(answer), Stage3Answer)
    assert result.ok and [t.type for t in result.value.step_3_turning_points] == ["climax"]


def test_non_string_input_is_refused() -> None:
    with pytest.raises(TypeError):
        parse_answer(None, Stage3Answer)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["[" * 5000 + "{" * 5000, '{"a":' * 3000 + "1" + "}" * 3000,
                                  '{"segments": ' + "[" * 3000, "[a] " * 3000])
def test_pathological_text_is_refused_quickly(text: str) -> None:
    result = parse_answer(text, Stage3Answer)
    assert result.value is None
    assert result.errors[0].code in (IssueCode.PARSE_ERROR, IssueCode.SCHEMA_ERROR)
