"""Build hook only (the project's metadata is in pyproject.toml): a wheel carries the checkout's
top-level conf/ as litseg/conf, so that an installed package composes its own configs
(litseg.utils.locations.config_dir). conf/ stays where the project keeps it, the only copy in the
checkout; an editable install copies nothing, since code run from the checkout reads conf/ there."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONF = Path(__file__).resolve().parent / "conf"


class BuildPyWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "litseg" / "conf"
        shutil.rmtree(target, ignore_errors=True)  # a stale build folder must not keep removed configs
        shutil.copytree(CONF, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithConfigs})
