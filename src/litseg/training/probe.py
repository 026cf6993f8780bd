"""A probe reward for smoke runs, which use a tiny *random* model.

Every shipped reward is flat on such a model: nothing it writes parses, so the format reward is 0
and the judge scores every answer "unjudgeable" (0). With equal rewards inside each group of
generations GRPO's advantages are all zero, the loss and the gradient are exactly zero and the
LoRA weights never move: a smoke run would exercise generation and logging but not the update.
``debug=smoke`` therefore adds this reward (``rewards.probe`` in ``conf/debug/smoke.yaml``). It
varies from answer to answer, so the smoke run takes real optimiser steps; it rewards nothing a
segmenter should learn and has no place in a real run.
"""

from __future__ import annotations

from typing import Any

from litseg.training.rewards import completion_text


def distinct_characters(completions: list[Any], **columns: Any) -> list[float]:
    """The share of distinct characters in each answer (0 for an empty one)."""
    texts = [completion_text(c) for c in completions]
    return [len(set(t)) / max(1, len(t)) for t in texts]
