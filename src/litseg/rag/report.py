"""Reports of an evaluation run: tables (Markdown, CSV, JSON), per-question JSONL, PNG plots and,
with ``logger=wandb``, the same tables and plots in Weights & Biases (offline without a key).

Files written to the run folder::

    results.md  results.csv  results.json  pairwise.csv
    per_question/<chunker>.jsonl
    plots/metrics.png  plots/chunk_lengths.png
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from litseg.rag.results import ChunkerResult, EvaluationResult
    from litseg.utils.tracking import LoggerConfig

from litseg.rag.rows import count_of
from litseg.rag.stats import few_books_warning
from litseg.rag.config import logger_settings, report_settings

log = logging.getLogger(__name__)


def fmt(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _ci(m: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not m:
        return "–"
    est, lo, hi = m.get("estimate"), m.get("low"), m.get("high")
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        return fmt(est, digits)
    return f"{est:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def pct(x: Any) -> str:
    return "–" if x is None else f"{100 * float(x):.0f}%"


FALLBACK_HEADER = "units by fallback: repair / pieces / whole"


def fallback_cell(summary: Mapping[str, Any]) -> str:
    """How a chunker's units came about: shares repaired, cut into pieces and kept whole after an
    unusable answer (plus a chunker's own fallbacks); "–" for chunkers without model answers."""
    fb = summary.get("fallbacks")
    if not fb:
        return "–"
    shares = fb.get("shares") or {}
    cell = " / ".join(pct(count_of(shares, k)) for k in ("repair", "pieces", "whole_unit"))
    other = [f"{k} {pct(v)}" for k, v in shares.items() if k not in ("repair", "pieces", "whole_unit")]
    return cell + (f" ({', '.join(other)})" if other else "")


def safe_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@+-]+", "_", label).strip("_") or "chunker"


# -------------------------------------------------------------------------------------- tables
def main_table(result: "EvaluationResult") -> tuple[list[str], list[list[str]]]:
    """Header and rows of the Markdown results table (one row per chunker)."""
    s = result.settings
    mrr = f"mrr@{s.mrr_k}"
    ev = [f"evidence@{b}" for b in s.budgets]
    has_gold = any(r.summary["metrics"].get(mrr) for r in result.results)
    has_gen = any(r.summary["metrics"].get("f1") for r in result.results)
    has_cr = any(r.summary["metrics"].get("context_relevance") for r in result.results)
    has_aa = any(r.summary["metrics"].get("answer_accuracy") for r in result.results)
    has_ctx = any(r.summary.get("chunks", {}).get("share_with_context") for r in result.results)
    has_overlap = any(r.summary.get("chunks", {}).get("share_overlapping") for r in result.results)
    budgets = {((r.summary.get("generation") or {}).get("context") or {}).get("budget_chars") for r in result.results}
    budgets.discard(None)
    head = ["chunker", "chunks/book", "words/chunk (median)", "> window", "boundary sim. ↓", "cuts on sentence breaks",
            FALLBACK_HEADER]
    if has_ctx:
        head.append("chunks with context sentences")
    if has_overlap:
        head.append("overlapping chunks (text read twice)")
    if has_gold:
        head += ["random H@1", f"MRR@{s.mrr_k} [95% CI]"] + [f"H@{k}" for k in s.ks]
        head += [f"evidence in {b} chars [95% CI]" for b in s.budgets]
    if has_gen:
        head += ["EM", "F1", "ROUGE-L", "METEOR"]
    if budgets:
        head += [f"answer context in {'/'.join(f'{b:,}' for b in sorted(budgets))} chars: "
                 "chunks (questions with the last one cut, chunk text cut)"]
    if has_cr:
        head += ["context relevance (judge fails)"]
    if has_aa:
        head += ["answer accuracy (judge fails)"]
    rows = []
    for r in result.results:
        m = r.summary["metrics"]
        ch = r.summary.get("chunks", {})
        seg = r.summary.get("segment_quality", {})
        words = ch.get("words", {})
        row = [r.label, fmt(ch.get("chunks_per_book", {}).get("mean"), 1),
               f"{fmt(words.get('mean'), 0)} ({fmt(words.get('p50'), 0)})",
               pct(ch.get("share_over_window")), fmt(seg.get("boundary_similarity")),
               pct(seg.get("share_on_sentence_breaks")), fallback_cell(r.summary)]
        if has_ctx:
            row.append(f"{pct(ch.get('share_with_context'))} "
                       f"({fmt(ch.get('mean_context_sentences_when_used'), 1)} sentences)")
        if has_overlap:
            row.append(f"{pct(ch.get('share_overlapping'))} ({pct(ch.get('overlap_chars_share'))})")
        if has_gold:
            row += [fmt((m.get("random_hit@1") or {}).get("estimate")), _ci(m.get(mrr))]
            row += [fmt((m.get(f"hit@{k}") or {}).get("estimate")) for k in s.ks]
            row += [_ci(m.get(e)) for e in ev]
        if has_gen:
            row += [fmt((m.get(k) or {}).get("estimate")) for k in ("em", "f1", "rougeL", "meteor")]
        gen = r.summary.get("generation") or {}
        if budgets:
            ctx = gen.get("context") or {}
            row.append(f"{fmt(ctx.get('mean_chunks'), 1)} ({pct(ctx.get('truncated_share'))}, "
                       f"{pct(ctx.get('cut_chars_share'))})" if ctx else "–")
        for on, key in ((has_cr, "context_relevance"), (has_aa, "answer_accuracy")):
            if on:
                row.append(f"{_ci(m.get(key))} ({pct((gen.get(key) or {}).get('failure_rate'))})")
        rows.append(row)
    return head, rows


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def pairwise_markdown(pairwise: Sequence[Mapping[str, Any]]) -> str:
    head = ["A", "B", "metric", "mean A", "mean B", "A − B [95% CI]", "p (permutation)", "questions", "books"]
    rows = [[p["a"], p["b"], p["metric"], fmt(p["mean_a"]), fmt(p["mean_b"]),
             f"{p['diff']:+.3f} [{p['diff_low']:+.3f}, {p['diff_high']:+.3f}]", fmt(p["p_permutation"], 4),
             str(p["n"]), str(p["books"])] for p in pairwise]
    return markdown_table(head, rows)


