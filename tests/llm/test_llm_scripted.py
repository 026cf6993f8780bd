"""ScriptedChatModel, the stand-in model every other test uses."""

from __future__ import annotations

import pytest

from litseg.llm.base import ChatRequest, Completion
from litseg.llm.testing import ScriptedChatModel, ScriptExhausted


def req(text: str = "q", **kw) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], **kw)


def test_answers_in_order_and_records_requests() -> None:
    model = ScriptedChatModel(["one", "two"])
    assert [model.chat(req("a")).text, model.chat(req("b")).text] == ["one", "two"]
    assert [r.messages[0]["content"] for r in model.requests] == ["a", "b"]
    assert model.remaining == 0
    with pytest.raises(ScriptExhausted, match="all 2 scripted answers are used"):
        model.chat(req("c"))


def test_cycle_restarts_the_list() -> None:
    model = ScriptedChatModel(["x", "y"], cycle=True)
    assert [model.chat(req()).text for _ in range(5)] == ["x", "y", "x", "y", "x"]


def test_function_answers_from_the_request() -> None:
    model = ScriptedChatModel(lambda r: r.messages[-1]["content"].upper())
    assert model.chat_batch([req("ab"), req("cd")])[1].text == "CD"


def test_token_accounting_is_filled() -> None:
    answer = "a fairly long answer " * 10
    c = ScriptedChatModel([answer]).chat(req("a question of some length"))
    assert c.completion_tokens == ScriptedChatModel([""]).count_tokens(answer) > 0
    assert c.prompt_tokens > 0 and c.finish_reason == "stop" and c.model == "scripted"


def test_completions_pass_through_for_errors_and_cuts() -> None:
    scripted = [Completion(text="", error="boom", finish_reason="error"),
                Completion(text='{"a":', finish_reason="length", completion_tokens=3)]
    model = ScriptedChatModel(scripted)
    first, second = model.chat(req()), model.chat(req())
    assert first.error == "boom"
    assert (second.finish_reason, second.completion_tokens, second.model) == ("length", 3, "scripted")


def test_truncate_cuts_long_answers_at_max_tokens() -> None:
    c = ScriptedChatModel(["word " * 200], truncate=True).chat(req(max_tokens=10))
    assert c.finish_reason == "length" and len(c.text) == 40


def test_bad_answer_type_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="must be a str or a Completion"):
        ScriptedChatModel([42]).chat(req())  # type: ignore[list-item]


def test_identity_depends_on_the_script() -> None:
    assert ScriptedChatModel(["a"]).identity() != ScriptedChatModel(["b"]).identity()
    assert ScriptedChatModel(["a"], name="n1").identity() != ScriptedChatModel(["a"], name="n2").identity()
