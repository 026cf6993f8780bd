"""What one run of an entry (annotate, evaluate, train) hands back, and the exit codes, defined once.

Every entry is a task ``task(cfg) -> RunResult``: :func:`litseg.annotation.entry.annotate_task`,
:func:`litseg.rag.evaluation.run.evaluate_task` and :func:`litseg.training.run.training_task`.
A task decides its own run's code from its summary and never exits; the entry's ``cli()`` collects
the results of every run (every job of a sweep) and exits once with the worst of them
(:func:`litseg.cli.worst_exit`). Standard library only, importable anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The run did what it was asked.
OK = 0
#: The run ran, but units or books failed (listed; a rerun into the same directory tries them again).
FAILED_EXIT = 1
#: The run could not start (or go on): a config mistake, a missing input, a model or server that is
#: not there, a run directory of another setup or locked by another run (one ``error:`` line).
SETUP_EXIT = 2
#: train.py: the run trained nothing (no trainable tensor changed, or GRPO rewards all 0 / flat).
UNTRAINED_EXIT = 3
#: annotate.py: everything read was chunked, but some inputs were skipped (an unsupported format
#: such as PDF, an empty file; listed in run_summary.json's ``inputs``).
INPUTS_SKIPPED_EXIT = 4


@dataclass(frozen=True)
class RunResult:
    """One run's outcome: the value a sweeper reads (``metric``, NaN when there is none), where it
    wrote (``run_dir``, "" when it stopped before it had one), its exit code with the ``reason``
    in a few words ("" for :data:`OK`) and its summary (what the run wrote, or {})."""

    metric: float
    run_dir: str | Path
    exit_code: int = OK
    reason: str = ""
    summary: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def stopped(cls, reason: str, run_dir: str | Path = "") -> RunResult:
        """A run that could not start or go on (:data:`SETUP_EXIT`): no metric, no summary."""
        return cls(metric=math.nan, run_dir=run_dir, exit_code=SETUP_EXIT, reason=reason)