def timing_markdown(result: "EvaluationResult") -> str:
    keys = ["chunking", "chunk_stats", "index", "retrieve", "generation"]
    head = ["chunker", "chunks", "unit failures"] + [f"{k} (s)" for k in keys]
    rows = []
    for r in result.results:
        sec = r.summary.get("seconds", {})
        n_chunks = (r.summary.get("chunks") or {}).get("n_chunks")
        rows.append([r.label, fmt(n_chunks), str(count_of(r.summary, "unit_failures"))]
                    + [fmt(sec.get(k), 1) for k in keys])
    return markdown_table(head, rows)


def flat_row(r: "ChunkerResult") -> dict[str, Any]:
    """One CSV row: every number of a chunker's summary under a flat name."""
    s = r.summary
    ch = s.get("chunks", {})
    seg = s.get("segment_quality", {})
    row: dict[str, Any] = {"chunker": r.label, "method": r.method, "source": s.get("source"),
                           "n_questions": s.get("n_questions"), "n_with_gold": s.get("n_with_gold"),
                           "n_without_relevant_chunk": s.get("n_without_relevant_chunk"),
                           "n_chunks": ch.get("n_chunks"), "n_books": ch.get("n_books"),
                           "chunks_per_book_mean": ch.get("chunks_per_book", {}).get("mean"),
                           "chunks_per_book_median": ch.get("chunks_per_book", {}).get("p50")}
    for unit in ("words", "chars"):
        for stat in ("mean", "std", "min", "p50", "p90", "max"):
            row[f"{unit}_{stat}"] = ch.get(unit, {}).get(stat)
    for k in ("share_over_window", "window", "share_with_context", "mean_context_sentences",
              "share_overlapping", "overlap_chars_share"):
        row[k] = ch.get(k)
    for k in ("boundary_similarity", "share_on_sentence_breaks", "n_boundaries"):
        row[k] = seg.get(k)
    for name, m in s.get("metrics", {}).items():
        row[name] = m.get("estimate")
        row[f"{name}_low"] = m.get("low")
        row[f"{name}_high"] = m.get("high")
    gen = s.get("generation") or {}
    for k in ("context_relevance", "answer_accuracy"):
        if gen.get(k):
            row[f"{k}_failure_rate"] = gen[k].get("failure_rate")
            row[f"{k}_n_scored"] = gen[k].get("n_scored")
    if "generation_failure_rate" in gen:
        row["generation_failure_rate"] = gen["generation_failure_rate"]
    for k, v in (gen.get("context") or {}).items():
        if k != "text":
            row[f"context_{k}"] = v
    for k, v in (s.get("seconds") or {}).items():
        row[f"seconds_{k}"] = v
    row["unit_failures"] = s.get("unit_failures")
    fb = s.get("fallbacks") or {}
    row["fallback_units"] = fb.get("units")
    for k, v in (fb.get("shares") or {}).items():
        row[f"fallback_{k}_share"] = v
    return row


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in cols})


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def results_markdown(result: "EvaluationResult", plots: Mapping[str, Path] | None = None) -> str:
    head, rows = main_table(result)
    b = result.benchmark
    lines = [f"# {result.suite}: chunker comparison", "",
             f"{b.get('name')}: {result.meta.get('books_prepared')} books, {result.meta.get('units')} units, "
             f"{result.meta.get('questions_evaluated')} questions evaluated "
             f"({result.meta.get('generation_questions')} with generation/judge). Wall time "
             f"{result.wall_seconds:.0f} s.", "", markdown_table(head, rows), ""]
    lines += [
        "Reading the table: chunk size moves MRR and Hit@k by itself (few large chunks per book make a",
        "high rank-1 hit likely even at random: see *random H@1*). The evidence column is size-fair: the",
        "share of gold evidence characters a reader sees within the first "
        f"{', '.join(map(str, result.settings.budgets))}",
        "characters of the ranked chunks. Boundary similarity (lower = cuts between less related text)",
        "must be read with the share of cuts on sentence breaks. Intervals: 95% bootstrap over "
        + ("books." if all(r.summary.get("resampling") in (None, "books") for r in result.results)
           else "questions (one book only: this understates the uncertainty)."), ""]
    lines += ["Units by fallback: of each LLM chunker's units, the share whose answer was repaired, and the",
              "shares that had no usable answer and became word-capped pieces or stayed whole as one chunk",
              "(`method.fallback`); a row with large shares measures its fallback more than its method. \"–\":",
              "the chunker does not answer per unit through a model.", ""]
    ctx = [((r.summary.get("generation") or {}).get("context") or {}) for r in result.results]
    if any(ctx):
        lines += ["Answer context: the generator and the judge read every chunker's ranked chunks up to the same",
                  "character budget, whole chunks first and only the last one cut at the budget; the column gives",
                  "the mean number of chunks read, the share of questions whose last chunk was cut, and the share",
                  "of the read chunks' text that the cut left out.", ""]
    few = few_books_warning(int(result.meta.get("books_prepared") or 0))
    if few:
        lines += [f"**Warning: {few}.**", ""]
    if result.pairwise:
        lines += ["## Pairwise differences (same questions)", "", pairwise_markdown(result.pairwise), ""]
    lines += ["## Time per step", "", timing_markdown(result), ""]
    warns = [(r.label, w) for r in result.results for w in r.summary.get("warnings", [])]
    if warns:
        lines += ["## Warnings", ""] + [f"- {lab}: {w}" for lab, w in warns] + [""]
    if plots:
        lines += ["## Plots", ""] + [f"![{k}]({p.as_posix()})" for k, p in plots.items()] + [""]
    comp = result.meta.get("components", {})
    lines += ["## Components", "", "```json", json.dumps(comp, indent=2, default=_json_default), "```", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------- plots
#: Plotted measures where a lower bar is the better one, and those that are a yardstick, not a score.
LOWER_IS_BETTER = frozenset({"boundary_similarity"})
REFERENCE_MEASURES = frozenset({"random_hit@1"})


def metric_label(name: str) -> str:
    """A measure's name on the plot: lower-is-better ones marked ``↓ lower is better``, the
    yardsticks ``(reference)``; the rest are higher-is-better (the axis says so)."""
    label = name.replace("_", " ")
    if name in LOWER_IS_BETTER:
        return f"{label} ↓ lower is better"
    return f"{label} (reference)" if name in REFERENCE_MEASURES else label


def plot_metrics(result: "EvaluationResult", path: Path) -> Path | None:
    """Grouped bars: one group per metric, one bar per chunker, with the bootstrap interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    s = result.settings
    order = ([f"mrr@{s.mrr_k}"] + [f"hit@{k}" for k in s.ks] + ["random_hit@1"] + [f"evidence@{b}" for b in s.budgets]
             + ["em", "f1", "rougeL", "meteor", "context_relevance", "answer_accuracy"])
    names = [n for n in order if any(r.summary["metrics"].get(n) for r in result.results)]
    extra = [("boundary_similarity", "segment_quality"), ("share_on_sentence_breaks", "segment_quality")]
    values: dict[str, list[tuple[float, float, float]]] = {}
    for n in names:
        values[n] = []
        for r in result.results:
            m = r.summary["metrics"].get(n) or {}
            est = m.get("estimate", math.nan)
            lo, hi = m.get("low", math.nan), m.get("high", math.nan)
            values[n].append((est, lo, hi))
    for n, section in extra:
        vals = [r.summary.get(section, {}).get(n) for r in result.results]
        if any(v is not None for v in vals):
            names.append(n)
            values[n] = [(v if v is not None else math.nan, math.nan, math.nan) for v in vals]
    if not names:
        return None
    labels = [r.label for r in result.results]
    x = np.arange(len(names))
    width = 0.8 / max(1, len(labels))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(names) + 2), 4.2))
    for i, lab in enumerate(labels):
        est = np.array([values[n][i][0] for n in names], dtype=float)
        lo = np.array([values[n][i][1] for n in names], dtype=float)
        hi = np.array([values[n][i][2] for n in names], dtype=float)
        err = np.vstack([np.where(np.isnan(lo), 0, est - lo), np.where(np.isnan(hi), 0, hi - est)])
        ax.bar(x + (i - (len(labels) - 1) / 2) * width, np.nan_to_num(est), width, yerr=err, capsize=2, label=lab)
    ax.set_xticks(x)
    ax.set_xticklabels([metric_label(n) for n in names], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("score, higher is better unless marked ↓\n(95% book-level bootstrap interval)", fontsize=8)
    few = few_books_warning(int(result.meta.get("books_prepared") or 0))
    ax.set_title(f"{result.suite}: metrics per chunker" + (" (few books: intervals too narrow)" if few else ""))
    ax.legend(fontsize=8, ncol=min(4, len(labels)))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_chunk_lengths(result: "EvaluationResult", path: Path) -> Path | None:
    """Histogram of words per chunk, one panel per chunker, on shared bins."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    data = [(r.label, np.asarray(r.chunk_words, dtype=float)) for r in result.results if r.chunk_words]
    if not data:
        return None
    top = max(float(np.percentile(w, 99)) for _, w in data)
    bins = np.linspace(0, max(top, 1.0), 40)
    fig, axes = plt.subplots(len(data), 1, figsize=(7, 1.6 * len(data) + 0.8), sharex=True, squeeze=False)
    for ax, (lab, w) in zip(axes[:, 0], data):
        ax.hist(np.clip(w, 0, bins[-1]), bins=bins, color="C0", alpha=0.8)
        ax.axvline(float(np.median(w)), color="C3", lw=1)
        ax.set_ylabel("chunks", fontsize=8)
        ax.set_title(f"{lab}: {len(w)} chunks, median {np.median(w):.0f} words", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("words per chunk (main text; last bin holds the top 1%)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------- writers
def write_report(result: "EvaluationResult", out_dir: Path, report_cfg: Any = None, *,
                 logger_cfg: Any = None, config: Mapping[str, Any] | None = None
                 ) -> dict[str, Path]:
    """Write every output of a run into ``out_dir``; returns the files by kind."""
    rc = report_settings(report_cfg)
    logger = logger_settings(logger_cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    plots: dict[str, Path] = {}
    if rc.plots:
        for name, fn in (("metrics", plot_metrics), ("chunk_lengths", plot_chunk_lengths)):
            p = fn(result, out_dir / "plots" / f"{name}.png")
            if p is not None:
                plots[name] = p.relative_to(out_dir)
                files[f"plot_{name}"] = p
    (out_dir / "results.md").write_text(results_markdown(result, plots), encoding="utf-8")
    files["markdown"] = out_dir / "results.md"
    _write_csv(out_dir / "results.csv", [flat_row(r) for r in result.results])
    files["csv"] = out_dir / "results.csv"
    if result.pairwise:
        _write_csv(out_dir / "pairwise.csv", result.pairwise)
        files["pairwise"] = out_dir / "pairwise.csv"
    doc = {"suite": result.suite, "benchmark": result.benchmark, "meta": result.meta,
           "settings": asdict(result.settings), "wall_seconds": result.wall_seconds,
           "results": [r.summary for r in result.results], "pairwise": result.pairwise}
    (out_dir / "results.json").write_text(json.dumps(doc, indent=2, default=_json_default) + "\n", encoding="utf-8")
    files["json"] = out_dir / "results.json"
    qdir = out_dir / "per_question"
    qdir.mkdir(exist_ok=True)
    for r in result.results:
        with (qdir / f"{safe_name(r.label)}.jsonl").open("w", encoding="utf-8") as fh:
            for row in r.per_question:
                fh.write(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n")
    files["per_question"] = qdir
    if rc.save_chunks:
        cdir = out_dir / "chunks"
        cdir.mkdir(exist_ok=True)
        for r in result.results:
            if r.chunkset is None or r.chunkset.source != "chunked":
                continue
            with (cdir / f"{safe_name(r.label)}.jsonl").open("w", encoding="utf-8") as fh:
                for c in r.chunkset.chunks:
                    fh.write(json.dumps(c.to_dict(), ensure_ascii=False, default=_json_default) + "\n")
        files["chunks"] = cdir
    if logger is not None and logger.backend == "wandb":
        log_to_wandb(result, files, logger, config)
    return files


def log_to_wandb(result: "EvaluationResult", files: Mapping[str, Path], cfg: "LoggerConfig",
                 config: Mapping[str, Any] | None = None) -> None:
    """The results table, the pairwise table, the plots and per-chunker summary numbers in one
    W&B run. Without ``WANDB_API_KEY`` (and mode ``auto``) the run is written offline under
    the run folder (sync it later with ``wandb sync``)."""
    try:
        import wandb
    except ImportError as exc:
        raise ImportError("logger=wandb needs the wandb package (pip install wandb)") from exc
    mode = cfg.mode
    if mode == "auto":
        mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
    out_dir = Path(files["markdown"]).parent
    run = wandb.init(project=cfg.project, entity=cfg.entity, mode=mode, group=cfg.group, tags=list(cfg.tags),
                     name=out_dir.name,
                     job_type="evaluate",
                     dir=str(out_dir), config=dict(config or {}), reinit="finish_previous")
    try:
        rows = [flat_row(r) for r in result.results]
        cols: list[str] = []
        for r in rows:
            cols += [k for k in r if k not in cols]
        run.log({"results": wandb.Table(columns=cols, data=[[r.get(c) for c in cols] for r in rows])})
        if result.pairwise:
            pcols = list(result.pairwise[0])
            run.log({"pairwise": wandb.Table(columns=pcols, data=[[p.get(c) for c in pcols] for p in result.pairwise])})
        for key, p in files.items():
            if key.startswith("plot_"):
                run.log({key[5:]: wandb.Image(str(p))})
        for r in rows:
            for k, v in r.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    run.summary[f"{r['chunker']}/{k}"] = v
        run.summary["wall_seconds"] = result.wall_seconds
    finally:
        run.finish()
