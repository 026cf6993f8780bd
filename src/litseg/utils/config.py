"""One way from a composed config section to a typed object.

Every config group under ``conf/`` has one frozen-or-plain dataclass schema, registered here with
:func:`config_schema`. :func:`from_dict` builds it from the composed section (DictConfig or dict),
rejecting unknown keys with their dotted path and checking scalar types, so a misspelt override
fails at once instead of being ignored. ``tests/config/test_config_schemas.py`` composes every YAML file of
every group and validates it against its schema. A default has one home, the group's YAML (where a
user reads and changes it): a schema field has none, and the same test fails when a YAML writes a
value that a code default already gives (docs/extending.md, "One home for every default"; the few
schemas that keep such defaults are listed there with their reasons). Code that builds a schema
object from Python with only some settings completes them from the shipped YAML
(:func:`shipped_option`). :func:`from_dict` returns an object already typed as it is, so a section
is read once, where the config is read, and reaches the code as its schema object.

Pure Python (omegaconf is imported lazily for DictConfig inputs): no torch, no Hydra.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from litseg.errors import SetupError
from litseg.utils.locations import config_dir

T = TypeVar("T")


class ConfigError(ValueError, SetupError):
    """A composed config does not fit its typed schema (unknown key, wrong type); the entry
    scripts print it as one line (litseg.cli)."""


def to_plain(node: Any) -> Any:
    """A DictConfig/ListConfig as plain, resolved dicts and lists; anything else unchanged."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(node, (DictConfig, ListConfig)):
            return OmegaConf.to_container(node, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a core dependency
        pass
    return node


def _check_union(value: Any, args: tuple[Any, ...], where: str) -> Any:
    if value is None and type(None) in args:
        return None
    errors = []
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _check_value(value, arg, where)
        except ConfigError as exc:
            errors.append(str(exc))
    raise ConfigError(errors[0] if errors else f"{where}: bad value {value!r}")


def _check_scalar(value: Any, annotation: Any, where: str) -> Any:
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected text, got {value!r}")
        return value
    return value


def _check_value(value: Any, annotation: Any, where: str) -> Any:
    """Coerce what YAML may give (an int for a float field) and reject what cannot be meant."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, args, where)
    if annotation is Any:
        return value
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: expected one of {list(args)}, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        item = args[0] if args else Any
        items = [_check_value(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        _, item = args or (str, Any)
        return {str(k): _check_value(v, item, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(annotation):
        return from_dict(annotation, value, where)
    return _check_scalar(value, annotation, where)


def check_value(value: Any, annotation: Any, where: str) -> Any:
    """``value`` checked (and coerced) against a type annotation as :func:`from_dict` checks a field:
    for settings typed by a class of another package (the TRL configs of the training stages)."""
    return _check_value(value, annotation, where)


def schema_for(cls: type[T], data: Mapping[str, Any], where: str = "") -> type[T]:
    """The dataclass that types ``data``: ``cls`` itself, or, for a group whose options differ in
    shape (LLM backends, chunkers), the class ``cls.__config_dispatch__(data, where)`` picks (a
    classmethod reading e.g. ``backend`` or ``name``; it raises :class:`ConfigError` for a value it
    does not know). A picked class that inherits the hook and picks itself ends the dispatch."""
    seen: set[type] = set()
    dispatch = getattr(cls, "__config_dispatch__", None)
    while dispatch is not None and cls not in seen:
        seen.add(cls)
        picked = dispatch(data, where)
        if picked is cls:
            break
        if not dataclasses.is_dataclass(picked):
            raise TypeError(f"{cls.__name__}.__config_dispatch__ must return a dataclass, got {picked!r}")
        cls = picked
        dispatch = getattr(cls, "__config_dispatch__", None)
    return cls


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """``cls(**data)`` for a dataclass, recursively, with unknown keys and bad types rejected.
    A class with a ``__config_dispatch__`` hook first picks the class that types ``data``
    (:func:`schema_for`); one with a ``__config_build__(data, where)`` classmethod builds itself
    (a section whose keys belong to a plug-in, e.g. :class:`~litseg.llm.config.PluginLLMConfig`).
    An object already of ``cls`` (typed by an earlier reader) is returned as it is."""
    if isinstance(data, cls) and dataclasses.is_dataclass(data):
        return data
    data = to_plain(data)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or cls.__name__}: expected a mapping, got {data!r}")
    cls = schema_for(cls, data, where)
    build = getattr(cls, "__config_build__", None)
    if build is not None:
        return build(data, where)  # type: ignore[no-any-return]
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    prefix = f"{where}." if where else ""
    unknown = sorted(set(data) - names)
    if unknown:
        close = {k: difflib.get_close_matches(str(k), names, n=1, cutoff=0.6) for k in unknown}
        hints = "".join(f"; did you mean {prefix}{m[0]}?" for m in close.values() if m)
        raise ConfigError(f"unknown setting(s) {', '.join(prefix + str(k) for k in unknown)}{hints} "
                          f"(known under {where or 'the root'}: {', '.join(sorted(names))})")
    absent = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in data  # type: ignore[arg-type]
              and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if absent:
        raise ConfigError(f"missing setting(s) {', '.join(prefix + k for k in absent)} "
                          f"({cls.__name__} has no default for them)")
    kwargs = {name: _check_value(value, hints[name], prefix + name) for name, value in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where or cls.__name__}: {exc}") from exc


def shipped_option(group: str, option: str, key: str = "") -> dict[str, Any]:
    """``conf/<group>/<option>.yaml`` of the configs this package reads
    (:func:`~litseg.utils.locations.config_dir`) as a plain dict, or its section at the dotted
    ``key``: the one home of those defaults, for code that builds a schema object from Python with
    only some settings given (:func:`~litseg.chunkers.build.build_chunker`, a chunker's constructor,
    a retrieval component built on its own). A same-group option it builds on (``defaults:
    [hybrid]``) lies under it; groups composed from elsewhere (``/prompt@template``) are left out,
    and interpolations are not resolved. Empty when the file does not exist (a plug-in of another package has no YAML here)."""
    data = _shipped_yaml(group, option)
    for part in key.split(".") if key else ():
        data = data.get(part) or {}
    return copy.deepcopy(dict(data))


@functools.cache
def _shipped_yaml(group: str, option: str) -> dict[str, Any]:
    from omegaconf import OmegaConf

    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        return {}
    data = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    assert isinstance(data, dict)
    merged: dict[str, Any] = {}
    for base in data.pop("defaults", []):
        if isinstance(base, str) and base != "_self_":
            merged = deep_merge(merged, _shipped_yaml(group, base))
    return deep_merge(merged, data)


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base`` as Hydra lays a command-line override over a YAML: a mapping
    given in part keeps ``base``'s other keys; anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def section_dict(obj: Any) -> Any:
    """The composed section a schema object was built from: ``dataclasses.asdict`` with the fields
    still at their code default left out. A YAML never writes a value a code default gives (the
    one-home rule above), so this is the dict the code read before it had the object, and what is
    hashed into a fingerprint stays what it was for a run made then."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.default is not dataclasses.MISSING and value == f.default:
                continue
            if f.default_factory is not dataclasses.MISSING and value == f.default_factory():
                continue
            out[f.name] = section_dict(value)
        return out
    if isinstance(obj, (list, tuple)):
        return [section_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: section_dict(v) for k, v in obj.items()}
    return obj


# --------------------------------------------------------------------------------------------
# Which schema types which config group


@dataclass(frozen=True)
class SchemaEntry:
    """``conf/<group>/*.yaml`` is typed by ``schema``. ``entry`` is the top config whose
    composition places the group at ``key`` (for the test to compose each option), and
    ``default_option`` the YAML whose values the schema's field defaults must equal."""

    group: str
    schema: type
    entry: str
    key: str
    default_option: str | None


SCHEMAS: dict[str, SchemaEntry] = {}


def config_schema(group: str, *, entry: str, key: str | None = None,
                  default_option: str | None = None) -> Callable[[type[T]], type[T]]:
    """Class decorator: the dataclass types every YAML of ``conf/<group>/``."""

    def deco(cls: type[T]) -> type[T]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass to type conf/{group}")
        if group in SCHEMAS and SCHEMAS[group].schema is not cls:
            raise ValueError(f"conf/{group} already has a schema: {SCHEMAS[group].schema.__name__}")
        SCHEMAS[group] = SchemaEntry(group, cls, entry, key or group, default_option)
        return cls

    return deco
