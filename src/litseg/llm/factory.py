"""Build a :class:`ChatModel` from a plain dict or an OmegaConf node (the ``llm`` config group).

::

    backend: transformers        # embedded | transformers | replay | scripted | openai | vllm | module:attr
    model: path/to/model_dir     # the backend's settings (litseg.llm.config: one class per backend)
    context_window: 8192         # optional: tokens the model reads (preprocess.max_words=auto);
                                 # read by the run, never passed to the backend
    cache:                       # optional response cache around the backend
      enabled: true
      path: .cache/litseg/llm_responses.sqlite
      replay: false              # true: answer from the file only, never load the model

One way from config to model: the section is typed by :class:`~litseg.llm.config.LLMConfig`
(which picks the backend's own class, so a misspelt setting fails with its dotted path), then
``factory.from_config(section)`` builds it. Backends are plug-ins of :data:`litseg.llm.backends.BACKENDS`
(:class:`~litseg.utils.registry.Registry`); the built-in ones are registered lazily, so building
``scripted`` or ``replay`` never imports torch and vLLM is imported only when chosen. A plug-in
backend without a ``config_class`` (``@register_backend("mine")`` on a class taking keywords) gets
its settings as keyword arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from litseg.llm.backends import BackendFactory, get_backend
from litseg.llm.base import ChatModel
from litseg.llm.cache import CachedChatModel, ReplayChatModel
from litseg.llm.config import CacheConfig, LLMConfig, ReplayLLMConfig
from litseg.utils.config import from_dict, to_plain

def _section(config: Mapping[str, Any] | Any) -> dict[str, Any]:
    settings = to_plain(config)
    if not isinstance(settings, Mapping):
        raise TypeError(f"llm config must be a mapping, got {type(settings).__name__}")
    cache = settings.get("cache")
    if isinstance(cache, Mapping):
        known = {f.name for f in dataclasses.fields(CacheConfig)}
        unknown = sorted(set(cache) - known)
        if unknown:
            raise ValueError(f"llm.cache: unknown key(s) {unknown}; known: {sorted(known)}")
    # The YAML files always name the cache; a config written in code may leave it out: no cache.
    return {"cache": None, **settings}


def _plugin(factory: BackendFactory, section: dict[str, Any]) -> tuple[ChatModel, CacheConfig | None]:
    """A backend without a typed config: the cache is typed, its own settings go as keywords."""
    cache = section.pop("cache")
    settings = {k: v for k, v in section.items() if k not in LLMConfig.COMMON}
    typed_cache = from_dict(CacheConfig, cache, "llm.cache") if cache is not None else None
    return factory(**settings), typed_cache


def build_llm(config: Mapping[str, Any] | Any) -> ChatModel:
    """The chat model a config describes, wrapped in the response cache when ``cache.enabled``."""
    section = _section(config)
    backend = section.get("backend")
    factory = get_backend(str(backend)) if backend else None
    if factory is not None and getattr(factory, "config_class", None) is None:
        model, cache = _plugin(factory, section)
    else:
        typed = from_dict(LLMConfig, section, "llm")
        model = factory.from_config(typed)  # type: ignore[union-attr]
        if isinstance(typed, ReplayLLMConfig):  # the cache file is the model
            return model
        cache = typed.cache
    return with_cache(model, cache)


def with_cache(model: ChatModel, cache: CacheConfig | None) -> ChatModel:
    """``model`` behind the response cache ``cache`` describes (or as it is)."""
    if cache is None:
        return model
    if cache.replay:
        # The backend object is only asked for its identity; its weights are never loaded.
        if not cache.path:
            raise ValueError("llm.cache.replay needs llm.cache.path")
        return ReplayChatModel(cache.path, model.identity(), timeout_s=cache.timeout_s)
    enabled = bool(cache.path) if cache.enabled is None else cache.enabled
    if not enabled:
        return model
    if not cache.path:
        raise ValueError("llm.cache.enabled needs llm.cache.path")
    return CachedChatModel(model, cache.path, timeout_s=cache.timeout_s)


build_chat_model = build_llm
