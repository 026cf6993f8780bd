"""The exit code of annotate.py, evaluate.py and train.py, decided in one place, and one line with
exit code 2 for the errors a user can fix.

Every entry's ``cli()`` is the same shape: :func:`check_command_line`, then its ``@hydra.main``
function (defined inside ``cli()``), which runs the entry's task (``task(cfg) ->``
:class:`~litseg.run_result.RunResult`) through a :class:`Jobs` collector and returns the run's
metric to Hydra (and its sweepers), then :meth:`Jobs.exit` once Hydra has returned. The exit code
is the worst of every run's (every job of a ``-m`` sweep), by :func:`worst_exit`:
2 (a run could not start) > 1 (units or books failed) > 3 (trained nothing) > 4 (inputs skipped) > 0,
with one line on stderr naming the runs that did not end with 0 (:func:`exit_line`). Nothing else
in the package exits.

Two places catch known errors. :func:`check_command_line` runs before ``@hydra.main``: it
composes the entry's config with the command line's overrides as Hydra will, and turns what Hydra
would stop with (an option that is not in a config group, ``method=recursve``; a key that is not in
the config, ``method.chunk_sise=5``; an override it cannot read) into one line with the valid
choices and a "did you mean". :func:`run_task` wraps the task itself.

Known errors are the setup errors (:class:`~litseg.errors.SetupError`: a missing input, a
parameter of the wrong type, a model folder or server that is not there, a run directory of
another setup), model errors (:class:`~litseg.llm.base.ChatModelError`), a run directory locked by
another process, a missing mandatory config value and a missing file. A run stopped by one is a
result with :data:`~litseg.run_result.SETUP_EXIT` (the other jobs of a sweep still run); alone, it
is printed as ``error: <message>`` on stderr and the process exits with 2. Everything else (a bug)
keeps its traceback. ``HYDRA_FULL_ERROR=1`` shows the full traceback of known errors too.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from litseg.annotation.store import RunDirLocked
from litseg.errors import SetupError
from litseg.llm.base import ChatModelError
from litseg.run_result import (FAILED_EXIT, INPUTS_SKIPPED_EXIT, OK, SETUP_EXIT, UNTRAINED_EXIT,
                               RunResult)
from litseg.utils.task import hydra_run_dir

#: The exit codes from the worst to the mildest: the worst of an entry's runs is its exit code.
PRECEDENCE = (SETUP_EXIT, FAILED_EXIT, UNTRAINED_EXIT, INPUTS_SKIPPED_EXIT, OK)


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


def run_task(task: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``task(*args, **kwargs)``; a known error becomes :meth:`RunResult.stopped` with its one line
    (and the job's Hydra output folder, when there is one). ``HYDRA_FULL_ERROR=1`` re-raises it."""
    try:
        return task(*args, **kwargs)
    except known_errors() as exc:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        job_dir = hydra_run_dir("")  # Hydra's output folder of the job; "" outside Hydra
        return RunResult.stopped(one_line(exc), run_dir="" if job_dir == Path() else job_dir)


def worst_exit(results: Sequence[RunResult]) -> int:
    """The exit code of an entry's runs: the worst of theirs by :data:`PRECEDENCE` (0 for none; a
    code outside it counts as the worst)."""
    codes = [r.exit_code for r in results]
    return min(codes, key=lambda c: PRECEDENCE.index(c) if c in PRECEDENCE else -1, default=OK)


def exit_line(entry: str, results: Sequence[RunResult]) -> str | None:
    """The one stderr line of an entry's runs that did not end with 0 (None when all did): a run
    stopped alone by a known error is ``error: <message>``; otherwise each run's reason, exit code
    and run folder, after the entry's exit code."""
    failed = [r for r in results if r.exit_code != OK]
    if not failed:
        return None
    if len(results) == 1 and failed[0].exit_code == SETUP_EXIT:
        return f"error: {failed[0].reason}"
    parts = [f"{r.reason or 'failed'} (exit code {r.exit_code})" + (f" in {r.run_dir}" if str(r.run_dir) else "")
             for r in failed]
    if len(results) == 1:
        return f"{entry}: {parts[0]}"
    return (f"{entry}: exit code {worst_exit(results)}: {len(failed)} of {len(results)} runs did not end with 0: "
            + "; ".join(parts))


class Jobs:
    """The results of one command line's runs (one, or every job of a sweep), for its exit code."""

    def __init__(self, entry: str) -> None:
        self.entry = entry
        self.results: list[RunResult] = []

    def run(self, task: Callable[[Any], RunResult], cfg: Any) -> float:
        """One run (one Hydra job): ``task(cfg)`` through :func:`run_task`, its result kept; the
        metric is what the ``@hydra.main`` function returns to Hydra's sweepers."""
        result = run_task(task, cfg)
        self.results.append(result)
        return result.metric

    def exit(self) -> None:
        """After Hydra has returned: the one line of :func:`exit_line` on stderr, and the process
        exits with :func:`worst_exit` of every run (returns when that is 0, so that a caller that
        runs the entry in its own process, ``runpy`` for one, goes on)."""
        line = exit_line(self.entry, self.results)
        if line is not None:
            print(line, file=sys.stderr, flush=True)
        code = worst_exit(self.results)
        if code != OK:
            sys.exit(code)


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
