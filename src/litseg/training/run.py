"""What ``train.py`` runs once Hydra has composed the config.

data (teacher runs -> DatasetDict, by-book splits) -> stages in order (SFT, GRPO; each a LoRA
trainer that resumes from its latest checkpoint and leaves ``stages/<kind>/adapter``,
:mod:`litseg.training.stages`) -> the final ``adapter/`` (optionally ``merged/``) -> evaluation on
the held-out books with the reward functions -> ``train_summary.json``. The run directory holds
everything a notebook needs: ``config.yaml``, ``data_report.json``, ``metrics.jsonl`` (every logged
step), ``eval_samples.jsonl`` and the summary. Files are written by the main process only; with
several processes the other ranks train and wait.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from litseg.training.config import TrainConfig, require_named_model, to_dict, train_config_from
from litseg.training.data import build_datasets, check_teacher_runs, expand_runs, write_report
from litseg.training.launch import check_devices, main_first
from litseg.training.stages import StagePlan, run_stages
from litseg.chunkers.tagger import WRITER_SCHEMA
from litseg.training.tagger_files import assemble_tagger, boundary_metrics
from litseg.training.writer_data import evaluate_writer
from litseg.run_result import OK, UNTRAINED_EXIT, RunResult
from litseg.utils.task import Task, start_task
from litseg.llm.adapter_config import inference_llm_config
from litseg.llm.factory import build_llm
from litseg.training.adapters import merge_adapter
from litseg.training.builders import (
    bound_cpu_heap,
    check_generation_batch,
    check_trl_settings,
    completion_length,
    device_kind,
    engine_memory_fraction,
    leave_zero3,
    load_tokenizer,
    resolve_model_path,
    trl_value,
    visible_gpus,
)
from litseg.training.launch import is_main_process
from litseg.training.evaluation import evaluate_split
from litseg.training.loggers import RunLogger
from litseg.training.rewards import RewardContext, build_rewards
from litseg.training.synthetic import make_synthetic_run

log = logging.getLogger(__name__)

SUMMARY = "train_summary.json"
#: Where a run writes outside Hydra when no run_dir is given.
DEFAULT_DIR = "outputs/train/manual"


def run_training(cfg: Any, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Train (or just evaluate) as ``cfg`` says; returns the summary (also written to the run dir).

    Refused before the run directory is made or any model loads, each in one line: no model named
    (:func:`~litseg.training.config.require_named_model`), a ``trl:`` key TRL does not know
    (:func:`~litseg.training.builders.check_trl_settings`), several GPUs under a plain process
    (:func:`~litseg.training.launch.check_devices`), and a judge that does not answer under its
    configured name (the rewards' ``check``); teacher runs that are missing or not a teacher's are
    named before the judge is asked."""
    tc: TrainConfig = train_config_from(cfg)
    if tc.prompt is None:
        raise ValueError("no prompt: compose with prompt=litseg_lite (or an ablation prompt)")
    require_named_model(tc.model)
    check_trl_settings(tc)
    check_devices(visible_gpus())
    if tc.data.runs:  # a missing teacher run is the user's first mistake: name it before asking any judge
        check_teacher_runs(expand_runs(tc.data.runs))
    reward_funcs, reward_weights = _rewards(tc)
    try:
        check_rewards(reward_funcs)
        return _train(tc, cfg, run_dir, reward_funcs, reward_weights)
    finally:
        _close_rewards(reward_funcs)


def training_task(cfg: Any, run_dir: str | Path | None = None) -> RunResult:
    """What train.py runs: :func:`run_training`, the configured metric for sweepers, and
    :data:`~litseg.run_result.UNTRAINED_EXIT` when the run trained nothing (the reasons: the
    summary's ``trained_nothing`` and the run's last line); the entry exits with it once every job
    has finished."""
    summary = run_training(cfg, run_dir)
    untrained = bool(summary["trained_nothing"])
    return RunResult(metric=float(summary["metric"]), run_dir=summary["run_dir"],
                     exit_code=UNTRAINED_EXIT if untrained else OK, reason="trained nothing" if untrained else "",
                     summary=summary)


