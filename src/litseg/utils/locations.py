"""Where the configs are: the one place library code and the entries ask.

The checkout's top-level ``conf/`` is the only source of the configs. A wheel carries a copy of it
as ``litseg/conf`` (``setup.py`` copies it in when the wheel is built), because an installed
package has no checkout beside it. Code running from a checkout (``pip install -e .``, as ``make
venv`` installs, or ``PYTHONPATH=src``) reads the checkout's ``conf/`` itself, so an edit there
counts at once and no second copy exists in the checkout.
"""

from __future__ import annotations

import functools
from pathlib import Path

#: The ``litseg`` package folder (``src/litseg`` in a checkout, ``site-packages/litseg`` installed).
PACKAGE_DIR = Path(__file__).resolve().parent.parent
#: A file every config folder holds, to tell a config folder from any folder named ``conf``.
_MARKER = "annotate.yaml"


@functools.cache
def checkout_root() -> Path | None:
    """The litseg checkout this package runs from: the folder holding ``src/litseg`` and the
    top-level ``conf/``; None for an installed package (no checkout around it)."""
    root = PACKAGE_DIR.parent.parent
    if PACKAGE_DIR.parent.name == "src" and (root / "conf" / _MARKER).is_file():
        return root
    return None


@functools.cache
def config_dir() -> Path:
    """The folder of the configs: the checkout's ``conf/`` when running from a checkout, else the
    copy installed with the package (``litseg/conf``)."""
    root = checkout_root()
    if root is not None:
        return root / "conf"
    shipped = PACKAGE_DIR / "conf"
    if (shipped / _MARKER).is_file():
        return shipped
    raise FileNotFoundError(f"no litseg configs: {shipped} is missing and {PACKAGE_DIR} is not inside a checkout "
                            "(reinstall litseg from a wheel or a checkout: pip install .)")
