"""Indexing throughput and query latency of the embedded Qdrant store at 10k and 100k chunks.

Run from the repository root (one core):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/qdrant_index.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/qdrant_index.py --sizes 10000 --location /tmp/qdrant --json out.json
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/qdrant_index.py --write      # into docs/evaluation.md
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/qdrant_index.py --sizes 10000 --location disk --partition none --write

This measures the store only, not the embedder: the dense vectors are random unit vectors of
dimension 384 (MiniLM's size) and the sparse vectors are random BM25-like term weights (30
distinct terms per chunk out of a 50,000-term vocabulary), written exactly as the RAG index
writes them (:class:`litseg.rag.stores.qdrant.QdrantStore`: one collection, a named dense and a named
sparse vector, book id and position as payload; 1,000 chunks per book).

Reported per size and layout: upsert throughput (chunks per second, wall clock, batches of 256)
and the p50/p95 latency of single queries (``QdrantStore.search`` with one request) for dense
and sparse search restricted to one book by the payload filter, as retrieval does, and of dense
search over the whole collection. Layouts: ``none`` = one collection for all books (the
default); ``book`` = one collection per book (``retrieval.store.partition=book``).

``--write`` puts the table into a generated block of docs/evaluation.md: ``qdrant_index`` for the
in-memory store, ``qdrant_index.disk`` for ``--location disk`` (:mod:`litseg.utils.docblocks`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402

from litseg.rag.index import SparseVector  # noqa: E402
from litseg.rag.stores.qdrant import QdrantStore  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "evaluation.md"

DIM = 384
VOCAB = 50_000
TERMS_PER_CHUNK = 30
CHUNKS_PER_BOOK = 1_000


def random_sparse(rng: np.random.Generator, n_terms: int) -> SparseVector:
    ids = np.unique(rng.integers(0, VOCAB, size=n_terms))
    return SparseVector(tuple(int(i) for i in ids), tuple(float(w) for w in rng.gamma(2.0, 0.5, size=len(ids))))


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)), "n": len(ms)}


def bench_size(n: int, location: str, n_queries: int, seed: int, partition: str = "none") -> dict[str, Any]:
    """``partition="none"``: one collection, book filter on every query (the default layout);
    ``"book"``: one collection per book (``retrieval.store.partition=book``), still filtered."""
    rng = np.random.default_rng(seed)
    dense = rng.standard_normal((n, DIM)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    sparse = [random_sparse(rng, TERMS_PER_CHUNK) for _ in range(n)]
    books = [f"book{i // CHUNKS_PER_BOOK:04d}" for i in range(n)]
    payloads = [{"book_id": b, "order": i % CHUNKS_PER_BOOK, "chunk_id": f"{b}:{i}"} for i, b in enumerate(books)]
    store = QdrantStore(location)
    groups: dict[str, list[int]] = {}
    for i, b in enumerate(books):
        groups.setdefault(f"bench_{n}_{b}" if partition == "book" else f"bench_{n}", []).append(i)
    try:
        t0 = time.perf_counter()
        for name, rows in groups.items():
            store.create_collection(name, dense_dim=DIM, sparse=True)
            store.upsert(name, rows, dense=dense[rows], sparse=[sparse[i] for i in rows],
                         payloads=[payloads[i] for i in rows])
        upsert_s = time.perf_counter() - t0
        assert sum(store.count(name) for name in groups) == n
        queries = rng.standard_normal((n_queries, DIM)).astype(np.float32)
        sparse_q = []
        for _ in range(n_queries):  # eight query terms, weight 1 each (term counts, as BM25 queries are)
            ids = sorted({int(i) for i in rng.integers(0, VOCAB, 8)})
            sparse_q.append(SparseVector(tuple(ids), tuple(1.0 for _ in ids)))
        n_books = len(set(books))
        timings: dict[str, list[float]] = {"dense_book_filter": [], "sparse_book_filter": []}
        if partition == "none":
            timings["dense_no_filter"] = []
        for i in range(n_queries):
            book = f"book{i % n_books:04d}"
            name = f"bench_{n}_{book}" if partition == "book" else f"bench_{n}"
            cases = [("dense_book_filter", queries[i], book), ("sparse_book_filter", sparse_q[i], book)]
            if partition == "none":
                cases.append(("dense_no_filter", queries[i], None))
            for kind, vec, filt in cases:
                t = time.perf_counter()
                hits = store.search(name, "dense" if kind.startswith("dense") else "sparse", [vec], [filt], [10])
                timings[kind].append(time.perf_counter() - t)
                if filt is not None:
                    assert all(books[p] == book for p, _ in hits[0])
        return {"chunks": n, "books": n_books, "location": location, "partition": partition,
                "upsert_seconds": upsert_s, "chunks_per_second": n / upsert_s,
                **{k: percentiles(v) for k, v in timings.items()}}
    finally:
        for name in groups:
            store.delete_collection(name)
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated collection sizes")
    ap.add_argument("--location", default=":memory:",
                    help=":memory: (default), 'disk' (a temporary folder), a folder, or a server URL")
    ap.add_argument("--queries", type=int, default=None, help="queries per size (default: 50 at <=10k, else 20)")
    ap.add_argument("--partition", default="none,book",
                    help="layouts to measure: none (one collection, book filter), book (one collection per book)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--write", action="store_true", help=f"write the table into {DOCS.relative_to(REPO)}")
    args = ap.parse_args()
    if args.write and args.location not in (":memory:", "disk"):
        raise SystemExit("--write documents the in-memory store or --location disk only")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    rows = []
    for partition in args.partition.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            nq = args.queries or (50 if n <= 10_000 else 20)
            if args.location == "disk":
                with tempfile.TemporaryDirectory(prefix="litseg-qdrant-") as tmp:
                    row = bench_size(n, tmp, nq, args.seed, partition)
                    row["location"] = "disk (temporary folder)"
            else:
                row = bench_size(n, args.location, nq, args.seed, partition)
            rows.append(row)
            print(json.dumps(row), flush=True)
    table = markdown(rows)
    print("\n" + table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    if args.write:
        load_s = ", ".join(f"{x:.1f}" for x in load) if load else "unknown"
        queries = args.queries or "50 at up to 10,000 chunks, else 20"
        note = (f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPU cores ({platform.machine()}, Python "
                f"{platform.python_version()}), load average before the run {load_s}, "
                f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; queries per size: {queries}.")
        name = "qdrant_index" if args.location == ":memory:" else "qdrant_index.disk"
        flags = "" if args.location == ":memory:" else f" --sizes {args.sizes} --location disk --partition {args.partition}"
        write_block(DOCS, name, f"benchmarks/qdrant_index.py{flags} --write", f"{note}\n\n{table}")
        print(f"\nwrote block {name} into {DOCS}")


def _ms(v: float) -> str:
    return f"{v:,.0f}" if v >= 10 else f"{v:.1f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| chunks | location | collections | upsert (chunks/s) | dense, book filter p50 / p95 (ms) | "
             "sparse, book filter p50 / p95 (ms) | dense, no filter p50 / p95 (ms) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{_ms(r[k]['p50_ms'])} / {_ms(r[k]['p95_ms'])}" if k in r else "–"
                 for k in ("dense_book_filter", "sparse_book_filter", "dense_no_filter")]
        layout = "one" if r["partition"] == "none" else f"one per book ({r['books']})"
        where = "a folder (on disk)" if r["location"].startswith("disk") else f"`{r['location']}`"
        lines.append(f"| {r['chunks']:,} | {where} | {layout} | {r['chunks_per_second']:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
