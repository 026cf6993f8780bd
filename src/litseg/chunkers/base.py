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
        raise ValueError(f"unknown chunker {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    factory = _REGISTRY[name]
    accepted = inspect.signature(factory).parameters
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
        raise ValueError(f"chunker {name!r} needs an llm config (llm=...)")
    chunker = factory(**params)
    if merge:
        from litseg.chunkers.merge import with_merge

        chunker = with_merge(chunker, merge)
    return chunker
