"""The README's quick tour, run as written (commands read from README.md) on a fresh store.

Only size flags are appended (fewer tasks, one small training step): the commands themselves are the
README's, so a tour that stops working fails here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

README = Path(__file__).resolve().parents[2] / "README.md"
RLDATA = str(Path(sys.executable).parent / "rldata")
# a few dozen tasks (task ids are hashes: a mix of arith and GSM8K, whose long prompts exceed the
# default context and must be recorded, not fatal) and one training step of 4 groups of 4
_SMALL = {
    "sample": ["--where", "task_id IN (SELECT task_id FROM tasks ORDER BY task_id LIMIT 40)"],
    "train": ["--steps", "1", "--prompts-per-step", "4", "--n", "4"],
}


def tour_commands() -> list[list[str]]:
    text = README.read_text()
    block = re.search(r"## Quick tour\s+```bash\n(.*?)```", text, re.DOTALL).group(1)
    cmds = []
    for line in block.splitlines():
        argv = shlex.split(line, comments=True)
        if argv and argv[0] == "rldata":
            cmds.append(argv[1:])
    return cmds


def test_readme_quick_tour_runs_in_order(tmp_path):
    cmds = tour_commands()
    assert [c[0] for c in cmds][:3] == ["ingest", "ingest", "tables"] and len(cmds) >= 10
    env = {
        **os.environ,
        "RLDATA_STORE": str(tmp_path / "rldata-store"),
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }
    env.pop("RAY_ADDRESS", None)
    for argv in cmds:
        full = [RLDATA, *argv, *_SMALL.get(argv[0], [])]
        r = subprocess.run(
            full, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        assert r.returncode == 0, f"rldata {shlex.join(argv)} failed:\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr
    assert (tmp_path / "buckets.yaml").is_file() and list((tmp_path / "band").glob("*.parquet"))
    assert (tmp_path / "report").is_dir()
