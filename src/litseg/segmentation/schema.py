"""Typed schemas of the JSON answers the segmentation prompts ask for.

Field names follow the paper's output formats (appendix E.1 teacher stages, E.2 LitSeg-Lite,
E.4 ablation variants). The models are deliberately tolerant of *extra* keys (ignored) and give
defaults to the fields segmentation does not need (reasoning text, titles, context lists), so
that a usable answer is never thrown away for a cosmetic omission; :func:`parse_answer` records
every such leniency in its notes. The exported JSON Schema, on the other hand, is strict: every
property is required and no extra properties are allowed, which is what constrained decoders
(xgrammar, vLLM structured outputs, OpenAI ``response_format`` strict mode)
expect.

Every answer model that carries segments exposes them through :func:`answer_segments`; the
class variable ``SEGMENTS_PATH`` says where they live in the JSON (used by the parser to accept
a bare list or a flattened answer).
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field


class _Answer(BaseModel):
    # Extra keys from chatty models are ignored rather than rejected; the export forbids them.
    model_config = ConfigDict(extra="ignore")

    #: Path of keys from the answer root to its list of segments; empty when it has none.
    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ()


class Segment(_Answer):
    """One plot block: a closed, 1-based main range plus optional context sentence indices."""

    subtitle: str = Field(default="", description="Short title of the plot block.")
    from_idx: int = Field(description="First sentence index of the block (1-based, inclusive).")
    to_idx: int = Field(description="Last sentence index of the block (inclusive).")
    context_idx: list[int] = Field(
        default_factory=list,
        description="Indices of sentences outside the range needed to understand the block.",
    )

    @property
    def span(self) -> tuple[int, int]:
        return (self.from_idx, self.to_idx)


class TurningPoint(_Answer):
    type: str = Field(default="", description="Kind of turning point.")
    description: str = Field(default="", description="The event or shift that makes it one.")


class LiteStep1(_Answer):
    step_1_events: str = Field(default="", description="Core dynamic events of the unit.")


class LiteStep2(_Answer):
    step_2_threads: str = Field(default="", description="Narrative threads and their levels.")


class Step3Answer(_Answer):
    """Stage 3 of the teacher and the ``step3`` block of the Lite answer."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("segments",)

    chapter_title: str = Field(default="", description="Title or identifier of the unit.")
    step_3_turning_points: list[TurningPoint] = Field(default_factory=list)
    segments: list[Segment]


class LiteAnswer(_Answer):
    """The LitSeg-Lite single-pass answer: summarised workflow plus the segmentation."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("step3", "segments")

    step1: LiteStep1 = Field(default_factory=LiteStep1)
    step2: LiteStep2 = Field(default_factory=LiteStep2)
    step3: Step3Answer


# Teacher stages (appendix E.1).
class Stage1Answer(_Answer):
    step_1_events: str = Field(description="Core dynamic events of the unit.")


class Stage2Answer(_Answer):
    step_2_threads: str = Field(description="Narrative threads and their levels.")


Stage3Answer = Step3Answer


# Ablation variants of the Lite prompt (appendix E.4).
class SegmentsOnlyAnswer(_Answer):
    """``w/o Theory``: a generic semantic-segmentation prompt; no narratological steps."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("segments",)

    chapter_title: str = Field(default="", description="Title or identifier of the unit.")
    segments: list[Segment]


class LiteAnswerNoTheory(_Answer):
    """``w/o Theory``: the generic prompt asks for the segments and nothing else."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("segments",)

    segments: list[Segment]


class SegmentsStep3(_Answer):
    """``step3`` without turning points (the ablation that drops them)."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("segments",)

    chapter_title: str = Field(default="", description="Title or identifier of the unit.")
    segments: list[Segment]


# The stage ablations keep the Lite answer's key names and drop one block, so every variant
# keeps its segments at ``step3.segments`` and the same readers work for all of them.
class LiteAnswerNoStep1(_Answer):
    """``w/o Theo.S.1``: no event extraction; threads, then turning points and segments."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("step3", "segments")

    step2: LiteStep2 = Field(default_factory=LiteStep2)
    step3: Step3Answer


class LiteAnswerNoStep2(_Answer):
    """``w/o Theo.S.2``: no thread untangling; events, then turning points and segments."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("step3", "segments")

    step1: LiteStep1 = Field(default_factory=LiteStep1)
    step3: Step3Answer


