"""Reward functions for GRPO: plain callables ``(completions, **columns) -> list[float]``.

TRL calls every reward with the batch's completions and the dataset's columns as keyword
arguments (here ``n_sentences``, ``schema``, ``chapter``, ...). Rewards are chosen by name and
weight in ``conf/rewards/*.yaml``; :func:`build_rewards` turns that mapping into the list of
functions and weights handed to ``GRPOTrainer``.

* ``format``: rule-based partial credit for a well-formed segmentation (table in
  docs/training.md and :data:`DEFAULT_FORMAT_CREDITS`).
* ``judge``: the narratological reward. An LLM judge (any backend of :mod:`litseg.llm`) grades
  every predicted chunk on event validity, unity of action and cut-point logic (1-5, rubric in
  ``conf/prompt/judge.yaml``); the scores are averaged over the three dimensions, then over the
  chunks, and scaled so that the scale's ends map to 0 and 1. The rubric's context adjustments
  (+/- half a point on cut-point logic) keep their effect at the ends of the scale: a top grade
  with the bonus scores above a clean top grade, a bottom grade with the penalty below a clean
  one (so the reward can leave 0..1 by a few hundredths). Calls go out as one ``chat_batch`` per
  reward call (duplicates sent once), through the response cache when the judge's llm config
  enables it. A judgement that cannot be read is asked again with a correction note; when the
  retries are spent the completion gets a neutral score and the failure is counted. A judge that
  keeps failing stops the run: when more than ``max_failure_share`` of the judgements of the last
  ``failure_window`` reward calls failed, :class:`JudgeUnavailableError` is raised (otherwise
  GRPO would quietly go on as format-only training).

* ``boundary``: agreement of the student's cuts with the teacher's (:mod:`.boundary`), for when no
  judge is served.

Each reward is one module of this package whose factory registers itself with
``@REWARDS.register("name")`` (:mod:`.base`); a new reward is one new module plus its entry in
``conf/rewards/``. ``package.module:function`` in a config names a plain reward function outside
litseg (its params bound as keywords).

Rewards report counters through TRL's ``log_metric`` hook, so every training step logs each reward
(``rewards/<name>/mean``, from TRL) and its failure counts (``<name>/...``, from here).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from litseg.training.rewards.base import REWARDS, RewardContext, RewardFn, column, log_metric, completion_text
from litseg.training.rewards.format import DEFAULT_FORMAT_CREDITS, FormatScore, format_score, make_format_reward
from litseg.training.rewards.judge import (
    CORRECTION,
    JudgementError,
    JudgeRubric,
    JudgeStats,
    JudgeUnavailableError,
    NarratologicalJudgeReward,
    chunk_lines,
    judge_json_schema,
    parse_judgement,
)
from litseg.utils.registry import import_target

__all__ = [
    "CORRECTION", "DEFAULT_FORMAT_CREDITS", "REWARDS", "FormatScore", "JudgeRubric", "JudgeStats",
    "JudgeUnavailableError", "JudgementError", "NarratologicalJudgeReward", "RewardContext", "RewardFn",
    "column", "log_metric", "build_reward", "build_rewards", "chunk_lines", "completion_text", "format_score",
    "judge_json_schema", "make_format_reward", "parse_judgement",
]


def build_reward(name: str, function: str, params: Mapping[str, Any], context: RewardContext) -> RewardFn:
    """One reward: a registered name, or ``package.module:function`` (params bound as keywords)."""
    if ":" in function:
        target = import_target(function)
        bound = partial(target, **dict(params)) if params else target

        def reward(completions: list[Any], **columns: Any) -> list[float]:
            return bound(completions, **columns)

        reward.__name__ = name  # TRL names the reward's metrics after this
        return reward
    # An unknown name raises UnknownPluginError ("unknown reward ...; available: ...").
    return REWARDS.get(function)(name, params, context)


def build_rewards(specs: Mapping[str, Any], context: RewardContext) -> tuple[list[RewardFn], list[float]]:
    """Enabled rewards and their weights, in config order. ``specs`` maps name -> RewardSpec."""
    funcs: list[RewardFn] = []
    weights: list[float] = []
    for name, spec in specs.items():
        if not spec.enabled:
            continue
        funcs.append(build_reward(name, spec.function or name, spec.params, context))
        weights.append(float(spec.weight))
    if not funcs:
        raise ValueError("no reward enabled: GRPO needs at least one (see conf/rewards/)")
    return funcs, weights
