"""Tables over finished training runs (local run directories or W&B), for the ablation notebook.

:func:`load_runs` finds every ``train_summary.json`` below a folder (a single run, a multirun
sweep, or ``outputs/train``); :func:`find_runs` does it for a folder given relative to the
repository (as ``LITSEG_RUNS`` is) and fails when there is none; :func:`ablation_table` lines
the runs up one row per experiment with their evaluation metrics; :func:`reward_curves` reads
each run's ``metrics.jsonl`` into one long table of per-step values. :func:`wandb_runs` does the
same from a W&B project.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from litseg.utils.jsonl import read_jsonl
from litseg.utils.locations import checkout_root

#: The paper's order of LitSeg-Lite and its ablations (section 4.3); other experiments follow.
ABLATION_ORDER = ["litseg_lite", "grpo", "sft", "no_grpo", "no_finetune", "no_stage1", "no_stage2",
                  "no_turning_points", "no_theory"]


def load_runs(roots: str | Path | Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every run summary below ``roots``, with ``run_dir`` set to where it was found."""
    if isinstance(roots, (str, Path)):
        roots = [roots]
    runs = []
    for root in roots:
        for path in sorted(Path(root).expanduser().rglob("train_summary.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            data["run_dir"] = str(path.parent)
            runs.append(data)
    return runs


def repository_root(start: str | Path | None = None) -> Path:
    """The litseg checkout: the nearest folder at or above ``start`` (default: the working
    directory, e.g. ``notebooks/`` for a notebook) holding ``pyproject.toml`` and
    ``conf/train.yaml``; else the checkout this package runs from; else the working directory
    (an installed package has no checkout: relative paths are then the working directory's)."""
    here = Path(start or Path.cwd()).resolve()
    package = checkout_root()
    for candidate in (here, *here.parents, *([package] if package else [])):
        if (candidate / "pyproject.toml").is_file() and (candidate / "conf" / "train.yaml").is_file():
            return candidate
    return here


def resolve_in_repository(path: str | Path, start: str | Path | None = None) -> Path:
    """``path`` as given when absolute, else relative to :func:`repository_root` (never to the
    folder a notebook happens to run in)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else Path(os.path.normpath(repository_root(start) / p))


def find_runs(spec: str | Path, start: str | Path | None = None) -> list[dict[str, Any]]:
    """:func:`load_runs` below ``spec`` (resolved by :func:`resolve_in_repository`); an error
    naming the folder when it holds no run, so an empty table never passes for a result."""
    root = resolve_in_repository(spec, start)
    runs = load_runs(root)
    if not runs:
        state = "does not exist" if not root.exists() else "holds no train_summary.json"
        raise FileNotFoundError(f"no training runs: {root} {state} (given as {str(spec)!r}; relative "
                                f"paths are read from the repository, {repository_root(start)})")
    return runs


def _order(name: str) -> tuple[int, str]:
    return (ABLATION_ORDER.index(name) if name in ABLATION_ORDER else len(ABLATION_ORDER), name)


def ablation_table(runs: Sequence[dict[str, Any]], metrics: Sequence[str] | None = None) -> Any:
    """A pandas DataFrame, one row per run, in the paper's ablation order."""
    import pandas as pd

    rows = []
    for r in runs:
        row = {
            "experiment": r.get("experiment"),
            "prompt_version": r.get("prompt_version"),
            "stages": "+".join(r.get("stage_plan", [])) or "none",
            "train_examples": Counter(r.get("data", {}).get("examples") or {})["train"],  # no split: 0
            "git_commit": (r.get("git_commit") or "")[:10],
            "run_dir": r.get("run_dir"),
        }
        row.update(r.get("eval", {}))
        for kind, stage in r.get("stages", {}).items():
            last = stage.get("last_logged", {})
            if "reward" in last:
                row[f"{kind}/final_reward"] = last["reward"]
            if "loss" in last:
                row[f"{kind}/final_loss"] = last["loss"]
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table = table.sort_values("experiment", key=lambda col: col.map(_order)).reset_index(drop=True)
    if metrics:
        keep = ["experiment", "prompt_version", "stages", "train_examples"] + [m for m in metrics if m in table]
        table = table[keep]
    return table


def reward_curves(runs: Sequence[dict[str, Any]], keys: Sequence[str] = ("reward",)) -> Any:
    """Long table (experiment, stage, step, metric, value) of the logged training steps."""
    import pandas as pd

    rows = []
    for r in runs:
        for rec in read_jsonl(Path(r["run_dir"]) / "metrics.jsonl"):
            for key, value in rec.items():
                wanted = key in keys or any(key.startswith(k) for k in keys if k.endswith("/"))
                if wanted and isinstance(value, (int, float)):
                    rows.append({"experiment": r.get("experiment"), "stage": rec.get("stage"),
                                 "step": rec.get("step"), "metric": key, "value": float(value)})
    return pd.DataFrame(rows, columns=["experiment", "stage", "step", "metric", "value"])


def wandb_runs(project: str, *, entity: str | None = None, group: str | None = None) -> list[dict[str, Any]]:
    """Run summaries from W&B in the shape :func:`load_runs` gives (needs network and a key)."""
    import wandb

    api = wandb.Api()
    filters = {"group": group} if group else {}
    out = []
    for run in api.runs(f"{entity}/{project}" if entity else project, filters=filters):
        summary = dict(run.summary)
        out.append({"experiment": run.job_type, "prompt_version": next(
            (t.split(":", 1)[1] for t in run.tags if t.startswith("prompt:")), ""),
            "stage_plan": [], "eval": {k: v for k, v in summary.items() if k.startswith("eval/")},
            "run_dir": run.url, "git_commit": next((t.split(":", 1)[1] for t in run.tags if t.startswith("commit:")), "")})
    return out
