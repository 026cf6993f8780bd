"""The typed llm section (litseg.llm.config): one class per backend, defaults equal to the YAML,
one way from config to model, backends in one Registry."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from litseg.llm.config import (
    EmbeddedLLMConfig,
    LLMConfig,
    OpenAIBackendConfig,
    OpenAILLMConfig,
    ReplayLLMConfig,
    ScriptedLLMConfig,
    TransformersLLMConfig,
    VLLMBackendConfig,
    VLLMLLMConfig,
    backend_settings,
    shipped_llm_settings,
)
from litseg.llm.backends import BACKENDS, available_backends
from litseg.llm.factory import build_llm, llm_config_from
from litseg.utils.config import ConfigError, from_dict
from litseg.utils.registry import Registry
from tests.conftest import REPO

CONF = REPO / "conf"
BACKEND_FILES = {"embedded": EmbeddedLLMConfig, "openai": OpenAILLMConfig, "transformers": TransformersLLMConfig,
                 "vllm": VLLMLLMConfig, "replay": ReplayLLMConfig, "scripted": ScriptedLLMConfig}


def _compose(entry: str, group: str, option: str) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=entry, overrides=[f"{group}={option}"])
    return OmegaConf.to_container(OmegaConf.select(cfg, group), resolve=False)


def _drift(typed: object, data: dict) -> list[str]:
    out = []
    for f in dataclasses.fields(typed):  # type: ignore[arg-type]
        if f.name not in data or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING):
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if getattr(typed, f.name) != default:
            out.append(f"{f.name}: code {default!r} vs YAML {getattr(typed, f.name)!r}")
    return out


@pytest.mark.parametrize("backend", sorted(BACKEND_FILES))
def test_each_backend_class_defaults_equal_its_yaml(backend: str) -> None:
    data = _compose("annotate", "llm", backend)
    typed = from_dict(LLMConfig, data, "llm")
    assert type(typed) is BACKEND_FILES[backend]
    assert not _drift(typed, data), f"conf/llm/{backend}.yaml vs {type(typed).__name__}"


def test_settings_given_from_python_get_the_rest_from_the_yaml() -> None:
    """The values the issue found drifting (max_retries, max_concurrency, timeout_s, backoff_max_s)
    have one home, conf/llm/<backend>.yaml: a settings class has no copy of them."""
    yaml = OmegaConf.to_container(OmegaConf.load(CONF / "llm" / "openai.yaml"), resolve=False)
    settings = backend_settings(OpenAIBackendConfig, "openai", {"model": "m"})
    for key in ("max_retries", "max_concurrency", "timeout_s", "backoff_max_s", "backoff_base_s",
                "max_retry_after_s", "connect_timeout_s", "load_balancing", "max_tokens_field"):
        assert getattr(settings, key) == yaml[key], key
        assert next(f for f in dataclasses.fields(OpenAIBackendConfig) if f.name == key).default is dataclasses.MISSING
    assert isinstance(settings.timeout_s, float) and settings.base_urls == ["http://127.0.0.1:8000/v1"]
    with pytest.raises(TypeError):
        OpenAIBackendConfig(model="m")  # no second copy to fall back on
    embedded = llm_config_from({"backend": "embedded"})
    assert (embedded.batch_size, embedded.context_window, embedded.cache) == (4, 8192, None)
    vllm = backend_settings(VLLMBackendConfig, "vllm", {"model": "m", "seed": 3})
    assert (vllm.seed, vllm.gpu_memory_utilization, vllm.replica_start_timeout_s) == (3, 0.9, 1800.0)


def test_the_yaml_fills_from_the_environment_and_leaves_required_values_out(monkeypatch) -> None:
    monkeypatch.setenv("LITSEG_OPENAI_BASE_URLS", "http://a:1/v1,http://b:2/v1")
    assert llm_config_from({"backend": "openai", "model": "m"}).base_urls == "http://a:1/v1,http://b:2/v1"
    assert "model" not in shipped_llm_settings("transformers")  # model: ??? is the user's to give
    with pytest.raises(ConfigError, match="model"):
        llm_config_from({"backend": "transformers"})


def test_the_judge_server_composes_the_openai_file() -> None:
    judge = _compose("train", "judge_llm", "server")
    llm = _compose("annotate", "llm", "openai")
    typed = from_dict(LLMConfig, judge, "judge_llm")
    assert isinstance(typed, OpenAILLMConfig)
    own = {"model", "base_urls", "max_concurrency", "timeout_s", "max_retries", "cache"}
    assert {k: v for k, v in judge.items() if k not in own} == {k: v for k, v in llm.items() if k not in own}
    assert (typed.max_concurrency, typed.timeout_s, typed.max_retries) == (64, 120.0, 3)


def test_a_misspelt_backend_setting_fails_with_its_path() -> None:
    with pytest.raises(ConfigError, match=r"llm\.max_retrys"):
        build_llm({"backend": "openai", "model": "m", "base_urls": "http://h:1/v1", "max_retrys": 2})
    with pytest.raises(ConfigError, match=r"llm\.batch_size: expected an integer"):
        build_llm({"backend": "transformers", "model": "/m", "batch_size": "eight"})


def test_one_way_from_config_to_model_and_values_checked_at_build() -> None:
    model = build_llm({"backend": "openai", "model": "m", "base_urls": "http://h:1", "max_retries": 2})
    assert model.config.base_urls == ["http://h:1/v1"] and model.config.max_retries == 2
    assert model.config.backoff_max_s == 60.0  # the YAML's value, not a second copy's
    with pytest.raises(ValueError, match="load_balancing"):
        build_llm({"backend": "openai", "model": "m", "base_urls": "http://h:1", "load_balancing": "random"})


def test_backends_live_in_one_registry() -> None:
    assert isinstance(BACKENDS, Registry)
    assert {"embedded", "transformers", "openai", "vllm", "replay", "scripted"} <= set(available_backends())


def test_typing_a_vllm_section_never_imports_vllm() -> None:
    code = ("import sys; from litseg.llm.factory import llm_config_from; "
            "t = llm_config_from({'backend': 'vllm', 'model': 'M'}); "
            "assert type(t).__name__ == 'VLLMLLMConfig'; "
            "assert 'vllm' not in sys.modules and 'torch' not in sys.modules, 'heavy import'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
