"""Compare chunkers on a QA benchmark: chunk, index (Qdrant), retrieve, rerank, answer, score.

    python evaluate.py suite=fairytaleqa 'chunkers=[token,recursive,semantic]'
    python evaluate.py suite=smoke 'chunkers=[token,recursive]' retrieval.embedder.model=hashing  # seconds, no embedding model
    python evaluate.py suite=gutenqa_emma 'chunkers=[recursive]' '+chunkers.mine={chunks: outputs/annotate/RUN}'
    python evaluate.py suite=literaryqa generation.enabled=true judge.enabled=true llm@generation.llm=openai
    python evaluate.py -m suite=fairytaleqa 'chunkers=[recursive]' chunkers.recursive.chunk_size=500,1000,2000
    python evaluate.py suite=fairytaleqa export_texts=outputs/ftqa_texts   # book texts for annotate.py

Every chunker runs as annotate.py runs it, into an annotation run folder of its own,
chunker_runs/<label>/ in the Hydra run folder; a rerun of the same command with the same
hydra.run.dir resumes (finished units are not chunked again). Exit code 1 when a chunker's units
or books failed (listed; a rerun tries them again), 2 with one line when the run cannot start.
Writes results.md/.csv/.json, pairwise.csv, per_question/*.jsonl, chunks/*.jsonl and plots/*.png
to the Hydra run folder and returns the configured objective (``objective.metric`` of
``objective.chunker``, default: the suite's objective for the first chunker) for sweepers.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from litseg.rag.config import register_method_chunkers

CONF = Path(__file__).resolve().parent / "conf"
# Every conf/method/<name>.yaml is a chunkers option (chunkers=[token,recursive]); Hydra composes
# the command line twice (check_command_line, then @hydra.main), both after this.
register_method_chunkers(CONF)


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> float:
    from litseg.cli import run_entry
    from litseg.rag.evaluation.run import run_from_hydra

    return run_entry(run_from_hydra, cfg)  # known errors: one line, exit code 2


if __name__ == "__main__":
    from litseg.cli import check_command_line

    check_command_line(CONF, "evaluate")  # config mistakes: one line, exit code 2
    main()
