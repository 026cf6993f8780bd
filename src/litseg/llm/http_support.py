"""Plumbing of the OpenAI-compatible backend: a private event loop in a daemon thread (so the
blocking API works inside a caller's own loop), closing its HTTP clients, and reading Retry-After."""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx

T = TypeVar("T")


class LoopThread:
    """A private event loop in a daemon thread; the sync API submits coroutines to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="litseg-openai-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.loop.is_running():
            self.loop.close()


async def close_clients(clients: list[httpx.AsyncClient]) -> None:
    await asyncio.gather(*(client.aclose() for client in clients), return_exceptions=True)


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds asked by ``retry-after-ms`` or ``Retry-After`` (delta seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
