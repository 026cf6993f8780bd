"""NovelQA over whole novels: the paper's baseline rows and LLM / student rows, one resumable
``evaluate.py suite=novelqa`` run per row, written into docs/evaluation.md.

    python benchmarks/novelqa_eval.py                          # runs the missing paper rows, prints the table
    python benchmarks/novelqa_eval.py --write                  # ... and writes it into docs/evaluation.md
    python benchmarks/novelqa_eval.py --rows token,recursive --books 46 --out /tmp/nq   # a quick check
    python benchmarks/novelqa_eval.py --row student=litseg_lite_student --books student=46,5200
    python benchmarks/novelqa_eval.py --row 'grpo=litseg_lite_student chunkers.litseg_lite_student.llm.adapter=DIR'
    python benchmarks/novelqa_eval.py --row 'lite=annotate: llm=student prompt=litseg_lite_compact' --books lite=46
    python benchmarks/novelqa_eval.py --table-only --write     # the table of what --out holds, nothing run

Rows. The paper's baselines are the chunkers of ``conf/chunkers/paper_baselines.yaml`` (token,
recursive, semantic, perplexity, margin sampling, LumberChunker; each LLM one with its ``+merge``
row, which reuses its chunks), each run as ``chunkers=paper_baselines`` with the other rows set
to null, so their settings are the paper set's. ``--row NAME=SPEC`` adds a row, remembered in
``--out/rows.json`` so that later calls keep it (``--drop NAME`` forgets it):

* ``SPEC = CHUNKER [OVERRIDE ...]``: a chunkers option (a ``conf/method`` name or a ``conf/chunkers`` file) evaluated in ``evaluate.py``, with
  evaluate overrides (``chunkers.CHUNKER.llm.adapter=DIR`` ...);
* ``SPEC = annotate: OVERRIDE ...``: ``annotate.py`` with these overrides over the row's book files
  (resumable unit by unit), then its run folder evaluated as a chunk file.

``--books [ROW=]IDS`` runs a row on a named subset (book ids or Gutenberg numbers, comma
separated; without ``ROW=`` every row): an LLM row that cannot cover all eight books on a CPU
runs on a subset, and the table names it. Each row's runs live in ``--out/ROW``; a finished run
(``results.json``) is reused, a row whose spec or books changed is refused (pick another --out
or name, or delete its folder). Per row: MRR@10, Hit@1, Hit@5 and evidence@1500, each with a 95 % bootstrap
interval over questions and one over books (book-level, as ``evaluate.py`` reports them), chunks
per book, words per chunk and chunking seconds per book; then paired differences against
recursive on the same questions (book-level interval, book-level permutation p) for every added
row and those named by ``--paired``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.utils.docblocks import write_block  # noqa: E402

DOC = REPO / "docs" / "evaluation.md"
BLOCK = "novelqa"
SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))
PAPER_SET = REPO / "conf" / "chunkers" / "paper_baselines.yaml"
METRICS = (("mrr@10", "MRR@10"), ("hit@1", "Hit@1"), ("hit@5", "Hit@5"), ("evidence@1500", "evidence@1500"))
PAIRED_METRICS = ("mrr@10", "evidence@1500")
BASELINE = "recursive"
ALL_BOOKS = 8


@dataclass
class Row:
    """One table row group: a paper row (``kind="paper"``), a chunker config or an annotate run."""

    name: str
    kind: str  # paper | chunker | annotate
    spec: str = ""
    books: list[str] | None = None
    added: bool = False  # given with --row (compared against recursive)
    run: bool = True  # run it when its run folder is not finished (else: listed as not run yet)

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "spec": self.spec, "books": self.books}


@dataclass
class Line:
    """One line of the table: a chunker label of a row's evaluate run."""

    row: Row
    label: str
    summary: dict[str, Any]
    per_question: list[dict[str, Any]] = field(default_factory=list)
    seconds_per_book: float | None = None


# ------------------------------------------------------------------------------------- the rows
def paper_rows() -> dict[str, list[str]]:
    """Paper row -> the chunker keys of the paper set it keeps (itself and its ``+merge`` row)."""
    from omegaconf import OmegaConf

    conf = OmegaConf.to_container(OmegaConf.load(PAPER_SET))
    bases = [d for d in conf["defaults"] if isinstance(d, str) and d != "_self_"]
    rows = {b: [b] for b in bases}
    for key, value in conf.items():
        if key != "defaults" and isinstance(value, dict) and value.get("from") in rows:
            rows[value["from"]].append(key)
    return rows


