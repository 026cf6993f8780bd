"""Every YAML file of every config group validates against the group's one typed schema
(litseg.utils.config.SCHEMAS), and no schema default contradicts the group's default YAML."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import litseg
from litseg.utils.config import SCHEMAS, from_dict
from tests.conftest import REPO

CONF = REPO / "conf"
# Groups that are overlays on a whole entry config (they set keys of other groups), or another
# tool's own format (accelerate), rather than one section with a schema of its own.
OVERLAYS = {"experiment", "debug", "sweep", "preset", "accelerate"}


def _import_all() -> None:
    for info in pkgutil.walk_packages(litseg.__path__, "litseg."):
        if ".testing" in info.name:
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # optional extras (vllm, deepspeed) are absent on CPU machines
            pass


_import_all()


def _options() -> list[tuple[str, str]]:
    return [(e.group, p.stem) for e in SCHEMAS.values() for p in sorted((CONF / e.group).glob("*.yaml"))]


def _section(group: str, option: str):
    entry = SCHEMAS[group]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=entry.entry, overrides=[f"{group}={option}"])
    node = OmegaConf.select(cfg, entry.key)
    return OmegaConf.to_container(node, resolve=False) if node is not None else {}


def test_every_config_group_has_a_schema():
    groups = {p.name for p in CONF.iterdir() if p.is_dir()} - OVERLAYS
    missing = sorted(groups - set(SCHEMAS))
    assert not missing, f"config groups without a typed schema (litseg.utils.config.config_schema): {missing}"


@pytest.mark.parametrize(("group", "option"), _options(), ids=lambda v: str(v))
def test_every_yaml_file_validates_against_its_schema(group, option):
    entry = SCHEMAS[group]
    from_dict(entry.schema, _section(group, option), where=entry.key)


@pytest.mark.parametrize("group", sorted(SCHEMAS))
def test_schema_defaults_agree_with_the_default_yaml(group):
    entry = SCHEMAS[group]
    if entry.default_option is None:
        pytest.skip(f"conf/{group} has no default option: every field is required")
    data = _section(group, entry.default_option)
    typed = from_dict(entry.schema, data, where=entry.key)
    drift = []
    # A dispatching schema (LLM backends, chunkers) is checked on the class its default option picks.
    for f in dataclasses.fields(type(typed)):
        if f.name not in data:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            continue
        if getattr(typed, f.name) != default:
            drift.append(f"{f.name}: code {default!r} vs conf/{group}/{entry.default_option}.yaml {getattr(typed, f.name)!r}")
    assert not drift, "schema defaults drifted from the YAML:\n" + "\n".join(drift)


# --------------------------------------------------------------------------------------------
# One home for every default (docs/extending.md): a value the YAML writes has no default in code



def _field_default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _leaves(data: dict, prefix: tuple = ()):
    for key, value in data.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


def _second_copy(typed, path: tuple, value) -> str | None:
    """Why writing ``value`` at ``path`` repeats a default held elsewhere, or None."""
    node = typed
    for depth, key in enumerate(path):
        if not dataclasses.is_dataclass(node):
            return None
        fields = {f.name: f for f in dataclasses.fields(node)}
        if key not in fields:
            return None
        f = fields[key]
        source = f.metadata.get("defaults_of")
        if source and depth == len(path) - 2:  # a mapping handed to another package's config class
            module, name = source.split(":")
            theirs = {g.name: g for g in dataclasses.fields(getattr(importlib.import_module(module), name))}
            default = _field_default(theirs[path[-1]]) if path[-1] in theirs else dataclasses.MISSING
            return f"{name}'s own default" if default is not dataclasses.MISSING and default == value else None
        if depth == len(path) - 1:
            owner = type(node).__name__
            has_default = _field_default(f) is not dataclasses.MISSING
            return f"a default of {owner}.{key}" if has_default else None
        node = getattr(node, key)
    return None


def _parent_sections(group: str, defaults: list) -> list[dict]:
    """What an option's defaults list lays under its own values: another option of its group, or
    (conf/chunkers) a method config composed in place (``/method@_here_: recursive``)."""
    parents = []
    for item in defaults:
        if isinstance(item, str) and item != "_self_":
            section = _section(group, item)
            parents.append(section[group] if SCHEMAS[group].key == "." else section)
        elif isinstance(item, dict) and "/method@_here_" in item:
            parents.append(_section("method", item["/method@_here_"]))
    return parents


def _under_parent(parents: list[dict], path: tuple, value) -> str | None:
    inherited = [OmegaConf.select(OmegaConf.create(p), ".".join(map(str, path))) for p in parents]
    return "its parent's value" if value is not None and value in inherited else None


@pytest.mark.parametrize(("group", "option"), _options(), ids=lambda v: str(v))
def test_no_default_is_written_twice(group, option):
    """A group's YAML writes a value only where no schema field default (nor the default of the
    TRL class a ``trl:`` mapping is handed to) already gives one: each setting has one home."""
    import yaml

    entry = SCHEMAS[group]
    raw = yaml.safe_load((CONF / group / f"{option}.yaml").read_text()) or {}
    # An option built on another of its group (stage/sft_student on stage/common) overrides its
    # parent's values: those are checked against the parent, the rest against the schema.
    # A conf/chunkers option is checked against the method configs it composes.
    parents = _parent_sections(group, raw.pop("defaults", []))
    typed = from_dict(entry.schema, _section(group, option), where=entry.key)
    twice = []
    for path, value in _leaves(raw):
        inherited = [OmegaConf.select(OmegaConf.create(p), ".".join(map(str, path))) for p in parents]
        if any(v is not None for v in inherited):
            why = _under_parent(parents, path, value)
        else:
            why = _second_copy(typed, path, value)
        if why:
            twice.append(f"{'.'.join(path)}: {why}")
    assert not twice, f"conf/{group}/{option}.yaml repeats defaults held elsewhere: {twice}"


def test_the_training_stage_settings_have_their_one_home_in_conf_stage():
    """The drift issue 21 found (conf/stage/common.yaml vs SFTSettings/GRPOSettings vs the builders'
    field-by-field copy) cannot come back: these schemas carry no default at all."""
    from litseg.training.config import BoundarySettings, GRPOSettings, SFTSettings, StageConfig

    with_default = [f"{cls.__name__}.{f.name}" for cls in (StageConfig, SFTSettings, GRPOSettings, BoundarySettings)
                    for f in dataclasses.fields(cls) if _field_default(f) is not dataclasses.MISSING]
    assert not with_default
