"""Stand-in teacher answers and small books for the teacher and annotation tests.

``teacher_answer(messages)`` plays a well-behaved model for the three LitSeg stages (and the
single-pass LitSeg-Lite prompt): it reads which stage is asked from the first user message and
the unit's size from its numbered chapter, and answers in that stage's JSON shape. The same
function serves :class:`~litseg.llm.testing.ScriptedChatModel` (``request.messages``) and the
fake OpenAI server (``body["messages"]``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_NUMBERED = re.compile(r"(?m)^\[(\d+)\] ")


def stage_of(messages: list[dict[str, str]]) -> str:
    first_user = next(m["content"] for m in messages if m["role"] == "user")
    if "carry out step 1 only" in first_user:
        return "stage1"
    if "carry out step 2 only" in first_user:
        return "stage2"
    if "carry out step 3" in first_user:
        return "stage3"
    return "lite"


def unit_size(messages: list[dict[str, str]]) -> int:
    first_user = next(m["content"] for m in messages if m["role"] == "user")
    return max(int(i) for i in _NUMBERED.findall(first_user))


def segments_for(n: int, size: int = 5) -> list[dict[str, Any]]:
    """Blocks of ``size`` sentences covering 1..n; every block after the first names sentence 1
    as context."""
    out = []
    for k, start in enumerate(range(1, n + 1, size)):
        out.append({"subtitle": f"block {k + 1}", "from_idx": start, "to_idx": min(n, start + size - 1),
                    "context_idx": [1] if start > 1 else []})
    return out


def teacher_answer(messages: list[dict[str, str]], *, block: int = 5) -> str:
    stage, n = stage_of(messages), unit_size(messages)
    step3 = {"chapter_title": "a chapter", "step_3_turning_points": [{"type": "reversal", "description": "x"}],
             "segments": segments_for(n, block)}
    if stage == "stage1":
        return json.dumps({"step_1_events": f"events of a unit with {n} sentences"})
    if stage == "stage2":
        return json.dumps({"step_2_threads": "one thread, intradiegetic"})
    if stage == "stage3":
        return json.dumps(step3)
    return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"}, "step3": step3})


def write_book(path: Path, title: str, chapters: int = 2, sentences: int = 8) -> Path:
    """A small Markdown book: ``chapters`` chapters of ``sentences`` distinct sentences."""
    parts = [f"# {title}\n"]
    for c in range(1, chapters + 1):
        body = " ".join(f"In chapter {c} of {title}, event number {s} happened to the keeper of the light."
                        for s in range(1, sentences + 1))
        parts.append(f"## Chapter {c}\n\n{body}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def write_corpus(directory: Path, books: int = 3, chapters: int = 2, sentences: int = 8) -> Path:
    for b in range(1, books + 1):
        write_book(directory / f"book_{b:02d}.md", f"Book {b}", chapters, sentences)
    return directory


def make_teacher_model(*, block: int = 5, raise_on: str | None = None, name: str = "fake-teacher",
                       **_ignored: Any) -> Any:
    """``llm.backend: tests.teacher_fakes:make_teacher_model``: a scripted teacher. ``raise_on``:
    a chapter text fragment whose requests raise (a unit that fails outright)."""
    from litseg.llm.testing import ScriptedChatModel

    def answer(request: Any) -> str:
        first_user = next(m["content"] for m in request.messages if m["role"] == "user")
        if raise_on and raise_on in first_user:
            raise RuntimeError(f"scripted failure for a unit containing {raise_on!r}")
        return teacher_answer(request.messages, block=block)

    return ScriptedChatModel(answer, name=name)
