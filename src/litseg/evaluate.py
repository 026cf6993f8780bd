"""Compare chunkers on a QA benchmark: chunk, index (Qdrant), retrieve, rerank, answer, score.

    python -m litseg.evaluate suite=fairytaleqa 'chunkers=[token,recursive,semantic]'
    python -m litseg.evaluate suite=smoke 'chunkers=[token,recursive]' retrieval.embedder.model=hashing  # seconds
    python -m litseg.evaluate suite=gutenqa_emma 'chunkers=[recursive]' '+chunkers.mine={chunks: outputs/annotate/RUN}'
    python -m litseg.evaluate suite=literaryqa generation.enabled=true judge.enabled=true llm@generation.llm=openai
    python -m litseg.evaluate -m suite=fairytaleqa 'chunkers=[recursive]' chunkers.recursive.chunk_size=500,1000,2000
    python -m litseg.evaluate suite=fairytaleqa export_texts=outputs/ftqa_texts   # book texts for annotate

Every chunker runs as annotate runs it, into an annotation run folder of its own,
chunker_runs/<label>/ in the Hydra run folder; a rerun of the same command with the same
hydra.run.dir resumes (finished units are not chunked again). Exit code (the worst of every run,
every job of a ``-m`` sweep; one rule, in litseg/cli.py) 1 when a chunker's units or books failed
(listed; a rerun tries them again), 2 with one line when the run cannot start.

``litseg-evaluate ...`` (the installed command) and ``python evaluate.py ...`` (in a checkout) are
the same entry. The benchmark suites read their data below ``shared_dir`` (``$LITSEG_SHARED_DIR``,
else ``../shared``): an installed package has no checkout beside it, so set that (or
``shared_dir=PATH``); a suite whose data is not there stops with one line naming the path.

Writes results.md/.csv/.json, pairwise.csv, per_question/*.jsonl, chunks/*.jsonl and plots/*.png
to the Hydra run folder and returns the configured objective (``objective.metric`` of
``objective.chunker``, default: the suite's objective for the first chunker) for sweepers.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from litseg.cli import Jobs, check_command_line
from litseg.rag.config import register_method_chunkers
from litseg.rag.evaluation.run import evaluate_task
from litseg.utils.locations import config_dir

# Every conf/method/<name>.yaml is a chunkers option (chunkers=[token,recursive]); Hydra composes
# the command line twice (check_command_line, then @hydra.main), both after this.
register_method_chunkers(config_dir())


def cli() -> None:
    """The command line: config mistakes as one line and exit code 2, the Hydra app (every run's
    result collected), then one exit code for all runs (:meth:`litseg.cli.Jobs.exit`)."""
    check_command_line(config_dir(), "evaluate")
    jobs = Jobs("evaluate")

    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="evaluate")
    def main(cfg: DictConfig) -> float:
        return jobs.run(evaluate_task, cfg)

    main()
    jobs.exit()


if __name__ == "__main__":
    cli()
