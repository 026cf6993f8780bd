"""benchmarks/gpu_check.py --dry-run: on a CPU, every config the GPU check would use composes, the
judge server it starts answers a judgement, and the transformers backend answers its two requests
(CI runs this; the GPU run itself is `make gpu-check`, docs/training.md)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

CHECKS = ["env", "transformers", "train", "grpo-judge", "zero3", "zero2", "vllm", "vllm-grpo"]


def test_the_dry_run_prepares_every_check_and_passes(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--dry-run", "--work", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("gpu-check: ")]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [line.split()[1] for line in lines[1:-1]] == CHECKS  # one line per check, in order
    assert all(line.split()[2] == "PASS" for line in lines[1:-1]), "\n".join(lines)
    assert lines[-1].startswith(f"gpu-check: {len(CHECKS)} passed, 0 failed")


def test_the_dry_run_cannot_write_the_docs(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--dry-run", "--write", "--work",
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "a dry run proves nothing about a GPU" in proc.stderr
