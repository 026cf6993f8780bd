"""Run many sequential LLM conversations while sending their calls in batches.

Each unit's validate-retry loop is plain sequential code that calls ``ask(messages)``. Running
the loops in worker threads and gathering their pending calls into one ``chat_batch`` lets a
batching backend (vLLM, an async HTTP client, batched ``generate``) serve many units at once,
retries included, without the loops knowing about each other.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import TypeVar

from litseg.errors import SetupError
from litseg.llm.base import ChatModel, ChatRequest, Completion

log = logging.getLogger(__name__)
R = TypeVar("R")
Ask = Callable[[ChatRequest], Completion]


def run_batched(
    llm: ChatModel,
    jobs: Iterable[Callable[[Ask], R]],
    *,
    workers: int = 8,
    max_batch: int = 64,
    linger_s: float = 0.05,
) -> Iterator[R]:
    """Run ``job(ask)`` for every job, ``workers`` at a time, yielding results as jobs finish.

    ``ask`` blocks until the batch holding its request comes back. A batch is sent once every
    running job is waiting, once ``max_batch`` requests are queued, or ``linger_s`` after the
    first queued request. Exceptions raised by a job are re-raised here.
    """
    jobs = list(jobs)
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield job(llm.chat)
        return
    yield from _Batcher(llm, jobs, max_batch, linger_s).run(min(workers, len(jobs)))


class _Batcher:
    """Worker threads running the jobs, and the dispatcher (the caller's thread) batching their calls."""

    def __init__(self, llm: ChatModel, jobs: list[Callable[[Ask], R]], max_batch: int, linger_s: float) -> None:
        self.llm = llm
        self.jobs = jobs
        self.max_batch = max_batch
        self.linger_s = linger_s
        self.requests: queue.Queue[tuple[ChatRequest, Future[Completion]]] = queue.Queue()
        self.results: queue.Queue[tuple[bool, object]] = queue.Queue()
        self.lock = threading.Lock()
        self.running = 0
        self.next = 0

    def ask(self, req: ChatRequest) -> Completion:
        fut: Future[Completion] = Future()
        self.requests.put((req, fut))
        return fut.result()

    def worker(self) -> None:
        while True:
            with self.lock:
                if self.next >= len(self.jobs):
                    self.running -= 1
                    self.requests.put((None, None))  # type: ignore[arg-type]  # wake the dispatcher
                    return
                job = self.jobs[self.next]
                self.next += 1
            try:
                self.results.put((True, job(self.ask)))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                self.results.put((False, exc))

    def run(self, n_workers: int) -> Iterator[R]:
        self.running = n_workers
        threads = [threading.Thread(target=self.worker, daemon=True, name=f"llm-job-{i}") for i in range(n_workers)]
        for t in threads:
            t.start()
        done = 0
        while done < len(self.jobs):
            while not self.results.empty():  # hand out finished results first so the caller sees progress
                ok, value = self.results.get()
                done += 1
                if not ok:
                    raise value  # type: ignore[misc]
                yield value  # type: ignore[misc]
            if done >= len(self.jobs):
                break
            pending = self.gather()
            if pending:
                self.send(pending)
        for t in threads:
            t.join(timeout=1)

    def gather(self) -> list[tuple[ChatRequest, Future[Completion]]]:
        """The next batch: what is queued once all running jobs wait, max_batch or linger_s is reached."""
        try:
            first = self.requests.get(timeout=0.2)
        except queue.Empty:
            return []
        pending = [first] if first[0] is not None else []
        deadline = time.monotonic() + self.linger_s
        while pending and len(pending) < self.max_batch:
            with self.lock:
                all_waiting = len(pending) >= self.running
            if all_waiting:
                break
            try:
                item = self.requests.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item[0] is not None:
                pending.append(item)
        return pending

    def send(self, pending: list[tuple[ChatRequest, Future[Completion]]]) -> None:
        try:
            answers = self.llm.chat_batch([r for r, _ in pending])
        except SetupError as exc:  # the model cannot serve at all: no use asking one by one
            for _, fut in pending:
                fut.set_exception(exc)
        except Exception:  # noqa: BLE001 - one bad request must not fail its batch-mates
            log.warning("a batch of %d requests failed; asking them one by one", len(pending), exc_info=True)
            for req, fut in pending:
                try:
                    fut.set_result(self.llm.chat(req))
                except Exception as exc:  # noqa: BLE001 - handed to the job that asked
                    fut.set_exception(exc)
        else:
            for (_, fut), ans in zip(pending, answers, strict=True):
                fut.set_result(ans)
