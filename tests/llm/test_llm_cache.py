"""Response cache and replay: no torch, no model, just SQLite."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from litseg.llm.base import ChatModelError, ChatRequest, Completion, Usage
from litseg.llm.cache import CachedChatModel, CacheMiss, ReplayChatModel, cache_key
from litseg.llm.testing import ScriptedChatModel


def req(text: str = "hello", **kw) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], **kw)


def echo_model(name: str = "echo") -> ScriptedChatModel:
    return ScriptedChatModel(lambda r: f"answer to {r.messages[-1]['content']}", name=name)


def test_miss_then_hit_keeps_original_accounting(tmp_path: Path) -> None:
    inner = ScriptedChatModel([Completion(text="A", prompt_tokens=11, completion_tokens=3, seconds=2.5)])
    model = CachedChatModel(inner, tmp_path / "c.sqlite")
    first = model.chat(req())
    second = model.chat(req())
    assert len(inner.requests) == 1  # paid once
    assert (first.text, first.from_cache) == ("A", False)
    assert (second.text, second.from_cache) == ("A", True)
    assert (second.prompt_tokens, second.completion_tokens, second.seconds) == (11, 3, 2.5)
    stats = model.stats()
    assert (stats.entries, stats.model_entries, stats.hits, stats.misses, stats.stored) == (1, 1, 1, 1, 1)
    usage = Usage()
    usage.add(first)
    usage.add(second)
    assert (usage.calls, usage.cache_hits, usage.prompt_tokens) == (2, 1, 22)


def test_cache_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cache.sqlite"  # parent folders are created
    CachedChatModel(echo_model(), path).chat(req("q1"))
    fresh_inner = echo_model()
    again = CachedChatModel(fresh_inner, path).chat(req("q1"))
    assert again.from_cache and again.text == "answer to q1"
    assert fresh_inner.requests == []


@pytest.mark.parametrize("change", [
    {"temperature": 0.7}, {"max_tokens": 7}, {"seed": 3}, {"top_p": 0.5}, {"stop": ["\n"]},
    {"json_schema": {"type": "object"}},
])
def test_any_parameter_change_is_a_new_key(tmp_path: Path, change: dict) -> None:
    inner = echo_model()
    model = CachedChatModel(inner, tmp_path / "c.sqlite")
    model.chat(req())
    assert not model.chat(req(**change)).from_cache
    assert len(inner.requests) == 2


def test_model_identity_is_part_of_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedChatModel(echo_model("one"), path).chat(req())
    other = CachedChatModel(echo_model("two"), path)
    assert not other.chat(req()).from_cache
    assert other.stats().entries == 2 and other.stats().model_entries == 1
    assert cache_key({"name": "one"}, req()) != cache_key({"name": "two"}, req())


def test_errors_are_not_cached(tmp_path: Path) -> None:
    inner = ScriptedChatModel([Completion(text="", error="server down", finish_reason="error"), "fine"])
    model = CachedChatModel(inner, tmp_path / "c.sqlite")
    assert model.chat(req()).error == "server down"
    retried = model.chat(req())
    assert retried.text == "fine" and not retried.from_cache
    assert model.chat(req()).from_cache
    assert model.stats().stored == 1


def test_batch_asks_each_distinct_request_once(tmp_path: Path) -> None:
    inner = echo_model()
    model = CachedChatModel(inner, tmp_path / "c.sqlite")
    model.chat(req("a"))
    out = model.chat_batch([req("a"), req("b"), req("b"), req("c")])
    assert [c.text for c in out] == ["answer to a", "answer to b", "answer to b", "answer to c"]
    assert [c.from_cache for c in out] == [True, False, False, False]
    assert [r.messages[-1]["content"] for r in inner.requests] == ["a", "b", "c"]
    out[1].text = "mutated"  # results are independent objects
    assert out[2].text == "answer to b"


class _DiesOnThirdCall(ScriptedChatModel):
    """Answers two requests per call, like a backend with batch_size 2, and dies on its third call."""

    def __init__(self) -> None:
        super().__init__(lambda r: f"answer to {r.messages[-1]['content']}", name="dies")
        self.calls = 0

    def answers_per_call(self) -> int | None:
        return 2

    def chat_batch(self, requests):
        self.calls += 1
        if self.calls == 3:
            raise KeyboardInterrupt("killed mid-batch")
        assert len(requests) <= 2
        return super().chat_batch(requests)


def test_a_run_killed_mid_batch_keeps_the_answers_already_paid_for(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with pytest.raises(KeyboardInterrupt):
        CachedChatModel(_DiesOnThirdCall(), path).chat_batch([req(t) for t in "abcdef"])
    again = CachedChatModel(_DiesOnThirdCall(), path)
    out = again.chat_batch([req(t) for t in "abcd"])
    assert [c.from_cache for c in out] == [True] * 4   # the first two calls' answers were stored
    assert again.inner.calls == 0


def test_replay_answers_recorded_requests_only(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    recorder = CachedChatModel(echo_model(), path)
    recorder.chat(req("seen"))
    replay = ReplayChatModel(path, recorder.identity())
    hit = replay.chat(req("seen"))
    assert hit.from_cache and hit.text == "answer to seen"
    with pytest.raises(CacheMiss) as err:
        replay.chat(req("never asked"))
    message = str(err.value)
    assert cache_key(recorder.identity(), req("never asked")) in message
    assert "never asked" in message
    assert (replay.stats().hits, replay.stats().misses) == (1, 1)


def test_replay_finds_the_single_recorded_model(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedChatModel(echo_model("only"), path).chat(req())
    assert ReplayChatModel(path).chat(req()).text == "answer to hello"
    CachedChatModel(echo_model("second"), path).chat(req())
    with pytest.raises(ChatModelError, match="holds answers of 2 models"):
        ReplayChatModel(path)


def test_replay_of_a_missing_or_foreign_file_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(ChatModelError, match="does not exist"):
        ReplayChatModel(tmp_path / "absent.sqlite", {"name": "x"})
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE other(x)")
    with pytest.raises(ChatModelError, match="not a usable litseg cache"):
        ReplayChatModel(foreign, {"name": "x"})
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ChatModelError, match="not a usable litseg cache"):
        CachedChatModel(echo_model(), garbage)


def test_cache_uses_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedChatModel(echo_model(), path).chat(req())
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _writer(path: str, worker: int) -> None:
    model = CachedChatModel(echo_model(), path)
    # Half the keys are shared by all workers, half are the worker's own.
    for i in range(40):
        model.chat(req(f"shared {i}" if i % 2 == 0 else f"own {worker} {i}"))


def test_several_processes_share_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_writer, args=(path, w)) for w in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    stats = CachedChatModel(echo_model(), path).stats()
    assert stats.entries == 20 + 3 * 20  # shared keys stored once, each worker's own keys once
