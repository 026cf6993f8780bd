"""Shared pieces of the training tests: composing train.yaml, the synthetic teacher run, a probe reward."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def compose_train(overrides: list[str]) -> Any:
    """``train.yaml`` composed with ``overrides`` exactly as the command line would give them."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", overrides=list(overrides))


def distinct_characters(completions: list[Any], **columns: Any) -> list[float]:
    """A probe reward for smoke runs: the share of distinct characters in each answer.

    The shipped rewards are flat on a random tiny model (nothing parses), so GRPO's group
    advantages would all be zero; this one varies from answer to answer, which gives the smoke run
    a gradient without changing the rewards under test.
    """
    from litseg.training.rewards import completion_text

    texts = [completion_text(c) for c in completions]
    return [len(set(t)) / max(1, len(t)) for t in texts]
