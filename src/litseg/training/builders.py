"""From typed settings to TRL / PEFT / transformers objects.

Everything heavy (torch, transformers, trl, peft) is imported here and only here, so that the
config and data layers stay light. The functions are small and separate so that tests (and
notebooks) can build one piece at a time: the model, the LoRA config, the trainer arguments, the
trainers.
"""

from __future__ import annotations

import importlib.util
import logging
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


def _common(settings: SFTSettings | GRPOSettings, cfg: TrainConfig, output_dir: Path, run_name: str,
            report_to: list[str]) -> dict[str, Any]:
    args = {
        "output_dir": str(output_dir),
        "run_name": run_name,
        "report_to": report_to,
        "seed": cfg.seed,
        "learning_rate": settings.learning_rate,
        "num_train_epochs": settings.num_train_epochs,
        "max_steps": settings.max_steps,
        "per_device_train_batch_size": settings.per_device_train_batch_size,
        "gradient_accumulation_steps": settings.gradient_accumulation_steps,
        "warmup_steps": settings.warmup_steps,
        "lr_scheduler_type": settings.lr_scheduler_type,
        "max_grad_norm": settings.max_grad_norm,
        "logging_steps": settings.logging_steps,
        "logging_first_step": True,
        "save_strategy": "steps",
        "save_steps": settings.save_steps,
        "save_total_limit": settings.save_total_limit,
        "gradient_checkpointing": cfg.model.gradient_checkpointing,
        "disable_tqdm": not is_main_process(),
        **precision_args(cfg.model),
    }
    if cfg.model.gradient_checkpointing:
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if cfg.model.chat_template_kwargs:
        args["chat_template_kwargs"] = dict(cfg.model.chat_template_kwargs)
    return args


def _with_extra(args: dict[str, Any], extra: Mapping[str, Any], config_cls: type) -> dict[str, Any]:
    import dataclasses

    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(extra) - known)
    if unknown:
        raise ValueError(f"extra: {unknown} are not {config_cls.__name__} fields")
    return {**args, **dict(extra)}


def sft_config(cfg: TrainConfig, output_dir: Path, *, run_name: str, report_to: list[str], has_eval: bool) -> Any:
    from trl import SFTConfig

    s = cfg.stage.sft
    args = _common(s, cfg, output_dir, run_name, report_to)
    args.update(
        per_device_eval_batch_size=s.per_device_eval_batch_size,
        max_length=cfg.data.max_total_tokens,
        packing=s.packing,
        completion_only_loss=s.completion_only_loss,
        **({"pad_to_multiple_of": s.pad_to_multiple_of} if s.pad_to_multiple_of else {}),
        weight_decay=s.weight_decay,
        eval_strategy=_eval_strategy(s.eval_steps, has_eval),
        eval_steps=s.eval_steps or None,
    )
    args.pop("chat_template_kwargs", None)  # SFTConfig takes the template's kwargs per dataset row
    return SFTConfig(**_with_extra(args, s.extra, SFTConfig))


def _eval_strategy(eval_steps: float | None, has_eval: bool) -> str:
    """Validation loss: every ``eval_steps`` steps, once per epoch (None), or never (0 / no split)."""
    if not has_eval or eval_steps == 0:
        return "no"
    return "epoch" if eval_steps is None else "steps"


def completion_length(settings: GRPOSettings, longest_reference: int | None) -> tuple[int, str | None]:
    """GRPO's ``max_completion_length`` and a warning when answers like the teacher's would be cut.

    ``auto`` sizes it as the longest teacher answer times ``completion_length_margin`` (capped at
    ``completion_length_cap``); an explicit number is kept as given.
    """
    value = settings.max_completion_length
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
                   + (" and masked out of the loss" if settings.mask_truncated_completions else ""))
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
    batch = settings.generation_batch_size or (
        settings.per_device_train_batch_size * world_size() * settings.gradient_accumulation_steps)
    if batch % settings.num_generations:
        raise ValueError(
            f"GRPO: the generation batch ({batch} = per_device_train_batch_size x processes x "
            f"gradient_accumulation_steps, or generation_batch_size) must be divisible by "
            f"num_generations ({settings.num_generations})")
    return batch


def grpo_config(cfg: TrainConfig, output_dir: Path, *, run_name: str, report_to: list[str],
                reward_weights: list[float], longest_reference: int | None) -> tuple[Any, str | None]:
    from trl import GRPOConfig

    g = cfg.stage.grpo
    check_generation_batch(g)
    length, warning = completion_length(g, longest_reference)
    args = _common(g, cfg, output_dir, run_name, report_to)
    args.update(
        num_generations=g.num_generations,
        generation_batch_size=g.generation_batch_size,
        max_completion_length=length,
        temperature=g.temperature,
        top_p=g.top_p,
        loss_type=g.loss_type,
        epsilon=g.epsilon,
        epsilon_high=g.epsilon_high,
        beta=g.beta,
        mask_truncated_completions=g.mask_truncated_completions,
        scale_rewards=g.scale_rewards,
        num_iterations=g.num_iterations,
        reward_weights=list(reward_weights),
        log_completions=g.log_completions and is_main_process(),
        num_completions_to_print=g.num_completions_to_print,
        remove_unused_columns=False,  # the rewards read the dataset's columns
    )
    if use_vllm(g):
        args.update(use_vllm=True, vllm_mode=g.vllm_mode)
        if g.vllm_mode == "colocate":
            args.update(vllm_gpu_memory_utilization=g.vllm_gpu_memory_utilization,
                        vllm_tensor_parallel_size=g.vllm_tensor_parallel_size)
        elif g.vllm_server_base_url:
            args["vllm_server_base_url"] = g.vllm_server_base_url
    return GRPOConfig(**_with_extra(args, g.extra, GRPOConfig)), warning


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
    if selective_head(cfg.stage.sft.selective_lm_head, cfg.stage.sft.completion_only_loss):
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
