"""Trainer callbacks: every logged step also lands in the run directory as JSONL.

TRL already logs each reward (``rewards/<name>/mean`` and ``/std``), the combined reward, the
metrics rewards report through ``log_metric`` (judge failures, retries, unreadable answers) and,
with ``log_completions``, a table of sample completions (a parquet file per logging step under the
trainer's ``completions/`` folder, and a W&B table when W&B is on). :class:`MetricsFileCallback`
keeps the scalar logs beside the run's other outputs, so notebooks and tests read them without
W&B; only the main process writes.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


class MetricsFileCallback(TrainerCallback):
    """Append each ``on_log`` record (with stage, step and wall time) to ``path``."""

    def __init__(self, path: str | Path, stage: str) -> None:
        self.path = Path(path)
        self.stage = stage
        self.start = time.time()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or not state.is_world_process_zero:
            return
        row = {"stage": self.stage, "step": state.global_step, "time_s": round(time.time() - self.start, 3)}
        row.update({k: _jsonable(v) for k, v in logs.items()})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


class StepTimeCallback(TrainerCallback):
    """Wall time of each optimiser step (``step_seconds`` in the summary)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._t0: float | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._t0 = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._t0 is not None:
            self.times.append(time.perf_counter() - self._t0)
            self._t0 = None
