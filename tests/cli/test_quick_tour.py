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
# a few dozen of the tasks the README samples, and one training step of 4 groups of 4
_FIRST_40 = "task_id IN (SELECT task_id FROM tasks WHERE {where} ORDER BY task_id LIMIT 40)"
_SMALL = {"train": ["--steps", "1", "--prompts-per-step", "4", "--n", "4"]}


def _small(argv: list[str]) -> list[str]:
    """``argv`` with its size flags: ``sample`` keeps the README's own --where, on 40 of its tasks."""
    if argv[0] != "sample":
        return [*argv, *_SMALL.get(argv[0], [])]
    out, where = list(argv), "true"
    if "--where" in out:
        i = out.index("--where")
        where = out.pop(i + 1)
        out.pop(i)
    return [*out, "--where", f"({where}) AND " + _FIRST_40.format(where=where)]


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
    errs = {}
    for argv in cmds:
        full = [RLDATA, *_small(argv)]
        r = subprocess.run(
            full, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        assert r.returncode == 0, f"rldata {shlex.join(argv)} failed:\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr
        errs.setdefault(argv[0], r.stderr)
    # the bundled model gets the tasks it can read: no prompt too long, no verifier error
    assert "prompt longer than the engine's context" not in errs["sample"]
    assert re.search(r"verifier errors 0\b", errs["sample"]), errs["sample"]
    # progress in a log: the stages as they start and one final line each; Ray's start-up notice is not printed
    assert "loading the bundled model on" in errs["sample"] and "sampling: 40/40 tasks in" in errs["sample"]
    assert "Token authentication is enabled" not in errs["sample"] + errs["train"]
    assert re.search(r"train first: tiny-arith@\w+, 1 step x 4 prompts x 4 samples, sync;", errs["train"])
    assert "training: 1/1 steps in" in errs["train"]
    assert (tmp_path / "buckets.yaml").is_file() and list((tmp_path / "band").glob("*.parquet"))
    assert (tmp_path / "report").is_dir()
