"""Segment books into chunks with any chunker; outputs land in the Hydra run directory.

    python -m litseg.annotate input=path/to/book.txt                      # LitSeg-Lite, embedded model
    python -m litseg.annotate input='corpus/*.txt' method=recursive       # a baseline by name
    python -m litseg.annotate input=book.epub llm=openai llm.model=NAME   # any backend
    python -m litseg.annotate input=book.txt hydra.run.dir=outputs/run1   # rerun the same dir to resume

``litseg-annotate ...`` (the installed command) and ``python annotate.py ...`` (in a checkout) are
the same entry. The configs are the checkout's ``conf/`` or, installed, the copy shipped in the
package (:func:`litseg.utils.locations.config_dir`).

Writes chunks.jsonl, sentences.jsonl, diagnostics.jsonl, documents.jsonl, run_summary.json and
view.html; run_summary.json lists every input file as chunked, skipped (with why) or failed.
The exit code (the worst of every run, every job of a ``-m`` sweep; one rule, in litseg/cli.py): 1
when a book could not be read or a unit failed (the failed units are listed; a unit the model could
not be reached for is one: a rerun into the same directory tries it again); 4 when all went well
but some inputs were skipped (an unsupported format such as PDF, an empty file); 2, with one line,
when the run cannot start (missing input, a config option or key that does not exist, a parameter
of the wrong type, a model folder or server that is not there, a run directory of another setup or
locked by another run; HYDRA_FULL_ERROR=1 shows the traceback). ``strict_exit=false`` makes 1 and 4
into 0.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from litseg.annotation.entry import annotate_task
from litseg.cli import Jobs, check_command_line
from litseg.utils.locations import config_dir


def cli() -> None:
    """The command line: config mistakes as one line and exit code 2, the Hydra app (every run's
    result collected), then one exit code for all runs (:meth:`litseg.cli.Jobs.exit`)."""
    check_command_line(config_dir(), "annotate")
    jobs = Jobs("annotate")

    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="annotate")
    def main(cfg: DictConfig) -> float:
        return jobs.run(annotate_task, cfg)

    main()
    jobs.exit()


if __name__ == "__main__":
    cli()
