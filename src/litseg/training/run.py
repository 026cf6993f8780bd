"""What ``train.py`` runs once Hydra has composed the config.

data (teacher runs -> DatasetDict, by-book splits) -> stages in order (SFT, GRPO; each a LoRA
trainer that resumes from its latest checkpoint and leaves ``stages/<kind>/adapter``) -> the
final ``adapter/`` (optionally ``merged/``) -> evaluation on the held-out books with the reward
functions -> ``train_summary.json``. The run directory holds everything a notebook needs:
``config.yaml``, ``data_report.json``, ``metrics.jsonl`` (every logged step), ``eval_samples.jsonl``
and the summary. Files are written by the main process only; with several processes the other
ranks train and wait.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import shutil
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from litseg.training.config import TrainConfig, to_dict, train_config_from

log = logging.getLogger(__name__)

SUMMARY = "train_summary.json"
RUN_ID_ENV = "LITSEG_RUN_ID"
#: train.py's exit code when a run (or any job of a sweep) trained nothing (docs/training.md).
UNTRAINED_EXIT = 3


def hydra_run_dir(default: str = "outputs/train/manual") -> Path:
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except (ImportError, ValueError):
        return Path(default)


def share_run_id() -> None:
    """Give every process of a distributed launch the same run id (so one run directory).

    Called before Hydra composes the config: ``hydra.run.dir`` reads ``$LITSEG_RUN_ID``. Rank 0's
    timestamp is broadcast to the others; ranks other than 0 also get Hydra's own outputs
    (``.hydra/``, the job log file) switched off, so the run directory is written by one process.
    """
    import sys

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    if RUN_ID_ENV not in os.environ:
        from accelerate import PartialState
        from accelerate.utils import broadcast_object_list

        PartialState()
        stamp = [time.strftime("%Y-%m-%d_%H-%M-%S")]
        broadcast_object_list(stamp, from_process=0)
        os.environ[RUN_ID_ENV] = stamp[0]
    if int(os.environ.get("RANK", "0")) != 0:
        sys.argv += ["hydra.output_subdir=null", "hydra/job_logging=none", "hydra/hydra_logging=none"]


def _main_first() -> Any:
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return nullcontext()
    from accelerate import PartialState

    return PartialState().main_process_first()


def _barrier() -> None:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from accelerate import PartialState

        PartialState().wait_for_everyone()


def _settings_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _resume_checkpoint(setting: str, checkpoints: Path) -> str | None:
    if setting == "never":
        return None
    if setting == "auto":
        from transformers.trainer_utils import get_last_checkpoint

        return get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    if not Path(setting).is_dir():
        raise FileNotFoundError(f"output.resume={setting!r}: no such checkpoint directory")
    return setting


def _trainable_snapshot(model: Any) -> dict[str, Any]:
    return {n: p.detach().float().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def _changed(before: dict[str, Any], model: Any) -> dict[str, float]:
    import torch

    after = {n: p.detach().float().cpu() for n, p in model.named_parameters() if n in before}
    changed = [n for n, t in after.items() if not torch.equal(t, before[n])]
    delta = sum(float((after[n] - before[n]).abs().sum()) for n in changed)
    return {"trainable_tensors": len(before), "changed_tensors": len(changed), "abs_delta": delta}


def _rewards_logged(history: list[dict[str, Any]]) -> dict[str, Any]:
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


def untrained_reasons(stages: dict[str, Any]) -> list[str]:
    """Why a run learnt nothing, one reason per stage and cause (empty: every stage learnt).

    A stage that ran but changed none of its trainable tensors, and a GRPO stage whose rewards
    were all 0 or never differed inside a group, trained nothing. Reused stages were checked when
    they ran.
    """
    reasons: list[str] = []
    for kind, stage in stages.items():
        if stage.get("reused"):
            continue
        params = stage.get("params") or {}
        total, changed = int(params.get("trainable_tensors", 0)), int(params.get("changed_tensors", 0))
        steps = stage.get("global_step")
        if total == 0:
            reasons.append(f"{kind}: the model has no trainable tensor")
        elif changed == 0:
            reasons.append(f"{kind}: none of the {total} trainable tensors changed in {steps} step(s)")
        rewards = stage.get("rewards") or {}
        if rewards.get("all_zero"):
            reasons.append(f"{kind}: every reward was 0 at all {rewards['steps']} logged step(s)")
        elif rewards.get("flat"):
            reasons.append(f"{kind}: the rewards never differed within a group of generations "
                           f"({rewards['steps']} logged step(s)), so every advantage and the gradient were 0")
    return reasons


def end_line(summary: dict[str, Any]) -> str:
    """The one line a run ends with: verdict, metric, adapter, tensors changed per stage, run dir."""
    reasons = summary.get("trained_nothing") or []
    changed = []
    for kind, stage in summary.get("stages", {}).items():
        p = stage.get("params") or {}
        changed.append(f"{kind} {p.get('changed_tensors', '?')}/{p.get('trainable_tensors', '?')}"
                       + (" (reused)" if stage.get("reused") else ""))
    if reasons:
        verdict = "TRAINED NOTHING (" + "; ".join(reasons) + ")"
    else:
        verdict = "trained" if summary.get("stages") else "no training stage (evaluation only)"
    metric = summary.get("metric")
    shown = f"{metric:.4f}" if isinstance(metric, float) else str(metric)
    return (f"train: {verdict} | {summary.get('metric_name')}={shown} | adapter {summary.get('adapter') or 'none'}"
            f" | tensors changed: {', '.join(changed) or 'none (no stage ran)'} | run {summary.get('run_dir')}")


def check_grpo_examples(settings: Any, n_train: int) -> None:
    """GRPO draws ``generation batch / num_generations`` distinct prompts per generation batch;
    with fewer training examples than that there is not one batch to train on (TRL only says
    "max_steps must be set")."""
    from litseg.training.builders import check_generation_batch

    batch = check_generation_batch(settings)
    prompts = batch // settings.num_generations
    if n_train < prompts:
        raise ValueError(
            f"GRPO: too few training examples for one generation batch: {n_train} example(s), but each "
            f"generation batch needs {prompts} distinct prompts (generation batch {batch} / num_generations "
            f"{settings.num_generations}); add teacher units (see data_report.json for what was dropped) or "
            "lower stage.grpo.per_device_train_batch_size / gradient_accumulation_steps / generation_batch_size")


def _last_logged(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The latest value of every key in the trainer's log history."""
    out: dict[str, Any] = {}
    for row in history:
        for k, v in row.items():
            if v is not None:
                out[k] = v
    return out