class LiteAnswerNoTurningPoints(_Answer):
    """``w/o Theo.S.3``: events, threads, then segments without turning points."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("step3", "segments")

    step1: LiteStep1 = Field(default_factory=LiteStep1)
    step2: LiteStep2 = Field(default_factory=LiteStep2)
    step3: SegmentsStep3


#: Answer models by name; prompt configs refer to these names.
SCHEMAS: dict[str, type[BaseModel]] = {
    "lite": LiteAnswer,
    "stage1": Stage1Answer,
    "stage2": Stage2Answer,
    "stage3": Stage3Answer,
    "segments": SegmentsOnlyAnswer,
    "lite_no_theory": LiteAnswerNoTheory,
    "lite_no_step1": LiteAnswerNoStep1,
    "lite_no_step2": LiteAnswerNoStep2,
    "lite_no_turning_points": LiteAnswerNoTurningPoints,
}


def get_schema(name: str) -> type[BaseModel]:
    try:
        return SCHEMAS[name]
    except KeyError:
        raise ValueError(f"unknown answer schema {name!r}; known: {', '.join(sorted(SCHEMAS))}") from None


def segments_path(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(getattr(model, "SEGMENTS_PATH", ()))


def has_segments(model: type[BaseModel]) -> bool:
    return bool(segments_path(model))


def answer_segments(answer: BaseModel) -> list[Segment]:
    """The segments an answer carries (empty for the reasoning-only stages)."""
    node: Any = answer
    for key in segments_path(type(answer)):
        node = getattr(node, key)
    return list(node) if isinstance(node, list) else []


# --------------------------------------------------------------------------------------------
# JSON Schema export for constrained decoding

# Keywords every decoder we target understands; anything else pydantic emits is dropped.
_KEEP_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "description",
    "minimum", "maximum",
}
_INDEX_FIELDS = {"from_idx", "to_idx"}

#: Length bounds for ``json_schema(..., bounded=True)``. Under a grammar a weak model can keep
#: writing a free-text field until it runs out of tokens; bounds make every answer finish.
#: Strings: maximum characters; lists: maximum items (``segments`` is bounded by n instead).
TEXT_BOUNDS: dict[str, int] = {
    "step_1_events": 400, "step_2_threads": 400, "chapter_title": 80, "subtitle": 80,
    "type": 40, "description": 160,
}
LIST_BOUNDS: dict[str, int] = {"step_3_turning_points": 4, "context_idx": 8}


def json_schema(
    model: type[BaseModel], *, n_sentences: int | None = None, descriptions: bool = True,
    bounded: bool = False,
) -> dict[str, Any]:
    """A self-contained JSON Schema for ``model`` suited to constrained decoding.

    References are inlined (no ``$ref``/``$defs``), every object lists all its properties as
    required and forbids others, and only widely supported keywords remain (type, properties,
    required, additionalProperties, items, description, minimum, maximum). With
    ``n_sentences`` the sentence indices (``from_idx``, ``to_idx`` and the items of
    ``context_idx``) get ``minimum: 1`` and ``maximum: n_sentences``. Older vLLM releases
    route schemas with integer bounds away from xgrammar to another backend; leave
    ``n_sentences`` unset there. lm-format-enforcer accepts the bounds but does not enforce
    them; semantic validation catches out-of-range indices either way.

    ``bounded`` adds ``maxLength`` to free-text fields and ``maxItems`` to lists
    (:data:`TEXT_BOUNDS`, :data:`LIST_BOUNDS`, ``segments`` at most ``n_sentences``) so that a
    grammar-constrained answer always ends; xgrammar honours them, some hosted APIs reject them.
    """
    if n_sentences is not None and n_sentences < 1:
        raise ValueError(f"n_sentences must be >= 1, got {n_sentences}")
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})
    out = _clean(_inline(raw, defs, depth=0), n_sentences=n_sentences, descriptions=descriptions)
    if bounded:
        _bound(out, n_sentences)
    return out


def _bound(node: dict[str, Any], n_sentences: int | None, name: str = "") -> None:
    if node.get("type") == "string" and name in TEXT_BOUNDS:
        node["maxLength"] = TEXT_BOUNDS[name]
    if node.get("type") == "array":
        limit = n_sentences if name == "segments" else LIST_BOUNDS.get(name)
        if limit:
            node["maxItems"] = limit
        if isinstance(node.get("items"), dict):
            _bound(node["items"], n_sentences, f"{name}[]")
    for key, sub in node.get("properties", {}).items():
        _bound(sub, n_sentences, key)


def _inline(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if depth > 32:
        raise ValueError("schema nesting too deep (recursive model?)")
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            merged = copy.deepcopy(defs[name])
            merged.update({k: v for k, v in node.items() if k != "$ref"})
            return _inline(merged, defs, depth + 1)
        return {k: _inline(v, defs, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs, depth + 1) for v in node]
    return node


def _clean(node: dict[str, Any], *, n_sentences: int | None, descriptions: bool,
           field_name: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _KEEP_KEYWORDS or (key == "description" and not descriptions):
            continue
        if key == "properties":
            out[key] = {
                name: _clean(sub, n_sentences=n_sentences, descriptions=descriptions, field_name=name)
                for name, sub in value.items()
            }
        elif key == "items":
            out[key] = _clean(value, n_sentences=n_sentences, descriptions=descriptions,
                              field_name=f"{field_name}[]")
        else:
            out[key] = value
    if out.get("type") == "object":
        out.pop("description", None)  # class docstrings are notes for developers, not the model
        out["required"] = list(out.get("properties", {}))
        out["additionalProperties"] = False
    if n_sentences is not None and out.get("type") == "integer" and (
        field_name in _INDEX_FIELDS or field_name == "context_idx[]"
    ):
        out["minimum"] = 1
        out["maximum"] = n_sentences
    return out
