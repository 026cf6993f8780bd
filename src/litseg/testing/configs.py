"""Config groups of ``conf/`` as the typed objects the code receives, for tests and benchmarks that
build chunkers, generators or training data without composing a Hydra config."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from litseg.chunkers.groups import FeedbackConfig, PromptConfig
from litseg.segmentation.config import PreprocessConfig
from litseg.rag.config import DEFAULT_CONF_DIR
from litseg.utils.config import from_dict


def group_yaml(group: str, name: str, conf_dir: Path = DEFAULT_CONF_DIR) -> dict[str, Any]:
    """``conf/<group>/<name>.yaml`` as a plain, resolved dict (a preprocess option's defaults list
    composed, as Hydra would)."""
    from omegaconf import OmegaConf

    node = OmegaConf.load(Path(conf_dir) / group / f"{name}.yaml")
    data: dict[str, Any] = OmegaConf.to_container(node, resolve=True)  # type: ignore[assignment]
    bases = [d for d in data.pop("defaults", []) if d != "_self_"]
    merged: dict[str, Any] = {}
    for base in bases:
        merged.update(group_yaml(group, str(base), conf_dir))
    return {**merged, **data}


def prompt_config(name: str, **changes: Any) -> Any:
    """``conf/prompt/<name>.yaml`` typed (its shape's class), with ``changes`` to its fields."""
    return from_dict(PromptConfig, {**group_yaml("prompt", name), **changes}, "prompt")


def feedback_config(name: str = "default") -> FeedbackConfig:
    return from_dict(FeedbackConfig, group_yaml("feedback", name), "feedback")


def preprocess_config(name: str = "default", **changes: Any) -> PreprocessConfig:
    """``conf/preprocess/<name>.yaml`` typed; ``auto`` in ``changes`` is a dict of its fields to change."""
    config = from_dict(PreprocessConfig, group_yaml("preprocess", name), "preprocess")
    if "auto" in changes:
        changes["auto"] = dataclasses.replace(config.auto, **changes["auto"])
    return dataclasses.replace(config, **changes)
