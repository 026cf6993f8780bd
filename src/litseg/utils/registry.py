"""One pattern for every plug-in point: chunkers, LLM backends, rewards, benchmarks, vector stores.

A :class:`Registry` maps a config name to a factory. Factories register themselves with the
``@REGISTRY.register("name")`` decorator in their own module; the registry imports every module
of its ``discover`` packages on first lookup, so adding a plug-in is one new module (plus its
config file) and never an import line elsewhere. ``"package.module:attribute"`` names a factory
outside litseg, imported on first use, and :meth:`Registry.register_lazy` does the same for
built-ins whose imports are heavy (a CUDA-only backend is imported only when chosen).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from litseg.errors import SetupError

F = TypeVar("F", bound=Callable[..., object])


class UnknownPluginError(SetupError, ValueError):
    """A config names a plug-in that is not registered (the message lists those that are)."""


def import_target(target: str) -> Callable[..., object]:
    """The attribute named by ``"package.module:attribute"``."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"a plug-in target must look like 'package.module:attribute', got {target!r}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{module_name} has no attribute {attribute!r}") from None


class Registry(Generic[F]):
    """Names -> factories of one kind (``kind`` is used in messages)."""

    def __init__(self, kind: str, discover: Iterable[str] = (), skip: Iterable[str] = ()) -> None:
        self.kind = kind
        self._factories: dict[str, F] = {}
        self._lazy: dict[str, str] = {}
        self._discover = tuple(discover)
        self._skip = tuple(skip)
        self._discovered = False

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator: ``kind: name`` in a config builds with the decorated factory."""

        def deco(factory: F) -> F:
            known = self._factories.get(name)
            if known is not None and known is not factory:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._factories[name] = factory
            return factory

        return deco

    def register_lazy(self, name: str, target: str) -> None:
        """``name`` builds with ``"package.module:attribute"``, imported on first use."""
        if ":" not in target:
            raise ValueError(f"lazy {self.kind} target must look like 'module:attribute', got {target!r}")
        self._lazy[name] = target

    def _discover_all(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        for package_name in self._discover:
            package = importlib.import_module(package_name)
            for info in pkgutil.iter_modules(package.__path__, package_name + "."):
                if info.name not in self._skip:
                    importlib.import_module(info.name)

    def names(self) -> list[str]:
        self._discover_all()
        return sorted(set(self._factories) | set(self._lazy))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def get(self, name: str) -> F:
        """The factory for ``name``; a ``module:attribute`` name is imported as such."""
        if name not in self._factories and name not in self._lazy:
            self._discover_all()
        if name in self._factories:
            return self._factories[name]
        if name in self._lazy:
            factory = import_target(self._lazy[name])
            self._factories.setdefault(name, factory)  # type: ignore[arg-type]
            return self._factories[name]
        if ":" in name:
            return import_target(name)  # type: ignore[return-value]
        raise UnknownPluginError(f"unknown {self.kind} {name!r}; available: {', '.join(self.names())}")
