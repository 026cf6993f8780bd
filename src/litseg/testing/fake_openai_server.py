"""A local stand-in for an OpenAI-compatible chat server, with scriptable faults.

It listens on 127.0.0.1 only, on an ephemeral port, inside a background thread with its own
asyncio loop, and speaks just enough HTTP/1.1 (keep-alive included) for ``/v1/chat/completions``
and ``/v1/models``. Tests, the teacher pipeline's end-to-end fault test and the serving benchmark
all drive it the same way:

* ``latency_s``: seconds added to every answer, or a function of the request JSON.
* ``responder``: a function from the request JSON to the answer (a content string, a
  :class:`Reply`, or a full response dict). The default answers a JSON-schema request with the
  smallest instance of the schema and echoes the last user message otherwise.
* Faults, decided per arriving request in this order: an explicit queue (:meth:`script`), a
  ``fault_plan(body, attempt)`` hook, ``fail_first_k`` (the first k attempts of each distinct
  request fail with ``fail_kind``), then random faults (``fault_rate``/``fault_kinds``, seeded).
* Measurements in :attr:`stats`: requests seen, in flight now and at most, faults served, the
  attempts of each distinct request, the bodies and the Authorization headers received.

Fault kinds: ``ok``, ``429`` (with Retry-After), ``500``, ``503``, ``hang`` (answer only after
``hang_s``, longer than a client's timeout), ``drop`` (headers and half the body, then the
connection is cut), ``reset`` (cut before any byte), ``malformed`` (HTTP 200 whose content is not
JSON), ``truncated`` (content cut in half, finish_reason ``length``), ``bad_body`` (HTTP 200
whose body is not JSON), ``400`` and ``401``.

Run it by hand with ``python -m litseg.testing.fake_openai_server --port 8000 --latency 0.2``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

FAULT_KINDS = (
    "ok", "429", "500", "503", "hang", "drop", "reset", "malformed", "truncated", "bad_body", "400", "401",
)


@dataclass(slots=True)
class Reply:
    """A responder's answer when it wants to set more than the content."""

    content: str
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None


@dataclass(slots=True)
class Fault:
    """One scripted action; a bare kind string is accepted wherever a Fault is."""

    kind: str
    retry_after: float | None = None  # seconds, sent as the Retry-After header of a 429/503
    message: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {', '.join(FAULT_KINDS)}")


Responder = Callable[[dict[str, Any]], "str | Reply | dict[str, Any]"]
FaultPlan = Callable[[dict[str, Any], int], "Fault | str | None"]


@dataclass
class ServerStats:
    requests: int = 0  # chat-completion requests received (every attempt counts)
    in_flight: int = 0
    max_in_flight: int = 0
    served: Counter = field(default_factory=Counter)  # fault kind -> times served
    attempts: Counter = field(default_factory=Counter)  # distinct request key -> attempts seen
    response_format_rejected: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)


