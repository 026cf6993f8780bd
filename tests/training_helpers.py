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
    """The smoke runs' probe reward (``litseg.training.probe``), importable from the tests too."""
    from litseg.training.probe import distinct_characters as probe

    return probe(completions, **columns)


def make_dying_judge(good_batches: int = 1, name: str = "dying-judge", **_ignored: Any) -> Any:
    """``judge_llm.backend: tests.training_helpers:make_dying_judge``: a scripted judge that answers
    its first ``good_batches`` batches with a one-chunk verdict, then raises as a server that went
    down would."""
    from litseg.llm.testing import ScriptedChatModel

    verdict = '{"event_validity": [4], "unity_of_action": [3.5], "cut_point_logic": [4]}'

    class DyingJudge(ScriptedChatModel):
        batches = 0

        def chat_batch(self, requests: list[Any]) -> list[Any]:
            self.batches += 1
            if self.batches > good_batches:
                raise ConnectionError("judge server unreachable")
            return super().chat_batch(requests)

    return DyingJudge([verdict], name=name, cycle=True)
