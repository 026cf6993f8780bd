"""A reward a CPU can afford: agreement of the student's cuts with the teacher's.

Not in the paper (its GRPO reward is the format check plus an LLM judge of Event Validity, Unity of
Action and Cut Point Logic). When no capable judge is served, boundary F1 within +/-``tolerance``
sentences against the teacher's segmentation of the same unit (the dataset's ``reference``
column) rewards the same thing the SFT targets teach, but for whole answers sampled from the
policy. An answer that cannot be read scores 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litseg.segmentation.agreement import boundary_f1
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.schema import get_schema
from litseg.training.rewards.base import REWARDS, column, log_metric, completion_text


def make_boundary_reward(tolerance: int = 1, name: str = "boundary") -> Any:
    def boundary_reward(completions: list[Any], **columns: Any) -> list[float]:
        n = len(completions)
        refs = column(columns, "reference", n)
        schemas = column(columns, "schema", n, default="lite")
        scores: list[float] = []
        unread = 0
        cache: dict[tuple[str, str], list[Any]] = {}
        for completion, ref, schema in zip(completions, refs, schemas):
            model = get_schema(str(schema))
            key = (str(ref), str(schema))
            if key not in cache:
                cache[key] = parse_answer(str(ref), model).segments
            try:
                got = parse_answer(completion_text(completion), model)
            except (ValueError, RecursionError):  # a reply the parser refuses counts as unreadable
                got = None
            if got is None or got.value is None or not got.segments:
                unread += 1
                scores.append(0.0)
                continue
            scores.append(boundary_f1(got.segments, cache[key], tolerance).f1)
        log_metric(columns, f"{name}/unreadable", unread)
        return scores

    boundary_reward.__name__ = name
    return boundary_reward


@REWARDS.register("boundary")
def boundary_factory(name: str, params: Mapping[str, Any], context: Any) -> Any:
    return make_boundary_reward(name=name, **dict(params))
