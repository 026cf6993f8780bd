"""Segment books into chunks with any chunker; outputs land in the Hydra run directory.

    python -m litseg.annotate input=path/to/book.txt                      # LitSeg-Lite, embedded model
    python -m litseg.annotate input='corpus/*.txt' method=recursive       # a baseline by name
    python -m litseg.annotate input=book.epub llm=openai llm.model=NAME   # any backend
    python -m litseg.annotate input=book.txt hydra.run.dir=outputs/run1   # rerun the same dir to resume

``litseg-annotate ...`` (the installed command) and ``python annotate.py ...`` (in a checkout) are
the same entry. The configs are the checkout's ``conf/`` or, installed, the copy shipped in the
package (:func:`litseg.utils.locations.config_dir`).

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

from litseg.annotation.config import annotate_config_from
from litseg.annotation.entry import exit_code, run_annotate
from litseg.cli import check_command_line, run_entry
from litseg.utils.locations import config_dir


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="annotate")
def main(cfg: DictConfig) -> float:
    summary = run_entry(run_annotate, cfg)  # known errors (setup): one line, exit code 2
    code = exit_code(summary, annotate_config_from(cfg).strict_exit)
    if code:
        sys.exit(code)
    return float(summary["chunks"])


def cli() -> None:
    """The command line: config mistakes as one line and exit code 2, then the Hydra app."""
    check_command_line(config_dir(), "annotate")
    main()


if __name__ == "__main__":
    cli()
