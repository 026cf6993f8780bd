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
      timeout_s: 60              # SQLite busy timeout

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
from collections.abc import Mapping
from typing import Any

from litseg.llm.backends import backend_option, get_backend
from litseg.llm.base import ChatModel
from litseg.llm.cache import CachedChatModel, ReplayChatModel
from litseg.llm.config import (CacheConfig, LLMConfig, PluginLLMConfig, ReplayLLMConfig, shipped_cache_settings,
                               shipped_llm_settings)
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
    # A section written in code names only what it sets: the backend's other settings are those of
    # its conf/llm file (none for a plug-in), their one home, and so are those of a cache it names
    # in part. The YAML files always name the cache; a config written in code may leave it out: no cache.
    backend = settings.get("backend")
    option = backend_option(backend) if isinstance(backend, str) and backend else None
    shipped = shipped_llm_settings(option) if option else {}
    if option == "replay" and cache is None:  # the cache file is the model: its settings are replay.yaml's
        cache = {}
    if isinstance(cache, Mapping) and option:
        settings = {**settings, "cache": {**shipped_cache_settings(option), **cache}}
    return {"cache": None, **shipped, **settings}


def llm_config_from(config: Any, where: str = "llm") -> LLMConfig | None:
    """An ``llm`` section as its typed config: the backend's own class (``config_class``), or
    :class:`~litseg.llm.config.PluginLLMConfig` for a plug-in taking keywords; None for None; an
    already typed section as it is. The one reader of every llm section (annotate's ``llm``, the
    judge's, evaluate's generation and judge models, a chunker entry's own); the settings a section
    leaves out are those of ``conf/llm/<backend>.yaml``, except ``cache`` (left out: no cache)."""
    if config is None or isinstance(config, LLMConfig):
        return config
    return from_dict(LLMConfig, _section(config), where)


def build_llm(config: Mapping[str, Any] | LLMConfig) -> ChatModel:
    """The chat model a config (a section or its typed config) describes, wrapped in the response
    cache when ``cache.enabled``."""
    typed = llm_config_from(config)
    if typed is None:
        raise TypeError("llm config must be a mapping, got NoneType")
    factory = get_backend(typed.backend)
    if isinstance(typed, PluginLLMConfig):
        return with_cache(factory(**typed.settings()), typed.cache)
    model = factory.from_config(typed)  # type: ignore[attr-defined]
    if isinstance(typed, ReplayLLMConfig):  # the cache file is the model
        return model
    return with_cache(model, typed.cache)


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