def request_key(body: dict[str, Any]) -> str:
    """Identity of a request across retries: its messages (the response_format may be dropped)."""
    blob = json.dumps(body.get("messages"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def minimal_instance(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """The smallest value that satisfies a (common subset of) JSON Schema."""
    root = root if root is not None else schema
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref is supported, got {ref!r}")
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part]
        return minimal_instance(node, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combo in ("anyOf", "oneOf", "allOf"):
        if schema.get(combo):
            return minimal_instance(schema[combo][0], root)
    kind = schema.get("type") or "object"  # JSON Schema: no type, any value; an object will do
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: minimal_instance(props.get(name) or {}, root) for name in schema.get("required") or []}
    if kind == "array":
        items = schema.get("items") or {}
        return [minimal_instance(items, root) for _ in range(int(schema.get("minItems") or 0))]
    if kind == "string":
        return "x" * int(schema.get("minLength") or 0)
    if kind in ("integer", "number"):
        bound = "minimum" if "minimum" in schema else "exclusiveMinimum"
        low = schema[bound] if bound in schema else 0
        value = low + 1 if "exclusiveMinimum" in schema and "minimum" not in schema else low
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    return None


def default_responder(body: dict[str, Any]) -> str:
    """Schema requests get the minimal valid instance; others get the last user message echoed."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return json.dumps(minimal_instance(fmt["json_schema"]["schema"]))
    users = [m.get("content") or "" for m in body.get("messages") or [] if m.get("role") == "user"]
    return f"echo: {users[-1] if users else ''}"


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class FakeOpenAIServer:
    """See the module docstring. Use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        model: str = "fake-model",
        latency_s: float | Callable[[dict[str, Any]], float] = 0.0,
        fail_first_k: int = 0,
        fail_kind: str = "500",
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = ("429", "500", "drop"),
        fault_plan: FaultPlan | None = None,
        seed: int = 0,
        retry_after_s: float = 0.05,
        hang_s: float = 30.0,
        supports_response_format: bool = True,
        api_key: str | None = None,
        record_bodies: bool = True,
        port: int = 0,
    ) -> None:
        for kind in (fail_kind, *fault_kinds):
            Fault(kind)  # validates the name
        self.responder: Responder = responder or default_responder
        self.model = model
        self.latency_s = latency_s
        self.fail_first_k = fail_first_k
        self.fail_kind = fail_kind
        self.fault_rate = fault_rate
        self.fault_kinds = tuple(fault_kinds)
        self.fault_plan = fault_plan
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.supports_response_format = supports_response_format
        self.api_key = api_key
        self.record_bodies = record_bodies
        self.stats = ServerStats()
        self._rng = random.Random(seed)
        self._script: deque[Fault] = deque()
        self._seen_prefixes: set[str] = set()
        self._requested_port = port
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._conn_tasks: set[asyncio.Task] = set()
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._on_connection, "127.0.0.1", self._requested_port)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # reported to the caller of start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._shutdown())
                loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conn_tasks):
            task.cancel()
        await asyncio.gather(*self._conn_tasks, return_exceptions=True)

    # ----------------------------------------------------------------- scripting
    def script(self, *faults: Fault | str) -> None:
        """Queue actions for the next requests, in arrival order (before any other fault rule)."""
        with self._lock:
            self._script.extend(f if isinstance(f, Fault) else Fault(f) for f in faults)

    def reset_stats(self) -> None:
        """Start counting afresh (requests still in flight stay counted as in flight)."""
        self.stats = ServerStats(in_flight=self.stats.in_flight)

    def _decide(self, body: dict[str, Any]) -> Fault:
        key = request_key(body)
        self.stats.attempts[key] += 1
        attempt = self.stats.attempts[key]
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.fault_plan is not None:
            planned = self.fault_plan(body, attempt)
            if planned is not None:
                return planned if isinstance(planned, Fault) else Fault(planned)
        if attempt <= self.fail_first_k:
            return Fault(self.fail_kind)
        if self.fault_rate > 0 and self._rng.random() < self.fault_rate:
            return Fault(self._rng.choice(self.fault_kinds))
        return Fault("ok")

    # ----------------------------------------------------------------- HTTP
    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conn_tasks.add(task)
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    break
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                raw = await reader.readexactly(length) if length else b""
                keep_alive = await self._dispatch(method, path.split("?", 1)[0], headers, raw, writer)
                if not keep_alive or (headers.get("connection") or "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._conn_tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _send(
        self, writer: asyncio.StreamWriter, status: int, payload: bytes, extra: dict[str, str] | None = None
    ) -> None:
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                  429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}
        head = [f"HTTP/1.1 {status} {reason.get(status) or 'Status'}", "Content-Type: application/json",
                f"Content-Length: {len(payload)}"]
        head += [f"{k}: {v}" for k, v in (extra or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
        await writer.drain()

    @staticmethod
    def _error(message: str, kind: str, param: str | None = None) -> bytes:
        return json.dumps({"error": {"message": message, "type": kind, "param": param, "code": None}}).encode()

    async def _dispatch(
        self, method: str, path: str, headers: dict[str, str], raw: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        if method == "GET" and path.rstrip("/").endswith("/models"):
            data = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "litseg"}]}
            await self._send(writer, 200, json.dumps(data).encode())
            return True
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            await self._send(writer, 404, self._error(f"no route {method} {path}", "not_found"))
            return True
        self.stats.requests += 1
        self.stats.in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            return await self._chat(headers, raw, writer)
        finally:
            self.stats.in_flight -= 1

    async def _chat(self, headers: dict[str, str], raw: bytes, writer: asyncio.StreamWriter) -> bool:
        auth = headers.get("authorization")
        self.stats.authorizations.append(auth)
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            await self._send(writer, 400, self._error("request body is not JSON", "invalid_request_error"))
            return True
        if self.record_bodies:
            self.stats.bodies.append(body)
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            await self._send(writer, 401, self._error("invalid API key", "authentication_error"))
            return True
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema" and not self.supports_response_format:
            self.stats.response_format_rejected += 1
            msg = "response_format of type json_schema is not supported by this server"
            await self._send(writer, 400, self._error(msg, "invalid_request_error", "response_format"))
            return True

        fault = self._decide(body)
        self.stats.served[fault.kind] += 1
        latency = self.latency_s(body) if callable(self.latency_s) else self.latency_s
        if latency:
            await asyncio.sleep(latency)
        kind = fault.kind
        if kind == "429":
            wait = fault.retry_after if fault.retry_after is not None else self.retry_after_s
            await self._send(writer, 429, self._error(fault.message or "rate limit reached", "rate_limit_error"),
                             {"Retry-After": f"{wait:g}"})
            return True
        if kind in ("500", "503"):
            extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
            await self._send(writer, int(kind), self._error(fault.message or "server error", "server_error"), extra)
            return True
        if kind in ("400", "401"):
            await self._send(writer, int(kind), self._error(fault.message or f"rejected ({kind})",
                                                            "invalid_request_error"))
            return True
        if kind == "reset":
            writer.transport.abort()
            return False
        if kind == "hang":
            await asyncio.sleep(self.hang_s)

        try:
            payload = self._completion_body(body, kind)
        except Exception as exc:  # a broken responder is the test's bug: say so in the answer
            log.exception("responder failed")
            await self._send(writer, 500, self._error(f"responder failed: {exc!r}", "server_error"))
            return True
        if kind == "bad_body":
            await self._send(writer, 200, b"<html>upstream proxy error</html>")
            return True
        data = json.dumps(payload).encode()
        if kind == "drop":
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            writer.write(head.encode("latin-1") + data[: len(data) // 2])
            await writer.drain()
            writer.transport.abort()
            return False
        await self._send(writer, 200, data)
        return True

    def _completion_body(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        answer = self.responder(body)
        if isinstance(answer, dict):
            return answer
        reply = answer if isinstance(answer, Reply) else Reply(content=str(answer))
        content, finish = reply.content, reply.finish_reason
        if kind == "malformed":
            content = "{'segments': [unquoted, 'and', trailing,,"
        elif kind == "truncated":
            content, finish = content[: max(1, len(content) // 2)], "length"
        messages = body.get("messages") or []
        prompt_tokens = sum(_estimate_tokens(str(m.get("content") or "")) + 4 for m in messages)
        # A prefix-cache stand-in: everything before the last message counts as cached once seen.
        prefix = json.dumps(messages[:-1], sort_keys=True)
        cached = 0
        if len(messages) > 1:
            if prefix in self._seen_prefixes:
                cached = sum(_estimate_tokens(str(m.get("content") or "")) + 4 for m in messages[:-1])
            self._seen_prefixes.add(prefix)
        usage = {
            "prompt_tokens": reply.prompt_tokens if reply.prompt_tokens is not None else prompt_tokens,
            "completion_tokens": (reply.completion_tokens if reply.completion_tokens is not None
                                  else _estimate_tokens(content)),
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens if reply.cached_tokens is not None
                                      else cached},
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return {
            "id": f"chatcmpl-{self.stats.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish}],
            "usage": usage,
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Local OpenAI-compatible stand-in server (loopback only).")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(latency_s=args.latency, fault_rate=args.fault_rate, seed=args.seed, port=args.port)
    with server:
        print(f"listening on {server.base_url} (Ctrl-C to stop)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
