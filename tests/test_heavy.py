"""torch, Ray and vLLM load at one boundary each, rldata/heavy.py (docs/contributing.md, "Imports"):
no module imports them inside a function, only the learner's own modules import them at their top,
and the stand-ins load a package on first use, never before."""

from __future__ import annotations

import ast
import copy
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from rldata import heavy
from rldata.heavy import HEAVY, Lazy

ROOT = Path(__file__).resolve().parents[1]
CODE = ("rldata", "jobs", "trainer", "schemas")  # jobs/, trainer/, schemas/ install as rldata.*
# the only modules that import torch or Ray at their top: the learner side of the trainer, loaded when
# a training run starts its learners
LEARNER_MODULES = (
    "trainer/checkpoint.py",
    "trainer/learner.py",
    "trainer/loss.py",
    "trainer/policy.py",
    "trainer/sharding.py",
)


def heavy_imports(src: str) -> tuple[list[int], list[int]]:
    """Lines of ``src`` that import torch, Ray or vLLM (or a submodule): (at the module's top, elsewhere:
    in a function, a class, an ``if`` or a ``try``)."""
    top, nested = [], []
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(n.split(".")[0] in HEAVY for n in names):
            (top if node in tree.body else nested).append(node.lineno)
    return top, nested


def _scan() -> dict[str, tuple[list[int], list[int]]]:
    out = {}
    for d in CODE:
        for path in sorted((ROOT / d).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel != "rldata/heavy.py":
                out[rel] = heavy_imports(path.read_text())
    return out


def test_no_module_imports_torch_ray_or_vllm_inside_a_function():
    nested = {rel: lines for rel, (_, lines) in _scan().items() if lines}
    assert not nested, f"import them through rldata.heavy (a stand-in at the module's top): {nested}"


def test_only_the_learners_modules_import_them_at_their_top():
    top = {rel for rel, (lines, _) in _scan().items() if lines}
    assert top == set(LEARNER_MODULES), top ^ set(LEARNER_MODULES)


def test_the_scan_finds_what_it_looks_for():
    src = (
        "import os\nimport torch.nn as nn\nfrom ray.util import placement_group\n"
        "if True:\n    import vllm\n"
        "def f():\n    from torch import zeros\n    import rayon, torchvision_x\n"
        "class C:\n    from . import ray\n"
    )
    assert heavy_imports(src) == ([2, 3], [5, 7])


def _run(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# the modules that reach a heavy package through the stand-ins, and what `rldata tables` loads
LIGHT = [
    "rldata.cli",
    "rldata.api",
    "rldata.engine.actors",
    "rldata.engine.core",
    "rldata.engine.pool",
    "rldata.engine.weights",
    "rldata.jobs.sample_draw",
    "rldata.jobs.pretrain_tiny",
    "rldata.models.fixture",
    "rldata.predict.features",
    "rldata.rollout.episodes",
    "rldata.runs.trackers",
    "rldata.trainer.handoff",
    "rldata.verify.parallel",
]


def test_modules_that_use_them_through_the_stand_ins_import_without_loading_them():
    code = (
        "import importlib, json, sys\n"
        f"for m in {LIGHT!r}: importlib.import_module(m)\n"
        f"print(json.dumps(sorted({{k.split('.')[0] for k in sys.modules}} & set({list(HEAVY)!r}))))"
    )
    assert _run(code) == []


def test_a_stand_in_loads_its_package_on_first_use_and_submodules_by_name():
    code = (
        "import json, sys\n"
        "from rldata.heavy import Lazy, torch\n"
        "before = 'torch' in sys.modules\n"
        "r0 = repr(torch)\n"
        "total = float(torch.ones(3).sum())\n"  # first use: torch loads
        "dcp = Lazy('torch.distributed.checkpoint')\n"
        "mid = 'torch.distributed.checkpoint' in sys.modules\n"
        "save = dcp.save\n"
        "print(json.dumps([before, r0, total, mid, 'torch.distributed.checkpoint' in sys.modules,\n"
        "                  save.__module__.startswith('torch.distributed.checkpoint'), repr(torch)]))"
    )
    before, r0, total, mid, after, found, r1 = _run(code)
    assert (before, total, mid, after, found) == (False, 3.0, False, True, True)
    assert "not loaded yet" in r0 and "loaded" in r1 and "not" not in r1


def test_a_stand_in_reads_submodules_its_package_does_not_import():
    # xml does not import xml.dom.minidom; the stand-in does, when it is read
    code = (
        "import json, sys\nfrom rldata.heavy import Lazy\n"
        "xml = Lazy('xml.dom')\nm = xml.minidom\n"
        "print(json.dumps([m.__name__, 'xml.dom.minidom' in sys.modules]))"
    )
    assert _run(code) == ["xml.dom.minidom", True]


def test_missing_names_and_packages_raise_what_python_raises(tmp_path, monkeypatch):
    pkg = tmp_path / "heavy_broken"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "child.py").write_text("import no_such_package_rldata\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AttributeError):
        _ = Lazy("json").no_such_name
    with pytest.raises(ModuleNotFoundError, match="no_such_package_rldata"):
        _ = Lazy("no_such_package_rldata").anything
    # a submodule that exists but fails to import says why, not "no attribute"
    with pytest.raises(ModuleNotFoundError, match="no_such_package_rldata"):
        _ = Lazy("heavy_broken").child


def test_dunder_lookups_copy_and_pickle_never_load_the_package():
    lazy = Lazy("no_such_package_rldata")  # loading it would raise
    assert not hasattr(lazy, "__wrapped__")
    assert copy.copy(lazy) is not None
    assert pickle.loads(pickle.dumps(heavy.ray)) is heavy.ray  # the module's own stand-in, by name
    assert isinstance(pickle.loads(pickle.dumps(lazy)), Lazy)
