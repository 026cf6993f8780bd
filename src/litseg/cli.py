"""One line and exit code 2 for the errors a user can fix; shared by annotate.py, evaluate.py and
train.py.

Two places catch them. :func:`check_command_line` runs before ``@hydra.main``: it composes the
entry's config with the command line's overrides as Hydra will, and turns what Hydra would stop
with (an option that is not in a config group, ``method=recursve``; a key that is not in the
config, ``method.chunk_sise=5``; an override it cannot read) into one line with the valid
choices and a "did you mean". :func:`run_entry` wraps the task itself.

Known errors are the setup errors (:class:`~litseg.errors.SetupError`: a missing input, a
parameter of the wrong type, a model folder or server that is not there, a run directory of
another setup), model errors (:class:`~litseg.llm.base.ChatModelError`), a run directory locked by
another process, a missing mandatory config value and a missing file. They are printed as
``error: <message>`` on stderr and the process exits with :data:`SETUP_EXIT`; everything else
(a bug) keeps its traceback. ``HYDRA_FULL_ERROR=1`` shows the full traceback of known errors too.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from litseg.annotation.store import RunDirLocked
from litseg.errors import SetupError
from litseg.llm.base import ChatModelError

T = TypeVar("T")

#: Exit code of a run stopped by a known error (1 stays "the run ran, some units or books failed").
SETUP_EXIT = 2


def known_errors() -> tuple[type[BaseException], ...]:
    from omegaconf.errors import MissingMandatoryValue

    return (SetupError, ChatModelError, RunDirLocked, MissingMandatoryValue, FileNotFoundError)


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (a missing config value named as a command-line fix)."""
    from omegaconf.errors import MissingMandatoryValue

    if isinstance(exc, MissingMandatoryValue):
        key = getattr(exc, "full_key", None) or str(exc).splitlines()[0].rsplit(":", 1)[-1].strip()
        return f"{key} is missing: give it on the command line ({key}=...)"
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def run_entry(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)``; a known error becomes one line on stderr and exit code 2."""
    try:
        return function(*args, **kwargs)
    except known_errors() as exc:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {one_line(exc)}", file=sys.stderr, flush=True)
        raise SystemExit(SETUP_EXIT) from None


# --------------------------------------------------------------------------------------------
# Before @hydra.main: the command line's overrides against the entry's config

#: Command-line flags of Hydra's own (--cfg, --help, -cn, ...) leave the command line to Hydra.
_MULTIRUN_FLAGS = ("-m", "--multirun")
#: At most this many compositions check a multirun's sweeps (each value of each sweep once).
_MAX_SWEEP_CHECKS = 32


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    """``"; did you mean X?"`` for the closest of ``choices`` to ``name``, else ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def check_command_line(config_dir: str | Path, config_name: str, argv: Sequence[str] | None = None) -> None:
    """Compose ``config_name`` with the overrides of ``argv`` (default: the command line) the way
    ``@hydra.main`` will; a mistake Hydra would report with its own text and exit code 1 is
    printed as ``error: <one line>`` and the process exits with :data:`SETUP_EXIT`.
    ``HYDRA_FULL_ERROR=1`` and Hydra's own flags (``--cfg``, ``--help``, ...) skip the check."""
    message = command_line_error(config_dir, config_name, sys.argv[1:] if argv is None else argv)
    if message is not None:
        print(f"error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(SETUP_EXIT)


def command_line_error(config_dir: str | Path, config_name: str, argv: Sequence[str]) -> str | None:
    """The one-line message for the first mistake in ``argv``'s overrides, or None."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        return None
    if any(a.startswith("-") and a not in _MULTIRUN_FLAGS for a in argv):
        return None
    overrides = [a for a in argv if not a.startswith("-")]
    try:
        for attempt in _compositions(overrides, multirun=any(a in _MULTIRUN_FLAGS for a in argv)):
            _compose(config_dir, config_name, attempt)
    except (HydraException, OmegaConfBaseException) as exc:
        return describe_config_error(exc, Path(config_dir))
    return None


def _compositions(overrides: list[str], *, multirun: bool) -> Iterator[list[str]]:
    """The override lists to compose: the command line itself, or for a multirun its first job
    and then each other value of each sweep in turn (Hydra's sweepers try them all; a sweep that
    cannot be listed, such as an interval for Optuna, is left to the sweeper)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not multirun:
        yield overrides
        return
    candidates: list[list[str]] = []  # per override: the lines it stands for, first job's first
    for o in OverridesParser.create().parse_overrides(overrides):
        if not o.is_sweep_override():
            candidates.append([o.input_line])
        elif o.is_discrete_sweep() and (values := list(o.sweep_string_iterator())):
            candidates.append([f"{o.get_key_element()}={v}" for v in values])
    first = [lines[0] for lines in candidates]
    yield first
    others = [first[:i] + [line] + first[i + 1:] for i, lines in enumerate(candidates) for line in lines[1:]]
    yield from others[: _MAX_SWEEP_CHECKS - 1]


def _compose(config_dir: str | Path, config_name: str, overrides: list[str]) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
        compose(config_name, overrides=overrides)


def describe_config_error(exc: BaseException, config_dir: Path) -> str:
    """One line for a composition error: an unknown group option with the group's options, an
    unknown key with the keys beside it, anything else as Hydra words it, on one line."""
    from hydra.errors import MissingConfigException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = exc.__cause__
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file and "/" in exc.missing_cfg_file:
        group, name = exc.missing_cfg_file.rsplit("/", 1)
        options = list(exc.options or group_options(config_dir, group))
        return (f"{group}: no option {name!r} in conf/{group}/{did_you_mean(name, options)} "
                f"Choices: {', '.join(options)}")
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and getattr(cause, "full_key", None):
        return _unknown_key(str(cause.full_key), getattr(cause, "parent_node", None))
    return " ".join(str(exc).split())


def _unknown_key(full_key: str, parent: Any) -> str:
    where, _, name = full_key.rpartition(".")
    known = sorted(str(k) for k in parent.keys() if k != "hydra") if hasattr(parent, "keys") else []
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {where + '.' if where else ''}{close[0]}?" if close else ""
    listed = f"known under {where or 'the root'}: {', '.join(known)}; " if known else ""
    return f"{full_key}: no such setting{hint} ({listed}+{full_key}=... adds a key the config does not have)"


def group_options(config_dir: Path, group: str) -> list[str]:
    """The options of a config group: the YAML files in ``conf/<group>/`` and the entries Hydra's
    ConfigStore holds for it (evaluate.py's chunkers: every method)."""
    from hydra.core.config_store import ConfigStore

    try:
        stored = [Path(name).stem for name in ConfigStore.instance().list(group)]
    except OSError:  # ConfigStore.list raises when it holds nothing under that group
        stored = []
    return sorted({p.stem for p in (config_dir / group).glob("*.yaml")} | set(stored))
