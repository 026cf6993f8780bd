"""What every reward shares: the answer text of a completion, dataset columns, TRL's metric hook,
and the registry of reward factories.

A reward factory is ``factory(name, params, context) -> reward function`` registered with
``@REWARDS.register("name")`` in its own module of this package; the registry imports every module
of the package on first lookup, so a new reward is one new module plus its ``conf/rewards`` entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from litseg.chunkers.groups import JudgePrompt
from litseg.llm.config import LLMConfig
from litseg.utils.registry import Registry

RewardFn = Callable[..., list[float]]


@dataclass
class RewardContext:
    """What reward factories may need besides their own params."""

    judge_rubric: JudgePrompt | None = None
    judge_llm: LLMConfig | None = None  # conf/judge_llm, typed


RewardFactory = Callable[[str, Mapping[str, Any], RewardContext], RewardFn]

#: Rewards by name: factory(name, params, context) -> reward function.
REWARDS: Registry[RewardFactory] = Registry("reward", discover=["litseg.training.rewards"])


def completion_text(completion: Any) -> str:
    """The answer text of one completion: a string, a message, or a conversation (last message)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return str(completion["content"]) if "content" in completion else ""  # a message without text
    if isinstance(completion, Sequence) and completion:
        return completion_text(completion[-1])
    return ""


def column(columns: Mapping[str, Any], name: str, n: int, default: Any = None) -> list[Any]:
    values = columns.get(name)
    if values is None:
        if default is None:
            raise KeyError(f"reward needs the dataset column {name!r} (is the GRPO dataset from build_datasets?)")
        return [default] * n
    values = list(values)
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
    return values


def log_metric(columns: Mapping[str, Any], name: str, value: float) -> None:
    """Report ``name`` through the ``log_metric`` hook among the reward columns, when there is one."""
    hook = columns.get("log_metric")
    if callable(hook):
        hook(name, float(value))

