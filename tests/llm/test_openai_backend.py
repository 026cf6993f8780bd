"""The OpenAI-compatible backend against the local stand-in server, faults included.

Backoff settings are tiny so the whole file runs in a few seconds.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import pickle
import socket
import time

import httpx
import pytest

from litseg.llm.base import ChatRequest
from litseg.llm.openai_backend import OpenAIChatModel, _retry_after
from litseg.testing.fake_openai_server import FakeOpenAIServer, Fault, Reply, minimal_instance, request_key
from tests.conftest import load_benchmark

SCHEMA = {"type": "object", "properties": {"boundaries": {"type": "array", "items": {"type": "integer"}}},
          "required": ["boundaries"], "additionalProperties": False}
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5.0, "trust_env": False, "jitter_seed": 0}


def _req(text: str, schema: dict | None = None, **kw) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": "You mark scene boundaries."},
                                 {"role": "user", "content": text}], json_schema=schema, **kw)


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def _model(*urls: str, **kw) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", base_urls=list(urls), **{**FAST, **kw})


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


# ------------------------------------------------------------------ the happy path
def test_request_payload_and_completion_fields(server):
    with _model(server.base_url) as model:
        out = model.chat(_req("Chapter one.", max_tokens=77, temperature=0.3, top_p=0.9, seed=5, stop=["END"]))
    body = server.stats.bodies[0]
    assert body["model"] == "fake-model"
    assert body["messages"][1] == {"role": "user", "content": "Chapter one."}
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"], body["stop"]) == \
        (77, 0.3, 0.9, 5, ["END"])
    assert body["stream"] is False
    assert "response_format" not in body
    assert out.text == "echo: Chapter one."
    assert out.error is None and out.finish_reason == "stop" and out.model == "fake-model"
    assert out.prompt_tokens > 0 and out.completion_tokens > 0 and out.seconds > 0


def test_usage_and_cached_tokens_are_taken_from_the_server(server):
    server.responder = lambda body: Reply("{}", prompt_tokens=120, completion_tokens=9, cached_tokens=100)
    with _model(server.base_url) as model:
        out = model.chat(_req("x"))
    assert (out.prompt_tokens, out.completion_tokens, out.cached_tokens) == (120, 9, 100)


def test_usage_missing_is_estimated(server):
    server.responder = lambda body: {"choices": [{"message": {"content": "a" * 40}, "finish_reason": "stop"}]}
    with _model(server.base_url) as model:
        out = model.chat(_req("y"))
    assert out.completion_tokens == 10 and out.prompt_tokens > 0 and out.cached_tokens == 0


def test_json_schema_goes_into_response_format(server):
    with _model(server.base_url, schema_name="chunk_plan") as model:
        out = model.chat_batch([_req("a", SCHEMA), _req("b")])
    with_schema = next(b for b in server.stats.bodies if b["messages"][1]["content"] == "a")
    without = next(b for b in server.stats.bodies if b["messages"][1]["content"] == "b")
    assert with_schema["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "chunk_plan", "schema": SCHEMA, "strict": True}}
    assert "response_format" not in without
    assert json.loads(out[0].text) == {"boundaries": []}


def test_constrained_decoding_can_be_switched_off(server):
    with _model(server.base_url, constrained_decoding=False) as model:
        model.chat(_req("a", SCHEMA))
    assert "response_format" not in server.stats.bodies[0]


def test_unsupported_response_format_is_retried_without_it_and_remembered(server, caplog):
    server.supports_response_format = False
    with _model(server.base_url, max_retries=0) as model, caplog.at_level(logging.WARNING):
        first = model.chat(_req("a", SCHEMA))
        second = model.chat(_req("b", SCHEMA))
        assert not model.response_format_supported
    assert first.error is None and second.error is None  # the fallback try does not use up a retry
    assert server.stats.response_format_rejected == 1
    assert ["response_format" in b for b in server.stats.bodies] == [True, False, False]
    assert "sending requests without it" in caplog.text


def test_extra_body_and_max_tokens_field(server):
    with _model(server.base_url, max_tokens_field="max_completion_tokens",
                extra_body={"chat_template_kwargs": {"enable_thinking": False}, "temperature": 9}) as model:
        model.chat(_req("a", max_tokens=12, temperature=0.0))
    body = server.stats.bodies[0]
    assert body["max_completion_tokens"] == 12 and "max_tokens" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["temperature"] == 0.0  # the request wins over extra_body


# ------------------------------------------------------------------ concurrency and load
def test_batch_runs_concurrently_within_the_bound_and_keeps_order():
    # Later requests answer sooner, so completion order differs from request order.
    with FakeOpenAIServer(latency_s=lambda body: 0.05 + 0.15 * (int(body["messages"][1]["content"]) % 3 == 0)) \
            as srv, _model(srv.base_url, max_concurrency=4) as model:
        started = time.perf_counter()
        out = model.chat_batch([_req(str(i)) for i in range(24)])
        elapsed = time.perf_counter() - started
    assert [c.text for c in out] == [f"echo: {i}" for i in range(24)]
    assert srv.stats.max_in_flight == 4
    assert all(c.seconds < 0.5 for c in out)  # time waiting for a slot is not counted as work
    serial = sum(0.05 + 0.15 * (i % 3 == 0) for i in range(24))
    assert elapsed < serial / 2


def test_load_spreads_over_base_urls_least_in_flight():
    with FakeOpenAIServer(latency_s=0.02) as a, FakeOpenAIServer(latency_s=0.02) as b, \
            _model(a.base_url, b.base_url, max_concurrency=8) as model:
        out = model.chat_batch([_req(f"u{i}") for i in range(40)])
    assert all(c.error is None for c in out)
    assert a.stats.requests + b.stats.requests == 40
    assert min(a.stats.requests, b.stats.requests) >= 15
    assert max(a.stats.max_in_flight, b.stats.max_in_flight) <= 8


def test_connections_are_spread_over_small_clients(server):
    server.latency_s = 0.05
    with _model(server.base_url, max_concurrency=20, connections_per_client=8) as model:
        out = model.chat_batch([_req(f"u{i}") for i in range(60)])
        lanes = model._lanes[server.base_url]
    assert all(c.error is None for c in out)
    assert server.stats.max_in_flight == 20
    assert len(lanes) == 3  # ceil(20 / 8) clients, not one pool of 20


@pytest.mark.slow
def test_serving_benchmark_meets_its_target():
    bench = load_benchmark("serving_throughput")
    # 0.5 s per answer (the script's default is 0.2 s) keeps the figure about overlap, not about how
    # busy the machine's two cores are: issuing 32 requests then costs well under one latency.
    rows = bench.run_benchmark([1, 32], latency_s=0.5, per_slot=3, replicas=1)
    assert [r.errors for r in rows] == [0, 0]
    assert rows[1].speedup >= 20, rows


def test_round_robin_alternates(server):
    with FakeOpenAIServer() as other, _model(server.base_url, other.base_url, load_balancing="round_robin") as m:
        for i in range(6):
            m.chat(_req(str(i)))
    assert (server.stats.requests, other.stats.requests) == (3, 3)


def test_dead_base_url_is_skipped_while_cooling_down(server):
    with _model(_closed_port_url(), server.base_url, max_concurrency=2, endpoint_cooldown_s=30) as model:
        out = model.chat_batch([_req(f"u{i}") for i in range(10)])
        dead = model.endpoints[0]
    assert all(c.error is None for c in out)
    assert server.stats.requests == 10
    assert dead.failures <= 2  # tried before it was known to be down, then skipped


# ------------------------------------------------------------------ faults and retries
@pytest.mark.parametrize("kind", ["500", "503", "drop", "reset", "bad_body"])
def test_transient_faults_are_retried(server, kind):
    server.script(kind, kind)
    with _model(server.base_url) as model:
        out = model.chat(_req("x"))
    assert out.error is None and out.text == "echo: x"
    assert server.stats.requests == 3
    assert model.retries == 2


def test_rate_limit_honours_retry_after(server):
    server.script(Fault("429", retry_after=0.3))
    with _model(server.base_url) as model:
        started = time.perf_counter()
        out = model.chat(_req("x"))
        elapsed = time.perf_counter() - started
    assert out.error is None
    assert elapsed >= 0.3  # the backoff alone would have waited ~0.01 s
    assert server.stats.served["429"] == 1


def test_hanging_server_times_out_and_is_retried():
    with FakeOpenAIServer(hang_s=10) as srv, _model(srv.base_url, timeout_s=0.2) as model:
        srv.script("hang")
        started = time.perf_counter()
        out = model.chat(_req("x"))
        elapsed = time.perf_counter() - started
    assert out.error is None and out.text == "echo: x"
    assert 0.2 <= elapsed < 3


def test_backoff_grows_exponentially_with_jitter(server):
    model = _model(server.base_url, backoff_base_s=1.0, backoff_max_s=8.0)
    delays = [model._backoff(n, None) for n in range(1, 7)]
    ceilings = [1, 2, 4, 8, 8, 8]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings))
    assert len({round(d, 6) for d in delays}) == len(delays)  # jittered, not fixed steps
    assert model._backoff(1, retry_after=5.0) >= 5.0
    assert model._backoff(1, retry_after=1e6) <= model.config.max_retry_after_s


def test_retries_exhausted_return_an_error_completion(server):
    server.fail_first_k = 100
    with _model(server.base_url, max_retries=2) as model:
        out = model.chat(_req("x"))
    assert out.text == "" and out.finish_reason == "error"
    assert out.error is not None and "HTTP 500" in out.error and "3 attempt" in out.error
    assert server.stats.requests == 3
    assert model.failed_calls == 1


def test_failures_in_a_batch_stay_with_their_requests(server):
    server.fault_plan = lambda body, attempt: "500" if "doomed" in body["messages"][1]["content"] else None
    with _model(server.base_url, max_retries=1) as model:
        out = model.chat_batch([_req("ok 0"), _req("doomed 1"), _req("ok 2"), _req("doomed 3")])
    assert [c.error is None for c in out] == [True, False, True, False]
    assert out[2].text == "echo: ok 2"


@pytest.mark.parametrize("kind", ["400", "401"])
def test_client_errors_fail_fast(server, kind):
    server.script(kind)
    with _model(server.base_url, backoff_base_s=5.0) as model:
        started = time.perf_counter()
        out = model.chat(_req("x"))
    assert time.perf_counter() - started < 2
    assert out.error is not None and f"HTTP {kind}" in out.error and "not retryable" in out.error
    assert server.stats.requests == 1


def test_malformed_and_truncated_content_is_returned_for_the_caller_to_validate(server):
    server.script("malformed", "truncated")
    with _model(server.base_url) as model:
        bad = model.chat(_req("a", SCHEMA))
        cut = model.chat(_req("b", SCHEMA))
    assert bad.error is None
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad.text)
    assert cut.finish_reason == "length" and cut.error is None
    assert server.stats.requests == 2  # content problems are not transport problems: no retry


def test_random_faults_with_seed_are_survived(server):
    server.fault_rate, server.fault_kinds = 0.3, ("429", "500", "drop", "reset")
    with _model(server.base_url, max_retries=8, max_concurrency=8) as model:
        out = model.chat_batch([_req(f"u{i}") for i in range(40)])
    assert all(c.error is None for c in out)
    assert sum(n for kind, n in server.stats.served.items() if kind != "ok") > 0
    assert [c.text for c in out] == [f"echo: u{i}" for i in range(40)]


# ------------------------------------------------------------------ secrets
SECRET = "sk-test-SECRET-4f7c9a"


def test_api_key_is_sent_but_never_logged_or_exposed(monkeypatch, caplog):
    monkeypatch.setenv("LITSEG_TEST_KEY", SECRET)
    with FakeOpenAIServer(api_key=SECRET) as srv, caplog.at_level(logging.DEBUG):
        srv.script("500", Fault("401", message=f"Incorrect API key provided: {SECRET}"))
        with _model(srv.base_url, api_key_env="LITSEG_TEST_KEY") as model:
            out = model.chat(_req("x"))
            ok = model.chat(_req("y"))
            exposed = [repr(model), str(model.identity()), json.dumps(model.identity())]
            pickled = pickle.dumps(model)
    assert srv.stats.authorizations[-1] == f"Bearer {SECRET}"
    assert ok.error is None
    assert out.error is not None and "***" in out.error and SECRET not in out.error
    assert caplog.records, "debug logging was captured"
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    assert SECRET not in caplog.text
    assert all(SECRET not in text for text in exposed)
    assert SECRET.encode() not in pickled


def test_missing_key_sends_no_authorization(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with _model(server.base_url) as model:
        model.chat(_req("x"))
        assert "(unset)" in repr(model)
    assert server.stats.authorizations == [None]


def test_credentials_in_headers_are_refused():
    with pytest.raises(ValueError, match="api_key_env"):
        OpenAIChatModel("m", extra_headers={"Authorization": "Bearer x"})


def test_identity_ignores_endpoints_and_concurrency():
    a = OpenAIChatModel("m", base_urls="http://a:1/v1", max_concurrency=2)
    b = OpenAIChatModel("m", base_urls="http://b:2/v1,http://c:3/v1", max_concurrency=64)
    assert a.identity() == b.identity() == {"backend": "openai", "model": "m", "constrained_decoding": True,
                                            "sampling": "neutral"}
    assert OpenAIChatModel("m", identity_tag="q4_k_m").identity()["tag"] == "q4_k_m"


def test_requests_switch_the_servers_model_defaults_off(caplog):
    """vllm serve fills every field a request leaves out from the model's generation_config.json
    (Qwen2.5: repetition_penalty 1.05, top_k 20), so the backend sends the neutral values; a
    server that rejects them (hosted APIs) gets them dropped once, with a warning."""
    with FakeOpenAIServer() as srv:
        model = OpenAIChatModel("fake-model", base_urls=[srv.base_url], **FAST)
        assert model.chat(_req("hello", temperature=0.0)).error is None
        body = srv.stats.bodies[-1]
        assert (body["top_k"], body["min_p"], body["repetition_penalty"]) == (-1, 0.0, 1.0)
        assert body["temperature"] == 0.0 and body["top_p"] == 1.0
        model.close()

    def hosted(body, attempt):
        return Fault("400", message="Unrecognized request argument supplied: top_k") if "top_k" in body else None

    with FakeOpenAIServer(fault_plan=hosted) as srv, caplog.at_level(logging.WARNING):
        model = OpenAIChatModel("fake-model", base_urls=[srv.base_url], **{**FAST, "max_retries": 0})
        answers = model.chat_batch([_req("one"), _req("two")])
        assert [a.error for a in answers] == [None, None]  # no retry was used up by the fallback
        assert "top_k" not in srv.stats.bodies[-1] and "neutral sampling" in caplog.text
        model.close()
    # Answers of a server left to its defaults are another model's answers for the cache.
    assert OpenAIChatModel("m", neutral_sampling=False).identity()["sampling"] == "server_defaults"


# ------------------------------------------------------------------ calling conventions
def test_conf_llm_openai_builds_through_the_factory_with_the_cache(server, repo_root, tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from litseg.llm.factory import build_llm

    monkeypatch.setenv("LITSEG_OPENAI_BASE_URLS", server.base_url)
    monkeypatch.setenv("LITSEG_OPENAI_MODEL", "fake-model")
    cfg = OmegaConf.load(repo_root / "conf" / "llm" / "openai.yaml")
    cfg.cache.path = str(tmp_path / "responses.sqlite")
    cfg.trust_env = False
    model = build_llm(cfg)
    try:
        first = model.chat_batch([_req("a", SCHEMA), _req("b")])
        again = model.chat_batch([_req("a", SCHEMA), _req("b")])
    finally:
        model.close()
    assert [c.error for c in first] == [None, None]
    assert [c.from_cache for c in again] == [True, True]
    assert [c.text for c in again] == [c.text for c in first]
    assert server.stats.requests == 2  # the second batch never reached the server



def test_sync_chat_works_inside_a_running_event_loop(server):
    model = _model(server.base_url)

    async def caller():
        return model.chat(_req("inside")), await model.achat(_req("awaited")), \
            await model.achat_batch([_req("b0"), _req("b1")])

    try:
        sync_out, async_out, batch = asyncio.run(caller())
    finally:
        model.close()
    assert sync_out.text == "echo: inside" and async_out.text == "echo: awaited"
    assert [c.text for c in batch] == ["echo: b0", "echo: b1"]


def test_close_then_reuse_starts_a_fresh_loop(server):
    model = _model(server.base_url)
    assert model.chat(_req("a")).error is None
    model.close()
    model.close()  # twice is fine
    assert model.chat(_req("b")).error is None
    model.close()
    assert model.chat_batch([]) == []


def test_settings_are_validated():
    with pytest.raises(TypeError, match="unknown setting"):
        OpenAIChatModel("m", concurrency=3)
    with pytest.raises(ValueError, match="http"):
        OpenAIChatModel("m", base_urls="localhost:8000")
    with pytest.raises(ValueError, match="load_balancing"):
        OpenAIChatModel("m", load_balancing="random")
    model = OpenAIChatModel("m", base_urls="http://h:8000/, http://g:9/v1/chat/completions")
    assert model.config.base_urls == ["http://h:8000/v1", "http://g:9/v1"]


def test_retry_after_header_forms():
    assert _retry_after(httpx.Headers({"retry-after": "2.5"})) == 2.5
    assert _retry_after(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= _retry_after(httpx.Headers({"retry-after": future})) <= 31
    assert _retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert _retry_after(httpx.Headers({})) is None


# ------------------------------------------------------------------ the stand-in server itself
def test_fail_first_k_counts_attempts_per_distinct_request():
    with FakeOpenAIServer(fail_first_k=2, fail_kind="503") as srv, _model(srv.base_url) as model:
        out = model.chat_batch([_req("a"), _req("b")])
    assert all(c.error is None for c in out)
    assert sorted(srv.stats.attempts.values()) == [3, 3]
    assert srv.stats.attempts[request_key(srv.stats.bodies[0])] == 3


def test_minimal_instance_follows_the_schema():
    schema = {
        "$defs": {"span": {"type": "object", "properties": {"start": {"type": "integer", "minimum": 1},
                                                            "kind": {"enum": ["scene", "chapter"]}},
                           "required": ["start", "kind"]}},
        "type": "object",
        "properties": {"spans": {"type": "array", "items": {"$ref": "#/$defs/span"}, "minItems": 2},
                       "note": {"type": ["string", "null"]}, "ok": {"const": True}},
        "required": ["spans", "ok"],
    }
    assert minimal_instance(schema) == {"spans": [{"start": 1, "kind": "scene"}] * 2, "ok": True}


def test_server_rejects_unknown_fault_kinds_and_routes():
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault("explode")
    with FakeOpenAIServer() as srv:
        models = httpx.get(f"{srv.base_url}/models", trust_env=False)
        missing = httpx.post(f"{srv.base_url}/embeddings", json={}, trust_env=False)
    assert models.json()["data"][0]["id"] == "fake-model"
    assert missing.status_code == 404
    assert srv.base_url.startswith("http://127.0.0.1:")
