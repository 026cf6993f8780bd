"""The typed method section: one config class per chunker (no defaults: conf/method/<name>.yaml holds them),
found through one Registry that discovers litseg.chunkers."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import typing
from dataclasses import dataclass

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from litseg.chunkers.base import (
    CHUNKERS,
    Chunker,
    ChunkerGroups,
    ConfigValueError,
    MergeOptions,
    MethodConfig,
    UnitResult,
    config_class,
    register,
)
from litseg.chunkers.build import build_chunker, build_chunker_from_config
from litseg.utils.config import from_dict
from litseg.utils.registry import Registry
from tests.conftest import REPO

CONF = REPO / "conf"
OPTIONS = sorted(p.stem for p in (CONF / "method").glob("*.yaml"))


def _method(option: str) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="annotate", overrides=[f"method={option}"])
    return OmegaConf.to_container(cfg.method, resolve=False)


@pytest.mark.parametrize("option", OPTIONS)
def test_each_chunker_config_leaves_its_values_to_its_yaml(option: str) -> None:
    """conf/method/<name>.yaml is the one home of a built-in chunker's settings: its config class
    types them without a default of its own (only what the YAML never writes may have one)."""
    data = _method(option)
    typed = from_dict(MethodConfig, data, "method")
    assert type(typed) is config_class(data["name"])
    twice = [f.name for f in dataclasses.fields(typed) if f.name in data and f.name not in typed.COMPOSED
             and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)]
    assert not twice, f"{type(typed).__name__} repeats values of conf/method/{option}.yaml: {twice}"


def _built_class(name: str) -> type | None:
    """The chunker class the factory of ``name`` says it returns (None: only ``Chunker``)."""
    returned = typing.get_type_hints(CHUNKERS.get(name)).get("return")
    return returned if isinstance(returned, type) and returned is not Chunker else None


@pytest.mark.parametrize("name", sorted(set(OPTIONS) | {"litseg_tagger"}))
def test_a_chunker_constructor_repeats_no_default_of_its_config(name: str) -> None:
    """A setting's default lives in conf/method/<name>.yaml (the test above); the chunker's
    constructor takes the setting without a default of its own, so the two cannot
    drift apart (LitSeg-Lite's max_new_tokens once said 1024 in the constructor, 3072 in the YAML).
    Every factory, the baselines' included, names the class it builds, so that class is checked."""
    cls = _built_class(name)
    assert cls is not None, f"the factory of {name!r} names no chunker class (annotate its return type)"
    fields = {f.name for f in dataclasses.fields(config_class(name))}
    repeated = [p.name for p in inspect.signature(cls.__init__).parameters.values()
                if p.name in fields and p.default is not inspect.Parameter.empty]
    assert not repeated, f"{cls.__name__}.__init__ repeats defaults of {config_class(name).__name__}: {repeated}"


def test_registry_discovers_every_chunker_module_and_the_imported_one() -> None:
    assert isinstance(CHUNKERS, Registry)
    code = ("from litseg.chunkers import available; names = set(available()); "
            "assert {'imported', 'litseg', 'litseg_lite', 'lumberchunker', 'margin_sampling', "
            "'perplexity', 'recursive', 'semantic', 'token'} <= names, names")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert not (REPO / "src/litseg/chunkers/builtin.py").exists()


def test_unknown_and_misspelt_settings_are_config_errors() -> None:
    with pytest.raises(ConfigValueError, match=r"method\.chunk_sise"):
        build_chunker_from_config({"name": "token", "chunk_sise": 3})
    with pytest.raises(ConfigValueError, match="unknown chunker 'nope'"):
        build_chunker_from_config({"name": "nope"})
    with pytest.raises(ValueError, match="unknown chunker 'nope'"):
        build_chunker("nope")


def test_build_chunker_and_the_config_path_are_one_way() -> None:
    a = build_chunker("token", chunk_size=40, tokenizer="whitespace")
    b = build_chunker_from_config({**_method("token"), "chunk_size": 40, "tokenizer": "whitespace"})
    assert a.fingerprint() == b.fingerprint()


@dataclass(kw_only=True)
class _WholeConfig(MethodConfig):
    # A plug-in without a conf/method YAML holds its defaults in its config class.
    label: str = "whole"
    merge: MergeOptions | None = None


def test_a_new_chunker_is_a_factory_and_a_config_class() -> None:
    class Whole(Chunker):
        def __init__(self, label: str) -> None:
            self.name = label

        def chunk_unit(self, doc, unit):  # type: ignore[no-untyped-def]
            return UnitResult(doc.book_id, unit.unit_id, [])

    @register("whole-test", config=_WholeConfig)
    def make(config: _WholeConfig, groups: ChunkerGroups) -> Chunker:
        return Whole(config.label)

    assert build_chunker_from_config({"name": "whole-test", "label": "w"}).name == "w"
    assert build_chunker("whole-test").name == "whole"
    with pytest.raises(ConfigValueError, match=r"label must be a string"):
        build_chunker_from_config({"name": "whole-test", "label": 3})
