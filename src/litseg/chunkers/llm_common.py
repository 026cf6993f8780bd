"""Pieces shared by the LLM chunkers: numbering a unit, rendering prompts and retry feedback."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from litseg.segmentation.types import Document, Unit
from litseg.segmentation.validation import ValidationIssue, blocking_issues, feedback_message

_WS = re.compile(r"\s+")


def number_sentences(texts: Sequence[str]) -> str:
    """``[1] First sentence.\\n[2] Second ...``; line breaks inside a sentence become spaces."""
    return "\n".join(f"[{i}] {_WS.sub(' ', t).strip()}" for i, t in enumerate(texts, start=1))


def unit_sentence_texts(doc: Document, unit: Unit) -> list[str]:
    return [doc.text[s.start : s.end] for s in unit.sentences]


def render_single_pass_messages(
    prompt: Mapping[str, Any], sentence_texts: Sequence[str], length_reference: Mapping[str, Any] | None = None
) -> list[dict[str, str]]:
    """System + user messages of a single-pass prompt (LitSeg-Lite and its ablations).

    The training-data builder calls this too, so the student is trained on exactly the prompt
    it is run with.
    """
    user = str(prompt["user"]).format(
        chapter=number_sentences(sentence_texts),
        last_index=len(sentence_texts),
        length_hint=render_length_hint(prompt, length_reference),
    )
    return [{"role": "system", "content": str(prompt["system"])}, {"role": "user", "content": user}]


def sentence_word_counts(doc: Document, unit: Unit) -> list[int]:
    return [len(doc.text[s.start : s.end].split()) for s in unit.sentences]


def render_length_hint(prompt: Mapping[str, Any], reference: Mapping[str, Any] | None) -> str:
    """The soft length reference sentence, or "" when the prompt or the run has none."""
    template = str(prompt.get("length_hint") or "")
    if not template or not reference:
        return ""
    return template.format(**reference)


def make_feedback(template: Mapping[str, Any] | None, max_attempts: int):
    """A ``feedback(issues, n)`` callable for the retry loop, from the ``feedback`` config group.

    Without a template the core's default wording is used.
    """
    if not template:
        return feedback_message
    attempt = {"k": 0}

    def feedback(issues: Sequence[ValidationIssue], n: int) -> str:
        attempt["k"] += 1
        problems = blocking_issues(issues) or list(issues)
        items = "\n".join(str(template.get("item", "- {problem}")).format(problem=i.message) for i in problems[:12])
        if len(problems) > 12:
            items += f"\n(and {len(problems) - 12} more)"
        return str(template["user"]).format(problems=items, last_index=n, attempt=attempt["k"],
                                            max_attempts=max_attempts)

    return feedback
