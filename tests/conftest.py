"""Shared fixtures. Tests never touch the network; data in ../shared is optional."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")

REPO = Path(__file__).resolve().parents[1]

# Every conf/method/<name>.yaml is an option of evaluate.py's chunkers group (Hydra's ConfigStore,
# as evaluate.py registers them), for the tests that compose conf/evaluate.yaml with Hydra directly.
from litseg.rag.config import register_method_chunkers  # noqa: E402 - after the environment above

register_method_chunkers(REPO / "conf")


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` imported as module ``name`` (the scripts are not a package); it is
    registered in ``sys.modules`` first, since dataclasses look their module up while built."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def shared_dir() -> Path | None:
    """``$LITSEG_SHARED_DIR`` or ``../shared`` beside the checkout, if it holds data."""
    cand = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))
    return cand if (cand / "data").is_dir() else None


def shared_data_dir() -> Path:
    """The shared data folder, or skip the calling test with the reason."""
    d = shared_dir()
    if d is None:
        pytest.skip("needs ../shared/data (the project's shared literary texts and benchmarks); "
                    "not present in this checkout - set LITSEG_SHARED_DIR to run it")
    return d / "data"


@pytest.fixture
def shared_data() -> Path:
    return shared_data_dir()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


#: pytest-timeout's limit for tests marked ``slow`` (end-to-end runs with real models, set-up of
#: their module fixtures included); every other test has pyproject's ``timeout``, and any test
#: may set its own with ``@pytest.mark.timeout(N)``.
SLOW_TEST_TIMEOUT = 900


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT))
