"""Experiment-tracking settings (``conf/logger``), shared by training runs and RAG evaluations.

They sit below both (``litseg.rag`` and ``litseg.training`` never import each other), and import
nothing of W&B: the loggers that use them import it when a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from litseg.utils.config import config_schema


@config_schema("logger", entry="train", default_option="none")
@dataclass
class LoggerConfig:
    """Experiment tracking. ``backend: none`` keeps metrics in the run directory only."""

    backend: str  # none | wandb
    project: str
    entity: str | None
    group: str | None  # W&B group (e.g. the sweep or ablation grid)
    tags: list[str]
    mode: str  # auto (offline without WANDB_API_KEY) | online | offline | disabled
    log_model: bool
