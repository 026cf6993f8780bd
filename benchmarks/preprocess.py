"""Preprocessing speed, stage by stage, on one book (default: the longest novel in the shared
texts). Prints a Markdown table of seconds and MB/s per stage (best of ``--repeat`` runs).

Run (one core, as the target is stated for one core):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/preprocess.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/preprocess.py --file path/to/book.txt --repeat 5
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/preprocess.py --write   # into docs/bench_preprocess.md

Stages: read (decode the file), strip (Gutenberg header/footer), structure (headings, front and
back matter), units (segments -> units with the word cap), sentences (1-based sentence index of
every unit), and the whole ``prepare_document`` call end to end. Wall time and CPU (process)
time are both shown; on a shared machine the CPU time is the fairer one-core figure. ``--write``
puts the table into the generated block ``preprocess.<file name>`` of docs/bench_preprocess.md.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import platform
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.segmentation.config import default_preprocess  # noqa: E402
from litseg.segmentation.gutenberg import gutenberg_bounds  # noqa: E402
from litseg.segmentation.preprocess import index_sentences, prepare_document  # noqa: E402
from litseg.segmentation.reading import read_document  # noqa: E402
from litseg.segmentation.structure import analyze_structure  # noqa: E402
from litseg.segmentation.units import units_from_structure  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "bench_preprocess.md"
TARGET_MB_S = 1.0


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


class _Clock:
    """Wall and CPU (process) time of consecutive stages; CPU time is what one core spends on
    the work even when other processes share the machine."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._w, self._c = time.perf_counter(), time.process_time()

    def lap(self, name: str) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.wall[name], self.cpu[name] = w - self._w, c - self._c
        self._w, self._c = w, c


def run_once(path: Path, max_words: int, max_sentence_words: int) -> tuple[_Clock, int, int]:
    clock = _Clock()
    doc = read_document(path)
    clock.lap("read")
    start, end = gutenberg_bounds(doc.text, doc.body_start, doc.body_end)
    clock.lap("strip")
    structure = analyze_structure(doc.text, start, end)
    clock.lap("structure")
    reading = default_preprocess()
    units = units_from_structure(doc, structure, max_words=max_words, keep_front_matter=reading.keep_front_matter,
                                 index_matter=reading.index_matter)
    clock.lap("units")
    n_sent = 0
    for unit in units:
        unit.sentences = index_sentences(doc.text, unit, max_sentence_words=max_sentence_words)
        n_sent += len(unit.sentences)
    clock.lap("sentences")
    clock.wall["all stages"] = sum(clock.wall.values())
    clock.cpu["all stages"] = sum(clock.cpu.values())
    clock._w, clock._c = time.perf_counter(), time.process_time()
    prepare_document(path, dataclasses.replace(default_preprocess(), max_sentence_words=max_sentence_words),
                     max_words=max_words)
    clock.lap("prepare_document (end to end)")
    return clock, len(units), n_sent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", type=Path, help="book to process (default: longest shared novel)")
    ap.add_argument("--repeat", type=int, default=3, help="runs; the best time per stage counts")
    ap.add_argument("--max-words", type=int, default=2000)
    ap.add_argument("--max-sentence-words", type=int, default=120)
    ap.add_argument("--write", action="store_true", help=f"write the table into {DOCS.relative_to(REPO)}")
    args = ap.parse_args(argv)
    path = args.file or longest_novel(shared_texts())
    size_mb = path.stat().st_size / 1e6
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    n_units = n_sent = 0
    for _ in range(max(1, args.repeat)):
        clock, n_units, n_sent = run_once(path, args.max_words, args.max_sentence_words)
        for k in clock.wall:
            wall[k] = min(clock.wall[k], wall.get(k, float("inf")))
            cpu[k] = min(clock.cpu[k], cpu.get(k, float("inf")))
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    print(f"file: {path.name} ({size_mb:.2f} MB), units: {n_units}, sentences: {n_sent}, "
          f"best of {args.repeat}, OMP_NUM_THREADS={threads}")
    print()
    body = markdown(wall, cpu, size_mb)
    print(body)
    if args.write:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
        note = (f"`{path.name}` ({size_mb:.2f} MB, {n_units} units, {n_sent:,} sentences), best of {args.repeat}; "
                f"measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPU cores ({platform.machine()}, Python "
                f"{platform.python_version()}), load average {load}, "
                f"OMP_NUM_THREADS={threads}.")
        end = "prepare_document (end to end)"
        verdict = (f"**End to end: {size_mb / wall[end]:.1f} MB/s wall, {size_mb / cpu[end]:.1f} MB/s CPU**, "
                   f"{size_mb / cpu[end] / TARGET_MB_S:.1f}x the {TARGET_MB_S:g} MB/s target (CPU time).")
        name = "preprocess." + re.sub(r"[^\w.-]", "_", path.stem)
        script = "benchmarks/preprocess.py" + ("" if args.file is None else f" --file {args.file}") + " --write"
        write_block(DOCS, name, script, f"{note}\n\n{body}\n\n{verdict}")
        print(f"\nwrote block {name} into {DOCS}")
    return 0


def markdown(wall: dict[str, float], cpu: dict[str, float], size_mb: float) -> str:
    def rate(v: float) -> str:
        return f"{size_mb / v:.2f}" if v > 0 else "inf"

    lines = ["| stage | wall s | wall MB/s | CPU s | CPU MB/s |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {wall[k]:.3f} | {rate(wall[k])} | {cpu[k]:.3f} | {rate(cpu[k])} |" for k in wall]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