def parse_row(text: str) -> Row:
    name, sep, spec = text.partition("=")
    name, spec = name.strip(), spec.strip()
    if not sep or not name or not spec or not name.replace("_", "").replace("-", "").isalnum():
        raise SystemExit(f"--row {text!r}: expected NAME=CHUNKER [OVERRIDE ...] or NAME=annotate: OVERRIDE ...")
    if spec.startswith("annotate:"):
        return Row(name, "annotate", spec.removeprefix("annotate:").strip(), added=True)
    return Row(name, "chunker", spec, added=True)


def parse_books(values: list[str], names: set[str]) -> tuple[list[str] | None, dict[str, list[str]]]:
    """``--books`` values: ``IDS`` for every row, ``ROW=IDS`` for one."""
    every: list[str] | None = None
    per: dict[str, list[str]] = {}
    for v in values:
        row, sep, ids = v.rpartition("=")
        books = [b.strip() for b in ids.split(",") if b.strip()]
        if not books:
            raise SystemExit(f"--books {v!r}: no book named")
        if not sep:
            every = books
        elif row not in names:
            raise SystemExit(f"--books {v!r}: no row {row!r} (rows: {', '.join(sorted(names))})")
        else:
            per[row] = books
    return every, per


def registry(out: Path) -> dict[str, dict[str, Any]]:
    path = out / "rows.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def choose_rows(args: argparse.Namespace) -> list[Row]:
    """Every paper row (those of --rows to be run), then every added row (remembered ones
    first), with their books."""
    paper = paper_rows()
    wanted = list(paper) if args.rows == "all" else [r for r in args.rows.split(",") if r and r != "none"]
    unknown = [r for r in wanted if r not in paper]
    if unknown:
        raise SystemExit(f"--rows: unknown paper rows {unknown} (paper rows: {', '.join(paper)})")
    known = registry(args.out)
    for name in args.drop:
        known.pop(name, None)
    added = {n: Row(n, d["kind"], d["spec"], d["books"], True) for n, d in known.items()}
    new_rows = set()
    for text in args.row:
        row = parse_row(text)
        if row.name in paper:
            raise SystemExit(f"--row {row.name}: a paper row has that name; pick another")
        added[row.name] = row
        new_rows.add(row.name)
    rows = [Row(n, "paper", run=n in wanted) for n in paper] + list(added.values())
    every, per = parse_books(args.books, {r.name for r in rows})
    for r in rows:
        # books without ROW= go to the rows run or added now; a remembered row keeps its own
        if r.name in per or (every is not None and (r.name in new_rows or (r.kind == "paper" and r.run))):
            r.books = per.get(r.name, every)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rows.json").write_text(json.dumps({r.name: r.identity() for r in rows if r.added}, indent=2) + "\n",
                                        encoding="utf-8")
    return rows


# --------------------------------------------------------------------------------------- running
def run(cmd: list[str], log: Path) -> float:
    """Run a project command as a user would (output into ``log``); its wall seconds. Stops the
    script when the command fails."""
    # A cold response cache of the run's own: seconds per book must be the model's time, not replies
    # replayed from an earlier (killed) run of the same command; resuming is the run folders' job.
    cache = log.parent / "responses.sqlite"
    cache.unlink(missing_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "LITSEG_LLM_CACHE": str(cache)}
    print("$", shlex.join(cmd), flush=True)
    t0 = time.perf_counter()
    with log.open("a", encoding="utf-8") as fh:
        done = subprocess.run(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    print(f"  {seconds:.0f} s, exit {done.returncode} (log {log})", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"command failed with exit code {done.returncode}; see {log}")
    return seconds


def books_override(row: Row) -> list[str]:
    return [f"suite.args.books=[{','.join(row.books)}]"] if row.books else []


def evaluate_command(row: Row, run_dir: Path) -> list[str]:
    base = [sys.executable, "evaluate.py", "suite=novelqa", "progress=false", f"hydra.run.dir={run_dir}",
            *books_override(row)]
    if row.kind == "paper":
        keep = set(paper_rows()[row.name])
        return [*base, "chunkers=paper_baselines",
                *(f"chunkers.{k}=null" for rows in paper_rows().values() for k in rows if k not in keep)]
    if row.kind == "chunker":
        chunker, *overrides = shlex.split(row.spec)
        return [*base, f"chunkers=[{chunker}]", *overrides]
    annotated = run_dir.parent / "annotate"
    return [*base, "chunkers=[]", f"chunk_files=[{{label: {row.name}, path: '{annotated}'}}]"]


def annotate_command(row: Row, run_dir: Path) -> list[str]:
    from litseg.rag.benchmarks.novelqa import book_files

    files = book_files(SHARED / "data" / "benchmarks" / "novelqa", texts=SHARED / "data", books=row.books)
    inputs = ",".join(f"'{p}'" for p in files.values())
    return [sys.executable, "annotate.py", f"input=[{inputs}]", *shlex.split(row.spec), f"hydra.run.dir={run_dir}",
            "print_table=0", "view=false"]


def ensure_run(row: Row, out: Path, table_only: bool) -> Path | None:
    """The row's finished evaluate run folder (running what is missing), or None (not asked to
    run it, or --table-only)."""
    folder = out / row.name
    stamp = folder / "row.json"
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) != row.identity():
        if row.run:
            raise SystemExit(f"{folder} holds row {row.name} with another spec or books "
                             f"({stamp.read_text(encoding='utf-8').strip()}); use another --out or name, or delete {folder}")
        row.books = json.loads(stamp.read_text(encoding="utf-8"))["books"]  # not run now: shown as it was run
    eval_dir = folder / "eval"
    if (eval_dir / "results.json").is_file():
        return eval_dir
    if table_only or not row.run:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(row.identity(), indent=2) + "\n", encoding="utf-8")
    log = folder / "log.txt"
    if row.kind == "annotate":
        run(annotate_command(row, folder / "annotate"), log)
    run(evaluate_command(row, eval_dir), log)
    return eval_dir


