"""Compare chunkers on a QA benchmark: chunk, index (Qdrant), retrieve, rerank, answer, score.

    python evaluate.py suite=fairytaleqa 'chunkers=[token,recursive,semantic]'
    python evaluate.py suite=smoke 'chunkers=[token,recursive]' retrieval.embedder.model=hashing  # seconds, no embedding model
    python evaluate.py suite=gutenqa_emma 'chunkers=[recursive]' '+chunkers.mine={chunks: outputs/annotate/RUN}'
    python evaluate.py suite=literaryqa generation.enabled=true judge.enabled=true llm@generation.llm=openai
    python evaluate.py -m suite=fairytaleqa 'chunkers=[recursive]' chunkers.recursive.chunk_size=500,1000,2000
    python evaluate.py suite=fairytaleqa export_texts=outputs/ftqa_texts   # book texts for annotate.py

Writes results.md/.csv/.json, pairwise.csv, per_question/*.jsonl, chunks/*.jsonl and plots/*.png
to the Hydra run folder and returns the configured objective (``objective.metric`` of
``objective.chunker``, default: the suite's objective for the first chunker) for sweepers.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> float:
    from litseg.cli import run_entry
    from litseg.rag.evaluation.run import run_from_hydra

    return run_entry(run_from_hydra, cfg)  # known errors: one line, exit code 2


if __name__ == "__main__":
    from pathlib import Path

    from litseg.cli import check_command_line

    check_command_line(Path(__file__).resolve().parent / "conf", "evaluate")  # config mistakes: one line, exit code 2
    main()
