"""The registry of LLM backends (``llm.backend: <name>``), by name.

Its own module, below both :mod:`litseg.llm.config` (whose ``llm`` section picks the backend's
config class by name) and :mod:`litseg.llm.factory` (which builds the model): the built-in
backends are registered as ``"module:attribute"`` strings and imported on first use, so that
building ``scripted`` or ``replay`` never imports torch and vLLM is imported only when chosen.
"""

from __future__ import annotations

from collections.abc import Callable

from litseg.llm.base import ChatModel
from litseg.utils.registry import Registry

BackendFactory = Callable[..., ChatModel]

BACKENDS: Registry[BackendFactory] = Registry("llm backend")
BUILT_IN_BACKENDS = {
    "transformers": "litseg.llm.transformers_backend:TransformersChatModel",
    "embedded": "litseg.llm.embedded:EmbeddedChatModel",
    "scripted": "litseg.llm.testing:ScriptedChatModel",
    "replay": "litseg.llm.cache:ReplayChatModel",
    "openai": "litseg.llm.openai_backend:OpenAIChatModel",
    "vllm": "litseg.llm.vllm_backend:VLLMChatModel",  # the vllm package itself loads with the engine
}
for _name, _target in BUILT_IN_BACKENDS.items():
    BACKENDS.register_lazy(_name, _target)


def backend_option(backend: str) -> str:
    """The name of ``backend`` in ``conf/llm`` (where its settings have their home): a built-in
    backend named as ``"module:attribute"`` is its registered name, any other is itself."""
    return next((name for name, target in BUILT_IN_BACKENDS.items() if target == backend), backend)


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Decorator: ``@register_backend("mine")`` makes ``backend: mine`` build with this factory."""
    return BACKENDS.register(name)


def register_lazy_backend(name: str, target: str) -> None:
    """Register ``backend: name`` as ``"package.module:attribute"``, imported on first use."""
    BACKENDS.register_lazy(name, target)


def available_backends() -> list[str]:
    return BACKENDS.names()


def get_backend(name: str) -> BackendFactory:
    """The factory of ``backend: name`` (a ``"module:attribute"`` name is imported as such)."""
    return BACKENDS.get(name)
