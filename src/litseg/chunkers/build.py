"""Building a chunker from its ``method`` config and the other config groups it needs.

Kept apart from :mod:`litseg.chunkers.base` (the interface every chunker module imports) so that
the builder may import what it wraps chunkers in (:mod:`litseg.chunkers.merge`) without a circle.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from litseg.chunkers.base import (
    CHUNKERS,
    Chunker,
    ConfigValueError,
    MethodConfig,
    available,
    config_class,
    register,
)
from litseg.chunkers.merge import DynamicMerge, with_merge
from litseg.errors import SetupError
from litseg.llm.factory import build_llm
from litseg.utils.config import ConfigError, from_dict, to_plain
from litseg.utils.registry import UnknownPluginError


# Annotations a parameter check understands, and the Python types each admits.
_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,),
                                              "str": (str,), "None": (type(None),)}
_KIND_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "None": "null"}


def _declared_annotations(factory: Callable[..., Any]) -> dict[str, Any]:
    """Parameter annotations of a chunker factory or config class, and of the class a factory
    returns when it passes ``**params`` on (``def make(llm, **params) -> LitSegLiteChunker``)."""
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
    accepted = inspect.signature(factory).parameters
    out: dict[str, Any] = {}
    for group, node in groups.items():
        if group not in accepted or node is None:
            continue
        if group == "llm" and not hasattr(node, "chat_batch"):
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
    return inspect.signature(factory).parameters


def _merged(chunker: Chunker, merge: Any) -> Chunker:
    if not merge:
        return chunker
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


@register("merge")
def make_merge(base: str, target: float, measure: str = "words", **base_params: Any) -> Chunker:
    """``method=merge`` with ``base: <chunker name>`` and that chunker's parameters beside it."""
    if base == "merge":
        raise ValueError("merge: base must be another chunker, not 'merge'")
    return DynamicMerge(build_chunker(base, **base_params), target=target, measure=measure)
