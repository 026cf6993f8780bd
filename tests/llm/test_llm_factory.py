"""Building chat models from configs: registry, cache wrapping, replay, the conf/llm files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from litseg.llm.base import ChatModel, ChatModelError, ChatRequest, Completion
from litseg.llm.cache import CachedChatModel, CacheMiss, ReplayChatModel
from litseg.llm.backends import available_backends, register_backend
from litseg.llm.factory import build_llm
from litseg.llm.testing import ScriptedChatModel
from tests.conftest import REPO


def req(text: str = "hi") -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}])


def test_scripted_backend_without_cache() -> None:
    model = build_llm({"backend": "scripted", "answers": ["a", "b"]})
    assert isinstance(model, ScriptedChatModel)
    assert [model.chat(req()).text for _ in range(2)] == ["a", "b"]


def test_cache_wraps_the_backend_and_accepts_omegaconf(tmp_path: Path) -> None:
    cfg = OmegaConf.create({"backend": "scripted", "answers": ["x"],
                            "cache": {"enabled": True, "path": str(tmp_path / "c.sqlite")}})
    model = build_llm(cfg)
    assert isinstance(model, CachedChatModel)
    assert model.chat(req()).text == "x"
    assert model.chat(req()).from_cache  # the single scripted answer is not asked for twice


def test_disabled_cache_is_not_used(tmp_path: Path) -> None:
    model = build_llm({"backend": "scripted", "answers": ["x"],
                       "cache": {"enabled": False, "path": str(tmp_path / "c.sqlite")}})
    assert isinstance(model, ScriptedChatModel)
    assert not (tmp_path / "c.sqlite").exists()


def test_replay_backend_and_replay_flag(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    recorder = build_llm({"backend": "scripted", "answers": ["recorded"], "cache": {"path": path}})
    recorder.chat(req())
    replay = build_llm({"backend": "replay", "cache": {"path": path}})
    assert isinstance(replay, ReplayChatModel) and replay.chat(req()).text == "recorded"
    # replay: true rebuilds the identity from the recorded model's own config
    flagged = build_llm({"backend": "scripted", "answers": ["recorded"], "cache": {"path": path, "replay": True}})
    assert flagged.chat(req()).from_cache
    with pytest.raises(CacheMiss):
        flagged.chat(req("new question"))


def test_replay_flag_never_loads_transformers_weights(tmp_path: Path) -> None:
    """The model path does not exist: only the identity is computed, so nothing fails to load."""
    pytest.importorskip("transformers")
    settings = {"backend": "transformers", "model": str(tmp_path / "no-such-model"), "dtype": "float32"}
    recorded_identity = build_llm(settings).identity()

    class Recorded(ScriptedChatModel):  # plays the transformers model while recording
        def identity(self) -> dict:
            return recorded_identity

    CachedChatModel(Recorded(["from the past"]), tmp_path / "c.sqlite").chat(req())
    replay = build_llm({**settings, "cache": {"path": str(tmp_path / "c.sqlite"), "replay": True}})
    assert replay.chat(req()).text == "from the past"


def test_registry_accepts_new_backends() -> None:
    @register_backend("constant-test")
    class Constant(ChatModel):
        def __init__(self, text: str) -> None:
            self.text = text

        def chat(self, request: ChatRequest) -> Completion:
            return Completion(text=self.text)

    assert "constant-test" in available_backends()
    assert build_llm({"backend": "constant-test", "text": "k"}).chat(req()).text == "k"


def test_module_attribute_backend() -> None:
    model = build_llm({"backend": "litseg.llm.testing:ScriptedChatModel", "answers": ["m"]})
    assert model.chat(req()).text == "m"


@pytest.mark.parametrize("cfg, message", [
    ({"backend": "nope"}, "unknown llm backend 'nope'"),
    ({}, "needs a backend"),
    ({"backend": "scripted", "answers": ["a"], "cache": {"path": "x", "colour": 1}}, "unknown key"),
    ({"backend": "scripted", "answers": ["a"], "cache": {"enabled": True}}, "needs llm.cache.path"),
    ({"backend": "replay", "cache": {"path": "missing.sqlite"}}, "nothing to replay"),
    ({"backend": "scripted"}, "non-empty list of answers"),
])
def test_bad_configs_fail_clearly(cfg: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError, ChatModelError), match=message):
        build_llm(cfg)


def test_building_cheap_backends_imports_no_torch() -> None:
    code = ("import sys; from litseg.llm.factory import build_llm; "
            "m = build_llm({'backend': 'scripted', 'answers': ['a']}); m.chat.__call__; "
            "import litseg.llm.cache, litseg.llm.embedded; "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy import'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("name", ["embedded", "transformers", "replay"])
def test_conf_llm_files_are_documented_and_resolve(name: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = REPO / "conf" / "llm" / f"{name}.yaml"
    text = path.read_text()
    assert text.startswith("#") and f"llm={name}" in text.splitlines()[1]
    monkeypatch.setenv("LITSEG_LLM_CACHE", str(tmp_path / "c.sqlite"))
    cfg = OmegaConf.load(path)
    if name == "transformers":
        cfg.model = str(tmp_path / "model")
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["cache"]["path"] == str(tmp_path / "c.sqlite")
    if name == "replay":
        CachedChatModel(ScriptedChatModel(["r"]), tmp_path / "c.sqlite").chat(req())
        assert build_llm(cfg).chat(req()).text == "r"
    elif name == "transformers" or _embedded_installed():
        model = build_llm(cfg)  # cheap: weights load on the first chat
        assert isinstance(model, CachedChatModel)
        assert model.identity()["backend"] == "transformers"


def _embedded_installed() -> bool:
    from litseg.llm.embedded import embedded_model_available

    return embedded_model_available()