def _train(tc: TrainConfig, cfg: Any, run_dir: str | Path | None, reward_funcs: list[Any],
           reward_weights: list[float]) -> dict[str, Any]:
    from transformers import set_seed

    main = is_main_process()
    task = start_task("train", cfg, run_dir, fallback=DEFAULT_DIR, write=main)
    out = task.run_dir
    set_seed(tc.seed)
    if device_kind() == "cpu":
        bound_cpu_heap()
    tokenizer = load_tokenizer(tc.model)
    datasets, report, runs = _build_data(tc, tokenizer, out, main)
    logger = RunLogger(tc.logger, run_dir=out, run_name=f"{tc.experiment_name}-{out.name}",
                       experiment=tc.experiment_name, prompt_version=tc.prompt.version, commit=task.commit,
                       config=to_dict(tc), main=main)
    plan = StagePlan(tc=tc, out=out, tokenizer=tokenizer, datasets=datasets, examples=report.examples,
                     longest=report.longest_completion(), reward_funcs=reward_funcs, reward_weights=reward_weights,
                     report_to=logger.report_to, commit=task.commit, main=main, runs=runs)
    try:
        warnings: list[str] = []
        stages, adapter_in = run_stages(plan, warnings)
        leave_zero3()
        final_adapter, merged = _final_adapter(tc, out, adapter_in, main)
        trained = final_adapter or (adapter_in if tc.stage.run else None)
        evaluation = _evaluate(plan, trained, warnings)
        if "boundary" in stages:
            evaluation.update(boundary_metrics(stages["boundary"]))
            if main:
                assemble_tagger(plan, out / "tagger", stages["boundary"], final_adapter)
        summary = _summary(plan, task, report, stages, evaluation, final_adapter, merged, warnings, logger.tags)
        if main:
            task.finish(summary, summary["metric"], file=SUMMARY)
            logger.log_summary({**evaluation, "data/train_examples": report.n_examples("train")})
            for reason in summary["trained_nothing"]:
                log.warning("TRAINED NOTHING: %s (%s)", reason, out)
            print(end_line(summary), flush=True)
    finally:
        logger.finish()
    return summary


def _build_data(tc: TrainConfig, tokenizer: Any, out: Path, main: bool) -> tuple[Any, Any, list[str]]:
    """The DatasetDict of the teacher runs (a synthetic teacher run for smoke runs without any),
    its report written as data_report.json; GRPO refused early when one batch cannot be filled."""
    runs: list[str] = list(tc.data.runs)
    if not runs and tc.data.synthetic:
        with main_first():
            runs = [str(make_synthetic_run(out / "synthetic_teacher"))]
    datasets, report = build_datasets(tc.data, tc.prompt, tokenizer, runs=runs,
                                      chat_template_kwargs=tc.model.chat_template_kwargs)
    if main:
        write_report(report, out / "data_report.json")
    if "grpo" in tc.stage.run:
        check_grpo_examples(tc.stage.grpo, report.n_examples("train"))
    return datasets, report, runs


def _rewards(tc: TrainConfig) -> tuple[list[Any], list[float]]:
    """The reward functions and weights (for GRPO and for the evaluation), none when neither runs."""
    if "grpo" not in tc.stage.run and not tc.eval.enabled:
        return [], []
    context = RewardContext(judge_rubric=tc.judge, judge_llm=tc.judge_llm or None)
    return build_rewards(tc.rewards, context)


def check_rewards(reward_funcs: list[Any]) -> None:
    """Ask every reward that calls a model (the judge) whether it can answer, before any model
    loads: a judge server that is down, or serves another model name, stops the run in one line
    (:class:`~litseg.llm.base.ModelUnavailable`) instead of after the first rollout."""
    for fn in reward_funcs:
        check = getattr(fn, "check", None)
        if callable(check):
            check()


def _close_rewards(reward_funcs: list[Any]) -> None:
    """Close the judge models the rewards started (a served model's client, an engine)."""
    for fn in reward_funcs:
        llm = getattr(fn, "_llm", None)
        if hasattr(llm, "close"):
            llm.close()


