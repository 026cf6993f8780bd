"""The one place the configs are found (litseg.utils.locations): in a checkout, its top-level conf/
(the installed copy is tests/entries/test_installed_package.py's)."""

from __future__ import annotations

from litseg.utils.locations import PACKAGE_DIR, checkout_root, config_dir
from tests.conftest import REPO


def test_a_checkout_reads_its_own_top_level_conf() -> None:
    assert PACKAGE_DIR == REPO / "src" / "litseg"
    assert checkout_root() == REPO and config_dir() == REPO / "conf"
    assert not (PACKAGE_DIR / "conf").exists()  # no second copy in the checkout: the wheel build makes it
