"""Speed of each non-LLM chunker on the longest novel in ``../shared/data/texts``.

Run from the repository root (one core):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/chunker_speed.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/chunker_speed.py --only recursive,token-ws --json out.json
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/chunker_speed.py --repeat 3 --write   # into docs/baselines.md

The book is prepared once with the project's preprocessing (units under 2,000 words, indexed
sentences); that time is reported but not charged to any chunker. Each chunker is built first
(tokenizer / model loading is reported in its own column), then timed over all units of the book.
Characters per second = characters inside the units / chunking seconds (wall clock), and per
CPU second of this process (steadier on a shared machine); the best of ``--repeat`` runs is kept.
Chunkers whose packages are missing are skipped with the reason. ``--write`` puts the table into
the generated block ``chunker_speed`` of docs/baselines.md (every chunker, so no ``--only``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.chunkers.base import Chunker  # noqa: E402
from litseg.chunkers.merge import DynamicMerge  # noqa: E402
from litseg.chunkers.recursive import RecursiveChunker  # noqa: E402
from litseg.chunkers.token import TokenChunker  # noqa: E402
from litseg.segmentation.preprocess import prepare_document  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "baselines.md"
SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared")) / "data"


def _semantic() -> Chunker:
    from litseg.chunkers.semantic import SemanticChunker

    return SemanticChunker()


def _minilm_wordpiece() -> Chunker:
    from litseg.embeddings import packaged_model_dir

    return TokenChunker(chunk_size=128, overlap=0, tokenizer=str(packaged_model_dir()))


CHUNKERS: dict[str, tuple[str, Callable[[], Chunker]]] = {
    "token-ws": ("token, 128 whitespace tokens",
                 lambda: TokenChunker(chunk_size=128, overlap=0, tokenizer="whitespace")),
    "token-smollm2": ("token, 128 SmolLM2 tokens, overlap 16",
                      lambda: TokenChunker(chunk_size=128, overlap=16, tokenizer="embedded")),
    "token-wordpiece": ("token, 128 MiniLM word pieces", _minilm_wordpiece),
    "recursive": ("recursive, 1,000 chars", lambda: RecursiveChunker(chunk_size=1000, chunk_overlap=0)),
    "recursive-overlap": ("recursive, 1,000 chars, overlap 200",
                          lambda: RecursiveChunker(chunk_size=1000, chunk_overlap=200)),
    "recursive+merge": ("recursive 1,000 + merge to 350 words",
                        lambda: DynamicMerge(RecursiveChunker(chunk_size=1000, chunk_overlap=0), target=350,
                                             measure="words")),
    "semantic": ("semantic, MiniLM, buffer 1, p95", _semantic),
}


def longest_novel(texts: Path) -> Path:
    novels = sorted((texts / "novel").glob("*.txt"), key=lambda p: p.stat().st_size, reverse=True)
    if not novels:
        raise SystemExit(f"no novels under {texts / 'novel'}; set LITSEG_SHARED_DIR or pass --book")
    return novels[0]


def measure(chunker: Chunker, doc: Any, repeat: int) -> tuple[float, float, int, list[int]]:
    """Best wall-clock and process-CPU seconds over ``repeat`` runs, chunk count, chunk lengths."""
    best = best_cpu = float("inf")
    n_chunks, lengths = 0, []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        results = list(chunker.chunk_units(doc, doc.units))
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
        n_chunks = sum(len(r.chunks) for r in results)
        lengths = sorted(len(c.main_text) for r in results for c in r.chunks)
    return best, best_cpu, n_chunks, lengths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--book", type=Path, help="a book file (default: the longest novel in ../shared)")
    ap.add_argument("--only", help="comma-separated subset of: " + ", ".join(CHUNKERS))
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per chunker (best kept; semantic runs once)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--write", action="store_true", help=f"write the table into {DOCS.relative_to(REPO)}")
    args = ap.parse_args()
    if args.write and args.only:
        raise SystemExit("--write needs every chunker: no --only")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None

    book = args.book or longest_novel(SHARED / "texts")
    t0 = time.perf_counter()
    doc = prepare_document(book)
    prep_s = time.perf_counter() - t0
    chars = sum(u.end - u.start for u in doc.units)
    sentences = sum(u.n_sentences for u in doc.units)
    print(f"{book.name}: {len(doc.text):,} characters, {len(doc.units)} units, {chars:,} characters in units, "
          f"{sentences:,} sentences; preprocessing {prep_s:.2f} s "
          f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})\n", flush=True)

    names = args.only.split(",") if args.only else list(CHUNKERS)
    rows: list[dict[str, Any]] = []
    for name in names:
        label, factory = CHUNKERS[name]
        try:
            t0 = time.perf_counter()
            chunker = factory()
            load_s = time.perf_counter() - t0
        except (ImportError, FileNotFoundError, RuntimeError) as exc:
            print(f"skipped {name}: {exc}", flush=True)
            continue
        seconds, cpu, n_chunks, lengths = measure(chunker, doc, 1 if name == "semantic" else args.repeat)
        row = {"chunker": name, "config": label, "load_s": round(load_s, 2), "seconds": round(seconds, 3),
               "cpu_seconds": round(cpu, 3), "chars_per_s": round(chars / seconds),
               "chars_per_cpu_s": round(chars / cpu), "chunks": n_chunks,
               "median_chunk_chars": lengths[len(lengths) // 2] if lengths else 0}
        rows.append(row)
        print(f"{name}: {row['chars_per_s']:,} chars/s ({seconds:.2f} s wall, {cpu:.2f} s CPU)", flush=True)

    table = markdown(rows)
    print("\n" + table)
    if args.write:
        load_s = ", ".join(f"{x:.1f}" for x in load) if load else "unknown"
        note = (f"*{book.name}*: {len(doc.text):,} characters; {len(doc.units)} units under the 2,000-word cap, "
                f"{chars:,} characters and {sentences:,} sentences inside them. Measured {time.strftime('%Y-%m-%d')} "
                f"on {os.cpu_count()} CPU cores ({platform.machine()}, Python {platform.python_version()}), "
                f"load average before the run {load_s}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, best of "
                f"{args.repeat} runs (semantic: one run); preprocessing took {prep_s:.2f} s. On a shared machine the "
                "wall-clock column is pessimistic; the CPU column counts this process only.")
        write_block(DOCS, "chunker_speed", "benchmarks/chunker_speed.py --write", f"{note}\n\n{table}")
        print(f"\nwrote the table into {DOCS}")
    if args.json:
        args.json.write_text(json.dumps({"book": book.name, "chars": chars, "units": len(doc.units),
                                         "sentences": sentences, "rows": rows}, indent=2), encoding="utf-8")


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| chunker | configuration | characters / s | characters / CPU s | chunking s | load s | chunks "
             "| median chunk chars |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['chunker']} | {r['config']} | {r['chars_per_s']:,} | {r['chars_per_cpu_s']:,} "
              f"| {r['seconds']:.2f} | {r['load_s']:.1f} | {r['chunks']:,} | {r['median_chunk_chars']:,} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
