"""Throughput of the OpenAI-compatible backend against the local stand-in server.

Every answer takes a fixed simulated latency (default 200 ms), so the figure measures how well
the client overlaps requests, not a model. Run:

    .venv/bin/python benchmarks/serving_throughput.py                # 1, 8, 32 concurrent requests
    .venv/bin/python benchmarks/serving_throughput.py --replicas 2 --concurrency 1 32 64
    .venv/bin/python benchmarks/serving_throughput.py --check        # exit 1 if 32 < 20x of 1
    .venv/bin/python benchmarks/serving_throughput.py --write        # the table into docs/serving.md

Target: 32 concurrent requests give at least 20 times the throughput of one at a time.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from litseg.llm.base import ChatRequest  # noqa: E402
from litseg.llm.openai_backend import OpenAIChatModel  # noqa: E402
from litseg.testing.fake_openai_server import FakeOpenAIServer  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "serving.md"
BLOCK = "serving_throughput"

SCHEMA = {"type": "object", "properties": {"boundaries": {"type": "array", "items": {"type": "integer"}}},
          "required": ["boundaries"], "additionalProperties": False}


@dataclass
class Row:
    concurrency: int
    requests: int
    seconds: float
    requests_per_s: float
    speedup: float
    p50_latency_s: float
    errors: int
    server_max_in_flight: int | None  # measured only with --in-process servers


def _requests(n: int) -> list[ChatRequest]:
    system = "You mark narrative boundaries in a unit of fiction. " * 20  # shared prefix, as in a book
    return [ChatRequest(messages=[{"role": "system", "content": system},
                                  {"role": "user", "content": f"Unit {i}: sentences [0] ... [40]"}],
                        json_schema=SCHEMA, max_tokens=256) for i in range(n)]


@contextmanager
def _server_process(latency_s: float) -> Iterator[str]:
    """The stand-in in a process of its own, as a real server would be (no shared GIL with the client)."""
    proc = subprocess.Popen([sys.executable, "-m", "litseg.testing.fake_openai_server", "--port", "0",
                             "--latency", str(latency_s)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("listening on "):
            raise RuntimeError(f"stand-in server did not start: {line!r}")
        yield line.split()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def run_benchmark(concurrencies: list[int], latency_s: float, per_slot: int, replicas: int,
                  in_process: bool = False) -> list[Row]:
    """Throughput at each concurrency level; ``in_process`` runs the servers in this process's threads."""
    rows: list[Row] = []
    with ExitStack() as stack:
        servers: list[FakeOpenAIServer] = []
        if in_process:
            servers = [stack.enter_context(FakeOpenAIServer(latency_s=latency_s, record_bodies=False))
                       for _ in range(replicas)]
            urls = [s.base_url for s in servers]
        else:
            urls = [stack.enter_context(_server_process(latency_s)) for _ in range(replicas)]
        for concurrency in concurrencies:
            n = concurrency * per_slot
            with OpenAIChatModel("fake-model", base_urls=urls, max_concurrency=concurrency,
                                 trust_env=False) as model:
                # Steady state, as in a long run: the loop started and one connection per slot open.
                model.chat_batch(_requests(concurrency))
                for srv in servers:
                    srv.reset_stats()
                started = time.perf_counter()
                out = model.chat_batch(_requests(n))
                elapsed = time.perf_counter() - started
            rate = n / elapsed
            rows.append(Row(concurrency, n, round(elapsed, 3), round(rate, 2),
                            round(rate / rows[0].requests_per_s, 2) if rows else 1.0,
                            round(statistics.median(c.seconds for c in out), 3),
                            sum(c.error is not None for c in out),
                            sum(s.stats.max_in_flight for s in servers) if servers else None))
    return rows


def markdown(rows: list[Row], latency_s: float, per_slot: int, replicas: int, where: str,
             load: tuple[float, ...] | None) -> str:
    """The block of docs/serving.md: how it was measured, then one row per concurrency level."""
    load_s = ", ".join(f"{x:.1f}" for x in load) if load else "unknown"
    lines = [f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPU cores ({platform.machine()}, Python "
             f"{platform.python_version()}), load average before the run {load_s}: stand-in latency "
             f"{latency_s * 1000:.0f} ms per answer, {replicas} server(s) in {where}, {per_slot} requests per "
             "concurrency slot, after a warm-up batch that opens one connection per slot (as in a long run).",
             "", "| concurrency | requests | seconds | req/s | speedup | median latency | errors |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r.concurrency} | {r.requests} | {r.seconds:.2f} | {r.requests_per_s:.2f} | {r.speedup:.1f}x "
              f"| {r.p50_latency_s:.3f} s | {r.errors} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--latency", type=float, default=0.2, help="simulated seconds per answer")
    parser.add_argument("--per-slot", type=int, default=10, help="requests per concurrency slot")
    parser.add_argument("--replicas", type=int, default=1, help="stand-in servers behind the client")
    parser.add_argument("--in-process", action="store_true",
                        help="run the stand-in servers in threads of this process (shares the GIL)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the 32-way speedup is >= 20")
    parser.add_argument("--write", action="store_true", help=f"write the table into docs/{DOCS.name}")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None

    rows = run_benchmark(args.concurrency, args.latency, args.per_slot, args.replicas, args.in_process)
    where = "in-process threads" if args.in_process else "separate processes"
    print(f"stand-in latency {args.latency * 1000:.0f} ms per request, {args.replicas} server(s) in {where}")
    print(f"{'concurrency':>11} {'requests':>8} {'seconds':>8} {'req/s':>8} {'speedup':>8} "
          f"{'p50 lat s':>9} {'errors':>6} {'server max in flight':>20}")
    for r in rows:
        inflight = "-" if r.server_max_in_flight is None else str(r.server_max_in_flight)
        print(f"{r.concurrency:>11} {r.requests:>8} {r.seconds:>8.2f} {r.requests_per_s:>8.2f} "
              f"{r.speedup:>7.1f}x {r.p50_latency_s:>9.3f} {r.errors:>6} {inflight:>20}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([asdict(r) for r in rows], fh, indent=2)
    if args.write:
        write_block(DOCS, BLOCK, "benchmarks/serving_throughput.py --write",
                    markdown(rows, args.latency, args.per_slot, args.replicas, where, load))
        print(f"wrote the table into {DOCS}")
    if args.check:
        at32 = next((r for r in rows if r.concurrency == 32), None)
        if at32 is None or rows[0].concurrency != 1:
            print("--check needs concurrency 1 first and 32 among the levels", file=sys.stderr)
            return 2
        if at32.speedup < 20 or any(r.errors for r in rows):
            print(f"FAILED: 32-way speedup {at32.speedup}x (< 20x) or errors", file=sys.stderr)
            return 1
        print(f"OK: 32-way speedup {at32.speedup}x >= 20x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
