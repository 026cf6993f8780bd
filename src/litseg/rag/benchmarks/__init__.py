"""Benchmarks of the RAG evaluation: one registry of loaders, by name.

Each loader is a module of this package registering itself with :func:`benchmark`, which also
records which of its arguments are files or folders (``load_suite`` resolves those against the
shared folder and checks they exist). Adding a benchmark is one new module here plus one
``conf/suite`` YAML naming it in ``loader:``; nothing else imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from litseg.utils.registry import Registry

F = TypeVar("F", bound=Callable[..., Any])

BENCHMARKS: Registry[Callable[..., Any]] = Registry("benchmark", discover=["litseg.rag.benchmarks"])


def benchmark(name: str, *, paths: Sequence[str] = ()) -> Callable[[F], F]:
    """Decorator: ``loader: name`` in a suite calls the decorated loader; ``paths`` names its
    arguments that are files or folders."""

    def deco(fn: F) -> F:
        fn.path_args = tuple(paths)  # type: ignore[attr-defined]
        return BENCHMARKS.register(name)(fn)  # type: ignore[return-value]

    return deco


def load_benchmark(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call the loader registered as ``name`` (``fairytaleqa``, ``literaryqa``, ``gutenqa``,
    ``narrativeqa``, ...)."""
    try:
        loader = BENCHMARKS.get(name.lower())
    except ValueError as exc:
        raise ValueError(str(exc).replace("unknown benchmark", "unknown benchmark", 1)) from None
    return loader(*args, **kwargs)


def resolve_path(value: str, base_dirs: Sequence[Path] = ()) -> str:
    """A relative path as given when it exists from the current directory, else the first
    existing one under ``base_dirs`` (e.g. the repository root), else unchanged."""
    p = Path(value).expanduser()
    if p.is_absolute() or p.exists():
        return str(p)
    for base in base_dirs:
        if (Path(base) / p).exists():
            return str(Path(base) / p)
    return value


def load_benchmark_from_args(name: str, args: Mapping[str, Any], *, base_dirs: Sequence[Path] = (),
                             suite_name: str = "") -> Any:
    """``load_benchmark(name, **args)`` with the loader's path arguments resolved against
    ``base_dirs`` and checked to exist."""
    loader = BENCHMARKS.get(name.lower())
    kwargs = dict(args)
    for key in getattr(loader, "path_args", ()):
        if isinstance(kwargs.get(key), str):
            kwargs[key] = resolve_path(kwargs[key], base_dirs)
            if not Path(kwargs[key]).exists():
                raise FileNotFoundError(f"suite {suite_name}: {key}={kwargs[key]} does not exist "
                                        "(set LITSEG_SHARED_DIR or shared_dir=... to the shared folder)")
    return loader(**kwargs)
