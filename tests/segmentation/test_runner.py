"""The validate-retry-fallback loop, driven by scripted model replies."""

from __future__ import annotations

import json

import pytest

from litseg.llm.base import Completion
from litseg.segmentation.repair import RepairKind
from litseg.segmentation.runner import CUT_OFF_NOTICE, damage, segment_with_retries
from litseg.segmentation.schema import LiteAnswer, Stage3Answer, answer_segments
from litseg.segmentation.validation import IssueCode, validate_segments

N = 10
WORDS = [5] * N
MESSAGES = [{"role": "system", "content": "segment"}, {"role": "user", "content": "[1] ... [10] ..."}]


class ScriptedModel:
    """Answers each call with the next scripted completion and keeps the conversations seen."""

    def __init__(self, *replies: str | Completion) -> None:
        self.replies = [r if isinstance(r, Completion) else Completion(text=r, prompt_tokens=100,
                                                                        completion_tokens=20, seconds=0.5)
                        for r in replies]
        self.seen: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> Completion:
        self.seen.append(messages)
        return self.replies[len(self.seen) - 1]


def lite(*ranges: tuple) -> str:
    segments = [{"subtitle": f"part {k}", "from_idx": r[0], "to_idx": r[1],
                 "context_idx": list(r[2]) if len(r) > 2 else []} for k, r in enumerate(ranges)]
    return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                       "step3": {"chapter_title": "I", "step_3_turning_points": [], "segments": segments}})


def run(model: ScriptedModel, **kw):
    kw.setdefault("max_retries", 2)
    kw.setdefault("fallback", "pieces")
    return segment_with_retries(model, MESSAGES, n=N, answer_model=LiteAnswer, sentence_words=WORDS,
                                max_fallback_words=20, **kw)


def test_valid_first_answer_needs_one_try() -> None:
    model = ScriptedModel(lite((1, 4), (5, 10, [2])))
    out = run(model)
    assert [s.span for s in out.segments] == [(1, 4), (5, 10)]
    d = out.diagnostics
    assert (d.tries, d.chosen_attempt, d.fallback, d.first_try_valid) == (1, 0, "none", True)
    assert d.repairs == [] and d.attempts[0].issues == [] and d.attempts[0].valid
    assert model.seen == [MESSAGES]
    assert isinstance(out.answer, LiteAnswer) and out.text == model.replies[0].text
    assert (d.prompt_tokens, d.completion_tokens, d.seconds) == (100, 20, 0.5)


def test_invalid_answer_is_retried_with_feedback() -> None:
    model = ScriptedModel(lite((1, 4), (7, 10)), lite((1, 6), (7, 10)))
    out = run(model)
    d = out.diagnostics
    assert d.tries == 2 and d.chosen_attempt == 1 and d.fallback == "none"
    assert d.attempts[0].issue_codes == ["uncovered"] and not d.attempts[0].valid
    retry_conversation = model.seen[1]
    assert retry_conversation[:2] == MESSAGES
    assert retry_conversation[2] == {"role": "assistant", "content": model.replies[0].text}
    assert retry_conversation[3]["role"] == "user" and "sentences 5-6" in retry_conversation[3]["content"]
    assert out.messages == retry_conversation
    assert [s.span for s in out.segments] == [(1, 6), (7, 10)]
    assert (d.prompt_tokens, d.completion_tokens) == (200, 40)


def test_retries_exhausted_best_attempt_is_repaired() -> None:
    worst = lite((1, 2))  # 8 sentences uncovered
    better = lite((1, 4), (6, 10))  # one sentence uncovered
    model = ScriptedModel(worst, better, "not json at all")
    out = run(model)
    d = out.diagnostics
    assert d.tries == 3 and d.chosen_attempt == 1 and d.fallback == "repair"
    assert [s.span for s in out.segments] == [(1, 5), (6, 10)]
    assert [r.kind for r in d.repairs] == [RepairKind.FILLED_GAP]
    assert d.attempts[2].issue_codes == ["parse_error"] and not d.attempts[2].parsed
    assert out.text == better


def test_nothing_readable_splits_the_whole_unit() -> None:
    model = ScriptedModel("Sorry, I can't.", "```json\n{\"oops\": 1}\n```")
    out = run(model, max_retries=1)
    d = out.diagnostics
    assert d.fallback == "whole_unit" and d.chosen_attempt is None and out.answer is None
    assert [s.span for s in out.segments] == [(1, 4), (5, 8), (9, 10)]  # 5 words each, cap 20
    assert "no readable answer in 2 tries" in d.notes[0]
    assert validate_segments(out.segments, N) == []


def test_empty_answer_is_not_preferred_to_a_partial_one() -> None:
    model = ScriptedModel(lite((1, 6)), lite())
    out = run(model, max_retries=1)
    assert out.diagnostics.chosen_attempt == 0 and out.diagnostics.fallback == "repair"
    assert [s.span for s in out.segments] == [(1, 10)]