def git_commit() -> str | None:
    from litseg.annotation.annotate import git_commit as commit

    return commit()


def run_training(cfg: Any, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Train (or just evaluate) as ``cfg`` says; returns the summary (also written to the run dir)."""
    from transformers import set_seed

    from litseg.training.adapters import (
        inference_llm_config,
        merge_adapter,
        save_adapter,
    )
    from litseg.training.builders import (
        bound_cpu_heap,
        device_kind,
        build_grpo_trainer,
        build_sft_trainer,
        completion_length,
        is_main_process,
        load_model,
        load_tokenizer,
        resolve_model_path,
    )
    from litseg.training.callbacks import MetricsFileCallback, StepTimeCallback
    from litseg.training.data import build_datasets, write_report
    from litseg.training.loggers import RunLogger
    from litseg.training.rewards import RewardContext, build_rewards
    from litseg.training.synthetic import load_prompt, make_synthetic_run

    t0 = time.time()
    tc: TrainConfig = train_config_from(cfg)
    if not tc.prompt:
        raise ValueError("no prompt: compose with prompt=litseg_lite (or an ablation prompt)")
    out = Path(run_dir) if run_dir is not None else hydra_run_dir()
    main = is_main_process()
    out.mkdir(parents=True, exist_ok=True)
    if main:
        _write_config(cfg, out / "config.yaml")
    set_seed(tc.seed)
    if device_kind() == "cpu":
        bound_cpu_heap()

    tokenizer = load_tokenizer(tc.model)
    runs: list[str] = list(tc.data.runs)
    if not runs and tc.data.synthetic:
        with _main_first():
            runs = [str(make_synthetic_run(out / "synthetic_teacher", prompt=load_prompt("litseg_lite")))]
    datasets, report = build_datasets(tc.data, tc.prompt, tokenizer, runs=runs,
                                      chat_template_kwargs=tc.model.chat_template_kwargs)
    if main:
        write_report(report, out / "data_report.json")
    if "grpo" in tc.stage.run:
        check_grpo_examples(tc.stage.grpo, report.examples.get("train", 0))
    longest = int(report.completion_tokens.get("max", 0)) or None

    commit = git_commit()
    prompt_version = str(tc.prompt.get("version", ""))
    logger = RunLogger(tc.logger, run_dir=out, run_name=f"{tc.experiment_name}-{out.name}",
                       experiment=tc.experiment_name, prompt_version=prompt_version, commit=commit,
                       config=to_dict(tc), main=main)
    need_rewards = "grpo" in tc.stage.run or tc.eval.enabled
    context = RewardContext(judge_rubric=tc.judge or None, judge_llm=tc.judge_llm or None)
    reward_funcs, reward_weights = build_rewards(tc.rewards, context) if need_rewards else ([], [])

    stages: dict[str, Any] = {}
    warnings: list[str] = []
    adapter_in: Path | None = None
    if tc.stage.run and tc.stage.run[0] == "grpo" and tc.stage.grpo.init_adapter:
        adapter_in = Path(tc.stage.grpo.init_adapter).expanduser()
    metrics_file = out / "metrics.jsonl"
    try:
        for kind in tc.stage.run:
            stage_dir = out / "stages" / kind
            settings = {"stage": to_dict(getattr(tc.stage, kind)), "model": to_dict(tc.model),
                        "peft": to_dict(tc.peft), "adapter_in": str(adapter_in), "data": report.examples}
            marker = stage_dir / "done.json"
            if tc.output.resume != "never" and marker.is_file():
                done = json.loads(marker.read_text())
                if done.get("settings_hash") == _settings_hash(settings):
                    log.info("stage %s already finished in %s; reusing its adapter", kind, stage_dir)
                    stages[kind] = {**done.get("result", {}), "reused": True}
                    adapter_in = stage_dir / "adapter"
                    continue
            started = time.time()
            model = load_model(tc.model, adapter=adapter_in)
            step_times = StepTimeCallback()
            callbacks = [MetricsFileCallback(metrics_file, kind), step_times]
            run_name = f"{tc.experiment_name}-{kind}"
            if kind == "sft":
                trainer = build_sft_trainer(tc, model, tokenizer, datasets, stage_dir / "checkpoints",
                                            run_name=run_name, report_to=logger.report_to, callbacks=callbacks)
            else:
                trainer, warning = build_grpo_trainer(
                    tc, model, tokenizer, datasets, stage_dir / "checkpoints", reward_funcs=reward_funcs,
                    reward_weights=reward_weights, longest_reference=longest, run_name=run_name,
                    report_to=logger.report_to, callbacks=callbacks)
                if warning:
                    warnings.append(warning)
            before = _trainable_snapshot(trainer.model)
            resume_from = _resume_checkpoint(tc.output.resume, stage_dir / "checkpoints")
            if resume_from:
                log.info("stage %s resumes from %s", kind, resume_from)
            result = trainer.train(resume_from_checkpoint=resume_from)
            change = _changed(before, trainer.model)
            meta = {"base_model": tc.model.path, "base_model_resolved": resolve_model_path(tc.model),
                    "model_name": tc.model.name, "experiment": tc.experiment_name, "stage": kind,
                    "prompt": tc.prompt.get("name"), "prompt_version": prompt_version,
                    "schema": tc.prompt.get("schema"), "lora_r": tc.peft.r if tc.peft.enabled else None,
                    "git_commit": commit}
            save_adapter(trainer, None, stage_dir / "adapter", meta, main=main)
            _barrier()
            stages[kind] = {
                "global_step": trainer.state.global_step,
                "resumed_from": resume_from,
                "train_loss": result.training_loss,
                "seconds": round(time.time() - started, 3),
                "step_seconds": step_times.times,
                "params": change,
                "last_logged": _last_logged(trainer.state.log_history),
            }
            if kind == "grpo":
                stages[kind]["rewards"] = _rewards_logged(trainer.state.log_history)
            if main:
                marker.write_text(json.dumps({"settings_hash": _settings_hash(settings), "result": stages[kind]},
                                             indent=2, default=str) + "\n")
            adapter_in = stage_dir / "adapter"
            del trainer, model
            gc.collect()

        final_adapter: Path | None = None
        if adapter_in is not None and tc.stage.run and main and tc.output.save_adapter:
            final_adapter = out / "adapter"
            shutil.rmtree(final_adapter, ignore_errors=True)
            shutil.copytree(adapter_in, final_adapter)
        merged: Path | None = None
        if final_adapter is not None and tc.output.merge_adapter and main:
            merged = merge_adapter(resolve_model_path(tc.model), final_adapter, out / "merged")

        evaluation: dict[str, float] = {}
        if tc.eval.enabled and main and tc.eval.split in datasets:
            from litseg.llm.factory import build_llm

            rows = datasets[tc.eval.split]
            if tc.eval.max_examples is not None:
                rows = rows.select(range(min(len(rows), tc.eval.max_examples)))
            max_new = tc.eval.max_new_tokens or completion_length(tc.stage.grpo, longest)[0]
            trained = final_adapter or (adapter_in if tc.stage.run else None)
            if trained is not None and not tc.peft.enabled:
                base, adapter, embedded = str(trained), None, False  # full fine-tuning saved a whole model
            else:
                base, adapter, embedded = resolve_model_path(tc.model), trained, tc.model.path == "embedded"
            backend_settings = ({"batch_size": tc.eval.batch_size, "device": "auto"}
                                if tc.eval.backend == "transformers" else {})
            llm = build_llm(inference_llm_config(base, adapter, backend=tc.eval.backend, embedded=embedded,
                                                 lora_rank=tc.peft.r, **backend_settings))
            try:
                evaluation = evaluate_split_rows(rows, llm, reward_funcs, reward_weights, max_new,
                                                 tc, out / "eval_samples.jsonl")
            finally:
                llm.close()
        elif tc.eval.enabled and main:
            warnings.append(f"no {tc.eval.split!r} split (too few books?): evaluation skipped")

        summary = {
            "experiment": tc.experiment_name,
            "run_dir": str(out),
            "git_commit": commit,
            "prompt": tc.prompt.get("name"),
            "prompt_version": prompt_version,
            "schema": tc.prompt.get("schema"),
            "model": tc.model.name,
            "stages": stages,
            "stage_plan": list(tc.stage.run),
            "data": report.to_dict(),
            "rewards": {getattr(fn, "__name__", str(i)): {"weight": w, "stats": _reward_stats(fn)}
                        for i, (w, fn) in enumerate(zip(reward_weights, reward_funcs))},
            "eval": evaluation,
            "adapter": str(final_adapter) if final_adapter else None,
            "merged": str(merged) if merged else None,
            "warnings": warnings,
            "tags": logger.tags,
            "seconds": round(time.time() - t0, 3),
        }
        summary["metric_name"] = tc.eval.metric
        summary["metric"] = _metric(summary, tc.eval.metric)
        summary["trained_nothing"] = untrained_reasons(stages)
        if main:
            (out / SUMMARY).write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
            logger.log_summary({**evaluation, "data/train_examples": report.examples.get("train", 0)})
            for reason in summary["trained_nothing"]:
                log.warning("TRAINED NOTHING: %s (%s)", reason, out)
            print(end_line(summary), flush=True)
    finally:
        logger.finish()
        for fn in reward_funcs:
            llm = getattr(fn, "_llm", None)
            if hasattr(llm, "close"):
                llm.close()
    return summary


def evaluate_split_rows(rows: Any, llm: Any, reward_funcs: list[Any], reward_weights: list[float],
                        max_new_tokens: int, tc: TrainConfig, samples_path: Path) -> dict[str, float]:
    from litseg.training.evaluation import evaluate_split

    return evaluate_split(list(rows), llm, reward_funcs, reward_weights, max_new_tokens=max_new_tokens,
                          constrained=tc.eval.constrained, batch_size=tc.eval.batch_size,
                          samples_path=samples_path)


def _reward_stats(fn: Any) -> dict[str, Any]:
    stats = getattr(fn, "stats", None)
    return stats.to_dict() if hasattr(stats, "to_dict") else {}


def _metric(summary: dict[str, Any], name: str) -> float:
    """The value a sweeper optimises: an eval metric, else the last logged training value."""
    if name in summary["eval"]:
        return float(summary["eval"][name])
    for stage in reversed(list(summary["stages"].values())):
        value = stage.get("last_logged", {}).get(name)
        if isinstance(value, (int, float)):
            return float(value)
    return float("nan")


def _write_config(cfg: Any, path: Path) -> None:
    from omegaconf import DictConfig, OmegaConf

    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    path.write_text(OmegaConf.to_yaml(node, resolve=True), encoding="utf-8")
