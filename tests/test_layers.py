"""The layer contracts of pyproject.toml ([tool.importlinter], docs/contributing.md), run as CI runs them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "lint-imports"


def _lint(src: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    if src is not None:
        env["RLDATA_SRC"] = str(src)
    return subprocess.run([str(SCRIPT)], check=False, env=env, capture_output=True, text=True, timeout=300)


def test_the_tree_keeps_the_layer_contracts():
    got = _lint()
    assert got.returncode == 0, got.stdout + got.stderr
    assert "2 kept, 0 broken" in got.stdout


def _copy_with(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the checkout's code with ``line`` appended to rldata/``module``."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "rldata", src / "rldata", ignore=shutil.ignore_patterns("__pycache__"))
    for p in ("jobs", "trainer", "schemas", "sample_data"):
        (src / p).symlink_to(ROOT / p)
    with open(src / "rldata" / module, "a") as f:
        f.write(f"\n{line}\n")
    return src


@pytest.mark.parametrize(
    "module, line, broken",
    [
        # a lower layer reaching up: the store importing the ledger built over it
        (
            "store/core.py",
            "import rldata.ledger.core  # noqa",
            "rldata.store is not allowed to import rldata.ledger",
        ),
        # the cycle this issue broke: the adaptive rules importing the filter that uses them
        (
            "adaptive/rules.py",
            "import rldata.ledger.select  # noqa",
            "rldata.adaptive is not allowed to import",
        ),
    ],
)
def test_an_upward_import_breaks_the_contracts(tmp_path, module, line, broken):
    got = _lint(_copy_with(tmp_path, module, line))
    assert got.returncode != 0
    assert broken in got.stdout


def test_a_module_missing_from_the_layers_is_refused(tmp_path):
    # exhaustive: a new module must be given its place in the layer list
    src = _copy_with(tmp_path, "errors.py", "")
    (src / "rldata" / "newthing.py").write_text("X = 1\n")
    got = _lint(src)
    assert got.returncode != 0
    assert "newthing" in got.stdout


def test_the_loose_modules_of_rldata_stay_at_or_under_the_documented_ceiling():
    # one package per concept: few modules directly in rldata/ (docs/contributing.md, Layout)
    doc = (ROOT / "docs" / "contributing.md").read_text()
    (ceiling,) = re.findall(r"At most \*\*(\d+)\*\*\s+modules\s+sit\s+directly\s+in", doc)
    loose = sorted(p.name for p in (ROOT / "rldata").glob("*.py"))
    assert len(loose) <= int(ceiling), f"{len(loose)} modules directly in rldata/: {loose}"
