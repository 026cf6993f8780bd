"""Experiment tracking: W&B (offline without a key) or nothing, always on the main process only.

Runs are grouped (``logger.group``, e.g. the ablation grid or a sweep) and tagged with the
experiment, the prompt version and the git commit, so that a W&B workspace lines them up; the
run name is the run directory's name. Without ``WANDB_API_KEY`` the run is written offline
under the run directory (``wandb sync`` uploads it later).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from litseg.utils.tracking import LoggerConfig

log = logging.getLogger(__name__)


def run_tags(experiment: str, prompt_version: str, commit: str | None, extra: list[str]) -> list[str]:
    tags = [f"experiment:{experiment}", f"prompt:{prompt_version or 'unknown'}"]
    if commit:
        tags.append(f"commit:{commit[:10]}")
    return tags + [t for t in extra if t not in tags]


def wandb_mode(cfg: LoggerConfig) -> str:
    if cfg.mode != "auto":
        return cfg.mode
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


class RunLogger:
    """Starts the tracking run; ``report_to`` is what the trainers get."""

    def __init__(self, cfg: LoggerConfig, *, run_dir: Path, run_name: str, experiment: str, prompt_version: str,
                 commit: str | None, config: dict[str, Any], main: bool) -> None:
        self.cfg = cfg
        self.run = None
        self.report_to: list[str] = []
        self.tags = run_tags(experiment, prompt_version, commit, list(cfg.tags))
        if cfg.backend == "none" or not main:
            return
        try:
            import wandb
        except ImportError as exc:
            raise RuntimeError("logger=wandb needs the wandb package (pip install wandb), "
                               "or use logger=none") from exc
        mode = wandb_mode(cfg)
        self.run = wandb.init(project=cfg.project, entity=cfg.entity, group=cfg.group or experiment,
                              job_type=experiment, name=run_name, tags=self.tags, config=config,
                              dir=str(run_dir), mode=mode, reinit="finish_previous")
        os.environ.setdefault("WANDB_LOG_MODEL", "checkpoint" if cfg.log_model else "false")
        self.report_to = ["wandb"]
        log.info("wandb run %s (%s mode)", run_name, mode)

    def log_summary(self, values: dict[str, Any]) -> None:
        if self.run is not None:
            numbers = {k: v for k, v in values.items() if isinstance(v, (int, float))}
            self.run.log(numbers)
            self.run.summary.update(numbers)

    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
