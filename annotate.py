"""Segment books into chunks with any chunker; outputs land in the Hydra run directory.

    python annotate.py input=path/to/book.txt                      # LitSeg-Lite, embedded model
    python annotate.py input='corpus/*.txt' method=recursive       # a baseline by name
    python annotate.py input=book.epub llm=openai llm.model=NAME   # any backend
    python annotate.py input=book.txt hydra.run.dir=outputs/run1   # rerun the same dir to resume

Writes chunks.jsonl, sentences.jsonl, diagnostics.jsonl, documents.jsonl, run_summary.json and
view.html; run_summary.json lists every input file as chunked, skipped (with why) or failed. Exit
code 1 when a book could not be read or a unit failed (the failed units are listed; a unit the
model could not be reached for is one: a rerun into the same directory tries it again); exit code 4
when all went well but some inputs were skipped (an unsupported format such as PDF, an empty file);
exit code 2, with one line, when the run cannot start (missing input, a config option or key that
does not exist, a parameter of the wrong type, a model folder or server that is not there, a run
directory of another setup or locked by another run; HYDRA_FULL_ERROR=1 shows the traceback).
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="annotate")
def main(cfg: DictConfig) -> float:
    from litseg.annotation.config import annotate_config_from
    from litseg.annotation.entry import exit_code, run_annotate
    from litseg.cli import run_entry

    summary = run_entry(run_annotate, cfg)  # known errors (setup): one line, exit code 2
    code = exit_code(summary, annotate_config_from(cfg).strict_exit)
    if code:
        sys.exit(code)
    return float(summary["chunks"])


if __name__ == "__main__":
    from pathlib import Path

    from litseg.cli import check_command_line

    check_command_line(Path(__file__).resolve().parent / "conf", "annotate")  # config mistakes: one line, exit code 2
    main()
