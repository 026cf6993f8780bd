"""Preprocessing speed, stage by stage, on one book (default: the longest novel in the shared
texts). Prints a Markdown table of seconds and MB/s per stage (best of ``--repeat`` runs).

Run (one core, as the target is stated for one core):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/preprocess.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/preprocess.py --file path/to/book.txt --repeat 5

Stages: read (decode the file), strip (Gutenberg header/footer), structure (headings, front and
back matter), units (segments -> units with the word cap), sentences (1-based sentence index of
every unit), and the whole ``prepare_document`` call end to end.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.segmentation.gutenberg import gutenberg_bounds  # noqa: E402
from litseg.segmentation.preprocess import index_sentences, prepare_document  # noqa: E402
from litseg.segmentation.reading import read_document  # noqa: E402
from litseg.segmentation.structure import analyze_structure  # noqa: E402
from litseg.segmentation.units import units_from_structure  # noqa: E402


def shared_texts() -> Path:
    base = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))
    return base / "data" / "texts"


def longest_novel(texts: Path) -> Path:
    """The largest file of kind ``novel`` in the shared manifest."""
    with open(texts / "manifest.tsv", encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["kind"] == "novel"]
    if not rows:
        raise SystemExit(f"no novels listed in {texts / 'manifest.tsv'}")
    return max((texts / r["file"] for r in rows), key=lambda p: p.stat().st_size)


def run_once(path: Path, max_words: int, max_sentence_words: int) -> tuple[dict[str, float], int, int]:
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    doc = read_document(path)
    t1 = time.perf_counter()
    start, end = gutenberg_bounds(doc.text, doc.body_start, doc.body_end)
    t2 = time.perf_counter()
    structure = analyze_structure(doc.text, start, end)
    t3 = time.perf_counter()
    units = units_from_structure(doc, structure, max_words=max_words)
    t4 = time.perf_counter()
    n_sent = 0
    for unit in units:
        unit.sentences = index_sentences(doc.text, unit, max_sentence_words=max_sentence_words)
        n_sent += len(unit.sentences)
    t5 = time.perf_counter()
    prepare_document(path, max_words=max_words, max_sentence_words=max_sentence_words)
    t6 = time.perf_counter()
    times.update(read=t1 - t0, strip=t2 - t1, structure=t3 - t2, units=t4 - t3,
                 sentences=t5 - t4, staged_total=t5 - t0, prepare_document=t6 - t5)
    return times, len(units), n_sent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", type=Path, help="book to process (default: longest shared novel)")
    ap.add_argument("--repeat", type=int, default=3, help="runs; the best time per stage counts")
    ap.add_argument("--max-words", type=int, default=2000)
    ap.add_argument("--max-sentence-words", type=int, default=120)
    args = ap.parse_args(argv)
    path = args.file or longest_novel(shared_texts())
    size_mb = path.stat().st_size / 1e6
    best: dict[str, float] = {}
    n_units = n_sent = 0
    for _ in range(max(1, args.repeat)):
        times, n_units, n_sent = run_once(path, args.max_words, args.max_sentence_words)
        for k, v in times.items():
            best[k] = min(v, best.get(k, float("inf")))
    print(f"file: {path.name} ({size_mb:.2f} MB), units: {n_units}, sentences: {n_sent}, "
          f"best of {args.repeat}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print()
    print("| stage | seconds | MB/s |")
    print("|---|---:|---:|")
    for k, v in best.items():
        print(f"| {k} | {v:.3f} | {size_mb / v if v > 0 else float('inf'):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
