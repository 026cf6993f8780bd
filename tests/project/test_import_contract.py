"""The import graph stays readable: the layers and no-circle contracts of pyproject.toml
(``[tool.importlinter]``) hold for this checkout's ``src/``, the package's own modules are imported
at module top (the few lazy ones say why), and no private name crosses a module boundary."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SRC = REPO / "src"


def _lint_imports() -> str:
    found = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(found).exists():
        pytest.skip("lint-imports is not installed (pip install -e '.[dev]' installs import-linter)")
    return found


def test_import_contract_holds() -> None:
    # The checkout's src/ first on the path: an editable install elsewhere must not be checked instead.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([_lint_imports(), "--no-cache", "--config", str(REPO / "pyproject.toml")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def _own_imports() -> list[tuple[Path, int, ast.ImportFrom | ast.Import, bool]]:
    """Every import of a ``litseg`` module in src/: (file, line, statement, inside a function)."""
    found = []
    for path in sorted((SRC / "litseg").rglob("*.py")):
        package = ".".join(path.relative_to(SRC).with_suffix("").parts[:-1])

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                if isinstance(child, ast.ImportFrom):
                    base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    target = f"{base}.{child.module or ''}".rstrip(".") if child.level else child.module or ""
                    if target.split(".")[0] == "litseg":
                        found.append((path, child.lineno, child, in_function))
                elif isinstance(child, ast.Import) and any(a.name.split(".")[0] == "litseg" for a in child.names):
                    found.append((path, child.lineno, child, in_function))
                visit(child, inside)

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_own_modules_are_imported_at_module_top_unless_a_heavy_dependency_says_why() -> None:
    """An import inside a function hides a dependency from the reader and from the contract's
    reasons; the few left keep torch (or an optional integration) out of light imports, and say so
    in a ``# lazy: ...`` comment on the line or the one above."""
    lazy = [(path, line) for path, line, _, in_function in _own_imports() if in_function]
    assert len(lazy) < 20, f"{len(lazy)} in-function imports of litseg modules"
    unexplained = []
    for path, line in lazy:
        lines = path.read_text(encoding="utf-8").splitlines()
        if "lazy" not in lines[line - 1] and "lazy" not in lines[line - 2]:
            unexplained.append(f"{path.relative_to(REPO)}:{line}")
    assert not unexplained, f"in-function imports without a '# lazy: <why>' comment: {unexplained}"


def test_no_private_name_is_imported_from_another_module() -> None:
    crossing = [f"{path.relative_to(REPO)}:{line} imports {alias.name}"
                for path, line, node, _ in _own_imports() if isinstance(node, ast.ImportFrom)
                for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not crossing, crossing