def _final_adapter(tc: TrainConfig, out: Path, adapter_in: Path | None, main: bool) -> tuple[Path | None, Path | None]:
    """The last stage's adapter copied to ``adapter/`` and, when asked, merged into ``merged/``."""
    final_adapter: Path | None = None
    if adapter_in is not None and tc.stage.run and main and tc.output.save_adapter:
        final_adapter = out / "adapter"
        shutil.rmtree(final_adapter, ignore_errors=True)
        shutil.copytree(adapter_in, final_adapter)
    merged: Path | None = None
    if final_adapter is not None and tc.output.merge_adapter and main:
        merged = merge_adapter(resolve_model_path(tc.model), final_adapter, out / "merged")
    return final_adapter, merged


def _evaluate(plan: StagePlan, trained: Path | None, warnings: list[str]) -> dict[str, float]:
    """The rewards of the trained model (the base model when no stage ran) on the held-out split."""
    tc = plan.tc
    if not tc.eval.enabled or not plan.main:
        return {}
    if tc.eval.split not in plan.datasets:
        warnings.append(f"no {tc.eval.split!r} split (too few books?): evaluation skipped")
        return {}
    rows = plan.datasets[tc.eval.split]
    if tc.eval.max_examples is not None:
        rows = rows.select(range(min(len(rows), tc.eval.max_examples)))
    if tc.prompt.schema == WRITER_SCHEMA and trained is None:
        return {}  # a boundary stage alone: the writer was not trained in this run

    max_new = tc.eval.max_new_tokens or completion_length(tc.stage.grpo, plan.longest)[0]
    if trained is not None and not tc.peft.enabled:
        base, adapter, embedded = str(trained), None, False  # full fine-tuning saved a whole model
    else:
        base, adapter, embedded = resolve_model_path(tc.model), trained, tc.model.path == "embedded"
    backend_settings = ({"batch_size": tc.eval.batch_size, "device": "auto"}
                        if tc.eval.backend == "transformers" else _engine_memory())
    llm = build_llm(inference_llm_config(base, adapter, backend=tc.eval.backend, embedded=embedded,
                                         lora_rank=tc.peft.r, **backend_settings))
    try:
        if tc.prompt.schema == WRITER_SCHEMA:
            return evaluate_writer(list(rows), llm, max_new_tokens=64, samples_path=plan.out / "eval_samples.jsonl")
        return evaluate_split_rows(rows, llm, plan.reward_funcs, plan.reward_weights, max_new, tc,
                                   plan.out / "eval_samples.jsonl")
    finally:
        llm.close()


def _engine_memory() -> dict[str, Any]:
    """vLLM's share of the GPU for the evaluation engine inside this process: what is free once the
    trainer's CUDA cache is returned (a judge served beside it keeps its own share), not the
    engine's 0.9 of the whole card, which the trainer's leftovers and the judge would not leave it."""
    fraction = engine_memory_fraction()
    return {} if fraction is None else {"gpu_memory_utilization": fraction}


def evaluate_split_rows(rows: Any, llm: Any, reward_funcs: list[Any], reward_weights: list[float],
                        max_new_tokens: int, tc: TrainConfig, samples_path: Path) -> dict[str, float]:
    return evaluate_split(list(rows), llm, reward_funcs, reward_weights, max_new_tokens=max_new_tokens,
                          constrained=tc.eval.constrained, batch_size=tc.eval.batch_size,
                          samples_path=samples_path)


def _summary(plan: StagePlan, task: Task, report: Any, stages: dict[str, Any], evaluation: dict[str, float],
             final_adapter: Path | None, merged: Path | None, warnings: list[str], tags: list[str]) -> dict[str, Any]:
    """train_summary.json: what ran, on what, with which result; ``metric`` is what a sweeper reads."""
    tc = plan.tc
    summary = {
        "experiment": tc.experiment_name,
        "run_dir": str(task.run_dir),
        "git_commit": task.commit,
        "prompt": tc.prompt.name,
        "prompt_version": tc.prompt.version,
        "schema": tc.prompt.schema,
        "model": tc.model.name,
        "stages": stages,
        "stage_plan": list(tc.stage.run),
        "data": report.to_dict(),
        "rewards": {getattr(fn, "__name__", str(i)): {"weight": w, "stats": _reward_stats(fn)}
                    for i, (w, fn) in enumerate(zip(plan.reward_weights, plan.reward_funcs))},
        "eval": evaluation,
        "adapter": str(final_adapter) if final_adapter else None,
        "merged": str(merged) if merged else None,
        "warnings": warnings,
        "tags": tags,
        "seconds": round(task.seconds(), 3),
    }
    summary["metric_name"] = tc.eval.metric
    summary["metric"] = _metric(summary, tc.eval.metric)
    summary["trained_nothing"] = untrained_reasons(stages)
    return summary


