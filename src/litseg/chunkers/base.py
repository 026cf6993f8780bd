"""The chunker interface shared by LitSeg, LitSeg-Lite and every baseline.

A chunker receives a :class:`Document` whose units already carry indexed sentences and returns,
per unit, chunks with exact spans into the source plus diagnostics. Chunkers are chosen by name
(``method=...`` in Hydra config) through :func:`build_chunker`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from litseg.errors import SetupError
from litseg.utils.config import ConfigError, config_schema, from_dict, to_plain
from litseg.utils.registry import Registry, UnknownPluginError
from litseg.segmentation.types import Chunk, Document, Unit

F = TypeVar("F", bound=Callable[..., Any])


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


#: Chunker factories by ``method.name``. Every module of :mod:`litseg.chunkers` is imported on the
#: first lookup, so a new chunker is one module (``@register("mine", config=MineConfig)``) plus
#: ``conf/method/mine.yaml``; ``imported`` lives in the annotation package (litseg.chunkers.imported).
# tagger_model is the tagger's torch nets, no chunker: discovery must not import torch for every run.
CHUNKERS: Registry[Callable[..., Chunker]] = Registry("chunker", discover=["litseg.chunkers"],
                                                     skip=["litseg.chunkers.tagger_model"])
_CONFIGS: dict[str, type[MethodConfig]] = {}


@dataclass
class MergeOptions:
    """``method.merge``: dynamic merge of adjacent chunks towards ``target`` (null: off)."""

    target: float | None = None
    measure: Literal["words", "chars", "sentences"] = "words"


@config_schema("method", entry="annotate", default_option="litseg_lite")
@dataclass(kw_only=True)
class MethodConfig:
    """The ``method`` section: ``name`` picks the chunker, whose config class types the rest."""

    name: str
    # Dynamic merge towards a target length works for every chunker (litseg.chunkers.merge).
    merge: MergeOptions | None = None

    #: Fields taken from other config groups by composition (``/prompt@template``), not values.
    COMPOSED: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __config_dispatch__(cls, data: Mapping[str, Any], where: str) -> type:
        name = data.get("name")
        if not name:
            raise ConfigError(f"{where or 'method'} needs a name; available: {', '.join(available())}")
        schema = config_class(str(name))
        if schema is None:
            raise ConfigError(f"{where or 'method'}: chunker {name!r} declares no config class")
        return schema

    def options(self, *leave_out: str) -> dict[str, Any]:
        """The chunker's own settings as keyword arguments (not ``merge``, nor ``leave_out``)."""
        skip = {"merge", *leave_out}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}


def register(name: str, config: type[MethodConfig] | None = None) -> Callable[[F], F]:
    """Decorator: ``method.name: name`` builds with this factory, called as
    ``factory(config, **groups)`` with the typed ``config``; without one (a plug-in), with the
    method's settings as keywords."""

    def deco(factory: F) -> F:
        CHUNKERS.register(name)(factory)
        if config is not None:
            register_config(name, config)
        return factory

    return deco


def register_config(name: str, schema: type[MethodConfig]) -> None:
    """``schema`` types ``method`` sections with ``name: name``."""
    known = _CONFIGS.get(name)
    if known is not None and known is not schema:
        raise ValueError(f"chunker {name!r} already has a config class: {known.__name__}")
    _CONFIGS[name] = schema


def config_class(name: str) -> type[MethodConfig] | None:
    """The config class of chunker ``name`` (its module is imported first); None for a plug-in."""
    CHUNKERS.get(name)
    return _CONFIGS.get(name)


def available() -> list[str]:
    return CHUNKERS.names()


class ConfigValueError(SetupError, ValueError):
    """A chunker parameter of the wrong type or value (``method.chunk_size=abc``)."""


# Annotations a parameter check understands, and the Python types each admits.
_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,),
                                              "str": (str,), "None": (type(None),)}
_KIND_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "None": "null"}


