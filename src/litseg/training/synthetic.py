"""A synthetic teacher run for smoke runs and tests: the demo story annotated by a scripted teacher.

The real annotate pipeline runs (reading, units, sentences, the LitSeg-Lite chunker with its
validation, the run-directory ledger); only the model is replaced by a deterministic script that
cuts each unit into blocks of a fixed number of sentences, with a one-sentence overlap and a
context reference now and then. Each chapter of the demo story is written out as a book of its
own so that the by-book split has books to hold out. The annotations are placeholders, not a
teacher's judgement: use them to exercise the training code, never to train a real student.
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

from litseg.llm.base import ChatRequest
from litseg.annotation.annotate import annotate
from litseg.chunkers.groups import PromptConfig
from litseg.chunkers.litseg_lite import LitSegLiteChunker
from litseg.llm.testing import ScriptedChatModel
from litseg.segmentation.preprocess import prepare_document
from litseg.utils.config import from_dict
from litseg.utils.locations import config_dir

DEMO_STORY = Path(__file__).resolve().parents[1] / "data" / "demo" / "the_two_lanterns.md"
_INDEX = re.compile(r"^\[(\d+)\]", re.MULTILINE)


def scripted_lite_answer(n: int, *, block: int = 6) -> dict[str, Any]:
    """A valid LitSeg-Lite answer for a unit of ``n`` sentences (fixed-size blocks)."""
    segments = []
    start = 1
    k = 0
    while start <= n:
        end = min(n, start + block - 1)
        if n - end < 2:  # no block of one or two sentences at the end
            end = n
        context = [1] if k % 2 == 1 and start > 1 else []
        segments.append({"subtitle": f"Block {k + 1}", "from_idx": start, "to_idx": end, "context_idx": context})
        k += 1
        # Every third boundary repeats one sentence as overlap.
        start = end if (k % 3 == 0 and end < n and end > start) else end + 1
    return {
        "step1": {"step_1_events": f"{n} sentences; synthetic events"},
        "step2": {"step_2_threads": "one synthetic thread"},
        "step3": {"chapter_title": "synthetic", "step_3_turning_points": [
            {"type": "opportunity", "description": "synthetic turn"}], "segments": segments},
    }


def scripted_teacher(request: ChatRequest) -> str:
    """Answer a LitSeg-Lite request from the numbering in its chapter."""
    user = request.messages[-1]["content"] if request.messages else ""
    indices = [int(m) for m in _INDEX.findall(user)]
    return json.dumps(scripted_lite_answer(max(indices) if indices else 1))


def write_demo_books(target: Path) -> list[Path]:
    """One Markdown book per chapter of the demo story (three books)."""
    text = DEMO_STORY.read_text(encoding="utf-8")
    parts = re.split(r"(?m)^## ", text)[1:]
    target.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, part in enumerate(parts, start=1):
        path = target / f"two-lanterns-part-{i}.md"
        path.write_text(f"# The Two Lanterns, part {i}\n\n## {part}", encoding="utf-8")
        paths.append(path)
    return paths


def make_synthetic_run(out_dir: str | Path, *, max_words: int = 250, prompt: PromptConfig | None = None) -> Path:
    """Annotate the demo books with the scripted teacher into ``out_dir`` (reused when complete)."""
    out = Path(out_dir)
    if (out / "run_summary.json").is_file():
        return out
    books = write_demo_books(out / "books")
    if prompt is None:
        prompt = from_dict(PromptConfig, load_prompt("litseg_lite"), "prompt")
    chunker = LitSegLiteChunker(ScriptedChatModel(scripted_teacher, name="synthetic-teacher"), prompt,
                                name="synthetic_teacher", constrained=False, workers=1)
    annotate(inputs=books, chunker=chunker, out_dir=out, prepare=partial(prepare_document, max_words=max_words),
             progress=False)
    return out


def load_prompt(name: str) -> dict[str, Any]:
    """A prompt config of ``conf/prompt`` as a plain dict (for code outside a Hydra run)."""
    import yaml

    path = config_dir() / "prompt" / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no prompt config {path}")
    return dict(yaml.safe_load(path.read_text(encoding="utf-8")))
