"""Building a chunker from its ``method`` config and the other config groups it declares.

One way for every chunker: the section is typed by the chunker's config class (unknown keys and
bad types fail with their dotted path), the groups the class declares (``NEEDS``/``TAKES``) are
put in a :class:`~litseg.chunkers.base.ChunkerGroups` (the ``llm`` group built into a chat model
first), and the registered factory is called as ``factory(config, groups)``. A chunker that
declares no ``llm`` never has a model built for it, so baselines never import torch or start an
engine. Kept apart from :mod:`litseg.chunkers.base` (the interface every chunker module imports)
so that the builder may import what it wraps chunkers in (:mod:`litseg.chunkers.merge`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from litseg.chunkers.base import (
    CHUNKERS,
    GROUP_NAMES,
    Chunker,
    ChunkerFactory,
    ChunkerGroups,
    ConfigValueError,
    MethodConfig,
    available,
    config_class,
)
from litseg.chunkers.groups import FeedbackConfig, PromptConfig
from litseg.chunkers.merge import with_merge
from litseg.errors import SetupError
from litseg.llm.factory import build_llm
from litseg.utils.config import ConfigError, from_dict, shipped_option, to_plain
from litseg.utils.registry import UnknownPluginError

# Annotations a parameter check understands, and the Python types each admits.
_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,),
                                              "str": (str,), "None": (type(None),)}
_KIND_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "None": "null"}
#: How a missing required group is named in the error.
_GROUP_WORDS = {"llm": "an llm config (llm=...)", "prompt": "a prompt config (prompt=...)",
                "feedback": "a feedback config (feedback=...)",
                "length_reference": "a length reference (length_reference=...)"}


def check_parameter_types(name: str, schema: type[MethodConfig], params: Mapping[str, Any]) -> None:
    """Refuse a parameter whose value does not fit a plain annotation of the config class (``int``,
    ``float | None``, ``bool``, ``str``...), naming it: ``method.chunk_size=abc`` must not surface
    later as a comparison error inside the chunker, or per unit."""
    annotations = {f.name: f.type for f in dataclasses.fields(schema)}
    for key, value in params.items():
        annotation = annotations.get(key)
        if annotation is None:
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


def _factory(name: str, error: type[Exception]) -> ChunkerFactory:
    try:
        return CHUNKERS.get(name)
    except UnknownPluginError as exc:
        raise error(str(exc)) from None


def require_groups(name: str, schema: type[MethodConfig], given: Mapping[str, Any]) -> None:
    """A group the chunker ``NEEDS`` that is not ``given`` fails in one line, before anything is built."""
    missing = [g for g in sorted(schema.NEEDS) if given.get(g) is None]
    if missing:
        raise ConfigValueError(f"chunker {name!r} needs {' and '.join(_GROUP_WORDS[g] for g in missing)}")


#: The groups a chunker receives as their schema objects.
_TYPED_GROUPS: dict[str, type] = {"prompt": PromptConfig, "feedback": FeedbackConfig}


def _typed_group(group: str, value: Any) -> Any:
    """A group's composed section as the object a chunker receives: a schema object as given (the
    config readers build them), a section read by its schema, anything else plain and resolved."""
    schema = _TYPED_GROUPS.get(group)
    if schema is None:
        return to_plain(value)
    if isinstance(value, schema):
        return value
    try:
        return from_dict(schema, value, group)
    except ConfigError as exc:
        raise ConfigValueError(str(exc)) from None


def chunker_groups(schema: type[MethodConfig], given: Mapping[str, Any]) -> ChunkerGroups:
    """The groups ``schema`` declares, out of ``given`` (group name -> schema object or composed
    section, or an already built chat model for ``llm``)."""
    wanted = schema.NEEDS | schema.TAKES
    chosen = {g: given[g] for g in GROUP_NAMES if g in wanted and given.get(g) is not None}
    if "llm" in chosen and not hasattr(chosen["llm"], "chat_batch"):  # a config, not a model yet
        chosen["llm"] = build_llm(chosen["llm"])
    return ChunkerGroups(**{g: v if g == "llm" else _typed_group(g, v) for g, v in chosen.items()})


def _construct(name: str, make: Callable[[], Chunker]) -> Chunker:
    try:
        return make()
    except (ValueError, TypeError) as exc:  # a parameter the chunker refuses: the config's fault
        if isinstance(exc, SetupError):
            raise
        raise ConfigValueError(f"method {name!r}: {exc}") from exc


def _name_and_schema(params: Mapping[str, Any]) -> tuple[str, type[MethodConfig]]:
    name = params.get("name")
    if not name:
        raise ConfigValueError(f"method config needs a name; available: {', '.join(available())}")
    _factory(str(name), ConfigValueError)
    try:
        return str(name), config_class(str(name))
    except ConfigError as exc:
        raise ConfigValueError(str(exc)) from None


def method_config_from(method: Any) -> MethodConfig:
    """A ``method`` section typed by its chunker's config class (as it is when already typed). A
    section given from Python may name only some settings: the rest is ``conf/method/<name>.yaml``'s,
    their one home. A bad setting is named in the chunker's words (:class:`ConfigValueError`)."""
    if isinstance(method, MethodConfig):
        return method
    params = dict(to_plain(method))
    name, schema = _name_and_schema(params)
    params = {**shipped_option("method", name), **params}
    check_parameter_types(name, schema, params)
    try:
        return from_dict(MethodConfig, params, "method")
    except ConfigError as exc:
        raise ConfigValueError(f"method {name!r}: {exc}") from None


def build_chunker_from_config(method: Any, *, llm: Any = None, prompt: Any = None, feedback: Any = None,
                              length_reference: Any = None) -> Chunker:
    """Build the chunker named in a ``method`` config group (a section, or typed by
    :func:`method_config_from`), with the other composed groups beside it (``llm`` as a config or a
    chat model); each reaches the chunker only when its config class declares it."""
    given = {"llm": llm, "prompt": prompt, "feedback": feedback, "length_reference": length_reference}
    # A missing group is named first: without it the section may not even be complete (a template).
    name, schema = (method.name, type(method)) if isinstance(method, MethodConfig) else _name_and_schema(
        dict(to_plain(method)))
    require_groups(name, schema, given)
    cfg = method_config_from(method)
    factory = _factory(cfg.name, ConfigValueError)
    groups = chunker_groups(type(cfg), given)
    chunker = _construct(cfg.name, lambda: factory(cfg, groups))
    return with_merge(chunker, cfg.merge)


def build_chunker(name: str, **params: Any) -> Chunker:
    """``build_chunker("token", chunk_size=64)``: the chunker ``name`` with these settings (the
    rest from ``conf/method/<name>.yaml``, their one home, or a plug-in's config class); config groups
    (``llm`` as a model or a config, ``prompt``, ``feedback``, ``length_reference``) go beside them."""
    _factory(name, ValueError)
    settings = {k: v for k, v in params.items() if k not in GROUP_NAMES}
    groups = {k: v for k, v in params.items() if k in GROUP_NAMES}
    return build_chunker_from_config({"name": name, **settings}, **groups)
