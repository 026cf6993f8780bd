"""What the recursive splitter does on hard-wrapped text, with and without ``unwrap_lines``.

Run from the repository root (one core, a few seconds):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/recursive_wrapped.py            # print the table
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/recursive_wrapped.py --write    # into docs/baselines.md

Data: a hard-wrapped shared novel (Metamorphosis, Project Gutenberg 5200: lines broken near 70
characters inside paragraphs), all shared novels together (Gutenberg files; how much of each is
wrapped, and how long its paragraphs are, varies), and the FairytaleQA validation
stories (one paragraph per line: not wrapped), each prepared as the evaluation prepares books
(units under 2,000 words, indexed sentences). Per chunker: chunks, the share of chunks whose main
text starts with a lower-case letter (a cut inside a sentence, nearly always), and the share of
cuts inside a unit that fall between the project's sentences (the evaluation's "cuts on sentence
breaks", `litseg.rag.chunk_quality`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.chunkers.recursive import RecursiveChunker  # noqa: E402
from litseg.rag.benchmarks.fairytaleqa import load_fairytaleqa  # noqa: E402
from litseg.rag.chunk_quality import chunk_boundaries, on_sentence_break  # noqa: E402
from litseg.rag.evaluation.sources import benchmark_sources, read_books  # noqa: E402
from litseg.segmentation.preprocess import prepare_document  # noqa: E402
from litseg.segmentation.types import Document  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "baselines.md"
SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared")) / "data"
WRAPPED_NOVEL = "5200_Metamorphosis.txt"
VARIANTS = {"recursive (as published)": RecursiveChunker(), "recursive, unwrap_lines=true": RecursiveChunker(unwrap_lines=True)}


def datasets() -> dict[str, list[Document]]:
    novels = sorted((SHARED / "texts" / "novel").glob("*.txt"))
    if not novels:
        raise SystemExit(f"no shared novels under {SHARED / 'texts' / 'novel'}; set LITSEG_SHARED_DIR")
    prepared = {p.name: prepare_document(p) for p in novels}
    stories = read_books(benchmark_sources(load_fairytaleqa(SHARED / "benchmarks" / "fairytaleqa", "val"),
                                          prepare_document))
    return {f"{WRAPPED_NOVEL.split('_', 1)[1][:-4]} (wrapped)": [prepared[WRAPPED_NOVEL]],
            f"all {len(novels)} shared novels (Gutenberg files)": list(prepared.values()),
            f"FairytaleQA val, {len(stories)} stories (not wrapped)": list(stories.values())}


def measure(chunker: RecursiveChunker, docs: list[Document]) -> tuple[int, int, int, int]:
    """Chunks, chunks starting in lower case, cuts inside units, cuts on sentence breaks."""
    chunks = lower = cuts = on_breaks = 0
    for doc in docs:
        for unit in doc.units:
            found = chunker.chunk_unit(doc, unit).chunks
            chunks += len(found)
            lower += sum(c.main_text[:1].islower() for c in found)
            sentences = [(s.start, s.end) for s in unit.sentences]
            boundaries = chunk_boundaries([c.main_spans[0] for c in found])
            cuts += len(boundaries)
            on_breaks += sum(on_sentence_break(sentences, b) for b in boundaries)
    return chunks, lower, cuts, on_breaks


def table() -> str:
    rows = ["| data | chunker | chunks | starting in lower case | cuts on sentence breaks |", "|---|---|---|---|---|"]
    for data, docs in datasets().items():
        for label, chunker in VARIANTS.items():
            chunks, lower, cuts, on_breaks = measure(chunker, docs)
            rows.append(f"| {data} | {label} | {chunks:,} | {lower:,} ({lower / chunks:.0%}) | "
                        f"{on_breaks:,} of {cuts:,} ({on_breaks / cuts:.0%}) |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the table into docs/baselines.md")
    args = parser.parse_args(argv)
    body = table()
    print(body)
    if args.write:
        write_block(DOCS, "recursive_wrapped", "benchmarks/recursive_wrapped.py --write", body)
        print(f"written to {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
