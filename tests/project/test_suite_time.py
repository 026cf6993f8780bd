"""The suite's time limits: pytest-timeout per test (longer for slow tests) and the whole-suite
budget check of benchmarks/suite_time.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from litseg.utils.docblocks import read_blocks, render_block
from tests.conftest import REPO, SLOW_TEST_TIMEOUT, load_benchmark


def _suite_time():
    return load_benchmark("suite_time")


def test_every_test_has_a_time_limit(pytestconfig, request):
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert 0 < float(pytestconfig.getini("timeout")) < SLOW_TEST_TIMEOUT
    assert request.node.get_closest_marker("timeout") is None  # a plain test: the ini value applies


@pytest.mark.slow
def test_slow_tests_get_the_longer_limit(request):
    assert request.node.get_closest_marker("timeout").args == (SLOW_TEST_TIMEOUT,)


@pytest.mark.slow
@pytest.mark.timeout(1234)
def test_a_test_may_set_its_own_limit(request):
    assert request.node.get_closest_marker("timeout").args == (1234,)


def test_a_hung_test_fails_alone_at_its_limit(tmp_path):
    (tmp_path / "test_hang.py").write_text(textwrap.dedent("""
        import time
        def test_hangs():
            time.sleep(60)
        def test_after():
            pass
    """))
    # Only pytest-timeout is loaded (the other installed plugins take long to import on a busy machine).
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "pytest_timeout", "-p", "no:cacheprovider",
                           "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path), "-o", "timeout=2",
                           str(tmp_path / "test_hang.py")], capture_output=True, text=True, timeout=240, check=False,
                          env=env)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "Timeout (>2.0s)" in proc.stdout and "1 failed, 1 passed" in proc.stdout


def test_suite_time_reads_junit_writes_the_block_and_checks_the_budget(tmp_path):
    st = _suite_time()
    junit = tmp_path / "junit.xml"
    junit.write_text("""<?xml version="1.0"?><testsuites><testsuite>
        <testcase classname="tests.test_a" name="test_fast" time="0.5"/>
        <testcase classname="tests.test_a" name="test_slow" time="42.0"/>
        <testcase classname="tests.test_b" name="test_broken" time="1.0"><failure message="x"/></testcase>
        <testcase classname="tests.test_b" name="test_skip" time="0.0"><skipped message="y"/></testcase>
        </testsuite></testsuites>""")
    counts = st.read_junit(junit, top=2)
    assert (counts["tests"], counts["failed"], counts["errors"], counts["skipped"]) == (4, 1, 0, 1)
    assert counts["slowest"] == [("tests.test_a::test_slow", 42.0), ("tests.test_b::test_broken", 1.0)]

    result = st.SuiteTime(wall_s=605.2, returncode=1, load_before=(2.0, 1.5, 1.0), **counts)
    block = st.render_block(result, 720)
    assert "**10 min 05.2 s** wall (605 s), within the budget of 12 min 00.0 s" in block
    assert "4 tests, 2 passed, 1 failed, 0 errors, 1 skipped" in block and "the whole suite (`make test`)" in block
    assert "| `tests.test_a::test_slow` | 42.0 |" in block
    subset = st.render_block(st.SuiteTime(wall_s=800, pytest_args=["tests/test_a.py"]), 720)
    assert "OVER the budget" in subset and "a subset only (`pytest tests/test_a.py`), not `make test`" in subset

    doc = tmp_path / "testing.md"
    doc.write_text(f"intro\n{render_block(st.BLOCK, st.SCRIPT, 'old figure')}\nrest\n")
    st.write_docs(doc, block)
    assert doc.read_text() == f"intro\n{render_block(st.BLOCK, st.SCRIPT, block)}\nrest\n"
    (tmp_path / "other.md").write_text("no block here")
    with pytest.raises(ValueError, match="suite_time"):
        st.write_docs(tmp_path / "other.md", block)
    assert st.BLOCK in read_blocks(REPO / "docs" / "testing.md")

    assert st.exit_code(st.SuiteTime(wall_s=700), 720) == 0
    assert st.exit_code(st.SuiteTime(wall_s=721), 720) == 1  # over budget
    assert st.exit_code(st.SuiteTime(wall_s=100, returncode=1), 720) == 2  # in time, but tests failed
