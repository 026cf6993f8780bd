"""Typed settings behind ``conf/annotate.yaml``: its top-level settings (:class:`AnnotateConfig`)
and the groups this area owns (``feedback``, ``length_reference``).

The YAML holds every value; the dataclasses hold none of their own where the YAML gives one (a
field without a default is required, and annotate.yaml provides it). Settings a user adds with
``+key=value`` (``new_dir``, ``output_dir``) default to off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litseg.chunkers.base import MethodConfig
from litseg.chunkers.build import method_config_from
from litseg.chunkers.groups import FeedbackConfig, PromptConfig
from litseg.segmentation.config import PreprocessConfig
from litseg.llm.config import LLMConfig
from litseg.llm.factory import llm_config_from
from litseg.utils.config import config_schema, from_dict, shipped_option, to_plain


@config_schema("length_reference", entry="annotate", default_option="none")
@dataclass(frozen=True)
class LengthReferenceConfig:
    """A soft segment-length reference (p25 / p50 / p75); any quantile null turns it off.
    ``python -m litseg.annotation.length_reference`` writes one, with ``hint`` and ``source``."""

    name: str
    unit: str  # sentences | words
    p25: int | float | None
    p50: int | float | None
    p75: int | float | None
    hint: str | None = None  # the sentence filled into the prompt's {length_hint}
    source: dict[str, Any] | None = None  # which runs the figures came from


def length_reference_from(node: Any) -> LengthReferenceConfig | None:
    """A ``length_reference`` section typed (None stays None). One given from Python may name only
    its quantiles: the rest is conf/length_reference/none.yaml's, their one home."""
    if node is None or isinstance(node, LengthReferenceConfig):
        return node
    given = dict(to_plain(node))
    return from_dict(LengthReferenceConfig, {**shipped_option("length_reference", "none"), **given}, "length_reference")


@dataclass(frozen=True)
class InputOptions:
    """Column names for ``input=hf:...`` / ``input=dataset:...`` (id_column null: row number)."""

    id_column: str | None
    title_column: str


@dataclass(frozen=True)
class ExportSettings:
    """The sharded JSONL (and optional Parquet) dataset written into RUN/dataset."""

    enabled: bool
    dir: str | None
    shard_rows: int | None
    parquet: bool


@dataclass(frozen=True)
class AnnotateConfig:
    """The top-level settings of ``conf/annotate.yaml`` (documented there)."""

    input: Any  # a path, directory, glob, hf:... or dataset:...; None when the config leaves it ???
    input_options: InputOptions
    shard: str | None
    window_units: int
    export: ExportSettings
    limit_units: int | None
    resume: bool
    view: bool
    view_max_chunks: int
    print_table: int
    strict_exit: bool
    new_dir: bool = False  # +new_dir=true: a run dir of another setup -> a fresh folder beside it
    output_dir: str | None = None  # where to write outside Hydra (tests pass out_dir instead)
    # The method section typed by its chunker's config class (method_config_from).
    method: MethodConfig | None = None
    # The groups read as their schema objects (None where a config composes none).
    llm: LLMConfig | None = None
    length_reference: LengthReferenceConfig | None = None
    prompt: PromptConfig | None = None
    feedback: FeedbackConfig | None = None
    preprocess: PreprocessConfig | None = None


def annotate_config_from(cfg: Any) -> AnnotateConfig:
    """The typed settings of a composed annotate config (a missing ``input`` is None); every group
    typed by its schema (``method`` by :func:`~litseg.chunkers.build.method_config_from`, ``llm``
    by :func:`~litseg.llm.factory.llm_config_from`)."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        data = {k: None if OmegaConf.is_missing(cfg, k) else to_plain(cfg[k]) for k in cfg if k != "hydra"}
    else:
        data = {k: v for k, v in dict(to_plain(cfg)).items() if k != "hydra"}
    if data.get("method") is not None:
        data["method"] = method_config_from(data["method"])
    if "llm" in data:
        data["llm"] = llm_config_from(data["llm"])
    if "length_reference" in data:
        data["length_reference"] = length_reference_from(data["length_reference"])
    if data.get("shard") is not None:
        data["shard"] = str(data["shard"])  # shard=1/2 reads as text, but a bare number would not
    return from_dict(AnnotateConfig, data)
