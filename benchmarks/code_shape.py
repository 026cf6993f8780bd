"""The shape of src/ that issue 13 sets limits on: modules over 500 lines, functions over 80 lines,
and ``x.get(key, <literal>)`` calls (a default written in code instead of the YAML).

    python benchmarks/code_shape.py                 # totals and every offender
    python benchmarks/code_shape.py src/litseg/rag  # one area
    python benchmarks/code_shape.py --write         # the table in docs/extending.md
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_MODULE, MAX_FUNCTION = 500, 80


def literal_gets(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value is not None):
            lines.append(node.lineno)
    return lines


def measure(root: Path) -> dict:
    modules, functions, gets = [], [], Counter()
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = str(path.relative_to(REPO))
        n = text.count("\n")
        if n > MAX_MODULE:
            modules.append((n, rel))
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION:
                    functions.append((length, f"{rel}:{node.name}"))
        for line in literal_gets(tree):
            gets[rel] += 1
    return {"modules": sorted(modules, reverse=True), "functions": sorted(functions, reverse=True), "gets": gets}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", default=str(REPO / "src"))
    ap.add_argument("--write", action="store_true", help="write the table into docs/extending.md")
    args = ap.parse_args()
    m = measure(Path(args.root).resolve())
    print(f"modules over {MAX_MODULE} lines: {len(m['modules'])}")
    for n, rel in m["modules"]:
        print(f"  {n:5d}  {rel}")
    print(f"functions over {MAX_FUNCTION} lines: {len(m['functions'])}")
    for n, name in m["functions"]:
        print(f"  {n:5d}  {name}")
    print(f".get(key, <literal>) calls: {sum(m['gets'].values())}")
    for rel, n in m["gets"].most_common():
        print(f"  {n:5d}  {rel}")
    if args.write:
        sys.path.insert(0, str(REPO / "src"))
        from litseg.utils.docblocks import write_block

        table = "\n".join([
            "| measure | limit | count |", "|---|---|---|",
            f"| modules in src/ over {MAX_MODULE} lines | 0 | {len(m['modules'])} |",
            f"| functions in src/ over {MAX_FUNCTION} lines | 0 | {len(m['functions'])} |",
            f"| `.get(key, <literal>)` calls in src/ | 0 | {sum(m['gets'].values())} |",
        ])
        write_block(REPO / "docs" / "extending.md", "code_shape", "benchmarks/code_shape.py --write", table)


if __name__ == "__main__":
    main()
