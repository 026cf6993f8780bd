"""The chunker interface shared by LitSeg, LitSeg-Lite and every baseline.

A chunker receives a :class:`Document` whose units already carry indexed sentences and returns,
per unit, chunks with exact spans into the source plus diagnostics. Chunkers are chosen by name
(``method=...`` in Hydra config) through :func:`litseg.chunkers.build.build_chunker`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from litseg.chunkers.groups import FeedbackConfig, PromptConfig
from litseg.errors import SetupError
from litseg.llm.base import ChatModel
from litseg.utils.config import ConfigError, config_schema, deep_merge, shipped_option
from litseg.utils.registry import Registry
from litseg.segmentation.types import Chunk, Document, Unit


@dataclass(frozen=True, kw_only=True)
class ChunkerGroups:
    """The config groups besides ``method`` that a chunker may use: the chat model built from the
    ``llm`` group, the ``prompt`` and ``feedback`` schema objects, and the soft ``length_reference``.

    Every factory receives one of these, holding the groups its config class declares
    (:attr:`MethodConfig.NEEDS` and :attr:`MethodConfig.TAKES`) and None for the others, so that
    building a chunker needs no knowledge of its parameters and a baseline never builds a model.
    """

    llm: ChatModel | None = None
    prompt: PromptConfig | None = None
    feedback: FeedbackConfig | None = None
    length_reference: Mapping[str, Any] | None = None

    def chat_model(self) -> ChatModel:
        """The chat model of a chunker that declares ``llm`` in ``NEEDS`` (the builder checked it)."""
        if self.llm is None:
            raise ConfigValueError("this chunker needs an llm config (llm=...)")
        return self.llm

    def prompt_section(self) -> PromptConfig:
        """The prompt of a chunker that declares ``prompt`` in ``NEEDS`` (the builder checked it)."""
        if self.prompt is None:
            raise ConfigValueError("this chunker needs a prompt config (prompt=...)")
        return self.prompt


#: The names of the groups a :class:`ChunkerGroups` carries.
GROUP_NAMES = tuple(f.name for f in dataclasses.fields(ChunkerGroups))


@dataclass(slots=True)
class UnitResult:
    book_id: str
    unit_id: str
    chunks: list[Chunk]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # set when the unit failed outright (its chunks are then a fallback)


class Chunker(ABC):
    name: str = "chunker"

    @abstractmethod
    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult: ...

    def chunk_units(self, doc: Document, units: Iterable[Unit]) -> Iterator[UnitResult]:
        """Chunk several units; LLM chunkers may override to batch requests."""
        for unit in units:
            yield self.chunk_unit(doc, unit)

    def fingerprint(self) -> dict[str, Any]:
        """Configuration that changes the output; part of the resume key of each unit."""
        return {"name": self.name}

    def check(self) -> None:
        """Fail fast (:class:`~litseg.errors.SetupError`, one line) when what the chunker needs is
        not there; called once before a run. The default checks the chat model (``llm``) or the
        wrapped chunker (``base``) when there is one."""
        for attribute in ("llm", "base"):
            check = getattr(getattr(self, attribute, None), "check", None)
            if callable(check):
                check()


#: What builds a chunker: ``factory(config, groups)``, the same for every chunker.
ChunkerFactory = Callable[["MethodConfig", ChunkerGroups], Chunker]

#: Chunker factories by ``method.name``. Every module of :mod:`litseg.chunkers` is imported on the
#: first lookup, so a new chunker is one module (``@register("mine", config=MineConfig)``) plus
#: ``conf/method/mine.yaml``; ``imported`` lives in the annotation package (litseg.chunkers.imported).
# tagger_model and tagger_lm are the tagger's torch nets and LM reader, no chunkers: discovery must
# not import torch for every run.
CHUNKERS: Registry[ChunkerFactory] = Registry("chunker", discover=["litseg.chunkers"],
                                               skip=["litseg.chunkers.tagger_model", "litseg.chunkers.tagger_lm"])
_CONFIGS: dict[str, type[MethodConfig]] = {}


@dataclass
class MergeOptions:
    """``method.merge``: dynamic merge of adjacent chunks towards ``target`` (null: off), lengths
    counted in ``measure``. Both are required: a merge is written whole, in the conf/method YAML
    that has one (``merge: {target: null, measure: words}``), a conf/chunkers row, or by hand
    (``build_chunker(..., merge={"target": 350, "measure": "words"})``); a merge left off is
    ``merge: null`` or ``{target: null}``."""

    target: float | None
    measure: Literal["words", "chars", "sentences"]


@config_schema("method", entry="annotate", default_option="litseg_lite")
@dataclass(kw_only=True)
class MethodConfig:
    """The ``method`` section: ``name`` picks the chunker, whose config class types the rest."""

    name: str
    # Dynamic merge towards a target length works for every chunker (litseg.chunkers.merge); every
    # conf/method YAML says (null: off).
    merge: MergeOptions | None

    #: Fields taken from other config groups by composition (``/prompt@template``), not values.
    COMPOSED: ClassVar[frozenset[str]] = frozenset()
    #: Config groups (:data:`GROUP_NAMES`) the chunker cannot be built without, and those it uses
    #: when given; the builder passes these and no others (a baseline declares none).
    NEEDS: ClassVar[frozenset[str]] = frozenset()
    TAKES: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __config_dispatch__(cls, data: Mapping[str, Any], where: str) -> type:
        name = data.get("name")
        if not name:
            raise ConfigError(f"{where or 'method'} needs a name; available: {', '.join(available())}")
        return config_class(str(name))

    def options(self, *leave_out: str) -> dict[str, Any]:
        """The chunker's own settings as keyword arguments (not ``merge``, nor ``leave_out``)."""
        skip = {"merge", *leave_out}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}


