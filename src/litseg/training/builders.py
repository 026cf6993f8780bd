"""From typed settings to TRL / PEFT / transformers objects.

Everything heavy (torch, transformers, trl, peft) is imported here and only here, so that the
config and data layers stay light. The functions are small and separate so that tests (and
notebooks) can build one piece at a time: the model, the LoRA config, the trainer arguments, the
trainers.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import logging
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.training.config import (
    GRPOSettings,
    ModelConfig,
    PeftConfig,
    SFTSettings,
    TrainConfig,
)

from litseg.llm.decoding import neutral_generation_config
from litseg.llm.local_models import local_model_path
from litseg.training.launch import is_main_process, world_size
from litseg.errors import SetupError
from litseg.training.sft_loss import selective_sft_trainer_class
from litseg.utils.config import ConfigError, check_value

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Devices and models


def device_kind() -> str:
    """``cuda`` when a GPU is visible, else ``cpu`` (TRL then needs use_cpu=True, bf16=False)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def visible_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def free_gpu_cache() -> None:
    """Hand the CUDA memory PyTorch keeps cached back to the device (a trainer's, once deleted), so
    that an engine started next in this process, or beside it, can have it."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


#: The share of the GPU's free memory an engine started inside the training process may take; the
#: rest covers what vLLM allocates beyond its budget and what the process still holds.
ENGINE_SHARE_OF_FREE = 0.85


def engine_memory_fraction() -> float | None:
    """``gpu_memory_utilization`` for a vLLM engine started now in this process: a share of the
    memory that is free once PyTorch's cache is returned (vLLM refuses to start when the fraction
    it is given exceeds what is free). None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    free_gpu_cache()
    free, total = torch.cuda.mem_get_info()
    fraction = ENGINE_SHARE_OF_FREE * free / total
    if fraction < 0.05:
        raise SetupError(f"only {free / 2**30:.1f} of {total / 2**30:.1f} GiB of the GPU are free for the "
                         "evaluation engine (eval.backend=vllm); use eval.backend=transformers, or give the "
                         "judge served beside the trainer a smaller --gpu-memory-utilization")
    return round(fraction, 3)


def torch_dtype(name: str) -> Any:
    import torch

    if name == "auto":
        if device_kind() == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    known = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in known:
        raise ValueError(f"model.dtype: unknown dtype {name!r} (auto | float32 | bfloat16 | float16)")
    return known[name]


def resolve_model_path(model: ModelConfig) -> str:
    """A directory (or hub id) that ``from_pretrained`` loads: ``tiny`` and ``embedded`` resolved."""
    return local_model_path(model.path)


def load_tokenizer(model: ModelConfig) -> Any:
    from transformers import AutoTokenizer

    source = model.tokenizer or resolve_model_path(model)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=model.trust_remote_code)
    if tokenizer.chat_template is None:
        raise ValueError(f"the tokenizer of {source} has no chat template; set model.tokenizer to one that has")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(model: ModelConfig, *, adapter: str | Path | None = None, trainable: bool = True,
               zero3: bool = False) -> Any:
    """The causal LM, with ``adapter`` (a saved LoRA) loaded on top when given.

    ``zero3`` (DeepSpeed ZeRO-3): the adapter keeps the base model's dtype instead of peft's fp32
    upcast, as TRL does for the adapters it creates: ZeRO-3 all-gathers persistent parameters
    into buffers of one dtype, and bf16 base weights beside fp32 LoRA weights fail at the first
    optimizer step (DeepSpeed 0.19.2). Call it after the stage's TRL config exists
    (:func:`trainer_args`): that config is what makes ``from_pretrained`` load under zero.Init."""
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": torch_dtype(model.dtype), "trust_remote_code": model.trust_remote_code}
    if model.attn_implementation:
        kwargs["attn_implementation"] = model.attn_implementation
    net = AutoModelForCausalLM.from_pretrained(resolve_model_path(model), **kwargs)
    # GRPO's rollouts decode with what the trainer's config says, not the model's own preferences
    # (transformers fills unset generation settings from them; litseg.llm.decoding).
    net.generation_config = neutral_generation_config(net.generation_config)
    if adapter is not None:
        from peft import PeftModel

        if not (Path(adapter) / "adapter_config.json").is_file():
            raise FileNotFoundError(f"{adapter} holds no LoRA adapter (adapter_config.json missing)")
        extra = {"autocast_adapter_dtype": False} if zero3 else {}
        net = PeftModel.from_pretrained(net, str(adapter), is_trainable=trainable, **extra)
    return net