# ------------------------------------------------------------------------------------- the table
def read_lines(row: Row, eval_dir: Path) -> list[Line]:
    data = json.loads((eval_dir / "results.json").read_text(encoding="utf-8"))
    per_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in sorted((eval_dir / "per_question").glob("*.jsonl")):
        for ln in f.read_text(encoding="utf-8").splitlines():
            if ln.strip():
                q = json.loads(ln)
                per_q[q["chunker"]].append(q)
    lines = []
    for s in data["results"]:
        label = str(s["label"])
        lines.append(Line(row, row.name if row.kind != "paper" else label, s, per_q[label],
                          seconds_per_book(row, eval_dir, s)))
    return lines


def seconds_per_book(row: Row, eval_dir: Path, summary: dict[str, Any]) -> float | None:
    """Chunking seconds per book: measured by evaluate.py, or summed over the annotate run's units
    (each unit's ``model_seconds``, its share of the batch it was chunked in, where the chunker
    records it: a unit's wall ``seconds`` overlap when units are chunked in batches)."""
    books = summary["chunks"]["n_books"]
    if row.kind != "annotate":
        return summary["seconds"]["chunking"] / books if books else None
    diag = eval_dir.parent / "annotate" / "diagnostics.jsonl"
    units = [json.loads(ln) for ln in diag.read_text(encoding="utf-8").splitlines() if ln.strip()]
    key = "model_seconds" if any(u.get("model_seconds") is not None for u in units) else "seconds"
    return sum(float(u[key]) for u in units if u.get(key) is not None) / books if books else None


def intervals(rows: list[dict[str, Any]], metric: str) -> tuple[Any, Any]:
    """The metric's mean with a 95 % interval resampling questions, and one resampling books."""
    from litseg.rag.stats import bootstrap_ci

    vals = [(r[metric], r["book_id"]) for r in rows if r.get(metric) is not None]
    values, books = [v for v, _ in vals], [b for _, b in vals]
    return bootstrap_ci(values, None), bootstrap_ci(values, books)


def books_cell(line: Line) -> str:
    n = len({q["book_id"] for q in line.per_question})
    if not line.row.books:
        return f"all {n}"
    return f"{n} of {ALL_BOOKS}: {', '.join(b.split('_', 1)[0] for b in sorted({q['book_id'] for q in line.per_question}))}"


def fmt_interval(over_q: Any, over_b: Any) -> str:
    b = "–" if over_b.n_groups < 2 else f"{over_b.low:.2f}–{over_b.high:.2f}"
    return f"{over_q.estimate:.3f} q {over_q.low:.2f}–{over_q.high:.2f} · b {b}"