def test_answer_without_segments_falls_back_to_whole_unit() -> None:
    model = ScriptedModel(lite(), lite((20, 30)))
    out = run(model, max_retries=1)
    assert out.diagnostics.fallback == "whole_unit"
    assert [r.kind for r in out.diagnostics.repairs][-1] is RepairKind.WHOLE_UNIT
    assert [s.span for s in out.segments] == [(1, 4), (5, 8), (9, 10)]


def test_backend_error_counts_as_a_failed_try() -> None:
    model = ScriptedModel(Completion(text="", error="timeout after 3 retries", seconds=30.0), lite((1, 10)))
    out = run(model)
    d = out.diagnostics
    assert d.tries == 2 and d.chosen_attempt == 1 and d.fallback == "none"
    assert d.attempts[0].error == "timeout after 3 retries"
    assert d.attempts[0].issue_codes == [IssueCode.BACKEND_ERROR.value]
    assert model.seen[1] == MESSAGES  # the same request again, no feedback turn
    assert d.seconds == pytest.approx(30.5)


def test_all_tries_failing_at_the_backend() -> None:
    model = ScriptedModel(*[Completion(text="", error="down") for _ in range(3)])
    out = run(model)
    assert out.diagnostics.tries == 3 and out.diagnostics.fallback == "whole_unit"


def test_no_retries_means_one_call() -> None:
    model = ScriptedModel(lite((2, 10)))
    out = run(model, max_retries=0)
    assert out.diagnostics.tries == 1 and out.diagnostics.fallback == "repair"
    assert [s.span for s in out.segments] == [(1, 10)]


def test_cosmetic_issues_do_not_cause_a_retry() -> None:
    model = ScriptedModel(lite((6, 10), (1, 5, [3])))
    out = run(model)
    d = out.diagnostics
    assert d.tries == 1 and d.fallback == "none" and d.attempts[0].valid
    assert set(d.attempts[0].issue_codes) == {"out_of_order", "context_redundant"}
    assert {r.kind for r in d.repairs} == {RepairKind.SORTED, RepairKind.DROPPED_CONTEXT}
    assert [s.span for s in out.segments] == [(1, 5), (6, 10)]


def test_truncated_reply_is_noted_and_used() -> None:
    full = lite((1, 5), (6, 10))
    cut = full[: full.index('"part 1"') + 3]
    model = ScriptedModel(Completion(text=cut, finish_reason="length"), full)
    out = run(model)
    first = out.diagnostics.attempts[0]
    assert "reply cut at the token limit" in first.notes and first.parsed and not first.valid
    assert out.diagnostics.chosen_attempt == 1
    assert model.seen[1][-1]["content"].endswith(CUT_OFF_NOTICE)


def test_stage3_with_custom_extractor_and_feedback() -> None:
    reply = json.dumps({"chapter_title": "I", "step_3_turning_points": [],
                        "segments": [{"subtitle": "a", "from_idx": 1, "to_idx": 3, "context_idx": []}]})
    fixed = reply.replace('"to_idx": 3', '"to_idx": 10')
    model = ScriptedModel(reply, fixed)
    seen_feedback = []

    def feedback(issues, n):
        seen_feedback.append([i.code for i in issues])
        return "please fix"

    out = segment_with_retries(model, MESSAGES, n=N, answer_model=Stage3Answer, sentence_words=WORDS,
                               max_fallback_words=50, extract_segments=answer_segments, feedback=feedback, fallback="pieces", max_retries=2)
    assert seen_feedback == [[IssueCode.LAST_NOT_N, IssueCode.UNCOVERED]]
    assert model.seen[1][-1] == {"role": "user", "content": "please fix"}
    assert [s.span for s in out.segments] == [(1, 10)]


def test_diagnostics_serialise_to_json() -> None:
    model = ScriptedModel(lite((1, 4)), Completion(text="", error="boom"), "[]")
    out = run(model)
    d = json.loads(json.dumps(out.diagnostics.to_dict()))
    assert d["tries"] == 3 and d["fallback"] == "repair" and d["first_try_valid"] is False
    assert d["attempts"][0]["issue_codes"] == ["last_not_n", "uncovered"]
    assert d["repairs"][0]["kind"] == "filled_gap"


def test_damage_weighs_uncovered_sentences() -> None:
    from litseg.segmentation.schema import Segment

    small_gap = validate_segments([Segment(from_idx=1, to_idx=9)], N)
    big_gap = validate_segments([Segment(from_idx=1, to_idx=2)], N)
    empty = validate_segments([], N)
    assert damage(small_gap, N) < damage(big_gap, N) < damage(empty, N)
    assert damage(validate_segments([Segment(from_idx=1, to_idx=10)], N), N) == 0


@pytest.mark.parametrize("kw,match", [
    ({"n": 0}, "at least one sentence"),
    ({"sentence_words": [1, 2]}, "sentence_words"),
    ({"max_retries": -1}, "max_retries"),
])
def test_bad_arguments(kw: dict, match: str) -> None:
    args = {"n": N, "answer_model": LiteAnswer, "sentence_words": WORDS, "max_fallback_words": 20, "fallback": "pieces",
            "max_retries": 2}
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        segment_with_retries(ScriptedModel(lite((1, 10))), MESSAGES, **args)
