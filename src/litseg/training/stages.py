"""The training stages of a run, in order (SFT, GRPO): each a LoRA trainer that resumes from its
latest checkpoint and leaves ``stages/<kind>/adapter``, and a ``done.json`` marker so that a rerun
into the same run directory reuses a finished stage whose settings did not change. "Settings"
is everything the adapter depends on (:func:`stage_settings`): the stage's hyperparameters, model,
LoRA, prompt, seed, the data's content and the adapter it starts from, and for GRPO the rewards,
the judge's rubric and the judge model.

A stage's record (``train_summary.json``'s ``stages``): ``global_step``, ``resumed_from``,
``train_loss``, ``seconds``, ``step_seconds``, ``params`` (trainable tensors and how many changed:
did the stage learn anything), ``last_logged`` (the latest value of every logged key) and, for
GRPO, ``rewards`` (whether the logged rewards ever gave a learning signal); ``reused`` when taken
over from an earlier run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litseg.models import adapter_digest, resolve_adapter
from litseg.training.config import TrainConfig, to_dict
from litseg.training.launch import barrier
from litseg.training.adapters import save_adapter
from litseg.training.builders import (
    build_grpo_trainer,
    build_sft_trainer,
    free_gpu_cache,
    is_zero3,
    load_model,
    resolve_model_path,
    trainer_args,
)
from litseg.training.params import changed_tensors, trainable_snapshot
from litseg.utils.config import section_dict

log = logging.getLogger(__name__)

MARKER = "done.json"


@dataclass
class StagePlan:
    """What every stage of a run shares: settings, data, rewards, where it writes, who logs."""

    tc: TrainConfig
    out: Path
    tokenizer: Any
    datasets: Any
    examples: dict[str, int]  # examples per split (data_report.json)
    longest: int | None  # the longest teacher answer in tokens (sizes GRPO completions)
    reward_funcs: list[Any]
    reward_weights: list[float]
    report_to: list[str]
    commit: str | None
    main: bool
    runs: list[str] = field(default_factory=list)  # the teacher run directories (the boundary stage reads them)


def _settings_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def data_digest(datasets: Any) -> str:
    """A digest of every row of every split: a rerun on other teacher data is another stage."""
    h = hashlib.sha256()
    for split in sorted(datasets):
        h.update(str(split).encode())
        for row in datasets[split]:
            h.update(json.dumps(row, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _reward_identity(fn: Any) -> Any:
    identity = getattr(fn, "identity", None)
    return identity() if callable(identity) else getattr(fn, "__name__", repr(fn))


def stage_settings(plan: StagePlan, kind: str, adapter_in: Path | None) -> dict[str, Any]:
    """Everything the adapter of stage ``kind`` depends on (a rerun reuses the stage only when all
    of it is unchanged)."""
    tc = plan.tc
    if kind == "boundary":  # the nets read the teacher units only: no chat model, prompt or adapter
        return {"stage": to_dict(tc.stage.boundary), "seed": tc.seed, "runs": list(plan.runs),
                "split": tc.data.split, "data": to_dict(tc.data)}
    settings: dict[str, Any] = {
        "stage": to_dict(getattr(tc.stage, kind)), "model": to_dict(tc.model), "peft": to_dict(tc.peft),
        "seed": tc.seed, "prompt": section_dict(tc.prompt), "data": data_digest(plan.datasets),
        "adapter_in": str(adapter_in), "adapter_in_sha256": adapter_digest(adapter_in) if adapter_in else None,
    }
    if kind == "grpo":
        settings["rewards"] = {name: to_dict(spec) for name, spec in tc.rewards.items()}
        settings["judge_rubric"] = section_dict(tc.judge) if tc.judge is not None else {}
        settings["reward_models"] = [_reward_identity(fn) for fn in plan.reward_funcs]
    return settings


def _resume_checkpoint(setting: str, checkpoints: Path) -> str | None:
    if setting == "never":
        return None
    if setting == "auto":
        from transformers.trainer_utils import get_last_checkpoint

        return get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    if not Path(setting).is_dir():
        raise FileNotFoundError(f"output.resume={setting!r}: no such checkpoint directory")
    return setting


def rewards_logged(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether GRPO's logged rewards ever gave a learning signal.

    ``all_zero``: the mean reward and its spread were 0 at every logged step (every reward was
    0); ``flat``: no group of generations ever differed in reward (``frac_reward_zero_std`` 1, or
    ``reward_std`` 0, at every step), so every advantage, the loss and the gradient were 0.
    """
    rows = [r for r in history if r.get("reward") is not None]

    def zero(row: dict[str, Any], key: str) -> bool:
        return float(row.get(key) or 0.0) == 0.0

    flat = [float(r["frac_reward_zero_std"]) == 1.0 if r.get("frac_reward_zero_std") is not None
            else zero(r, "reward_std") for r in rows]
    all_zero = bool(rows) and all(zero(r, "reward") and zero(r, "reward_std") for r in rows)
    return {"steps": len(rows), "all_zero": all_zero, "flat": bool(rows) and all(flat)}