def leave_zero3() -> None:
    """After the last stage: models loaded from here on (merging the adapter, the evaluation) load
    whole. The ZeRO-3 config a stage registered stays live in accelerate's state, and
    ``from_pretrained`` would go on loading sharded, for a training engine that no longer runs."""
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled, unset_hf_deepspeed_config

    if is_deepspeed_zero3_enabled():
        unset_hf_deepspeed_config()


def is_zero3(args: Any) -> bool:
    """Whether a TRL config was made under accelerate's DeepSpeed ZeRO-3 (TRL's own test)."""
    plugin = getattr(args, "deepspeed_plugin", None)
    return plugin is not None and getattr(plugin, "zero_stage", None) == 3


def build_lora_config(peft: PeftConfig) -> Any:
    """``peft.LoraConfig`` for causal-LM LoRA, or None when ``peft.enabled`` is false."""
    if not peft.enabled:
        return None
    from peft import LoraConfig

    target = peft.target_modules
    if isinstance(target, Sequence) and not isinstance(target, str):
        target = list(target)
    return LoraConfig(r=peft.r, lora_alpha=peft.lora_alpha, lora_dropout=peft.lora_dropout, target_modules=target,
                      bias=peft.bias, use_rslora=peft.use_rslora, modules_to_save=peft.modules_to_save,
                      layers_to_transform=list(peft.layers_to_transform) if peft.layers_to_transform else None,
                      layers_pattern="layers" if peft.layers_to_transform else None, task_type="CAUSAL_LM")


# --------------------------------------------------------------------------------------------
# Trainer arguments


def cpu_bf16(setting: str | bool) -> bool:
    """Whether to train under bf16 autocast on this CPU (``model.cpu_bf16``)."""
    value = str(setting).lower()
    if value in {"true", "1", "yes"}:
        return True
    if value in {"false", "0", "no"}:
        return False
    if value != "auto":
        raise ValueError(f"model.cpu_bf16: expected auto | true | false, got {setting!r}")
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()) and \
            torch.backends.cpu.get_cpu_capability() in {"AVX512", "AMX"}
    except (AttributeError, RuntimeError):
        return False


def bound_cpu_heap() -> bool:
    """Keep glibc from hoarding freed memory during CPU training (Linux only; a no-op elsewhere).

    Every example has its own sequence length, so tensors of ever new sizes are freed and
    allocated; with glibc's adaptive thresholds the heap kept what was freed (a 135M-parameter LoRA
    run here grew to 15 GB resident over 52 steps). Fixed thresholds return large blocks at once;
    the same effect as MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ set before start-up.
    """
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        m_trim_threshold, m_mmap_threshold = -1, -3
        return bool(libc.mallopt(m_mmap_threshold, 131072)) and bool(libc.mallopt(m_trim_threshold, 131072))
    except (OSError, AttributeError):
        return False


def precision_args(model: ModelConfig) -> dict[str, Any]:
    """use_cpu / bf16 / fp16 for this machine (CPU: fp32 weights and use_cpu=True as TRL needs,
    with bf16 autocast where the CPU computes bf16 natively)."""
    import torch

    if device_kind() == "cpu":
        return {"use_cpu": True, "bf16": cpu_bf16(model.cpu_bf16), "fp16": False}
    dtype = torch_dtype(model.dtype)
    return {"bf16": dtype == torch.bfloat16, "fp16": dtype == torch.float16}


#: TRL arguments that litseg sets itself, each from another setting or from the machine (named
#: here): refused under a stage's ``trl:``, so that every argument has one source.
SET_BY_LITSEG = {
    "output_dir": "the run directory", "run_name": "the run directory", "report_to": "logger",
    "seed": "seed", "gradient_checkpointing": "model.gradient_checkpointing",
    "gradient_checkpointing_kwargs": "model.gradient_checkpointing",
    "chat_template_kwargs": "model.chat_template_kwargs", "disable_tqdm": "the process rank",
    "use_cpu": "the machine", "bf16": "model.dtype and model.cpu_bf16", "fp16": "model.dtype",
}
STAGE_SET_BY_LITSEG = {
    "sft": {**SET_BY_LITSEG, "max_length": "data.max_total_tokens"},
    "grpo": {**SET_BY_LITSEG, "max_completion_length": "stage.grpo.max_completion_length",
             "use_vllm": "stage.grpo.use_vllm", "reward_weights": "rewards.<name>.weight",
             "remove_unused_columns": "the rewards (they read the dataset's columns)"},
}


def trl_config_class(kind: str) -> type:
    """``trl.SFTConfig`` or ``trl.GRPOConfig``: the class that types ``stage.<kind>.trl``."""
    from trl import GRPOConfig, SFTConfig

    return {"sft": SFTConfig, "grpo": GRPOConfig}[kind]


