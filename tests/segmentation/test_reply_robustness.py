"""Issue 12: one reply can neither crash a run nor make it do unbounded work.

Each test here is a finding of the outside fuzz of the output contract (or of the run around
it) and failed before the fix: over-long integers escaping the parser (and the retry loop, and
the format reward), unknown keys passing as strictly valid, echoed sentence numbers hiding the
answer, a minus sign lost by json_repair, a huge correction request, lone surrogates crashing
the run store (again on every cached rerun), and super-linear work on a few pathological
replies. The work bounds themselves (every reply up to 1 MB in under 1 s) are measured by
``benchmarks/reply_bounds.py`` (docs/robustness.md); the CPU-time guards below only catch a
return of the old blow-ups (minutes of CPU), with margins of a hundredfold and more.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from litseg.llm.base import ChatRequest, Completion
from litseg.llm.cache import CachedChatModel, ReplayChatModel, cache_key
from litseg.llm.testing import ScriptedChatModel
from litseg.annotation.export import export_runs, iter_export_rows
from litseg.annotation.store import CHUNKS, LEDGER, RunStore
from litseg.utils.jsonl import read_jsonl
from litseg.segmentation import parsing
from litseg.segmentation.parsing import MAX_REPLY_CHARS, extract, limits, parse_answer
from litseg.segmentation.repair import repair_segments
from litseg.segmentation.runner import segment_with_retries
from litseg.segmentation.schema import LiteAnswer, Segment, Stage3Answer
from litseg.segmentation.textsafe import clean_text, clean_value
from litseg.segmentation.validation import (
    MAX_SPREAD,
    IssueCode,
    feedback_message,
    overlap_stats,
    spread,
    validate_segments,
)
from litseg.training.rewards import format_score

HUGE = "9" * 5000  # past Python's 4,300-digit limit for int <-> str conversion


def stage3(segments: Any) -> str:
    body = segments if isinstance(segments, str) else json.dumps(segments)
    return '{"chapter_title": "c", "step_3_turning_points": [], "segments": ' + body + "}"


VALID = stage3([{"subtitle": "a", "from_idx": 1, "to_idx": 4, "context_idx": []},
                {"subtitle": "b", "from_idx": 5, "to_idx": 8, "context_idx": [2]}])


def cpu_seconds(fn: Callable[[], Any]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def no_internal_error(result: parsing.ParseResult) -> None:
    assert not any("internal parser error" in n for n in result.notes), result.notes


# ------------------------------------------------------------------------------------------
# Over-long integers


@pytest.mark.parametrize("where,text", [
    ("number", stage3('[{"from_idx": ' + HUGE + ', "to_idx": 4}, {"from_idx": 5, "to_idx": 8}]')),
    ("string", stage3('[{"from_idx": "' + HUGE + '", "to_idx": 4}, {"from_idx": 5, "to_idx": 8}]')),
    ("range string", stage3('[{"from_idx": 1, "to_idx": 4, "context_idx": "1-' + HUGE + '"}, '
                            '{"from_idx": 5, "to_idx": 8}]')),
    ("bracketed item in prose", "Sentence [" + HUGE + "] matters. " + VALID),
    ("broken JSON", stage3('[{from_idx: ' + HUGE + ', to_idx: 4}, {"from_idx": 5, "to_idx": 8}')),
])
def test_overlong_integers_are_unusable_values_not_crashes(where: str, text: str) -> None:
    result = parse_answer(text, Stage3Answer, n=8)
    no_internal_error(result)
    assert result.ok, result.errors
    assert (5, 8) in [s.span for s in result.segments]
    for s in result.segments:
        assert abs(s.from_idx) < 10**100 and all(abs(c) < 10**100 for c in s.context_idx)
    if where in ("number", "string"):
        assert [e.code for e in result.errors] == [IssueCode.SEGMENT_MALFORMED]
        assert len(result.errors[0].message) < 200


def test_retry_loop_asks_again_after_an_overlong_integer() -> None:
    replies = iter([Completion(text=stage3('[{"from_idx": 1, "to_idx": ' + HUGE + "}]")), Completion(text=VALID)])
    out = segment_with_retries(lambda messages: next(replies), [{"role": "user", "content": "go"}], n=8,
                               answer_model=Stage3Answer, sentence_words=[3] * 8, max_fallback_words=10, fallback="pieces", max_retries=2)
    assert out.diagnostics.tries == 2 and out.diagnostics.chosen_attempt == 1
    assert out.diagnostics.fallback == "none"
    assert [s.span for s in out.segments] == [(1, 4), (5, 8)]


def test_format_reward_scores_an_overlong_integer_reply() -> None:
    score = format_score(stage3('[{"from_idx": 1, "to_idx": ' + HUGE + "}]"), 8, "stage3")
    assert 0.0 <= score.total < 1.0
    assert score.checks["indices"] == 0.0


# ------------------------------------------------------------------------------------------
# Unknown keys, aliases, duplicates


def test_unknown_keys_are_noted_and_cost_the_strict_schema_credit() -> None:
    text = stage3([{"subtitle": "a", "from_idx": 1, "to_idx": 8, "context_idx": [], "confidence": 0.9}])
    result = parse_answer(text, Stage3Answer)
    assert result.ok and not result.strict_ok
    assert any("unknown key 'confidence'" in n for n in result.notes), result.notes
    clean = format_score(stage3([{"subtitle": "a", "from_idx": 1, "to_idx": 8, "context_idx": []}]), 8, "stage3")
    extra = format_score(text, 8, "stage3")
    assert clean.checks["schema"] == 1.0 and extra.checks["schema"] < 1.0


def test_alias_colliding_with_the_real_key_is_noted() -> None:
    result = parse_answer(stage3('[{"from_idx": 1, "from": 3, "to_idx": 8}]'), Stage3Answer)
    assert result.segments[0].span == (1, 8)
    assert any("given under two names" in n for n in result.notes), result.notes


def test_duplicate_keys_are_noted() -> None:
    result = parse_answer(stage3('[{"from_idx": 3, "from_idx": 1, "to_idx": 8}]'), Stage3Answer)
    assert result.segments[0].span == (1, 8) and not result.strict_ok
    assert any("duplicate key" in n for n in result.notes), result.notes


# ------------------------------------------------------------------------------------------
# Readability


def test_sixty_four_echoed_sentence_numbers_do_not_hide_the_answer() -> None:
    echo = " ".join(f"[{k}] The keeper lit the lamp." for k in range(1, 80))
    result = parse_answer(echo + "\n" + VALID, Stage3Answer, n=8)
    assert result.ok and [s.span for s in result.segments] == [(1, 4), (5, 8)]
    assert result.errors == []


@pytest.mark.parametrize("text,expected", [
    ("[{\nfrom_idx:  -1,to_idx:  5}]", (-1, 5)),
    ('{"segments": [{  from_idx: -1,to_idx: 2 }]}', (-1, 2)),
    ("{segments: [{from_idx: 5,to_idx: -2}]}", (-2, 5)),  # swapped, sign kept: still invalid
])
def test_minus_sign_after_a_bare_key_is_kept(text: str, expected: tuple[int, int]) -> None:
    result = parse_answer(text, Stage3Answer)
    assert [s.span for s in result.segments] == [expected]
    codes = {i.code for i in validate_segments(result.segments, 8)}
    assert IssueCode.RANGE_OUT_OF_BOUNDS in codes


def test_a_huge_bad_value_gives_a_short_correction_request() -> None:
    text = stage3([{"subtitle": "a", "from_idx": "x" * 200_000, "to_idx": 8},
                   {"subtitle": "b", "from_idx": 1, "to_idx": 8, "context_idx": "y" * 200_000}])
    result = parse_answer(text, Stage3Answer, n=8)
    issues = list(result.errors) + validate_segments(result.segments, 8)
    assert len(feedback_message(issues, 8)) < 3000
    assert sum(len(n) for n in result.notes) < 3000
    many = validate_segments([Segment(from_idx=1, to_idx=8, context_idx=list(range(-50_000, 0, 2)))], 8)
    assert len(feedback_message(many, 8)) < 3000


def test_reply_over_the_cap_is_read_up_to_the_cap() -> None:
    result = parse_answer(VALID + " " + "x" * MAX_REPLY_CHARS, Stage3Answer)
    assert result.ok and any("only the first" in n for n in result.notes)


def test_context_ranges_expand_inside_the_unit_only() -> None:
    result = parse_answer(stage3([{"from_idx": 1, "to_idx": 4, "context_idx": "1-9999 1-9999 1-9999"},
                                  {"from_idx": 5, "to_idx": 8, "context_idx": "0-3, 20-30"}]), Stage3Answer, n=8)
    first, second = result.segments
    assert len(first.context_idx) == 3 * 9  # 1..8 and the out-of-unit end 9999, three times
    assert second.context_idx == [0, 1, 2, 3, 20, 30]
    outside = [i for i in validate_segments(result.segments, 8) if i.code is IssueCode.CONTEXT_OUT_OF_BOUNDS]
    assert [i.indices for i in outside] == [(9999,), (0, 20, 30)]


def test_notes_and_malformed_entries_are_capped() -> None:
    entries = [{"from_idx": f"junk {k}", "to_idx": 1, f"extra_{k}": 1} for k in range(500)]
    result = parse_answer(stage3(entries), Stage3Answer)
    assert len(result.notes) <= limits.MAX_NOTE_KINDS + 3
    assert len(result.errors) == limits.MAX_MALFORMED + 1
    assert "480 more segment entries" in result.errors[-1].message


# ------------------------------------------------------------------------------------------
# Bounded work (regression guards; the targets are measured by benchmarks/reply_bounds.py)


def test_json_repair_gets_a_bounded_share_of_a_pathological_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = extract.json_repair.loads

    def counting(text: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(text))
        return real(text, *args, **kwargs)

    monkeypatch.setattr(extract.json_repair, "loads", counting)
    for reply in ("{" * 1_000_000, "{a b} " * 150_000, '{"a": ' * 100_000, VALID[:-10] * 2):
        calls.clear()
        parse_answer(reply, Stage3Answer)
        assert len(calls) <= limits.MAX_MENDS and sum(calls) <= limits.MAX_MEND_CHARS


@pytest.mark.parametrize("name,reply", [
    ("100k unclosed <think> tags", "<think>" * 100_000 + VALID),
    ("1 MB of '{'", "{" * 1_000_000),
    ("150k broken objects", "{a b} " * 150_000 + VALID),
    ("40 characters that expand to 50k context indices",
     stage3([{"from_idx": 1, "to_idx": 8, "context_idx": "1-9999 1-9999 1-9999 1-9999 1-9999"}])),
])
def test_pathological_replies_take_no_super_linear_time(name: str, reply: str) -> None:
    # Before the fix: 443 s, 78 s, minutes, and 40 s per validation.
    def run() -> None:
        result = parse_answer(reply, Stage3Answer)
        no_internal_error(result)
        validate_segments(result.segments, 8)

    assert cpu_seconds(run) < 10.0


def test_validation_of_fifty_thousand_context_indices_is_linear() -> None:
    segment = Segment(from_idx=1, to_idx=8, context_idx=[c % 9999 + 1 for c in range(50_000)])
    assert cpu_seconds(lambda: validate_segments([segment] * 4, 10_000)) < 10.0  # was 160 s


def test_overlap_is_capped_so_one_answer_cannot_make_the_output_quadratic() -> None:
    n = 300
    # 20,000 distinct, heavily overlapping ranges, each naming 29 context sentences.
    segments = [Segment(from_idx=1 + i % n, to_idx=min(n, 1 + i % n + i // n), context_idx=list(range(1, 30)))
                for i in range(20_000)]
    assert [i.code for i in validate_segments(segments, n) if i.blocking] == [IssueCode.SPREAD_LIMIT] * 2
    fixed: list[Segment] = []

    def run() -> None:
        fixed.extend(repair_segments(segments, n)[0])

    assert cpu_seconds(run) < 10.0
    assert validate_segments(fixed, n) == []
    main, context = spread(fixed, n)
    assert main <= MAX_SPREAD * n and context <= MAX_SPREAD * n
    # A long unit answered with every prefix range: without the limit, n chunks of the whole unit.
    prefixes = [Segment(from_idx=1, to_idx=k) for k in range(n, 0, -1)]
    kept = repair_segments(prefixes, n)[0]
    assert spread(kept, n)[0] <= MAX_SPREAD * n and validate_segments(kept, n) == []


def test_moderate_overlap_within_the_limit_is_left_alone() -> None:
    segments = [Segment(from_idx=1, to_idx=6, context_idx=[8]), Segment(from_idx=1, to_idx=8),
                Segment(from_idx=3, to_idx=8, context_idx=[1, 2])]
    assert validate_segments(segments, 8) == []
    assert repair_segments(segments, 8)[1] == []


# ------------------------------------------------------------------------------------------
# Text a file cannot hold


@pytest.mark.parametrize("escape", ["\\ud83d", "\\ud83d\\ude0", "\\udc00x", "\\u0000", "\\u001b[31m"])
def test_lone_surrogates_and_controls_in_a_reply_are_cleaned_with_a_note(escape: str) -> None:
    text = stage3('[{"subtitle": "storm ' + escape + '", "from_idx": 1, "to_idx": 8}]')
    result = parse_answer(text, Stage3Answer)
    subtitle = result.segments[0].subtitle
    subtitle.encode("utf-8")  # would raise on a lone surrogate
    assert not any(ord(c) < 32 for c in subtitle)
    assert any("surrogate or control" in n for n in result.notes), result.notes


def test_clean_helpers_keep_pairs_and_count_changes() -> None:
    assert clean_text("a\U0001F600b") == ("a\U0001F600b", 0)
    assert clean_text("a\ud83d\ude00b")[0] == "a\U0001F600b"
    assert clean_text("x\ud83dy\x00z") == ("x\ufffdyz", 2)
    value, changes = clean_value({"k\ud800": ["\x07", {"n": 10**5000}], "ok": "fine"})
    assert value == {"k\ufffd": ["", {"n": value["k\ufffd"][1]["n"]}], "ok": "fine"}
    assert value["k\ufffd"][1]["n"].startswith("<integer of about 5001 digits") and changes == 3


def test_store_never_crashes_on_content_and_notes_what_it_replaced(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run", durable=False) as store:
        store.commit_unit("k1", [{"chunk_id": "c1", "subtitle": "emoji \ud83d cut", "n": 10**5000}],
                          [{"idx": 1, "text": "ok"}], {"book_id": "b", "unit_id": "u", "notes": ["x\udc00"]})
    chunk = read_jsonl(tmp_path / "run" / CHUNKS)[0]
    assert chunk["subtitle"] == "emoji \ufffd cut" and chunk["n"].startswith("<integer")
    ledger = read_jsonl(tmp_path / "run" / LEDGER)[0]
    assert ledger["notes"] == ["x\ufffd"]
    assert any(CHUNKS in n for n in ledger["storage_notes"]) and any(LEDGER in n for n in ledger["storage_notes"])
    with RunStore(tmp_path / "run", durable=False) as again:  # reopens cleanly: nothing torn
        assert again.is_done("k1") and again.recovered == {}


def test_export_repairs_rows_an_older_version_wrote_with_surrogate_escapes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with RunStore(run, durable=False) as store:
        store.commit_unit("k1", [{"chunk_id": "c1", "book_id": "b", "unit_id": "u", "subtitle": "plain",
                                  "main_spans": [[0, 1]], "context_spans": []}],
                          [{"idx": 1, "text": "ok"}], {"book_id": "b", "unit_id": "u", "unit_index": 0})
    # An older writer escaped a lone surrogate: valid JSON, but not text UTF-8 can hold.
    raw = (run / CHUNKS).read_bytes().replace(b'"plain"', b'"pl\\ud83dain"')
    (run / CHUNKS).write_bytes(raw)
    ledger = json.loads((run / LEDGER).read_text())
    ledger["offsets"][CHUNKS][1] = len(raw)
    (run / LEDGER).write_text(json.dumps(ledger) + "\n")
    manifest = export_runs([run], tmp_path / "export")
    assert manifest["tables"]["chunks"]["repaired_rows"] == 1
    assert [r["subtitle"] for r in iter_export_rows(tmp_path / "export")] == ["pl\ufffdain"]


def test_cache_stores_and_replays_a_lone_surrogate_exactly(tmp_path: Path) -> None:
    reply = Completion(text='{"subtitle": "\ud83d"} and \udc00', finish_reason="length")
    inner = ScriptedChatModel([reply])
    cached = CachedChatModel(inner, tmp_path / "c.sqlite")
    request = ChatRequest(messages=[{"role": "assistant", "content": "echo \ud83d"}], max_tokens=8)
    assert cached.chat(request).text == reply.text
    assert cached.chat(request).from_cache and cached.chat(request).text == reply.text
    replay = ReplayChatModel(tmp_path / "c.sqlite", inner.identity())
    assert replay.chat(request).text == reply.text
    plain = ChatRequest(messages=[{"role": "user", "content": "caf\u00e9"}], max_tokens=8)
    assert len(cache_key(inner.identity(), plain)) == 64  # unchanged hashing of valid text


def test_overlap_is_allowed_and_counted() -> None:
    segments = [Segment(from_idx=1, to_idx=5), Segment(from_idx=4, to_idx=8), Segment(from_idx=4, to_idx=4)]
    assert validate_segments(segments, 8) == []
    assert overlap_stats(segments, 8) == {"sentences_in_several_ranges": 2, "overlap_share": 0.25,
                                          "max_ranges_per_sentence": 3}
    replies = iter([Completion(text=stage3([{"from_idx": 1, "to_idx": 5}, {"from_idx": 4, "to_idx": 8}]))])
    out = segment_with_retries(lambda m: next(replies), [{"role": "user", "content": "go"}], n=8,
                               answer_model=Stage3Answer, sentence_words=[3] * 8, max_fallback_words=10, fallback="pieces", max_retries=2)
    assert out.diagnostics.to_dict()["overlap"]["overlap_share"] == 0.25


def test_lite_answer_with_every_kind_of_bad_string_stays_readable() -> None:
    text = ('{"step1": {"step_1_events": "a\\u0000b"}, "step2": {"step_2_threads": "\\ud83d"}, "step3": '
            + stage3([{"subtitle": "x\\udfff", "from_idx": 1, "to_idx": 8}]) + "}")
    result = parse_answer(text, LiteAnswer)
    assert result.ok
    dumped = json.dumps(result.value.model_dump(), ensure_ascii=False)
    dumped.encode("utf-8")
    assert "\\u0000" not in dumped


def test_export_reads_back_text_with_unicode_line_separators(tmp_path: Path) -> None:
    # Found by the widened property suite: JSON keeps U+2028 and U+0085 unescaped, and reading a
    # unit's rows back by byte range split lines at them (str.splitlines), so export crashed.
    run = tmp_path / "run"
    text = "one\u2028two\x85three\x1cfour"
    with RunStore(run, durable=False) as store:
        store.commit_unit("k1", [{"chunk_id": "c1", "book_id": "b", "unit_id": "u", "main_text": text,
                                  "main_spans": [[0, len(text)]], "context_spans": []}],
                          [{"idx": 1, "text": text}], {"book_id": "b", "unit_id": "u", "unit_index": 0})
    export_runs([run], tmp_path / "export")
    assert [r["main_text"] for r in iter_export_rows(tmp_path / "export")] == [text]