def _last_logged(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The latest value of every key in the trainer's log history."""
    out: dict[str, Any] = {}
    for row in history:
        for k, v in row.items():
            if v is not None:
                out[k] = v
    return out


def _reused(plan: StagePlan, stage_dir: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The record of a stage an earlier run finished with these settings (None: run it).

    ``done.json`` holds ``{"settings_hash": ..., "result": <the stage's record>}``."""
    marker = stage_dir / MARKER
    if plan.tc.output.resume == "never" or not marker.is_file():
        return None
    done = json.loads(marker.read_text())
    if done.get("settings_hash") != _settings_hash(settings):
        return None
    return {**(done.get("result") or {}), "reused": True}


def run_stages(plan: StagePlan, warnings: list[str]) -> tuple[dict[str, Any], Path | None]:
    """Run (or reuse) every stage of ``stage.run`` in order; their records and the last adapter."""
    tc = plan.tc
    stages: dict[str, Any] = {}
    adapter_in: Path | None = None
    # the first stage that trains an adapter may start from a given one (boundary trains none)
    first = next((getattr(tc.stage, k) for k in tc.stage.run if k in ("sft", "grpo")), None)
    if first is not None and first.init_adapter:
        adapter_in = Path(resolve_adapter(first.init_adapter))
    for kind in tc.stage.run:
        stage_dir = plan.out / "stages" / kind
        settings = stage_settings(plan, kind, adapter_in)
        reused = _reused(plan, stage_dir, settings)
        if kind == "boundary":  # LitSeg-Tagger's reading half: no adapter, the chat model is not loaded
            if reused is None:
                from litseg.training.tagger import run_boundary_stage  # lazy: training.tagger imports torch

                reused = run_boundary_stage(plan, stage_dir)
                (stage_dir / MARKER).write_text(json.dumps({"settings_hash": _settings_hash(settings),
                                                            "result": reused}, indent=2, default=str) + "\n")
            else:
                log.info("stage boundary already finished in %s; reusing its nets", stage_dir)
            stages[kind] = reused
            continue
        if reused is not None:
            log.info("stage %s already finished in %s; reusing its adapter", kind, stage_dir)
            stages[kind] = reused
        else:
            stages[kind] = run_stage(plan, kind, stage_dir, adapter_in, warnings)
            if plan.main:
                (stage_dir / MARKER).write_text(json.dumps({"settings_hash": _settings_hash(settings),
                                                            "result": stages[kind]}, indent=2, default=str) + "\n")
        adapter_in = stage_dir / "adapter"
    return stages, adapter_in


def _trainer_args(plan: StagePlan, kind: str, stage_dir: Path, warnings: list[str]) -> Any:
    args, warning = trainer_args(plan.tc, kind, plan.datasets, stage_dir / "checkpoints",
                                 run_name=f"{plan.tc.experiment_name}-{kind}", report_to=plan.report_to,
                                 reward_weights=plan.reward_weights, longest_reference=plan.longest)
    if warning:
        warnings.append(warning)
    return args


def _trainer(plan: StagePlan, kind: str, model: Any, args: Any, callbacks: list[Any]) -> Any:
    if kind == "sft":
        return build_sft_trainer(plan.tc, model, plan.tokenizer, plan.datasets, args, callbacks=callbacks)
    return build_grpo_trainer(plan.tc, model, plan.tokenizer, plan.datasets, args,
                              reward_funcs=plan.reward_funcs, callbacks=callbacks)


def adapter_metadata(tc: TrainConfig, kind: str, commit: str | None) -> dict[str, Any]:
    """What a saved adapter records about how it was trained (its model card reads it)."""
    return {"base_model": tc.model.path, "base_model_resolved": resolve_model_path(tc.model),
            "model_name": tc.model.name, "experiment": tc.experiment_name, "stage": kind,
            "prompt": tc.prompt.name, "prompt_version": tc.prompt.version, "schema": tc.prompt.schema,
            "lora_r": tc.peft.r if tc.peft.enabled else None, "git_commit": commit}


def run_stage(plan: StagePlan, kind: str, stage_dir: Path, adapter_in: Path | None,
              warnings: list[str]) -> dict[str, Any]:
    """Train one stage from ``adapter_in`` (None: the base model); its record."""
    from litseg.training.callbacks import MetricsFileCallback, StepTimeCallback  # lazy: imports transformers

    started = time.time()
    # The TRL config first: under accelerate's ZeRO-3 it is what makes the model load sharded.
    args = _trainer_args(plan, kind, stage_dir, warnings)
    model = load_model(plan.tc.model, adapter=adapter_in, zero3=is_zero3(args))
    step_times = StepTimeCallback()
    callbacks = [MetricsFileCallback(plan.out / "metrics.jsonl", kind), step_times]
    trainer = _trainer(plan, kind, model, args, callbacks)
    before = trainable_snapshot(trainer.model)
    resume_from = _resume_checkpoint(plan.tc.output.resume, stage_dir / "checkpoints")
    if resume_from:
        log.info("stage %s resumes from %s", kind, resume_from)
    result = trainer.train(resume_from_checkpoint=resume_from)
    change = changed_tensors(before, trainer.model)
    save_adapter(trainer, None, stage_dir / "adapter", adapter_metadata(plan.tc, kind, plan.commit), main=plan.main)
    barrier()
    record = {
        "global_step": trainer.state.global_step,
        "resumed_from": resume_from,
        "train_loss": result.training_loss,
        "seconds": round(time.time() - started, 3),
        "step_seconds": step_times.times,
        "params": change,
        "last_logged": _last_logged(trainer.state.log_history),
    }
    if kind == "grpo":
        record["rewards"] = rewards_logged(trainer.state.log_history)
    del trainer, model, args
    free_gpu_cache()  # the next stage, or an evaluation engine, gets the memory back
    return record
