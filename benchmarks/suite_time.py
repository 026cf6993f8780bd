"""How long the test suite takes: the check that `make test` stays within its budget (12 minutes on
the project's 2-core machine).

Runs the suite as `make test` does (``python -m pytest -q``, the Makefile's environment: one
thread, offline), with pytest's durations report and a JUnit XML file, and measures the wall time.
Prints the total, the counts and the slowest tests; ``--write`` writes them into the generated block
``suite_time`` of docs/testing.md (``--docs`` names another file holding that block). Exits 1 when the wall time is over ``--budget`` seconds, 2 when tests failed (the figure
is still written), else 0.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/suite_time.py --write          # the whole suite, into the docs
    .venv/bin/python benchmarks/suite_time.py -- tests/segmentation              # a subset: pytest arguments after --

A subset is labelled as such in the block; only a run of the whole suite speaks for `make test`.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.utils.docblocks import read_blocks, write_block  # noqa: E402

DOCS = REPO / "docs" / "testing.md"
BLOCK, SCRIPT = "suite_time", "benchmarks/suite_time.py --write"
BUDGET_S = 12 * 60
#: The Makefile's exported environment for `make test`.
MAKE_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}


@dataclass
class SuiteTime:
    wall_s: float
    tests: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    slowest: list[tuple[str, float]] = field(default_factory=list)  # (test id, seconds incl. set-up)
    pytest_args: list[str] = field(default_factory=list)
    returncode: int = 0
    load_before: tuple[float, float, float] | None = None

    @property
    def passed(self) -> int:
        return self.tests - self.failed - self.errors - self.skipped


def read_junit(path: Path, top: int = 10) -> dict:
    """Counts and the slowest test cases of a pytest JUnit XML report (times include set-up)."""
    root = ET.parse(path).getroot()
    cases = list(root.iter("testcase"))
    failed = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    timed = sorted(((f"{c.get('classname', '')}::{c.get('name', '')}", float(c.get("time") or 0.0)) for c in cases),
                   key=lambda t: -t[1])
    return {"tests": len(cases), "failed": failed, "errors": errors, "skipped": skipped, "slowest": timed[:top]}


def run_suite(pytest_args: list[str], *, python: str = sys.executable, top: int = 10) -> SuiteTime:
    env = {**os.environ, **MAKE_ENV}
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryDirectory(prefix="litseg-suite-time-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [python, "-m", "pytest", "-q", "--durations=15", f"--junitxml={junit}", *pytest_args]
        print("running:", " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, env=env, check=False)
        wall = time.perf_counter() - t0
        counts = read_junit(junit, top) if junit.is_file() else {}
    return SuiteTime(wall_s=wall, pytest_args=list(pytest_args), returncode=proc.returncode, load_before=load,
                     **counts)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def render_block(result: SuiteTime, budget_s: float) -> str:
    scope = "the whole suite (`make test`)" if not result.pytest_args else \
        f"a subset only (`pytest {' '.join(result.pytest_args)}`), not `make test`"
    verdict = "within" if result.wall_s <= budget_s else "OVER"
    load = ", ".join(f"{x:.1f}" for x in result.load_before) if result.load_before else "unknown"
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPU cores ({platform.machine()}, Python "
        f"{platform.python_version()}), load average before the run {load}; scope: {scope}.",
        "",
        f"**{_minutes(result.wall_s)}** wall ({result.wall_s:.0f} s), {verdict} the budget of "
        f"{_minutes(budget_s)}: {result.tests} tests, {result.passed} passed, {result.failed} failed, "
        f"{result.errors} errors, {result.skipped} skipped.",
        "",
        "| slowest tests (set-up included) | seconds |",
        "|---|---:|",
        *(f"| `{name}` | {seconds:.1f} |" for name, seconds in result.slowest),
    ]
    return "\n".join(lines)


def write_docs(doc: Path, block: str) -> None:
    """Put ``block`` into the ``suite_time`` block of ``doc``; a file without that block is refused
    (``--docs`` pointing at the wrong file)."""
    if BLOCK not in read_blocks(doc):
        raise ValueError(f"{doc} has no generated {BLOCK} block to replace")
    write_block(doc, BLOCK, SCRIPT, block)


def exit_code(result: SuiteTime, budget_s: float) -> int:
    if result.wall_s > budget_s:
        return 1
    return 2 if result.returncode != 0 else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds (default 720: 12 minutes)")
    parser.add_argument("--docs", type=Path, default=DOCS, help="file holding the suite_time block")
    parser.add_argument("--write", action="store_true", help="write the figure into --docs")
    parser.add_argument("--no-docs", action="store_true", help=argparse.SUPPRESS)  # old flag: print only is the default
    parser.add_argument("--top", type=int, default=10, help="slowest tests listed")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest arguments (a subset); none: the whole suite")
    args = parser.parse_args(argv)

    result = run_suite(args.pytest_args, top=args.top)
    block = render_block(result, args.budget)
    print("\n" + block)
    if args.write:
        write_docs(args.docs, block)
        print(f"\nwritten to {args.docs}")
    code = exit_code(result, args.budget)
    if code == 1:
        print(f"\nOVER BUDGET: {result.wall_s:.0f} s > {args.budget:.0f} s", file=sys.stderr)
    elif code == 2:
        print(f"\npytest exited {result.returncode}: tests failed", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
