"""docs/contributing.md, "Add a verifier", followed literally: the recipe's own code (read from the
doc) becomes a module, and `rldata verify` runs it on a real store, by module:Class and through the
recipe's entry point in a real (temporary) installed distribution."""

from __future__ import annotations

import json
import sys
import tomllib

import pytest

from rldata.cli import main
from rldata.verify.base import DOMAIN_DEFAULTS, REGISTRY
from tests.plugin_helpers import install_distribution, recipe_blocks


@pytest.fixture
def clean(monkeypatch):
    saved, domains = dict(REGISTRY), dict(DOMAIN_DEFAULTS)
    yield
    REGISTRY.clear()
    REGISTRY.update(saved)
    DOMAIN_DEFAULTS.clear()
    DOMAIN_DEFAULTS.update(domains)
    for mod in ("contrib_palindrome", "mypkg", "mypkg.verifiers"):
        sys.modules.pop(mod, None)


def _seed(store):
    cases = [("t0", "cba", "the answer is abc"), ("t1", "xyz", "zyx, or so I think"), ("t2", "dog", "")]
    store.append(
        "tasks",
        [
            {"task_id": t, "source": "unit", "domain": "text", "prompt": "reverse", "answer": a}
            for t, a, _ in cases
        ],
    )
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"{t}/0",
                "task_id": t,
                "run_id": "r1",
                "sample_idx": 0,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
                "completion": c,
            }
            for t, _, c in cases
        ],
    )


def _verify(store, verifier, capsys):
    code = main(["--store", store.root, "verify", "--verifier", verifier, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)[0]
    assert summary["verifiers"] == "palindrome@1"
    assert (summary["verified"], summary["correct"], summary["no_answer"]) == (3, 1, 1)
    rows = store.sql(
        "SELECT traj_id, verifier, verifier_version, passed, extracted FROM verifications ORDER BY traj_id"
    ).fetchall()
    assert rows == [
        ("t0/0", "palindrome", "1", True, "abc"),
        ("t1/0", "palindrome", "1", False, "think"),
        ("t2/0", "palindrome", "1", False, None),
    ]


def test_the_recipe_verifier_by_module_class(store, tmp_path, monkeypatch, capsys, clean):
    (code,) = recipe_blocks("Add a verifier", "python")
    (tmp_path / "contrib_palindrome.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    _seed(store)
    _verify(store, "contrib_palindrome:Palindrome", capsys)


def test_the_recipe_verifier_through_its_entry_point(store, tmp_path, monkeypatch, capsys, clean):
    (code,) = recipe_blocks("Add a verifier", "python")
    (toml,) = recipe_blocks("Add a verifier", "toml")
    eps = tomllib.loads(toml)["project"]["entry-points"]
    assert eps == {"rldata.verifiers": {"palindrome": "mypkg.verifiers:Palindrome"}}
    files = {"mypkg/__init__.py": "", "mypkg/verifiers.py": code}
    monkeypatch.syspath_prepend(str(install_distribution(tmp_path / "site", "mypkg", files, eps)))
    _seed(store)
    _verify(store, "palindrome", capsys)
