"""Errors a user can fix before a run can start (standard library only, importable anywhere)."""

from __future__ import annotations


class SetupError(Exception):
    """The run cannot start, or go on, as configured: a missing input, a parameter of the wrong
    type, a model folder that is not there, a server that does not answer, a run directory that
    holds another setup.

    The entry scripts (annotate.py, evaluate.py, train.py) print its message as one line and exit
    with code 2 (:mod:`litseg.cli`); chunkers let it through instead of recording it on every unit.
    """


#: ``Completion.error_kind`` of a request the model never saw (connection refused, timeout, HTTP
#: 5xx/429 after the backend's own retries, 401/403/404, a body that is no answer).
UNAVAILABLE = "unavailable"


class ModelUnreachable(RuntimeError):
    """A unit's conversation was cut because the model could not be reached for a try: nothing was
    answered, so the unit is neither retried with feedback nor filled by a fallback. It fails
    with no chunks, the run reports it (exit code 1) and a rerun asks again. ``diagnostics``
    holds the tries made so far (their tokens count)."""

    def __init__(self, message: str, diagnostics: dict | None = None) -> None:
        super().__init__(message)
        self.diagnostics = dict(diagnostics or {})


def is_unavailable(completion: object) -> bool:
    """Whether a completion (anything with ``error`` and ``error_kind``) says the model never saw
    the request."""
    return getattr(completion, "error", None) is not None and getattr(completion, "error_kind", None) == UNAVAILABLE
