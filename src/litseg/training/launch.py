"""The distributed launch a training process belongs to.

``accelerate launch`` and ``torchrun`` set ``WORLD_SIZE`` and ``RANK`` for every process they
start; a plain ``python train.py`` has neither and is the one (main) process of a launch of one.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import nullcontext
from typing import Any

from litseg.errors import SetupError

RUN_ID_ENV = "LITSEG_RUN_ID"


def _env_int(name: str, unset: int) -> int:
    value = os.environ.get(name)
    return unset if value is None else int(value)


def world_size() -> int:
    """Processes in the launch (1 outside a distributed launch)."""
    return _env_int("WORLD_SIZE", unset=1)


def rank() -> int:
    """This process's rank (0, the main process, outside a distributed launch)."""
    return _env_int("RANK", unset=0)


def is_main_process() -> bool:
    return rank() == 0


def launched() -> bool:
    """Whether a launcher (accelerate launch, torchrun) started this process: it then owns one
    device, whatever the machine has."""
    return "WORLD_SIZE" in os.environ or "LOCAL_RANK" in os.environ


def check_devices(visible_gpus: int) -> None:
    """A plain ``python train.py`` on a machine with several visible GPUs: transformers would wrap
    the model in ``nn.DataParallel``, which TRL refuses, and only after the model has loaded. Say
    so before anything loads, with the two ways out."""
    if visible_gpus > 1 and not launched():
        raise SetupError(
            f"{visible_gpus} GPUs are visible but train.py runs as one plain process (TRL does not train "
            "through nn.DataParallel): start one process per GPU with accelerate launch --config_file "
            f"conf/accelerate/zero2.yaml --num_processes {visible_gpus} train.py ..., or keep one GPU for "
            "training: CUDA_VISIBLE_DEVICES=0 python train.py ... (docs/training.md, \"GPU recipes\")")


def share_run_id() -> None:
    """Give every process of a distributed launch the same run id (so one run directory).

    Called before Hydra composes the config: ``hydra.run.dir`` reads ``$LITSEG_RUN_ID``. Rank 0's
    timestamp is broadcast to the others; ranks other than 0 also get Hydra's own outputs
    (``.hydra/``, the job log file) switched off, so the run directory is written by one process.
    """
    if world_size() <= 1:
        return
    if RUN_ID_ENV not in os.environ:
        from accelerate import PartialState
        from accelerate.utils import broadcast_object_list

        PartialState()
        stamp = [time.strftime("%Y-%m-%d_%H-%M-%S")]
        broadcast_object_list(stamp, from_process=0)
        os.environ[RUN_ID_ENV] = stamp[0]
    if rank() != 0:
        sys.argv += ["hydra.output_subdir=null", "hydra/job_logging=none", "hydra/hydra_logging=none"]


def main_first() -> Any:
    """A context in which the main process goes first (the others wait for it)."""
    if world_size() <= 1:
        return nullcontext()
    from accelerate import PartialState

    return PartialState().main_process_first()


def barrier() -> None:
    """Wait for every process of the launch."""
    if world_size() > 1:
        from accelerate import PartialState

        PartialState().wait_for_everyone()
