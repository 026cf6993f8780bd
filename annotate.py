"""Segment books into chunks with any chunker; outputs land in the Hydra run directory.

    python annotate.py input=path/to/book.txt                      # LitSeg-Lite, embedded model
    python annotate.py input='corpus/*.txt' method=recursive       # a baseline by name
    python annotate.py input=book.epub llm=openai llm.model=NAME   # any backend
    python annotate.py input=book.txt hydra.run.dir=outputs/run1   # rerun the same dir to resume

Writes chunks.jsonl, sentences.jsonl, diagnostics.jsonl, documents.jsonl, run_summary.json and
view.html. Exit code 1 when a book could not be read or a unit failed (see run_summary.json).
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="annotate")
def main(cfg: DictConfig) -> float:
    from litseg.pipeline.entry import run_annotate

    summary = run_annotate(cfg)
    if cfg.strict_exit and (summary["units_failed"] or summary["books_failed"]):
        sys.exit(1)
    return float(summary["chunks"])


if __name__ == "__main__":
    main()
