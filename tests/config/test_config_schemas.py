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
