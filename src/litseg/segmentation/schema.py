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
from collections.abc import Mapping
from dataclasses import dataclass, field
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


class RangeFirstSegment(_Answer):
    """A plot block written range first: the model settles which sentences form the block before it
    names the block, so the subtitle is written about sentences already chosen."""

    from_idx: int = Field(description="First sentence index of the block (1-based, inclusive).")
    to_idx: int = Field(description="Last sentence index of the block (inclusive).")
    context_idx: list[int] = Field(
        default_factory=list,
        description="Indices of sentences outside the range needed to understand the block.",
    )
    subtitle: str = Field(default="", description="Short title of the plot block.")

    @property
    def span(self) -> tuple[int, int]:
        return (self.from_idx, self.to_idx)


class RangeFirstAnswer(_Answer):
    """The compact student answer with each block's range before its subtitle."""

    SEGMENTS_PATH: ClassVar[tuple[str, ...]] = ("segments",)

    chapter_title: str = Field(default="", description="Title or identifier of the unit.")
    segments: list[RangeFirstSegment]


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
    "segments_range_first": RangeFirstAnswer,
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
    if not isinstance(node, list):
        return []
    # Every reader downstream takes Segment; a block written range first is the same block.
    return [s if isinstance(s, Segment) else Segment.model_validate(s.model_dump()) for s in node]


# --------------------------------------------------------------------------------------------
# JSON Schema export for constrained decoding

# Keywords every decoder we target understands; anything else pydantic emits is dropped.
_KEEP_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "description",
    "minimum", "maximum",
}
_INDEX_FIELDS = {"from_idx", "to_idx"}

#: Characters per token assumed when a token budget is checked against the text limits: below the
#: 3.5 measured on the teacher's step texts with the SmolLM2 tokenizer, so the check errs safe.
CHARS_PER_TOKEN = 3.0


@dataclass(frozen=True, slots=True)
class SchemaLimits:
    """The ``maxLength`` / ``maxItems`` limits put into a bounded schema (config: ``schema_limits``).

    Under a grammar a weak model can keep writing a free-text field until it runs out of tokens; a
    limit makes every field end. ``text`` maps a string field's name to its maximum characters;
    ``lists`` maps a list field's name to its maximum items (``None``: one more than the unit has
    sentences, which a valid answer never needs, so the limit only stops a runaway list). Field
    names apply wherever the field occurs in an answer; a field named in neither is not bounded.
    The values have one home, the ``schema_limits`` of each method's YAML (conf/method/litseg.yaml,
    litseg_lite.yaml), where they are sized against the strong teacher's answers.
    """

    text: Mapping[str, int]
    lists: Mapping[str, int | None]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | SchemaLimits) -> SchemaLimits:
        """The limits a ``schema_limits`` section (``{text: {...}, lists: {...}}``) writes, checked."""
        if isinstance(cfg, SchemaLimits):
            return cfg
        if not isinstance(cfg, Mapping):
            raise ValueError(f"schema_limits: expected a mapping with text: and lists:, got {cfg!r}")
        cfg = dict(cfg)
        unknown, absent = set(cfg) - {"text", "lists"}, {"text", "lists"} - set(cfg)
        if unknown or absent:
            raise ValueError(f"schema_limits: unknown key(s) {sorted(unknown)}, missing {sorted(absent)}; "
                             "it holds text: and lists: (as conf/method/litseg.yaml writes them)")
        text = {str(k): v for k, v in dict(cfg["text"] or {}).items()}
        lists = {str(k): v for k, v in dict(cfg["lists"] or {}).items()}
        for name, value in text.items():
            if value is None or int(value) < 1:
                raise ValueError(f"schema_limits.text.{name} must be a number of characters >= 1, got {value!r}")
        for name, value in lists.items():
            if value is not None and int(value) < 1:
                raise ValueError(f"schema_limits.lists.{name} must be >= 1 or null, got {value!r}")
        return cls({k: int(v) for k, v in text.items()},
                   {k: (None if v is None else int(v)) for k, v in lists.items()})

    def to_dict(self) -> dict[str, Any]:
        return {"text": dict(self.text), "lists": dict(self.lists)}

    def list_limit(self, name: str, n_sentences: int | None) -> int | None:
        if name == "segments":
            return n_sentences
        if name not in self.lists:
            return None
        value = self.lists[name]
        if value is None and n_sentences is not None:
            # one more than a valid answer can need (a turning point or a context index per
            # sentence at most), so an answer that reaches the bound is a runaway one: a unit of two
            # sentences with two turning points is whole, not cut
            return n_sentences + 1
        return value

    def text_tokens(self, model: type[BaseModel], chars_per_token: float = CHARS_PER_TOKEN) -> int:
        """Tokens the free-text fields of one ``model`` answer may take at their limits (one
        item per list; lists of text are counted once): what a token budget must leave room for."""
        # a string field without a text bound adds nothing
        total = sum(self.text[name] for name in _string_fields(model) if name in self.text)
        return int(total / chars_per_token + 0.999)


