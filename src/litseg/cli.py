"""One line and exit code 2 for the errors a user can fix; shared by annotate.py, evaluate.py and
train.py.

Known errors are the setup errors (:class:`~litseg.errors.SetupError`: a missing input, a
parameter of the wrong type, a model folder or server that is not there, a run directory of
another setup), model errors (:class:`~litseg.llm.base.ChatModelError`), a run directory locked by
another process, a missing mandatory config value and a missing file. They are printed as
``error: <message>`` on stderr and the process exits with :data:`SETUP_EXIT`; everything else
(a bug) keeps its traceback. ``HYDRA_FULL_ERROR=1`` shows the full traceback of known errors too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Exit code of a run stopped by a known error (1 stays "the run ran, some units or books failed").
SETUP_EXIT = 2


def known_errors() -> tuple[type[BaseException], ...]:
    from omegaconf.errors import MissingMandatoryValue

    from litseg.errors import SetupError
    from litseg.llm.base import ChatModelError
    from litseg.annotation.store import RunDirLocked

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
