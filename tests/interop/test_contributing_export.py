"""docs/contributing.md, "Add an export format", followed literally: the recipe's own code (read from
the doc) becomes a module, and `rldata export` writes the format from a real store, registered by
import and through the recipe's entry point in a real (temporary) installed distribution."""

from __future__ import annotations

import importlib
import json
import sys
import tomllib

import pyarrow as pa
import pytest

from rldata.cli import main
from rldata.interop import lineage
from tests.plugin_helpers import export_registries, install_distribution, recipe_blocks, saved


@pytest.fixture
def clean():
    restore = saved(export_registries())
    yield
    restore()
    for mod in ("contrib_alpaca", "mypkg", "mypkg.export"):
        sys.modules.pop(mod, None)


def _seed(store):
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{i}",
                "source": "arith",
                "domain": "math",
                "prompt": f"{i}+{i}=",
                "answer": str(2 * i),
            }
            for i in range(4)
        ],
    )
    store.append(
        "selections",
        [
            {
                "selection": "band",
                "task_id": f"t{i}",
                "decision": "keep" if i != 1 else "drop",
                "reason": "in_band" if i != 1 else "too_easy",
                "pass_rate": 0.5,
                "n": 4,
                "n_correct": 2,
            }
            for i in range(4)
        ],
    )


def _export_and_read_back(store, out, capsys):
    code = main(
        ["--store", store.root, "export", "--selection", "band", "--format", "alpaca", "--out", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [lineage.MANIFEST_NAME, "train.jsonl"]
    rows = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    assert rows == [
        {"instruction": "0+0=", "output": "0"},
        {"instruction": "2+2=", "output": "4"},
        {"instruction": "3+3=", "output": "6"},
    ]  # kept tasks only, by task id
    m = lineage.read_manifest(out)
    assert (m["format"], m["selection"], m["rows"], m["columns"]) == (
        "alpaca",
        "band",
        3,
        ["instruction", "output"],
    )
    assert lineage.verify(out) == [] and m["content_hash"] == lineage.rows_hash(pa.Table.from_pylist(rows))


def test_the_recipe_format_registered_by_import(store, tmp_path, monkeypatch, capsys, clean):
    (code,) = recipe_blocks("Add an export format", "python")
    (tmp_path / "contrib_alpaca.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("contrib_alpaca")
    _seed(store)
    _export_and_read_back(store, tmp_path / "out", capsys)


def test_the_recipe_format_through_its_entry_point(store, tmp_path, monkeypatch, capsys, clean):
    (code,) = recipe_blocks("Add an export format", "python")
    (toml,) = recipe_blocks("Add an export format", "toml")
    eps = tomllib.loads(toml)["project"]["entry-points"]
    assert eps == {"rldata.exports": {"alpaca": "mypkg.export:ALPACA"}}
    files = {"mypkg/__init__.py": "", "mypkg/export.py": code}
    monkeypatch.syspath_prepend(str(install_distribution(tmp_path / "site", "mypkg", files, eps)))
    _seed(store)
    _export_and_read_back(store, tmp_path / "out", capsys)