def _string_fields(model: type[BaseModel]) -> list[str]:
    """Names of the string fields of ``model``, nested models included (list items once)."""
    names: list[str] = []

    def walk(node: dict[str, Any], defs: dict[str, Any]) -> None:
        for name, sub in node.get("properties", {}).items():
            if "$ref" in sub:
                sub = defs[sub["$ref"].rsplit("/", 1)[-1]]
            if sub.get("type") == "string":
                names.append(name)
            elif sub.get("type") == "array" and isinstance(sub.get("items"), dict):
                item = sub["items"]
                if "$ref" in item:
                    walk(defs[item["$ref"].rsplit("/", 1)[-1]], defs)
            elif sub.get("type") == "object" or "properties" in sub:
                walk(sub, defs)

    raw = model.model_json_schema()
    walk(raw, raw.get("$defs", {}))
    return names


@dataclass(frozen=True, slots=True)
class LimitHit:
    """A field of an answer that reached its limit (a constrained decoder may have cut it there)."""

    path: str  # where in the answer, e.g. ``step3.segments[2].subtitle``
    limit: int
    length: int
    unit: str  # "characters" | "items"

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.path, "limit": self.limit, "length": self.length, "unit": self.unit}

    def message(self) -> str:
        return (f"{self.path} reached its limit of {self.limit} {self.unit} (schema_limits); "
                "the answer may have been cut there")


def limit_hits(answer: BaseModel | Mapping[str, Any], limits: SchemaLimits, n_sentences: int | None
               ) -> list[LimitHit]:
    """Every field of ``answer`` whose length reaches its limit in a schema bounded by ``limits``.

    A grammar-constrained decoder stops a string at ``maxLength`` and a list at ``maxItems``, so
    an answer that reaches a limit was most likely cut there; ``segments`` (bounded by the number
    of sentences, which a valid answer never exceeds) is not reported.
    """
    value = answer.model_dump() if isinstance(answer, BaseModel) else answer
    hits: list[LimitHit] = []

    def walk(node: Any, path: str, name: str) -> None:
        if isinstance(node, str):
            limit = limits.text.get(name)
            if limit is not None and len(node) >= limit:
                hits.append(LimitHit(path, limit, len(node), "characters"))
        elif isinstance(node, list):
            limit = None if name == "segments" else limits.list_limit(name, n_sentences)
            if limit is not None and len(node) >= limit:
                hits.append(LimitHit(path, limit, len(node), "items"))
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]", name)
        elif isinstance(node, Mapping):
            for key, sub in node.items():
                walk(sub, f"{path}.{key}" if path else str(key), str(key))

    walk(value, "", "")
    return hits


def clip_to_schema(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` as a decoder constrained by ``schema`` would let it through: strings cut at
    ``maxLength``, lists at ``maxItems`` (used to replay recorded answers under given limits)."""
    if isinstance(value, str):
        limit = schema.get("maxLength")
        return value[:limit] if isinstance(limit, int) else value
    if isinstance(value, list):
        limit = schema.get("maxItems")
        items = value[:limit] if isinstance(limit, int) else value
        sub = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
        return [clip_to_schema(v, sub) for v in items]
    if isinstance(value, Mapping):
        props = schema.get("properties") or {}
        return {k: clip_to_schema(v, props.get(k) or {}) for k, v in value.items()}
    return value


def json_schema(
    model: type[BaseModel], *, n_sentences: int | None = None, descriptions: bool = True,
    bounded: SchemaLimits | Mapping[str, Any] | None = None,
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

    ``bounded`` (a :class:`SchemaLimits` or its config section) adds ``maxLength`` to free-text
    fields and ``maxItems`` to lists so that a grammar-constrained answer always ends; ``segments``
    is at most ``n_sentences`` either way. xgrammar honours them, some hosted APIs reject them.
    """
    if n_sentences is not None and n_sentences < 1:
        raise ValueError(f"n_sentences must be >= 1, got {n_sentences}")
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})
    out = _clean(_inline(raw, defs, depth=0), n_sentences=n_sentences, descriptions=descriptions)
    if bounded is not None:
        _bound(out, n_sentences, SchemaLimits.from_config(bounded))
    return out


def _bound(node: dict[str, Any], n_sentences: int | None, limits: SchemaLimits, name: str = "") -> None:
    if node.get("type") == "string" and name in limits.text:
        node["maxLength"] = limits.text[name]
    if node.get("type") == "array":
        limit = limits.list_limit(name, n_sentences)
        if limit:
            node["maxItems"] = limit
        if isinstance(node.get("items"), dict):
            _bound(node["items"], n_sentences, limits, f"{name}[]")
    for key, sub in node.get("properties", {}).items():
        _bound(sub, n_sentences, limits, key)


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
