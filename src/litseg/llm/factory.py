"""Build a :class:`ChatModel` from a plain dict or an OmegaConf node (the ``llm`` config group).

::

    backend: transformers        # embedded | transformers | replay | scripted | openai | vllm | module:attr
    model: path/to/model_dir     # backend settings, passed to the backend's factory as keywords
    context_window: 8192         # optional: tokens the model reads (preprocess.max_words=auto);
                                 # dropped here, never passed to the backend
    cache:                       # optional response cache around the backend
      enabled: true
      path: .cache/litseg/llm_responses.sqlite
      replay: false              # true: answer from the file only, never load the model

Backends register with ``@register_backend("name")`` on a factory taking the settings as keyword
arguments. The built-in ones are imported only when asked for, so building ``scripted`` or
``replay`` never imports torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from litseg.llm.base import ChatModel

BackendFactory = Callable[..., ChatModel]

_REGISTRY: dict[str, BackendFactory] = {}
# name -> "module:attribute"; imported on first use.
_LAZY: dict[str, str] = {
    "transformers": "litseg.llm.transformers_backend:TransformersChatModel",
    "embedded": "litseg.llm.embedded:build_embedded_chat_model",
    "scripted": "litseg.llm.factory:_build_scripted",
    "replay": "litseg.llm.factory:_build_replay",
    "openai": "litseg.llm.openai_backend:OpenAIChatModel",
    "vllm": "litseg.llm.vllm_backend:VLLMChatModel",
}

_CACHE_KEYS = {"enabled", "path", "replay", "timeout_s"}


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Decorator: ``@register_backend("mine")`` makes ``backend: mine`` build with this factory."""

    def decorate(factory: BackendFactory) -> BackendFactory:
        _REGISTRY[name] = factory
        return factory

    return decorate


def register_lazy_backend(name: str, target: str) -> None:
    """Register ``backend: name`` as ``"package.module:attribute"``, imported on first use."""
    if ":" not in target:
        raise ValueError(f"lazy backend target must look like 'module:attribute', got {target!r}")
    _LAZY[name] = target


def available_backends() -> list[str]:
    return sorted(set(_REGISTRY) | set(_LAZY))


def _import_target(target: str) -> BackendFactory:
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{module_name} has no attribute {attribute!r}") from None


def get_backend(name: str) -> BackendFactory:
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in _LAZY:
        factory = _import_target(_LAZY[name])
        _REGISTRY.setdefault(name, factory)
        return _REGISTRY[name]
    if ":" in name:  # a backend living outside litseg: "my_pkg.my_module:MyChatModel"
        return _import_target(name)
    raise ValueError(f"unknown llm backend {name!r}; available: {', '.join(available_backends())}")


def _to_dict(config: Mapping[str, Any] | Any) -> dict[str, Any]:
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(config, DictConfig):
            return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type]
    except ImportError:
        pass
    if not isinstance(config, Mapping):
        raise TypeError(f"llm config must be a mapping, got {type(config).__name__}")
    return dict(config)


def _build_scripted(answers: list[str] | None = None, **settings: Any) -> ChatModel:
    from litseg.llm.testing import ScriptedChatModel

    if not answers:
        raise ValueError("scripted backend: give a non-empty list of answers")
    return ScriptedChatModel(list(answers), **settings)


def _build_replay(path: str | None = None, identity: dict[str, Any] | None = None,
                  timeout_s: float = 60.0) -> ChatModel:
    from litseg.llm.cache import ReplayChatModel

    if not path:
        raise ValueError("replay backend: set cache.path (or path) to the recorded response cache")
    return ReplayChatModel(path, identity, timeout_s=timeout_s)


def build_llm(config: Mapping[str, Any] | Any) -> ChatModel:
    """The chat model a config describes, wrapped in the response cache when ``cache.enabled``."""
    settings = _to_dict(config)
    backend = settings.pop("backend", None)
    if not backend:
        raise ValueError(f"llm config needs a backend; available: {', '.join(available_backends())}")
    cache = settings.pop("cache", None) or {}
    # Read by the run, not the backend: the window preprocess.max_words=auto sizes units to.
    settings.pop("context_window", None)
    if not isinstance(cache, Mapping):
        raise TypeError(f"llm.cache must be a mapping, got {type(cache).__name__}")
    unknown_cache = sorted(set(cache) - _CACHE_KEYS)
    if unknown_cache:
        raise ValueError(f"llm.cache: unknown key(s) {unknown_cache}; known: {sorted(_CACHE_KEYS)}")
    cache_path = cache.get("path")
    timeout_s = float(cache.get("timeout_s", 60.0))

    if backend == "replay":
        settings.setdefault("path", cache_path)
        return _build_replay(**settings, timeout_s=timeout_s)

    model = get_backend(backend)(**settings)
    if cache.get("replay"):
        # The backend object is only asked for its identity; its weights are never loaded.
        from litseg.llm.cache import ReplayChatModel

        if not cache_path:
            raise ValueError("llm.cache.replay needs llm.cache.path")
        return ReplayChatModel(cache_path, model.identity(), timeout_s=timeout_s)
    if cache.get("enabled", bool(cache_path)):
        if not cache_path:
            raise ValueError("llm.cache.enabled needs llm.cache.path")
        from litseg.llm.cache import CachedChatModel

        return CachedChatModel(model, cache_path, timeout_s=timeout_s)
    return model


build_chat_model = build_llm
