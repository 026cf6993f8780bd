"""The paper's baseline rows on a benchmark, written into docs/evaluation.md from an evaluate.py run.

Run the evaluation first (hours on a CPU: the LLM baselines run on the embedded SmolLM2), then
render its table into the generated block ``paper_baselines`` of the docs:

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python evaluate.py suite=fairytaleqa chunkers=paper_baselines \\
        hydra.run.dir=outputs/evaluate/paper_baselines
    .venv/bin/python benchmarks/paper_baselines.py outputs/evaluate/paper_baselines --write
    .venv/bin/python benchmarks/paper_baselines.py outputs/evaluate/paper_baselines   # print only

The table is the run's own results table (``litseg.rag.report.main_table``) read back from its
``results.json``, followed by the seconds each row spent chunking; the note states the command,
the wall time and the machine. Nothing is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.rag.results import ChunkerResult, EvalSettings, EvaluationResult  # noqa: E402
from litseg.rag.report import markdown_table, main_table  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "evaluation.md"
BLOCK = "paper_baselines"


def load_result(run_dir: Path) -> EvaluationResult:
    data = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    settings = EvalSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in data["settings"].items()})
    results = [ChunkerResult(str(s["label"]), str(s.get("method")), s, [], []) for s in data["results"]]
    return EvaluationResult(suite=data["suite"], benchmark=data["benchmark"], results=results, pairwise=data["pairwise"],
                            settings=settings, wall_seconds=float(data["wall_seconds"]), meta=data.get("meta", {}))


def render(result: EvaluationResult) -> str:
    head, rows = main_table(result)
    head = [*head, "chunking s"]
    rows = [[*row, f"{(r.summary.get('seconds') or {}).get('chunking', 0.0):,.0f}"]
            for row, r in zip(rows, result.results)]
    return markdown_table(head, rows)


def note(result: EvaluationResult, run_dir: Path) -> str:
    cfg = run_dir / "config.yaml"
    m = result.meta
    overrides = ""
    hydra_overrides = run_dir / ".hydra" / "overrides.yaml"
    if hydra_overrides.is_file():
        items = [ln[2:].strip() for ln in hydra_overrides.read_text(encoding="utf-8").splitlines() if ln.startswith("- ")]
        overrides = " ".join(items)
    return (f"Written by `benchmarks/paper_baselines.py` from the run `python evaluate.py {overrides}`"
            f"{' (config in ' + cfg.name + ')' if cfg.is_file() else ''}: {m.get('books_prepared')} books, "
            f"{m.get('units')} units, {m.get('questions_evaluated')} questions; wall time "
            f"{result.wall_seconds:,.0f} s on a {os.cpu_count()}-core {platform.machine()} machine shared with "
            "other jobs (seconds depend on the machine and its load; the scores do not).")


def write_docs(block_text: str) -> None:
    write_block(DOCS, BLOCK, "benchmarks/paper_baselines.py RUN_DIR --write", block_text)


def main(argv: list[str] | None = None) -> Any:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path, help="an evaluate.py run folder (holding results.json)")
    ap.add_argument("--write", action="store_true", help=f"write the table into {DOCS.relative_to(REPO)}")
    ap.add_argument("--no-docs", action="store_true", help=argparse.SUPPRESS)  # old flag: print only is the default
    args = ap.parse_args(argv)
    result = load_result(args.run_dir)
    block = f"{note(result, args.run_dir)}\n\n{render(result)}"
    print(block)
    if args.write:
        write_docs(block)
        print(f"\nwrote the table into {DOCS}")
    return result


if __name__ == "__main__":
    main()