def main_table(lines: list[Line]) -> str:
    head = ["row", "books", "questions", *(n for _, n in METRICS), "chunks/book", "words/chunk (median)", "s/book"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ln in lines:
        cells = [ln.label, books_cell(ln), str(len(ln.per_question))]
        cells += [fmt_interval(*intervals(ln.per_question, m)) for m, _ in METRICS]
        ch = ln.summary["chunks"]
        cells += [f"{ch['chunks_per_book']['mean']:.0f}", f"{ch['words']['mean']:.0f} ({ch['words']['p50']:.0f})",
                  "–" if ln.seconds_per_book is None else f"{ln.seconds_per_book:,.1f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def paired_table(lines: list[Line], paired: set[str]) -> str:
    """Each compared line minus recursive on the questions both answered."""
    from litseg.rag.stats import paired_comparison

    base = next((ln for ln in lines if ln.label == BASELINE), None)
    chosen = [ln for ln in lines if ln.label != BASELINE and (ln.row.added or ln.label in paired)]
    if base is None or not chosen:
        return ""
    head = ["row", "books", "questions", *(f"Δ {m} [95% CI], p" for m in PAIRED_METRICS)]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ln in chosen:
        cells = [ln.label]
        for k, m in enumerate(PAIRED_METRICS):
            a = {q["qid"]: q[m] for q in ln.per_question if q.get(m) is not None}
            b = {q["qid"]: q[m] for q in base.per_question if q.get(m) is not None}
            common = sorted(set(a) & set(b))
            groups = {q["qid"]: q["book_id"] for q in ln.per_question}
            n_books = len({groups[q] for q in common})
            if k == 0:
                cells += [str(n_books), str(len(common))]
            if len(common) < 2:
                cells.append("–")
                continue
            pc = paired_comparison({q: a[q] for q in common}, {q: b[q] for q in common},
                                   groups if n_books > 1 else None)
            cells.append(f"{pc.diff.estimate:+.3f} [{pc.diff.low:+.2f}, {pc.diff.high:+.2f}], p={pc.p_permutation:.2f}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def note(rows: list[Row], missing: list[str]) -> str:
    parts = [f"Written by `benchmarks/novelqa_eval.py`: one `python evaluate.py suite=novelqa` run per row "
             f"(200 questions, 25 per novel, retrieval within the question's book; default retrieval: hybrid "
             f"MiniLM + BM25), on a {os.cpu_count()}-core {platform.machine()} machine shared with other jobs "
             "(seconds depend on the machine and its load; the scores do not). Cells: the mean, its 95 % "
             "bootstrap interval over questions (q) and over books (b; – for a single book)."]
    specs = [f"`{r.name}`: " + _spec_text(r) for r in rows if r.added]
    if specs:
        parts.append("Added rows: " + "; ".join(specs) + ".")
    if missing:
        parts.append("Not run yet: " + ", ".join(missing) + ".")
    return " ".join(parts)


def _spec_text(row: Row) -> str:
    if row.kind == "annotate":
        return f"`annotate.py {row.spec}`, its run folder evaluated as a chunk file"
    chunker, *overrides = shlex.split(row.spec)
    return f"`chunkers=[{chunker}]`" + (f" with `{' '.join(overrides)}`" if overrides else "")


def render(rows: list[Row], lines: list[Line], missing: list[str], paired: set[str]) -> str:
    block = f"{note(rows, missing)}\n\n{main_table(lines)}\n"
    pt = paired_table(lines, paired)
    if pt:
        block += ("\nPaired differences against recursive on the same questions (row minus recursive; the "
                  "interval resamples books, or questions where a row has one book; p: permutation test "
                  f"flipping whole books, or questions):\n\n{pt}\n")
    return block


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "novelqa", help="folder of the row runs")
    ap.add_argument("--rows", default="all", help="paper rows to run when not finished, comma separated (all | "
                    "none | token,recursive,...); the table lists every paper row, finished or not")
    ap.add_argument("--row", action="append", default=[], help="add a row: NAME=CHUNKER [OVERRIDE ...] "
                    "or NAME=annotate: OVERRIDE ... (remembered in OUT/rows.json)")
    ap.add_argument("--drop", action="append", default=[], help="forget an added row")
    ap.add_argument("--books", action="append", default=[], help="[ROW=]IDS: a row (or every row) on these books")
    ap.add_argument("--paired", default="", help="paper rows also compared against recursive (comma separated)")
    ap.add_argument("--table-only", action="store_true", help="run nothing; the table of the finished runs")
    ap.add_argument("--write", action="store_true", help=f"write the table into {DOC.relative_to(REPO)}")
    args = ap.parse_args(argv)
    rows = choose_rows(args)
    lines: list[Line] = []
    missing: list[str] = []
    for row in rows:
        eval_dir = ensure_run(row, args.out, args.table_only)
        if eval_dir is None:
            missing.append(row.name)
            continue
        lines.extend(read_lines(row, eval_dir))
    block = render(rows, lines, missing, {p for p in args.paired.split(",") if p})
    print(block)
    if args.write:
        write_block(DOC, BLOCK, "benchmarks/novelqa_eval.py --write", block)
        print(f"wrote the table into {DOC}")
    return block


if __name__ == "__main__":
    main()
