"""LitSeg, the three-stage teacher: events, then threads, then turning points and segments.

Per unit the model is called three times. Every call is ``[system, user]`` where the system
prompt is the same for all stages and every user message opens with the same numbered chapter,
so system + chapter form one identical token prefix that a serving engine with prefix caching
computes once per unit (``conf/prompt/litseg.yaml`` explains the layout). Stage 2 receives
stage 1's validated JSON answer after the chapter, stage 3 both answers.

Each stage is decoded under its own JSON schema and retried on its own:

* stages 1 and 2 (free-text summaries): an answer that cannot be read, or is empty, is shown
  back with a correction request; after the retries the run continues with a note that the step
  is unavailable (recorded in the diagnostics), never with an abort;
* stage 3 goes through the core's validate-retry-fallback loop
  (:func:`~litseg.segmentation.runner.segment_with_retries`), then repair and reconstruction.

The schema limits (``schema_limits``) only keep a constrained answer from running on forever;
they are sized so that a full answer fits, and every answer that reaches one is reported
(``limit_hits`` in the unit's diagnostics and in each stage's, with a note), so a cut in the
teacher's reasoning never passes unnoticed. ``summary_max_new_tokens`` leaves room for a step
text at its limit; a smaller budget is reported when the chunker is built.

Many units run at once through :func:`~litseg.llm.batching.run_batched`, so a batching backend
(vLLM, the async OpenAI client) serves the stages of many units in one batch.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from litseg.chunkers.base import ChunkerGroups, MethodConfig, UnitResult, method_settings, register
from litseg.chunkers.groups import FeedbackConfig, PromptConfig, PromptStage, StagedPrompt
from litseg.chunkers.llm_common import (
    Ask,
    LLMChunker,
    make_feedback,
    number_sentences,
    render_length_hint,
    sentence_word_counts,
    unit_sentence_texts,
    usage_of,
)
from litseg.errors import ModelUnreachable, is_unavailable
from litseg.llm.base import ChatModel, ChatRequest, Completion
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.reconstruct import build_chunks
from litseg.segmentation.runner import CUT_OFF_NOTICE, check_unit_fallback, segment_with_retries
from litseg.segmentation.schema import (
    SchemaLimits,
    get_schema,
    has_segments,
    json_schema,
    limit_hits,
)
from litseg.segmentation.types import Document, Unit
from litseg.segmentation.validation import IssueCode, ValidationIssue

log = logging.getLogger(__name__)

STAGES = ("stage1", "stage2", "stage3")
SUMMARY_STAGES = ("stage1", "stage2")
# The JSON key each summary stage answers with, and the placeholder that carries it onwards.
_PLACEHOLDERS = {"stage1": "step1_json", "stage2": "step2_json"}

# What later stages see in place of an answer that could not be obtained or was left out. Kept
# in the answer's own JSON shape so that the prompt layout (and the cached prefix) stays the same.
UNAVAILABLE_NOTE = "(no usable answer for this step; work from the chapter alone)"
SKIPPED_NOTE = "(this step is left out in this run; work from the chapter alone)"



def render_stage_messages(
    prompt: StagedPrompt,
    stage: str,
    sentence_texts: Sequence[str],
    *,
    step1_json: str = "",
    step2_json: str = "",
    length_hint: str = "",
) -> list[dict[str, str]]:
    """``[system, user]`` of one teacher stage (``stage1`` / ``stage2`` / ``stage3``).

    The training-data builder and the token benchmark call this too, so every consumer renders
    exactly what the teacher sent.
    """
    spec = stage_spec(prompt, stage)
    user = spec.user.format(
        chapter=number_sentences(sentence_texts),
        last_index=len(sentence_texts),
        step1_json=step1_json,
        step2_json=step2_json,
        length_hint=length_hint,
    )
    return [{"role": "system", "content": prompt.system}, {"role": "user", "content": user}]


def stage_spec(prompt: StagedPrompt, stage: str) -> PromptStage:
    for spec in prompt.stages:
        if spec.name == stage:
            return spec
    raise ValueError(f"the teacher prompt {prompt.name!r} has no stage {stage!r}")


@dataclass(slots=True)
class StageResult:
    """One summary stage (1 or 2) of one unit: its answer, or why there is none."""

    name: str
    status: str  # "ok" | "unavailable" | "skipped"
    answer: BaseModel | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    limit_hits: list[dict[str, Any]] = field(default_factory=list)  # of the answer used

    def prompt_json(self) -> str:
        """What later stages receive for this step."""
        if self.answer is not None:
            return json.dumps(self.answer.model_dump(), ensure_ascii=False)
        key = "step_1_events" if self.name == "stage1" else "step_2_threads"
        return json.dumps({key: SKIPPED_NOTE if self.status == "skipped" else UNAVAILABLE_NOTE}, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "tries": len(self.attempts),
            **usage_of(self.attempts),
            "seconds": self.seconds,
            "answer": self.answer.model_dump() if self.answer is not None else None,
            "attempts": self.attempts,
            "notes": list(self.notes),
            "limit_hits": list(self.limit_hits),
        }


class LitSegChunker(LLMChunker):
    """The LitSeg teacher. ``prompt`` is a staged prompt (``conf/prompt/litseg.yaml``)."""

    def __init__(self, llm: ChatModel, prompt: PromptConfig, *,
                 feedback: FeedbackConfig | None = None,
                 length_reference: Mapping[str, Any] | None = None, **settings: Any) -> None:
        """``settings`` are fields of :class:`LitSegConfig` (``conf/method/litseg.yaml``);
        one left out is read from that file, its one home (method_settings)."""
        config = method_settings(LitSegConfig, "litseg", settings)
        if not isinstance(prompt, StagedPrompt):
            raise ValueError("method=litseg needs a staged teacher prompt with `system` and `stages` "
                             "(prompt=litseg); got a single-pass prompt")
        self.prompt = prompt
        self.answer_models: dict[str, type[BaseModel]] = {
            stage: get_schema(stage_spec(prompt, stage).schema) for stage in STAGES
        }
        if not has_segments(self.answer_models["stage3"]):
            raise ValueError("the teacher's stage3 schema must carry segments")
        unknown = sorted(set(config.skip_stages) - set(SUMMARY_STAGES))
        if unknown:
            raise ValueError(f"skip_stages may name {list(SUMMARY_STAGES)} only (stage 3 makes the "
                             f"segments), got {unknown}")
        for label, value in (("max_retries", config.max_retries), ("stage_max_retries", config.stage_max_retries)):
            if value is not None and value < 0:
                raise ValueError(f"{label} must be >= 0, got {value}")
        if config.workers < 1:
            raise ValueError(f"workers must be >= 1, got {config.workers}")
        self.name = config.name
        self.llm = llm
        self.max_retries = config.max_retries
        self.stage_max_retries = config.max_retries if config.stage_max_retries is None else config.stage_max_retries
        self.max_new_tokens = config.max_new_tokens
        self.summary_max_new_tokens = config.summary_max_new_tokens
        self.constrained = config.constrained
        self.bounded_schema = config.bounded_schema
        self.schema_limits = SchemaLimits.from_config(config.schema_limits)
        self.fallback = check_unit_fallback(config.fallback)
        self.fallback_max_words = config.fallback_max_words
        self.context_position = config.context_position
        self.length_reference = dict(length_reference) if length_reference else None
        self.feedback_template = feedback
        if config.constrained and config.bounded_schema:
            for stage in SUMMARY_STAGES:
                need = self.schema_limits.text_tokens(self.answer_models[stage])
                if need > config.summary_max_new_tokens:
                    log.warning("%s: a %s answer at its schema limits needs about %d tokens but "
                                "summary_max_new_tokens is %d; long answers will be cut at the budget",
                                config.name, stage, need, config.summary_max_new_tokens)
        self.skip_stages = tuple(s for s in SUMMARY_STAGES if s in set(config.skip_stages))
        self.workers = config.workers
        self.max_batch = config.max_batch or max(64, config.workers)

    # ------------------------------------------------------------------ identity
    def fingerprint(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "prompt": self.prompt.version,
            "stages": {s: stage_spec(self.prompt, s).schema for s in STAGES},
            "feedback": self.feedback_template.version if self.feedback_template else None,
            "model": self.llm.identity(),
            "max_retries": self.max_retries,
            "stage_max_retries": self.stage_max_retries,
            "max_new_tokens": self.max_new_tokens,
            "summary_max_new_tokens": self.summary_max_new_tokens,
            "constrained": self.constrained,
            "bounded_schema": self.bounded_schema,
            "schema_limits": self.schema_limits.to_dict() if self.bounded_schema else None,
            "fallback": self.fallback,
            "fallback_max_words": self.fallback_max_words,
            "context_position": self.context_position,
            "length_reference": self.length_reference,
            "skip_stages": list(self.skip_stages),
        }

    def prompt_versions(self) -> dict[str, Any]:
        return {"prompt": self.prompt.name, "version": self.prompt.version,
                "feedback": self.feedback_template.version if self.feedback_template else None}

    # ------------------------------------------------------------------ messages
    def stage_messages(self, doc: Document, unit: Unit, stage: str, *, step1_json: str = "",
                       step2_json: str = "") -> list[dict[str, str]]:
        hint = render_length_hint(self.prompt, self.length_reference) if stage == "stage3" else ""
        return render_stage_messages(self.prompt, stage, unit_sentence_texts(doc, unit),
                                     step1_json=step1_json, step2_json=step2_json, length_hint=hint)

    def _schema(self, stage: str, n: int) -> dict[str, Any] | None:
        if not self.constrained:
            return None
        return json_schema(self.answer_models[stage], n_sentences=n,
                           bounded=self.schema_limits if self.bounded_schema else None)

    @property
    def _limits(self) -> SchemaLimits | None:
        """The limits answers are decoded under (None when nothing bounds them)."""
        return self.schema_limits if self.constrained and self.bounded_schema else None

    # ------------------------------------------------------------------ stages
    def _summary_stage(self, ask: Ask, stage: str, messages: list[dict[str, str]], n: int) -> StageResult:
        """Stage 1 or 2: ask until the answer parses and says something, or retries run out."""
        t0 = time.perf_counter()
        result = StageResult(stage, "unavailable")
        model = self.answer_models[stage]
        schema = self._schema(stage, n)
        feedback = make_feedback(self.feedback_template, self.stage_max_retries)
        conversation = list(messages)
        for attempt in range(self.stage_max_retries + 1):
            completion = ask(ChatRequest(messages=list(conversation), json_schema=schema,
                                         max_tokens=self.summary_max_new_tokens))
            record = _attempt_record(attempt, completion)
            result.attempts.append(record)
            if completion.error is not None:
                record["issues"] = [ValidationIssue(IssueCode.BACKEND_ERROR, completion.error).to_dict()]
                if is_unavailable(completion):  # never seen by the model: the unit fails, no "unavailable" step
                    raise ModelUnreachable(f"{stage}: {completion.error}",
                                           {"stage": stage, "attempts": result.attempts})
                continue  # same conversation again: the call failed, not the answer
            parsed = parse_answer(completion.text, model)
            record["notes"] = parsed.notes
            issues = list(parsed.errors)
            if parsed.value is not None:
                empty = [k for k, v in parsed.value.model_dump().items() if isinstance(v, str) and not v.strip()]
                if empty:
                    issues.append(ValidationIssue(IssueCode.SCHEMA_ERROR,
                                                  f"{', '.join(empty)} is empty: write the requested summary"))
                else:
                    record["parsed"] = record["valid"] = True
                    result.answer, result.status = parsed.value, "ok"
                    if self._limits is not None:
                        hits = [h.to_dict() for h in limit_hits(parsed.value, self._limits, n)]
                        record["limit_hits"] = result.limit_hits = hits
                        result.notes += [f"{stage}: {h['field']} reached its limit of {h['limit']} "
                                         f"{h['unit']} (schema_limits); the text may have been cut there"
                                         for h in hits]
                    if completion.finish_reason == "length":
                        # A summary cut short still informs the next stage; keep it, say so.
                        record["notes"] = [*record["notes"], "reply cut at the token limit; its readable part was kept"]
                        result.notes.append(f"{stage}: answer cut at the token limit (summary_max_new_tokens)")
                    break
                record["parsed"] = True
            record["issues"] = [i.to_dict() for i in issues]
            if attempt < self.stage_max_retries:
                request = feedback(issues, n)
                if completion.finish_reason == "length":
                    request += f"\n{CUT_OFF_NOTICE}"
                conversation += [{"role": "assistant", "content": completion.text},
                                 {"role": "user", "content": request}]
        if result.answer is None:
            result.notes.append(f"{stage}: no usable answer in {len(result.attempts)} tries; later stages "
                                "were told the step is unavailable")
        result.seconds = time.perf_counter() - t0
        return result

    def _segment(self, doc: Document, unit: Unit, ask: Ask) -> UnitResult:
        t0 = time.perf_counter()
        n = unit.n_sentences
        if n == 0:
            return UnitResult(doc.book_id, unit.unit_id, [], {"tries": 0, "fallback": "none", "calls": 0})
        summaries: dict[str, StageResult] = {}
        for stage in SUMMARY_STAGES:
            if stage in self.skip_stages:
                summaries[stage] = StageResult(stage, "skipped")
                continue
            earlier = {_PLACEHOLDERS[s]: summaries[s].prompt_json() for s in summaries}
            summaries[stage] = self._summary_stage(ask, stage, self.stage_messages(doc, unit, stage, **earlier), n)

        t3 = time.perf_counter()
        schema = self._schema("stage3", n)

        def ask_stage3(messages: list[dict[str, str]]) -> Completion:
            return ask(ChatRequest(messages=messages, json_schema=schema, max_tokens=self.max_new_tokens))

        messages = self.stage_messages(doc, unit, "stage3", step1_json=summaries["stage1"].prompt_json(),
                                       step2_json=summaries["stage2"].prompt_json())
        outcome = segment_with_retries(
            ask_stage3, messages, n=n, answer_model=self.answer_models["stage3"],
            sentence_words=sentence_word_counts(doc, unit), max_fallback_words=self.fallback_max_words,
            max_retries=self.max_retries, feedback=make_feedback(self.feedback_template, self.max_retries),
            fallback=self.fallback, limits=self._limits,
        )
        chunks = build_chunks(doc, unit, outcome.segments, method=self.name,
                              tokenizer=self.llm.chunk_tokenizer(), context_position=self.context_position)

        # Top level: stage 3's diagnostics (the shape LitSeg-Lite writes, so readers of either
        # method work), with the accounting summed over all stages and each stage beside it.
        diag = outcome.diagnostics.to_dict()
        stage3 = {
            "status": "ok" if outcome.diagnostics.fallback == "none" else outcome.diagnostics.fallback,
            "tries": outcome.diagnostics.tries,
            "fallback": outcome.diagnostics.fallback,
            **usage_of(diag["attempts"]),
            "seconds": time.perf_counter() - t3,
            "answer": outcome.answer.model_dump() if outcome.answer is not None else None,
            "limit_hits": list(outcome.diagnostics.limit_hits),
        }
        stages = {s: summaries[s].to_dict() for s in SUMMARY_STAGES}
        stages["stage3"] = stage3
        all_attempts = [a for s in SUMMARY_STAGES for a in summaries[s].attempts] + diag["attempts"]
        called = sum(1 for s in SUMMARY_STAGES if summaries[s].status != "skipped") + 1
        diag.update(usage_of(all_attempts))
        diag.update(
            method=self.name,
            retries=len(all_attempts) - called,
            seconds=time.perf_counter() - t0,
            model_seconds=sum(float(a.get("seconds") or 0.0) for a in all_attempts),
            stages=stages,
            stages_unavailable=[s for s in SUMMARY_STAGES if summaries[s].status == "unavailable"],
            stages_skipped=list(self.skip_stages),
            notes=[*diag["notes"], *(note for s in SUMMARY_STAGES for note in summaries[s].notes)],
            segments=[s.model_dump() for s in outcome.segments],
            # Every field of the answers used (stages 1-3) that reached its schema limit.
            limit_hits=[{"stage": s, **h} for s in SUMMARY_STAGES for h in summaries[s].limit_hits]
            + [{"stage": "stage3", **h} for h in outcome.diagnostics.limit_hits],
        )
        if outcome.answer is not None:
            diag["answer"] = outcome.answer.model_dump()
        return UnitResult(doc.book_id, unit.unit_id, chunks, diag)


def _attempt_record(attempt: int, c: Completion) -> dict[str, Any]:
    return {
        "attempt": attempt, "parsed": False, "valid": False, "issues": [], "notes": [],
        "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
        "cached_tokens": c.cached_tokens, "seconds": c.seconds, "finish_reason": c.finish_reason,
        "from_cache": c.from_cache, "error": c.error,
    }


@dataclass(kw_only=True)
class LitSegConfig(MethodConfig):
    """conf/method/litseg.yaml (``default_prompt`` composed from conf/prompt/litseg.yaml)."""

    COMPOSED: ClassVar[frozenset[str]] = frozenset({"default_prompt"})
    NEEDS: ClassVar[frozenset[str]] = frozenset({"llm"})
    TAKES: ClassVar[frozenset[str]] = frozenset({"prompt", "feedback", "length_reference"})

    default_prompt: StagedPrompt | None = None
    max_retries: int
    stage_max_retries: int | None
    max_new_tokens: int
    summary_max_new_tokens: int
    constrained: bool
    bounded_schema: bool
    schema_limits: dict[str, dict[str, int | None]]
    fallback: str
    fallback_max_words: int
    context_position: str
    skip_stages: list[str]
    workers: int
    max_batch: int | None


@register("litseg", config=LitSegConfig)
def make_litseg(config: LitSegConfig, groups: ChunkerGroups) -> LitSegChunker:
    """``prompt`` is the composed prompt group; when it is a single-pass prompt (the annotate
    default, ``litseg_lite``), the staged prompt the method config names (``default_prompt``) is
    used instead, so ``method=litseg`` alone runs the teacher."""
    chosen = groups.prompt if isinstance(groups.prompt, StagedPrompt) else config.default_prompt
    if chosen is None:
        raise ValueError("method=litseg needs the staged teacher prompt: add prompt=litseg")
    reference = groups.length_reference
    if reference is not None and reference.get("p50") is None:
        reference = None
    return LitSegChunker(groups.chat_model(), chosen, feedback=groups.feedback, length_reference=reference,
                         **config.options("default_prompt"))
