"""Trained students as ``evaluate.py`` chunkers, and the ablation table scored like the paper's.

``python train.py -m +sweep=ablations`` leaves one run folder per variant (``config.yaml`` with the
resolved model and prompt, ``train_summary.json``, ``adapter/`` when something was trained). Then

    python evaluate.py suite=fairytaleqa students=multirun/train/<stamp>

evaluates every student of the sweep in one run: each becomes a LitSeg-Lite chunker with its own
base model, adapter and prompt (the one it was trained on, e.g. the generic prompt of ``w/o
Theory``), next to whatever ``chunkers=`` holds, and goes through the same retrieval (and, with a
generator, answer) pipeline as every other row. Besides the usual report the run writes
``ablations.md`` and ``ablations.json``: one row per variant with MRR, Hit@k, evidence within the
first character budget, answer metrics when a generator (and judge) ran, the fallback shares
and the training summary's own figures beside them. With ``logger=wandb`` the table is logged too.

A sweep job that left no ``train_summary.json`` (it failed) stays in the table as a row that says so.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litseg.llm.adapter_config import inference_llm_config
from litseg.llm.local_models import local_model_path
from litseg.rag.config import DEFAULT_CONF_DIR, logger_settings, method_config
from litseg.utils.config import ConfigError
from litseg.rag.report import fmt, markdown_table, pct

log = logging.getLogger(__name__)

SUMMARY = "train_summary.json"


@dataclass
class StudentRun:
    """One training run folder read as a student to evaluate."""

    run_dir: Path
    label: str
    experiment: str
    summary: dict[str, Any] | None  # None: the run left no summary (failed or unfinished)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.summary is None

    @property
    def adapter(self) -> str | None:
        return (self.summary or {}).get("adapter")


def _job_order(path: Path) -> tuple[int, str]:
    head = path.name.split("_", 1)[0]
    return (int(head), path.name) if head.isdigit() else (10**9, path.name)


def find_student_runs(paths: str | Path | Sequence[str | Path]) -> list[StudentRun]:
    """The runs under ``paths``: a run folder (holds ``config.yaml``) or a sweep folder whose
    subfolders are runs (Hydra's ``<num>_<experiment>``, in job order)."""
    from omegaconf import OmegaConf

    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    dirs: list[Path] = []
    for item in items:
        p = Path(str(item)).expanduser()
        if not p.is_dir():
            raise FileNotFoundError(f"students: {p} is not a folder (a train.py run or a multirun sweep folder)")
        if (p / "config.yaml").is_file():
            dirs.append(p)
            continue
        found = sorted((d for d in p.iterdir() if d.is_dir() and (d / "config.yaml").is_file()), key=_job_order)
        if not found:
            raise FileNotFoundError(f"students: {p} holds no train.py run folder (no */config.yaml)")
        dirs.extend(found)
    runs: list[StudentRun] = []
    seen: Counter[str] = Counter()
    for d in dirs:
        cfg = OmegaConf.to_container(OmegaConf.load(d / "config.yaml"), resolve=True)
        summary_path = d / SUMMARY
        summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else None
        experiment = str((summary or {}).get("experiment") or cfg.get("experiment_name") or d.name)
        seen[experiment] += 1
        label = experiment if seen[experiment] == 1 else f"{experiment}@{d.name}"
        runs.append(StudentRun(d, label, experiment, summary, cfg))
    return runs


def student_llm_config(run: StudentRun, backend: str = "transformers", **settings: Any) -> dict[str, Any]:
    """The llm config that runs the student of ``run``: its base model with its adapter (none for
    a variant that trained nothing, e.g. ``w/o fine-tune`` or a prompt ablation)."""
    model = run.config.get("model") or {}
    if "path" not in model:
        raise ConfigError(f"students: {run.run_dir}/config.yaml names no model.path (not a train.py run?)")
    peft = run.config.get("peft") or {}
    adapter = run.adapter
    if adapter and not Path(adapter).is_absolute() and not Path(adapter).exists():
        adapter = str(run.run_dir / "adapter")
    if adapter and peft.get("enabled") is False:  # full fine-tuning saved a whole model
        return inference_llm_config(str(adapter), None, backend=backend, **settings)
    return inference_llm_config(local_model_path(str(model["path"])), adapter, backend=backend,
                                embedded=model["path"] == "embedded", lora_rank=peft.get("r"), **settings)


def student_chunkers(runs: Iterable[StudentRun], *, method: Mapping[str, Any] | None = None,
                     backend: str = "transformers", llm: Mapping[str, Any] | None = None,
                     conf_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """``chunkers`` entries (label -> method config with its own ``llm`` and ``prompt``) for the
    runs that finished; ``method`` overrides ``conf/method/litseg_lite.yaml`` for all of them."""
    base = method_config("litseg_lite", conf_dir or DEFAULT_CONF_DIR)
    overrides = {k: v for k, v in dict(method or {}).items() if v is not None}  # null: keep the method's value
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.failed:
            continue
        prompt = run.config.get("prompt")
        if not prompt:
            raise ValueError(f"students: {run.run_dir}/config.yaml has no prompt (not a train.py run?)")
        out[run.label] = {**base, **overrides, "name": "litseg_lite",
                          "llm": student_llm_config(run, backend, **dict(llm or {})), "prompt": prompt}
    return out


# ---------------------------------------------------------------------------------- the table
def _estimate(metrics: Mapping[str, Any], name: str) -> float | None:
    m = metrics.get(name)
    if not m:
        return None
    value = m.get("estimate")
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def ablation_rows(runs: Sequence[StudentRun], result: Any) -> list[dict[str, Any]]:
    """One row per run: the evaluation's numbers for its chunker, and what training reported."""
    s = result.settings
    by_label = {r.label: r for r in result.results}
    names = ([f"mrr@{s.mrr_k}"] + [f"hit@{k}" for k in s.ks] + [f"evidence@{b}" for b in s.budgets]
             + ["em", "f1", "rougeL", "meteor", "context_relevance", "answer_accuracy"])
    rows = []
    for run in runs:
        row: dict[str, Any] = {"variant": run.label, "experiment": run.experiment, "run_dir": str(run.run_dir),
                               "status": "failed: no train_summary.json" if run.failed else "evaluated"}
        if not run.failed:
            row.update(stage_plan=list(run.summary.get("stage_plan") or []), prompt=run.summary.get("prompt"),
                       adapter=run.adapter, train_metric=run.summary.get("metric_name"),
                       train_metric_value=run.summary.get("metric"))
        res = by_label.get(run.label)
        if res is not None:
            metrics = res.summary.get("metrics", {})
            for name in names:
                value = _estimate(metrics, name)
                if value is not None:
                    row[name] = value
                    row[f"{name}_low"] = (metrics[name] or {}).get("low")
                    row[f"{name}_high"] = (metrics[name] or {}).get("high")
            ch = res.summary.get("chunks", {})
            row["chunks_per_book"] = (ch.get("chunks_per_book") or {}).get("mean")
            row["words_per_chunk"] = (ch.get("words") or {}).get("mean")
            fb = res.summary.get("fallbacks") or {}
            for k, v in (fb.get("shares") or {}).items():
                row[f"fallback_{k}_share"] = v
        elif not run.failed:
            row["status"] = "not evaluated"
        rows.append(row)
    return rows


def ablation_markdown(rows: Sequence[Mapping[str, Any]], result: Any) -> str:
    s = result.settings
    mrr = f"mrr@{s.mrr_k}"
    gen = [k for k in ("em", "f1", "rougeL", "meteor", "answer_accuracy") if any(k in r for r in rows)]
    head = (["variant", "trained", f"MRR@{s.mrr_k} [95% CI]"] + [f"H@{k}" for k in s.ks]
            + [f"evidence@{b}" for b in s.budgets] + [g for g in gen]
            + ["units by fallback: repair / pieces / whole", "chunks/book", f"train {rows[0].get('train_metric') or 'metric'}"
               if rows else "train metric"])

    def ci(row: Mapping[str, Any], name: str) -> str:
        if name not in row:
            return "–"
        lo, hi = row.get(f"{name}_low"), row.get(f"{name}_high")
        if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
            return fmt(row[name])
        return f"{row[name]:.3f} [{lo:.3f}, {hi:.3f}]"

    body = []
    for r in rows:
        if r["status"] != "evaluated":
            body.append([r["variant"], r["status"]] + ["–"] * (len(head) - 2))
            continue
        fallback = " / ".join(pct(r.get(f"fallback_{k}_share")) for k in ("repair", "pieces", "whole_unit"))
        body.append([r["variant"], "+".join(r.get("stage_plan") or []) or "none", ci(r, mrr)]
                    + [fmt(r.get(f"hit@{k}")) for k in s.ks] + [ci(r, f"evidence@{b}") for b in s.budgets]
                    + [fmt(r.get(g)) for g in gen]
                    + [fallback, fmt(r.get("chunks_per_book"), 1), fmt(r.get("train_metric_value"))])
    return markdown_table(head, body)


def write_ablation_table(runs: Sequence[StudentRun], result: Any, out_dir: Path,
                         logger_cfg: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """``ablations.md`` and ``ablations.json`` in ``out_dir`` (and a W&B table with logger=wandb)."""
    rows = ablation_rows(runs, result)
    table = ablation_markdown(rows, result)
    lines = [f"# Ablations on {result.suite}", "",
             f"{len(rows)} trained variants, each evaluated by evaluate.py as a LitSeg-Lite chunker with its own "
             f"base model, adapter and prompt on {result.meta.get('questions_evaluated')} questions "
             f"({result.meta.get('generation_questions')} with generation). Retrieval and answer figures come "
             "from results.json of this run; *train* is the training run's own validation metric.", "",
             table, ""]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "ablations.md").write_text("\n".join(lines), encoding="utf-8")
    (out_dir / "ablations.json").write_text(json.dumps({"suite": result.suite, "rows": rows}, indent=2,
                                                       default=str) + "\n", encoding="utf-8")
    files = {"ablations_markdown": out_dir / "ablations.md", "ablations_json": out_dir / "ablations.json"}
    logger = logger_settings(logger_cfg)
    if logger is not None and logger.backend == "wandb":
        log_ablations_to_wandb(rows, logger, out_dir)
    return files


def log_ablations_to_wandb(rows: Sequence[Mapping[str, Any]], cfg: Any, out_dir: Path) -> None:
    """The ablation rows as one W&B table (``cfg``: the typed logger group)."""
    import os

    import wandb

    mode = cfg.mode
    if mode == "auto":
        mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
    run = wandb.init(project=cfg.project, entity=cfg.entity, mode=mode, group=cfg.group or "ablations",
                     tags=list(cfg.tags),
                     name=f"{out_dir.name}-ablations", job_type="ablations", dir=str(out_dir),
                     reinit="finish_previous")
    try:
        cols: list[str] = []
        for r in rows:
            cols += [k for k in r if k not in cols]
        run.log({"ablations": wandb.Table(columns=cols, data=[[_cell(r.get(c)) for c in cols] for r in rows])})
    finally:
        run.finish()


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, dict)) else value
