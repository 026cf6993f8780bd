"""Chat backend for any OpenAI-compatible server (``llm=openai``).

Works with ``vllm serve``, SGLang, the llama.cpp server, Ollama and hosted APIs through
``POST {base_url}/chat/completions``. Requests run on a private asyncio loop in a background
thread, so :meth:`OpenAIChatModel.chat` and :meth:`OpenAIChatModel.chat_batch` are plain
blocking calls that also work when the caller already runs an event loop; async callers can use
:meth:`OpenAIChatModel.achat` / :meth:`OpenAIChatModel.achat_batch`.

Behaviour:

* at most ``max_concurrency`` HTTP requests in flight (one semaphore over all base URLs), carried
  by several small connection pools per server (``connections_per_client``) because one large
  httpx pool slows down quadratically with its size;
* several ``base_urls`` share the load (least-in-flight or round robin); an endpoint that
  refused a connection is skipped for ``endpoint_cooldown_s`` while another one is up;
* HTTP 408/409/429/5xx, timeouts, dropped connections and unparsable bodies are retried with
  exponential backoff plus jitter, waiting at least what Retry-After asks; other 4xx fail at once;
* a request with ``json_schema`` is sent with a strict ``response_format`` when
  ``constrained_decoding`` is on; a 400 saying the server does not support it is retried once
  without it, and the backend then stops sending it;
* ``neutral_sampling`` sends ``top_k``, ``min_p`` and ``repetition_penalty`` at their neutral
  values (:mod:`litseg.llm.decoding`), since ``vllm serve`` would fill them from the model's
  ``generation_config.json``; a 400 naming one of them drops them the same way;
* whatever happens, a call returns a :class:`Completion`; after the last try it carries
  ``error`` and an empty text. When the model never saw the request (connection refused, timeout,
  HTTP 5xx/429 after the retries, 401/403/404, a body that is no answer) it also carries
  ``error_kind="unavailable"``: a chunker then fails the unit (no chunks; a rerun asks again)
  instead of treating the silence as an answer;
* :meth:`OpenAIChatModel.check` (called once before a run) asks ``GET {base_url}/models`` and
  fails fast, in one line, when no server answers, the key is refused or the model is not
  served (``startup_check: false`` skips it).

The API key comes only from the environment variable named by ``api_key_env`` (default
``OPENAI_API_KEY``); it is never logged, never part of :meth:`identity` or ``repr``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import threading
import time
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

import httpx

from litseg.llm.base import ChatModel, ChatRequest, Completion, ModelUnavailable
from litseg.errors import UNAVAILABLE
from litseg.llm.config import OpenAIBackendConfig, OpenAILLMConfig, backend_settings
from litseg.llm.decoding import NEUTRAL_SAMPLING
from litseg.llm.http_support import LoopThread as _LoopThread
from litseg.llm.http_support import close_clients, retry_after as _retry_after

log = logging.getLogger(__name__)

T = TypeVar("T")

# Statuses worth another try: request timeout, conflict, too early, rate limit, server trouble.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
# Statuses that say this server will not serve this client or model at all (no retry either).
UNSERVED_STATUS = frozenset({401, 403, 404})


@dataclass
class EndpointStats:
    base_url: str
    in_flight: int = 0
    requests: int = 0
    failures: int = 0
    down_until: float = 0.0


@dataclass
class _Lane:
    """One small HTTP client of an endpoint and the requests it carries now."""

    client: httpx.AsyncClient
    in_flight: int = 0


@dataclass
class _Outcome:
    completion: Completion | None = None
    error: str = ""
    retryable: bool = False
    retry_after: float | None = None
    format_unsupported: bool = False
    sampling_unsupported: bool = False  # a 400 naming one of the neutral sampling fields
    unserved: bool = False  # 401/403/404: this server will not serve the request at all


class OpenAIChatModel(ChatModel):
    """See the module docstring. ``OpenAIChatModel(model="Qwen/Qwen2.5-7B-Instruct", base_urls=[...])``."""

    config_class = OpenAILLMConfig

    @classmethod
    def from_config(cls, section: OpenAILLMConfig) -> OpenAIChatModel:
        return cls(**section.settings())

    def __init__(self, model: str, **settings: Any) -> None:
        known = {f.name for f in fields(OpenAIBackendConfig)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"openai backend: unknown setting(s) {unknown}; known: {sorted(known - {'model'})}")
        # The settings not given are conf/llm/openai.yaml's.
        self.config = backend_settings(OpenAIBackendConfig, "openai", {**settings, "model": model})
        self.name = f"openai:{model}"
        self._api_key = os.environ.get(self.config.api_key_env) or None
        if self._api_key is None:
            log.info("openai backend: $%s is not set; sending requests without an API key",
                     self.config.api_key_env)
        self.endpoints = [EndpointStats(u) for u in self.config.base_urls]
        self._rr = 0
        self._rng = random.Random(self.config.jitter_seed)
        self._response_format_unsupported = False
        self._sampling_unsupported = False
        self._runner: _LoopThread | None = None
        self._runner_lock = threading.Lock()
        self._lanes: dict[str, list[_Lane]] = {}
        self._semaphore: asyncio.Semaphore | None = None
        self.retries = 0  # attempts after the first, over the whole run
        self.failed_calls = 0  # calls that returned with error set

    # ------------------------------------------------------------------ identity
    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"backend": "openai", "model": self.config.model,
                                 "constrained_decoding": self.config.constrained_decoding}
        # Answers cached while the server applied its model's defaults were decoded differently.
        ident["sampling"] = "neutral" if self.config.neutral_sampling else "server_defaults"
        if self.config.identity_tag:
            ident["tag"] = self.config.identity_tag
        return ident

    def __repr__(self) -> str:
        key_state = "set" if self._api_key else "unset"
        return (f"OpenAIChatModel(model={self.config.model!r}, base_urls={list(self.config.base_urls)!r}, "
                f"api_key_env={self.config.api_key_env!r} ({key_state}), "
                f"max_concurrency={self.config.max_concurrency})")

    def __getstate__(self) -> dict[str, Any]:
        # Only the settings travel; the key is read again from the environment on the other side.
        return {"config": asdict(self.config)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        settings = dict(state["config"])
        self.__init__(settings.pop("model"), **settings)  # type: ignore[misc]

    @property
    def response_format_supported(self) -> bool:
        return self.config.constrained_decoding and not self._response_format_unsupported

    # ------------------------------------------------------------------ start-up check
    def check(self) -> None:
        """``GET {base_url}/models`` on every server: :class:`ModelUnavailable` (one line) when none
        answers, one refuses the key, or the servers list models but not this one; a warning when
        only some answer."""
        cfg = self.config
        if not cfg.startup_check:
            return
        down: list[str] = []
        served: set[str] = set()
        timeout = httpx.Timeout(min(cfg.timeout_s, 30.0), connect=cfg.connect_timeout_s)
        with httpx.Client(timeout=timeout, trust_env=cfg.trust_env) as client:
            for url in cfg.base_urls:
                try:
                    response = client.get(f"{url}/models", headers=self._headers())
                except httpx.TransportError as exc:  # refused, unreachable, timed out
                    down.append(f"{url}: {self._redact(str(exc)) or type(exc).__name__}")
                    continue
                status = response.status_code
                if status in (401, 403):
                    raise ModelUnavailable(f"openai backend: {url} refused the request (HTTP {status}: "
                                           f"{self._error_message(response)}); export the key in "
                                           f"${cfg.api_key_env}")
                if status >= 500:
                    down.append(f"{url}: HTTP {status}")
                    continue
                if status == 200:  # a server without /models (404) is up, but lists nothing
                    try:
                        listed = response.json().get("data") or []
                        served.update(str(m.get("id")) for m in listed if isinstance(m, dict))
                    except (ValueError, AttributeError):
                        pass
        if len(down) == len(cfg.base_urls):
            raise ModelUnavailable(f"openai backend: no server answers ({'; '.join(down)}); start one "
                                   "(docs/serving.md) or point llm.base_urls at it")
        if down:
            log.warning("openai backend: %d of %d servers do not answer (%s); going on with the others",
                        len(down), len(cfg.base_urls), "; ".join(down))
        if served and cfg.model not in served:
            listing = ", ".join(sorted(served)[:5]) + (" ..." if len(served) > 5 else "")
            raise ModelUnavailable(f"openai backend: model {cfg.model!r} is not among the models the server "
                                   f"lists ({listing}); set llm.model to one of them "
                                   "(llm.startup_check=false skips this check)")

    # ------------------------------------------------------------------ sync API
    def chat(self, request: ChatRequest) -> Completion:
        return self._run(self._achat(request))

    def answers_per_call(self) -> int | None:
        return None  # the whole batch goes out concurrently

    def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        """Answer all requests concurrently (bounded by max_concurrency); results keep their order."""
        if not requests:
            return []
        return self._run(self._abatch(list(requests)))

    # ------------------------------------------------------------------ async API
    async def achat(self, request: ChatRequest) -> Completion:
        return await asyncio.wrap_future(self._loop_thread().submit(self._achat(request)))

    async def achat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        return await asyncio.wrap_future(self._loop_thread().submit(self._abatch(list(requests))))

    def close(self) -> None:
        with self._runner_lock:
            runner, self._runner = self._runner, None
        if runner is None:
            return
        lanes = [lane for group in self._lanes.values() for lane in group]
        if lanes:
            try:
                runner.submit(close_clients([lane.client for lane in lanes])).result(timeout=10)
            except Exception:  # closing is best effort; the loop goes away anyway
                log.debug("openai backend: closing the HTTP clients failed", exc_info=True)
        self._lanes = {}
        self._semaphore = None
        runner.stop()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def _loop_thread(self) -> _LoopThread:
        with self._runner_lock:
            if self._runner is None:
                self._runner = _LoopThread()
            return self._runner

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        runner = self._loop_thread()
        if threading.current_thread() is runner.thread:
            coro.close()
            raise RuntimeError("OpenAIChatModel.chat() called from its own event loop; use achat()")
        future = runner.submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def _ensure_semaphore(self) -> asyncio.Semaphore:
        # Created lazily on the private loop so it belongs to it.
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
        return self._semaphore

    def _lane(self, endpoint: EndpointStats) -> _Lane:
        """The least busy client of ``endpoint``; a new one while all are full and more may be needed."""
        cfg = self.config
        lanes = self._lanes.setdefault(endpoint.base_url, [])
        idle = min(lanes, key=lambda lane: lane.in_flight, default=None)
        if idle is not None and (idle.in_flight < cfg.connections_per_client
                                 or len(lanes) * cfg.connections_per_client >= cfg.max_concurrency):
            return idle
        width = min(cfg.connections_per_client, cfg.max_concurrency)
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(cfg.timeout_s, connect=cfg.connect_timeout_s),
            limits=httpx.Limits(max_connections=width, max_keepalive_connections=width),
            trust_env=cfg.trust_env,
        )
        lanes.append(_Lane(client))
        return lanes[-1]

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.config.extra_headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _pick_endpoint(self) -> EndpointStats:
        now = time.monotonic()
        n = len(self.endpoints)
        start = self._rr
        self._rr = (self._rr + 1) % n
        rotated = [self.endpoints[(start + i) % n] for i in range(n)]
        up = [e for e in rotated if e.down_until <= now] or rotated
        if self.config.load_balancing == "round_robin":
            return up[0]
        return min(up, key=lambda e: e.in_flight)  # min() keeps the first of ties: rotation spreads them

    def _payload(self, req: ChatRequest, with_schema: bool) -> dict[str, Any]:
        cfg = self.config
        neutral = cfg.neutral_sampling and not self._sampling_unsupported
        body: dict[str, Any] = {
            **(NEUTRAL_SAMPLING if neutral else {}),  # extra_body may still set any of them
            **cfg.extra_body,
            "model": cfg.model,
            "messages": req.messages,
            cfg.max_tokens_field: req.max_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "stream": False,
        }
        if req.seed is not None and cfg.send_seed:
            body["seed"] = req.seed
        if req.stop:
            body["stop"] = list(req.stop)
        if with_schema and req.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": cfg.schema_name, "schema": req.json_schema, "strict": cfg.strict_schema},
            }
        return body

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cfg = self.config
        ceiling = min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** (attempt - 1))
        delay = ceiling / 2 + self._rng.uniform(0, ceiling / 2)  # "equal jitter": never below half
        if retry_after is not None:
            delay = max(delay, min(retry_after, cfg.max_retry_after_s))
        return delay

    async def _abatch(self, requests: list[ChatRequest]) -> list[Completion]:
        return list(await asyncio.gather(*(self._achat(r) for r in requests)))

    async def _achat(self, req: ChatRequest) -> Completion:
        # Completion.seconds runs from the first attempt's start (waiting for a concurrency slot is
        # queueing, not work) to the end, retries and backoff included.
        clock: list[float] = []
        try:
            completion = await self._achat_with_retries(req, clock)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or an odd server must not stop the run: report it on the call
            log.exception("openai backend: unexpected failure")
            completion = Completion(text="", error=f"unexpected failure: {self._redact(repr(exc))}",
                                    finish_reason="error", model=self.config.model, error_kind=UNAVAILABLE)
        completion.seconds = time.perf_counter() - clock[0] if clock else 0.0
        if completion.error is not None:
            self.failed_calls += 1
        return completion

    async def _achat_with_retries(self, req: ChatRequest, clock: list[float]) -> Completion:
        cfg = self.config
        with_schema = req.json_schema is not None and self.response_format_supported
        tried_without_schema = False
        attempt = 0
        last: _Outcome | None = None
        while True:
            attempt += 1
            payload = self._payload(req, with_schema)
            outcome = await self._attempt(payload, req, clock)
            if outcome.completion is not None:
                return outcome.completion
            if outcome.sampling_unsupported and "repetition_penalty" in payload:  # this try sent them
                if not self._sampling_unsupported:
                    log.warning("openai backend: the server rejected the neutral sampling fields %s (%s); "
                                "sending requests without them from now on, so the server's own defaults apply",
                                sorted(NEUTRAL_SAMPLING), outcome.error)
                self._sampling_unsupported = True
                attempt -= 1  # the fallback try does not use up a retry
                continue
            if outcome.format_unsupported and with_schema and not tried_without_schema:
                if not self._response_format_unsupported:
                    log.warning("openai backend: the server rejected response_format=json_schema (%s); "
                                "sending requests without it from now on", outcome.error)
                self._response_format_unsupported = True
                with_schema, tried_without_schema = False, True
                attempt -= 1  # the fallback try does not use up a retry
                continue
            last = outcome
            if not outcome.retryable or attempt > cfg.max_retries:
                break
            delay = self._backoff(attempt, outcome.retry_after)
            self.retries += 1
            log.info("openai backend: attempt %d failed (%s); retrying in %.2fs", attempt, outcome.error, delay)
            await asyncio.sleep(delay)
        assert last is not None
        verdict = "gave up" if last.retryable else "not retryable"
        log.warning("openai backend: request failed after %d attempt(s), %s: %s", attempt, verdict, last.error)
        # A request the model never saw is "unavailable": the caller fails the unit rather than
        # reading the silence as an answer. Other refusals (400: prompt too long...) are the
        # request's own and stay plain errors.
        return Completion(text="", finish_reason="error", model=cfg.model,
                          error=f"{last.error} ({verdict} after {attempt} attempt(s))",
                          error_kind=UNAVAILABLE if last.retryable or last.unserved else None)

    async def _attempt(self, payload: dict[str, Any], req: ChatRequest, clock: list[float]) -> _Outcome:
        async with self._ensure_semaphore():
            if not clock:
                clock.append(time.perf_counter())
            endpoint = self._pick_endpoint()
            lane = self._lane(endpoint)
            endpoint.in_flight += 1
            endpoint.requests += 1
            lane.in_flight += 1
            try:
                response = await lane.client.post(f"{endpoint.base_url}/chat/completions", json=payload,
                                                  headers=self._headers())
            except httpx.TimeoutException as exc:
                endpoint.failures += 1
                return _Outcome(error=f"timeout ({type(exc).__name__}) at {endpoint.base_url}", retryable=True)
            except httpx.TransportError as exc:
                endpoint.failures += 1
                if isinstance(exc, httpx.ConnectError):
                    endpoint.down_until = time.monotonic() + self.config.endpoint_cooldown_s
                detail = self._redact(str(exc)) or type(exc).__name__
                return _Outcome(error=f"connection failed at {endpoint.base_url}: {detail}", retryable=True)
            finally:
                endpoint.in_flight -= 1
                lane.in_flight -= 1
        return self._interpret(response, req, endpoint)

    def _interpret(self, response: httpx.Response, req: ChatRequest, endpoint: EndpointStats) -> _Outcome:
        status = response.status_code
        if status == 200:
            try:
                data = response.json()
                return _Outcome(completion=self._completion_from(data, req))
            except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
                endpoint.failures += 1
                return _Outcome(error=f"unusable 200 response from {endpoint.base_url}: {type(exc).__name__}: "
                                      f"{self._redact(str(exc))[:200]}", retryable=True)
        message = self._error_message(response)
        error = f"HTTP {status} from {endpoint.base_url}: {message}"
        if status in RETRYABLE_STATUS or status >= 500:
            endpoint.failures += 1
            return _Outcome(error=error, retryable=True, retry_after=_retry_after(response.headers))
        lowered = message.lower()
        if status in (400, 422) and ("response_format" in lowered or "json_schema" in lowered):
            return _Outcome(error=error, format_unsupported=True)
        if status in (400, 422) and any(name in lowered for name in NEUTRAL_SAMPLING):
            return _Outcome(error=error, sampling_unsupported=True)
        return _Outcome(error=error, retryable=False, unserved=status in UNSERVED_STATUS)

    def _error_message(self, response: httpx.Response) -> str:
        try:
            data = response.json()
            err = data.get("error", data) if isinstance(data, dict) else data
            message = err.get("message") if isinstance(err, dict) else err
            text = str(message if message is not None else data)
        except ValueError:
            text = response.text
        return self._redact(" ".join(text.split()))[:300]

    def _completion_from(self, data: dict[str, Any], req: ChatRequest) -> Completion:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        refusal = message.get("refusal")
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        prompt_tokens = usage.get("prompt_tokens")
        completion_tokens = usage.get("completion_tokens")
        if prompt_tokens is None:  # servers without usage: estimate so the accounting is not zero
            prompt_tokens = self.count_prompt_tokens(req.messages)
        if completion_tokens is None:
            completion_tokens = self.count_tokens(text)
        return Completion(
            text=text,
            prompt_tokens=int(prompt_tokens),
            completion_tokens=int(completion_tokens),
            cached_tokens=int(details.get("cached_tokens") or 0),
            finish_reason=choice.get("finish_reason") or "stop",
            model=str(data.get("model") or self.config.model),
            error=f"model refused: {refusal}" if refusal and not text else None,
        )