def _reward_stats(fn: Any) -> dict[str, Any]:
    stats = getattr(fn, "stats", None)
    return stats.to_dict() if hasattr(stats, "to_dict") else {}


def _metric(summary: dict[str, Any], name: str) -> float:
    """The value a sweeper optimises: an eval metric, else the last logged training value."""
    if name in summary["eval"]:
        return float(summary["eval"][name])
    for stage in reversed(list(summary["stages"].values())):
        value = (stage.get("last_logged") or {}).get(name)
        if isinstance(value, (int, float)):
            return float(value)
    return float("nan")


def check_grpo_examples(settings: Any, n_train: int) -> None:
    """GRPO draws ``generation batch / num_generations`` distinct prompts per generation batch;
    with fewer training examples than that there is not one batch to train on (TRL only says
    "max_steps must be set")."""
    batch = check_generation_batch(settings)
    generations = trl_value("grpo", settings, "num_generations")
    prompts = batch // generations
    if n_train < prompts:
        raise ValueError(
            f"GRPO: too few training examples for one generation batch: {n_train} example(s), but each "
            f"generation batch needs {prompts} distinct prompts (generation batch {batch} / num_generations "
            f"{generations}); add teacher units (see data_report.json for what was dropped) or "
            "lower stage.grpo.trl.per_device_train_batch_size / gradient_accumulation_steps / generation_batch_size")


#: The reward conf/debug/smoke.yaml adds so that a tiny random model's GRPO step moves the weights.
PROBE_REWARD = "probe"


def _probe_note(summary: dict[str, Any]) -> str:
    """What of an eval reward metric the smoke probe reward makes (it scores variety of characters,
    not segmentation), so a smoke run's last line does not read like a real score; "" otherwise."""
    probe = (summary.get("rewards") or {}).get(PROBE_REWARD)
    name = str(summary.get("metric_name"))
    part = (summary.get("eval") or {}).get(f"{name.rsplit('/', 1)[0]}/{PROBE_REWARD}")
    if probe is None or not name.endswith("/reward") or part is None:
        return ""
    return (f" (of which {probe['weight'] * part:.4f} is the smoke probe reward: answers of a random model "
            "rewarded for varied characters, not a segmentation score)")


def _tensors(stage: dict[str, Any]) -> tuple[int | None, int | None]:
    """(trainable, changed) tensors of a stage record (:mod:`litseg.training.stages`); None where
    the record lacks them (a reused stage's marker from an older run)."""
    params = stage.get("params") or {}
    return params.get("trainable_tensors"), params.get("changed_tensors")


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
        total, changed = (int(n or 0) for n in _tensors(stage))
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
        total, done = ("?" if n is None else n for n in _tensors(stage))
        changed.append(f"{kind} {done}/{total}" + (" (reused)" if stage.get("reused") else ""))
    if reasons:
        verdict = "TRAINED NOTHING (" + "; ".join(reasons) + ")"
    else:
        verdict = "trained" if summary.get("stages") else "no training stage (evaluation only)"
    metric = summary.get("metric")
    shown = f"{metric:.4f}" if isinstance(metric, float) else str(metric)
    shown += _probe_note(summary)
    return (f"train: {verdict} | {summary.get('metric_name')}={shown} | adapter {summary.get('adapter') or 'none'}"
            f" | tensors changed: {', '.join(changed) or 'none (no stage ran)'} | run {summary.get('run_dir')}")