M = TypeVar("M", bound=MethodConfig)


def method_settings(config: type[M], name: str, settings: Mapping[str, Any]) -> M:
    """The typed settings of chunker ``name`` given from Python (a chunker's constructor): those in
    ``settings``, the rest from ``conf/method/<name>.yaml``, their one home
    (:func:`~litseg.utils.config.shipped_option`; nothing for a plug-in without a file there).
    A mapping given in part is laid over the file's, as a command-line override is
    (``schema_limits={"text": {"subtitle": 10}}`` keeps the file's other limits)."""
    return config(**{**deep_merge(shipped_option("method", name), settings), "name": name})


def register(name: str, config: type[MethodConfig]) -> Callable[[ChunkerFactory], ChunkerFactory]:
    """Decorator: ``method.name: name`` builds with this factory, always called the same way,
    ``factory(config, groups)``: the section typed by ``config`` and the :class:`ChunkerGroups`."""

    def deco(factory: ChunkerFactory) -> ChunkerFactory:
        CHUNKERS.register(name)(factory)
        register_config(name, config)
        factory.method_config = config  # type: ignore[attr-defined]  # found when named "module:attr"
        return factory

    return deco


def register_config(name: str, schema: type[MethodConfig]) -> None:
    """``schema`` types ``method`` sections with ``name: name``."""
    known = _CONFIGS.get(name)
    if known is not None and known is not schema:
        raise ValueError(f"chunker {name!r} already has a config class: {known.__name__}")
    _CONFIGS[name] = schema


def config_class(name: str) -> type[MethodConfig]:
    """The config class of chunker ``name`` (its module is imported first); a factory named as
    ``"package.module:attribute"`` brings its own through :func:`register`."""
    factory = CHUNKERS.get(name)
    schema = _CONFIGS.get(name) or getattr(factory, "method_config", None)
    if schema is None:
        raise ConfigError(f"chunker {name!r} has no config class: decorate its factory with "
                          "@register(name, config=...) (litseg.chunkers.base)")
    return schema


def available() -> list[str]:
    return CHUNKERS.names()


class ConfigValueError(SetupError, ValueError):
    """A chunker parameter of the wrong type or value (``method.chunk_size=abc``)."""
