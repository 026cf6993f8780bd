"""The chunker interface shared by LitSeg, LitSeg-Lite and every baseline.

A chunker receives a :class:`Document` whose units already carry indexed sentences and returns,
per unit, chunks with exact spans into the source plus diagnostics. Chunkers are chosen by name
(``method=...`` in Hydra config) through :func:`build_chunker`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from litseg.errors import SetupError
from litseg.segmentation.types import Chunk, Document, Unit


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


_REGISTRY: dict[str, Callable[..., Chunker]] = {}


def register(name: str) -> Callable[[Callable[..., Chunker]], Callable[..., Chunker]]:
    def deco(factory: Callable[..., Chunker]) -> Callable[..., Chunker]:
        if name in _REGISTRY:
            raise ValueError(f"chunker {name!r} registered twice")
        _REGISTRY[name] = factory
        return factory

    return deco


def available() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def build_chunker(name: str, **params: Any) -> Chunker:
    _load_builtin()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown chunker {name!r}; available: {', '.join(sorted(_REGISTRY))}") from None
    return factory(**params)


class ConfigValueError(SetupError, ValueError):
    """A chunker parameter of the wrong type or value (``method.chunk_size=abc``)."""


# Annotations a parameter check understands, and the Python types each admits.
_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,),
                                              "str": (str,), "None": (type(None),)}
_KIND_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "None": "null"}


def _declared_annotations(factory: Callable[..., Any]) -> dict[str, Any]:
    """Parameter annotations of a chunker factory, and of the class it returns when it passes
    ``**params`` on (``def make(llm, **params) -> LitSegLiteChunker``)."""
    import inspect

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


def check_parameter_types(name: str, factory: Callable[..., Any], params: dict[str, Any]) -> None:
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
            continue  # lists, mappings, models...: the chunker checks those itself
        if isinstance(value, bool) and "bool" not in kinds:
            fits = False  # a bool is an int to Python, not to a config
        else:
            fits = any(isinstance(value, t) for kind in kinds for t in _SIMPLE_TYPES[kind])
        if not fits:
            wanted = " or ".join(_KIND_WORDS[k] for k in kinds)
            raise ConfigValueError(f"method {name!r}: {key} must be {wanted}, got {value!r} "
                                   f"(method.{key}=...)")


def _load_builtin() -> None:
    # Importing the modules runs their @register decorators; heavy imports stay inside them.
    import litseg.chunkers.builtin  # noqa: F401


def build_chunker_from_config(method: Any, **groups: Any) -> Chunker:
    """Build the chunker named in a ``method`` config group.

    ``groups`` are other composed config groups (``llm``, ``prompt``, ``feedback``, ...). Each is
    passed only to a factory that takes an argument of that name; the ``llm`` group is turned
    into a :class:`~litseg.llm.base.ChatModel` first. So baselines never import torch or start
    an engine.
    """
    import inspect

    from omegaconf import DictConfig, OmegaConf

    def plain(node: Any) -> Any:
        return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node

    params = dict(plain(method))
    name = params.pop("name")
    _load_builtin()
    if name not in _REGISTRY:
        raise ConfigValueError(f"unknown chunker {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    factory = _REGISTRY[name]
    accepted = inspect.signature(factory).parameters
    check_parameter_types(name, factory, params)
    # ``merge: {target, measure}`` works for every chunker, LLM ones included.
    merge = params.pop("merge", None) if "merge" not in accepted else None
    for group, node in groups.items():
        if group not in accepted or node is None:
            continue
        if group == "llm":
            from litseg.llm.factory import build_llm

            params["llm"] = build_llm(node)
        else:
            params[group] = plain(node)
    if "llm" in accepted and "llm" not in params:
        raise ConfigValueError(f"chunker {name!r} needs an llm config (llm=...)")
    try:
        chunker = factory(**params)
    except (ValueError, TypeError) as exc:  # a parameter the chunker refuses: the config's fault
        if isinstance(exc, SetupError):
            raise
        raise ConfigValueError(f"method {name!r}: {exc}") from exc
    if merge:
        from litseg.chunkers.merge import with_merge

        chunker = with_merge(chunker, merge)
    return chunker
