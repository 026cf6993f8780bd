"""The task shell shared by annotate.py, evaluate.py and train.py.

Each entry's ``run_*`` starts with :func:`start_task` (the run directory, found one way; the
composed config written once as ``config.yaml``; the git commit recorded) and ends with
:meth:`Task.finish` (the summary written as JSON and the metric a Hydra sweeper optimises). What
lies between is the task's own work, read top to bottom.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litseg.utils.config import to_plain
from litseg.utils.locations import checkout_root


def git_commit() -> str | None:
    """The commit of the litseg checkout this code runs from (None outside a git checkout, and for
    an installed package, which may sit inside some other project's repository)."""
    root = checkout_root()
    if root is None:
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=root)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def hydra_run_dir(fallback: str | Path) -> Path:
    """Hydra's output directory of the running job; ``fallback`` when called outside Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except (ImportError, ValueError):
        return Path(fallback)


def write_config(cfg: Any, path: Path) -> None:
    """The composed config, resolved, as YAML (what reproduces the run)."""
    from omegaconf import DictConfig, OmegaConf

    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(to_plain(cfg))
    path.write_text(OmegaConf.to_yaml(node, resolve=True), encoding="utf-8")


@dataclass
class Task:
    """One run of an entry script: where it writes, what it ran from, when it started."""

    name: str
    run_dir: Path
    commit: str | None
    started: float = field(default_factory=time.time)

    def seconds(self) -> float:
        return time.time() - self.started

    def finish(self, summary: dict[str, Any], metric: Any, file: str | None = None) -> float:
        """Write ``summary`` (with the commit and wall time) to ``file`` in the run directory when
        given, and return ``metric`` as the float a sweeper reads (NaN when there is none)."""
        summary.setdefault("git_commit", self.commit)
        summary.setdefault("wall_seconds", round(self.seconds(), 3))
        if file:
            (self.run_dir / file).write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
        try:
            return float(metric)
        except (TypeError, ValueError):
            return math.nan


def start_task(name: str, cfg: Any, run_dir: str | Path | None = None, *, fallback: str | Path,
               write: bool = True) -> Task:
    """The run directory (``run_dir``, else Hydra's, else ``fallback``) created, ``config.yaml``
    written into it (unless ``write`` is false: a non-main process of a distributed launch)."""
    out = Path(run_dir) if run_dir is not None else hydra_run_dir(fallback)
    out.mkdir(parents=True, exist_ok=True)
    if write:
        write_config(cfg, out / "config.yaml")
    return Task(name=name, run_dir=out, commit=git_commit())
