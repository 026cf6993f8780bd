"""The install stays consistent: pyproject extras, the Makefile's CPU install and environment.yml."""

from __future__ import annotations

import re
import sys
import tomllib

from tests.conftest import REPO


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def makefile_extras() -> set[str]:
    m = re.search(r"^EXTRAS \?= (.+)$", (REPO / "Makefile").read_text(), re.M)
    assert m, "Makefile defines EXTRAS"
    return set(m.group(1).strip().split(","))


def test_makefile_installs_existing_extras_and_never_vllm() -> None:
    extras = set(pyproject()["project"]["optional-dependencies"])
    used = makefile_extras()
    assert used <= extras
    # vLLM is CUDA-only: never part of the CPU install.
    assert "vllm" not in used
    for name in used:
        deps = " ".join(pyproject()["project"]["optional-dependencies"][name])
        assert "vllm" not in deps and "deepspeed" not in deps


def test_environment_yml_names_only_known_extras() -> None:
    text = (REPO / "environment.yml").read_text()
    m = re.search(r"-e \.\[([a-z,_-]+)\]", text)
    assert m, "environment.yml installs the project with extras"
    assert set(m.group(1).split(",")) <= set(pyproject()["project"]["optional-dependencies"])
    assert "vllm" in m.group(1)  # the GPU environment gets the serving extra


def test_core_imports_without_torch() -> None:
    # The core and the annotate pipeline for non-LLM chunkers never pull in torch.
    import subprocess

    code = ("import sys, litseg.segmentation.preprocess, litseg.segmentation.reconstruct, "
            "litseg.segmentation.runner, litseg.chunkers, litseg.annotation.annotate, litseg.llm.factory; "
            "litseg.chunkers.available(); "
            "bad = [m for m in ('torch', 'transformers', 'trl', 'vllm') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