def _declared_annotations(factory: Callable[..., Any]) -> dict[str, Any]:
    """Parameter annotations of a chunker factory or config class, and of the class a factory
    returns when it passes ``**params`` on (``def make(llm, **params) -> LitSegLiteChunker``)."""
    import inspect

    if dataclasses.is_dataclass(factory):
        return {f.name: f.type for f in dataclasses.fields(factory)}
    signature = inspect.signature(factory)
    found = {n: p.annotation for n, p in signature.parameters.items()
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        returned = signature.return_annotation
        if isinstance(returned, str):
            returned = getattr(factory, "__globals__", {}).get(returned)
        if isinstance(returned, type):
            for n, p in inspect.signature(returned.__init__).parameters.items():
                found.setdefault(n, p.annotation)
    return found


def check_parameter_types(name: str, factory: Callable[..., Any], params: Mapping[str, Any]) -> None:
    """Refuse a parameter whose value does not fit a plain annotation (``int``, ``float | None``,
    ``bool``, ``str``...), naming it: ``method.chunk_size=abc`` must not surface later as a
    comparison error inside the chunker, or per unit."""
    import inspect

    annotations = _declared_annotations(factory)
    for key, value in params.items():
        annotation = annotations.get(key, inspect.Parameter.empty)
        if annotation is inspect.Parameter.empty:
            continue
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
        kinds = [part.strip() for part in text.split("|")]
        if not all(kind in _SIMPLE_TYPES for kind in kinds):
            continue  # lists, mappings, models...: the typed config checks those
        if isinstance(value, bool) and "bool" not in kinds:
            fits = False  # a bool is an int to Python, not to a config
        else:
            fits = any(isinstance(value, t) for kind in kinds for t in _SIMPLE_TYPES[kind])
        if not fits:
            wanted = " or ".join(_KIND_WORDS[k] for k in kinds)
            raise ConfigValueError(f"method {name!r}: {key} must be {wanted}, got {value!r} "
                                   f"(method.{key}=...)")


def _factory(name: str, error: type[Exception]) -> Callable[..., Chunker]:
    try:
        return CHUNKERS.get(name)
    except UnknownPluginError as exc:
        raise error(str(exc)) from None


def _groups(name: str, factory: Callable[..., Any], groups: Mapping[str, Any]) -> dict[str, Any]:
    """The config groups (``llm``, ``prompt``, ...) the factory takes; the ``llm`` group becomes a
    :class:`~litseg.llm.base.ChatModel` (unless it is one already)."""
    import inspect

    accepted = inspect.signature(factory).parameters
    out: dict[str, Any] = {}
    for group, node in groups.items():
        if group not in accepted or node is None:
            continue
        if group == "llm" and not hasattr(node, "chat_batch"):
            from litseg.llm.factory import build_llm

            out["llm"] = build_llm(node)
        else:
            out[group] = to_plain(node)
    if "llm" in accepted and "llm" not in out:
        raise ConfigValueError(f"chunker {name!r} needs an llm config (llm=...)")
    return out


def _construct(name: str, make: Callable[[], Chunker]) -> Chunker:
    try:
        return make()
    except (ValueError, TypeError) as exc:  # a parameter the chunker refuses: the config's fault
        if isinstance(exc, SetupError):
            raise
        raise ConfigValueError(f"method {name!r}: {exc}") from exc


def build_chunker_from_config(method: Any, **groups: Any) -> Chunker:
    """Build the chunker named in a ``method`` config group.

    The section is typed by its chunker's config class (unknown keys and bad types fail with
    their path), and the factory is called with it. ``groups`` are other composed config groups
    (``llm``, ``prompt``, ``feedback``, ...). Each is passed only to a factory that takes an
    argument of that name; the ``llm`` group is turned into a
    :class:`~litseg.llm.base.ChatModel` first. So baselines never import torch or start an engine.
    """
    params = dict(to_plain(method))
    name = params.get("name")
    if not name:
        raise ConfigValueError(f"method config needs a name; available: {', '.join(available())}")
    factory = _factory(str(name), ConfigValueError)
    schema = config_class(str(name))
    if schema is None:  # a plug-in taking its settings as keywords
        params.pop("name")
        check_parameter_types(name, factory, params)
        merge = params.pop("merge", None) if "merge" not in _accepted(factory) else None
        chunker = _construct(name, lambda: factory(**params, **_groups(name, factory, groups)))
        return _merged(chunker, merge)
    check_parameter_types(name, schema, params)
    try:
        cfg = from_dict(MethodConfig, params, "method")
    except ConfigError as exc:
        raise ConfigValueError(f"method {name!r}: {exc}") from None
    if _takes_config(factory):
        chunker = _construct(name, lambda: factory(cfg, **_groups(name, factory, groups)))
    else:  # a factory taking keywords (the imported chunker): the typed values as keywords
        chunker = _construct(name, lambda: factory(**cfg.options("name"), **_groups(name, factory, groups)))
    return _merged(chunker, cfg.merge)


def _takes_config(factory: Callable[..., Any]) -> bool:
    """Whether ``factory(config, **groups)`` is its calling convention (first parameter ``config``)."""
    return next(iter(_accepted(factory)), None) == "config"


def _accepted(factory: Callable[..., Any]) -> Mapping[str, Any]:
    import inspect

    return inspect.signature(factory).parameters


def _merged(chunker: Chunker, merge: Any) -> Chunker:
    if not merge:
        return chunker
    from litseg.chunkers.merge import with_merge

    return with_merge(chunker, merge)


def build_chunker(name: str, **params: Any) -> Chunker:
    """``build_chunker("token", chunk_size=64)``: the chunker ``name`` with these settings (the
    rest from its config class's defaults, which equal ``conf/method/<name>.yaml``); config groups
    (``llm`` as a model or a config, ``prompt``, ``feedback``...) go beside them."""
    factory = _factory(name, ValueError)
    schema = config_class(name)
    if schema is None:
        return factory(**params)
    fields = {f.name for f in dataclasses.fields(schema)}
    groups = {k: v for k, v in params.items() if k not in fields}
    missing = [n for n, p in _accepted(factory).items()
               if p.default is p.empty and n not in groups and p.kind is p.KEYWORD_ONLY]
    if missing:
        raise TypeError(f"chunker {name!r} needs {', '.join(missing)}")
    settings = {k: v for k, v in params.items() if k in fields}
    return build_chunker_from_config({"name": name, **settings}, **groups)