def trl_arguments(kind: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """``stage.<kind>.trl`` checked against the fields of TRL's config class, in one line each: a
    key TRL does not know (with a "did you mean"), a key litseg sets itself, a value of the wrong
    type (:class:`~litseg.utils.config.ConfigError`, exit code 2)."""
    config_cls = trl_config_class(kind)
    where = f"stage.{kind}.trl"
    taken = STAGE_SET_BY_LITSEG[kind]
    names = [f.name for f in dataclasses.fields(config_cls) if f.init]
    hints = typing.get_type_hints(config_cls)
    checked = {}
    for key, value in values.items():
        if key in taken:
            raise ConfigError(f"{where}.{key}: set by litseg from {taken[key]}, not under trl:")
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
            hint = f"; did you mean {where}.{close[0]}?" if close else ""
            raise ConfigError(f"{where}.{key}: unknown TRL {config_cls.__name__} field{hint}")
        checked[key] = check_value(value, hints[key], f"{where}.{key}")
    return checked


def check_trl_settings(cfg: TrainConfig) -> None:
    """Every ``trl:`` mapping of the stages that run, checked before anything loads."""
    for kind in ("sft", "grpo"):
        if kind in cfg.stage.run:
            trl_arguments(kind, getattr(cfg.stage, kind).trl)


def trl_value(kind: str, settings: SFTSettings | GRPOSettings, name: str) -> Any:
    """A TRL argument as the stage gets it: from its ``trl:`` mapping, else TRL's own default."""
    if name in settings.trl:
        return settings.trl[name]
    field = next(f for f in dataclasses.fields(trl_config_class(kind)) if f.name == name)
    return field.default


def _computed(cfg: TrainConfig, output_dir: Path, run_name: str, report_to: list[str]) -> dict[str, Any]:
    """The TRL arguments of :data:`SET_BY_LITSEG`, from the run and the machine."""
    args = {
        "output_dir": str(output_dir),
        "run_name": run_name,
        "report_to": report_to,
        "seed": cfg.seed,
        "gradient_checkpointing": cfg.model.gradient_checkpointing,
        "disable_tqdm": not is_main_process(),
        **precision_args(cfg.model),
    }
    if cfg.model.gradient_checkpointing:
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    return args


def sft_config(cfg: TrainConfig, output_dir: Path, *, run_name: str, report_to: list[str], has_eval: bool) -> Any:
    """``trl.SFTConfig``: ``stage.sft.trl`` as given, with what litseg computes (SFTConfig takes the
    chat template's kwargs per dataset row, so model.chat_template_kwargs is not among them)."""
    from trl import SFTConfig

    args = {**trl_arguments("sft", cfg.stage.sft.trl), **_computed(cfg, output_dir, run_name, report_to),
            "max_length": cfg.data.max_total_tokens}
    if not has_eval:
        args["eval_strategy"] = "no"  # no validation split (too few books): nothing to evaluate on
    return SFTConfig(**args)


def completion_length(settings: GRPOSettings, longest_reference: int | None) -> tuple[int, str | None]:
    """GRPO's ``max_completion_length`` and a warning when answers like the teacher's would be cut.

    ``auto`` sizes it as the longest teacher answer times ``completion_length_margin`` (capped at
    ``completion_length_cap``); an explicit number is kept as given.
    """
    value = settings.max_completion_length
    masked = trl_value("grpo", settings, "mask_truncated_completions")
    if value == "auto":
        if not longest_reference:
            raise ValueError("max_completion_length=auto needs the data's completion lengths")
        length = min(settings.completion_length_cap, int(longest_reference * settings.completion_length_margin) + 1)
    elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
        length = value
    else:
        raise ValueError(f"stage.grpo.max_completion_length must be a positive integer or 'auto', got {value!r}")
    warning = None
    if longest_reference and length < longest_reference:
        warning = (f"max_completion_length={length} is below the longest teacher answer ({longest_reference} "
                   "tokens): completions that long will be cut"
                   + (" and masked out of the loss" if masked else ""))
    return length, warning


def use_vllm(settings: GRPOSettings) -> bool:
    if settings.use_vllm == "auto":
        return importlib.util.find_spec("vllm") is not None and device_kind() == "cuda"
    if settings.use_vllm not in (True, False):
        raise ValueError(f"stage.grpo.use_vllm must be true, false or 'auto', got {settings.use_vllm!r}")
    if settings.use_vllm and importlib.util.find_spec("vllm") is None:
        raise ValueError("stage.grpo.use_vllm=true but vllm is not installed (pip install 'litseg[vllm]')")
    return settings.use_vllm


def check_generation_batch(settings: GRPOSettings) -> int:
    """The generation batch (prompts x generations per step); must divide by num_generations."""
    batch = trl_value("grpo", settings, "generation_batch_size") or (
        trl_value("grpo", settings, "per_device_train_batch_size") * world_size()
        * trl_value("grpo", settings, "gradient_accumulation_steps"))
    generations = trl_value("grpo", settings, "num_generations")
    if batch % generations:
        raise ValueError(
            f"GRPO: the generation batch ({batch} = per_device_train_batch_size x processes x "
            f"gradient_accumulation_steps, or generation_batch_size) must be divisible by "
            f"num_generations ({generations})")
    return batch


def grpo_config(cfg: TrainConfig, output_dir: Path, *, run_name: str, report_to: list[str],
                reward_weights: list[float], longest_reference: int | None) -> tuple[Any, str | None]:
    """``trl.GRPOConfig``: ``stage.grpo.trl`` as given, with what litseg computes (the completion
    length, vLLM or not, the reward weights) and a warning when teacher-length answers would be cut."""
    from trl import GRPOConfig

    g = cfg.stage.grpo
    args = trl_arguments("grpo", g.trl)
    check_generation_batch(g)
    length, warning = completion_length(g, longest_reference)
    args.update(_computed(cfg, output_dir, run_name, report_to), max_completion_length=length, use_vllm=use_vllm(g),
                reward_weights=list(reward_weights), remove_unused_columns=False)
    if cfg.model.chat_template_kwargs:
        args["chat_template_kwargs"] = dict(cfg.model.chat_template_kwargs)
    if not is_main_process():
        args["log_completions"] = False  # one table of samples, from the main process
    return GRPOConfig(**args), warning


# --------------------------------------------------------------------------------------------
# Trainers


def selective_head(setting: str | bool, completion_only: bool) -> bool:
    """Whether SFT projects only the trained positions onto the vocabulary (``stage.sft.selective_lm_head``;
    auto: on a CPU, where TRL's fused head scores every position)."""
    value = str(setting).lower()
    if value not in {"auto", "true", "false"}:
        raise ValueError(f"stage.sft.selective_lm_head: expected auto | true | false, got {setting!r}")
    if value == "auto":
        return completion_only and device_kind() == "cpu"
    return value == "true"


def trainer_args(cfg: TrainConfig, kind: str, datasets: Any, output_dir: Path, *, run_name: str,
                 report_to: list[str], reward_weights: list[float],
                 longest_reference: int | None) -> tuple[Any, str | None]:
    """The stage's TRL config (and a warning for GRPO's completion length). Build it before the
    model: under ``accelerate launch`` with DeepSpeed ZeRO-3 making it registers the DeepSpeed
    config that lets ``from_pretrained`` load the weights already sharded (``zero3_init_flag``);
    keep it alive while the model loads."""
    if kind == "sft":
        return sft_config(cfg, output_dir, run_name=run_name, report_to=report_to,
                          has_eval="validation" in datasets), None
    args, warning = grpo_config(cfg, output_dir, run_name=run_name, report_to=report_to,
                                reward_weights=reward_weights, longest_reference=longest_reference)
    if warning:
        log.warning(warning)
    return args, warning


def build_sft_trainer(cfg: TrainConfig, model: Any, tokenizer: Any, datasets: Any, args: Any, *,
                      callbacks: list[Any]) -> Any:
    from trl import SFTTrainer

    keep = ["prompt", "completion"]
    train = datasets["train"].select_columns(keep)
    evaluation = datasets["validation"].select_columns(keep) if "validation" in datasets else None
    peft_config = None if _is_peft(model) else build_lora_config(cfg.peft)
    trainer_cls = SFTTrainer
    # TRL's completion_only_loss None means "on" for prompt-completion rows, which these are.
    if selective_head(cfg.stage.sft.selective_lm_head, args.completion_only_loss is not False):
        trainer_cls = selective_sft_trainer_class()
    return trainer_cls(model=model, args=args, train_dataset=train, eval_dataset=evaluation, processing_class=tokenizer,
                      peft_config=peft_config, callbacks=callbacks)


def build_grpo_trainer(cfg: TrainConfig, model: Any, tokenizer: Any, datasets: Any, args: Any, *,
                       reward_funcs: list[Any], callbacks: list[Any]) -> Any:
    from trl import GRPOTrainer

    train = datasets["train"].remove_columns([c for c in ("completion",) if c in datasets["train"].column_names])
    peft_config = None if _is_peft(model) else build_lora_config(cfg.peft)
    return GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args, train_dataset=train,
                       processing_class=tokenizer, peft_config=peft_config, callbacks=callbacks)


def _is_peft(model: Any) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a dependency of training
        return False
    return isinstance(model, PeftModel)
