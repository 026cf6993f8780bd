"""What the semantic chunker's cap on chunk length (``max_chunk_tokens``) changes.

Run from the repository root (one core, a few minutes: MiniLM embeds every sentence group once):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/semantic_cap.py            # print the table
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/semantic_cap.py --write    # into docs/baselines.md

Data: the FairytaleQA validation stories, prepared as the evaluation prepares books (units under
2,000 words). The chunker as configured (packaged MiniLM, buffer 1, 95th percentile) without a
cap (``max_chunk_tokens: null``, the method as described) and with the default cap (``auto``:
the embedder's window less its two special tokens). The embeddings are computed once and shared
by both, so the rows differ only by the cap. "Over the window": chunks whose text has more word
pieces than the embedder reads, which it embeds from their beginning only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.chunkers.semantic import SPECIAL_TOKENS, SemanticChunker  # noqa: E402
from litseg.embeddings import load_embedder  # noqa: E402
from litseg.rag.benchmarks.fairytaleqa import load_fairytaleqa  # noqa: E402
from litseg.rag.evaluation.sources import benchmark_sources, read_books  # noqa: E402
from litseg.segmentation.preprocess import prepare_document  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "baselines.md"
SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared")) / "data"


class SharedEmbeddings:
    """The embedder with a memory of what it embedded, so both rows pay for the model once."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.max_seq_length = inner, inner.name, inner.max_seq_length
        self.memory: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self.memory})
        if todo:
            self.memory.update(zip(todo, self.inner.encode(todo)))
        return np.stack([self.memory[t] for t in texts])

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def table() -> str:
    docs = read_books(benchmark_sources(load_fairytaleqa(SHARED / "benchmarks" / "fairytaleqa", "val"), prepare_document))
    embedder = SharedEmbeddings(load_embedder())
    window = embedder.max_seq_length - SPECIAL_TOKENS
    rows = [f"FairytaleQA val: {len(docs)} stories, {sum(len(d.units) for d in docs.values())} units; "
            f"{embedder.name}, window {embedder.max_seq_length} word pieces ({window} of text).", "",
            "| max_chunk_tokens | chunks | words per chunk: median / max | over the window | cuts made by the cap |",
            "|---|---:|---:|---:|---:|"]
    for cap in (None, "auto"):
        chunker = SemanticChunker(embedder=embedder, max_chunk_tokens=cap)
        results = [chunker.chunk_unit(doc, unit) for doc in docs.values() for unit in doc.units]
        chunks = [c for r in results for c in r.chunks]
        words = [c.n_words for c in chunks]
        over = sum(embedder.count_tokens(c.text) > window for c in chunks)
        cap_cuts = sum(r.diagnostics["n_cap_cuts"] for r in results)
        rows.append(f"| {'null (no cap)' if cap is None else f'auto ({window})'} | {len(chunks):,} | "
                    f"{statistics.median(words):.0f} / {max(words):,} | {over:,} ({over / len(chunks):.0%}) | "
                    f"{cap_cuts:,} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the table into docs/baselines.md")
    args = parser.parse_args(argv)
    body = table()
    print(body)
    if args.write:
        write_block(DOCS, "semantic_cap", "benchmarks/semantic_cap.py --write", body)
        print(f"written to {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
