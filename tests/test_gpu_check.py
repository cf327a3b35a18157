"""benchmarks/gpu_check.sh stays runnable without a GPU: ``--dry-run`` runs every part on CPU at the
smallest size (gloo instead of NCCL, no engine) and prints one pass/fail line per part."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_dry_run_passes_on_cpu(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = {ln.split()[1]: ln.split()[0] for ln in lines[:-1]}
    assert status == {
        "install": "SKIP",
        "fixture": "PASS",
        "sample": "PASS",
        "fsdp": "PASS",
        "sync": "PASS",
        "grpo": "PASS",
    }
    assert lines[-1].startswith("gpu_check: 0 failed")


def test_gpu_check_reports_a_failing_part(tmp_path):
    """A part that fails prints FAIL with its last log line, and the exit status counts it."""
    env = {**os.environ, "PYTHON": str(tmp_path / "nopython"), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 5 and proc.stdout.count("FAIL ") == 5
