"""Flagged tasks through the pipeline: filter and stratify leave them out with the flag as the
selection's reason, export leaves them out and counts them in its manifest, --include-flagged keeps
them, drop deletes them, and blast-radius finds the exports that shipped them."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from rldata import open_store
from rldata.interop.export import export_selection
from rldata.interop.lineage import read_manifest
from rldata.interop.options import ExportConfig
from rldata.ledger.flags import flagged
from tests.quality.helpers import write_jsonl
from tests.reliability.helpers import run, seed_passrates

ANYTHING = "tests.quality.verifiers_for_tests:Anything"


@pytest.fixture
def root(tmp_path, capsys):
    """12 tasks t0..t11 ("i+1?"), all in the band; t1 and t2 copy an eval pack, t4's verifier passes
    the empty answer (a lint error)."""
    store = open_store(tmp_path / "s")
    seed_passrates(store)
    root = str(tmp_path / "s")
    write_jsonl(tmp_path / "ev.jsonl", [{"question": "1+1?"}, {"question": "2+1?"}, {"question": "99+1?"}])
    assert run(capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "ev.jsonl"))[0] == 0
    code, _, err = run(
        capsys, "--store", root, "lint", "--rule", "semantic.canary_floor", "--verifier", ANYTHING,
        "--where", "task_id = 't4'",
    )  # fmt: skip
    assert code == 0, err
    return root


def _sel(store, name) -> dict[str, tuple[str, str]]:
    df = store.sql(
        "SELECT task_id, decision, reason FROM selections WHERE selection = $1", params=[name]
    ).pl()
    return {t: (d, r) for t, d, r in df.iter_rows()}


def test_the_flags_and_their_reasons(root):
    f = flagged(open_store(root))
    assert dict(f.tasks.iter_rows()) == {
        "t1": "contaminated:ev",
        "t2": "contaminated:ev",
        "t4": "lint:semantic.canary_floor",
    }
    assert f.counts() == {"contaminated:ev": 2, "lint:semantic.canary_floor": 1}
    assert set(f.versions) == {"contamination", "lint_findings", "near_duplicates"}


def test_filter_and_stratify_leave_flagged_tasks_out_with_the_reason_stored(root, tmp_path, capsys):
    store = open_store(root)
    code, out, err = run(
        capsys, "--store", root, "filter", "--band", "0.1,0.9", "--name", "s", "--format", "json"
    )
    assert code == 0 and "left out as flagged" in err, err
    sel = _sel(store, "s")
    assert sel["t1"] == sel["t2"] == ("drop", "contaminated:ev") and sel["t4"] == (
        "drop",
        "lint:semantic.canary_floor",
    )
    assert sum(d == "keep" for d, _ in sel.values()) == 9
    printed = {r["reason"]: r["tasks"] for r in json.loads(out)}
    assert (
        printed["in_band"] == 9
        and printed["contaminated:ev"] == 2
        and printed["lint:semantic.canary_floor"] == 1
    )
    params = json.loads(
        store.sql("SELECT params FROM selections WHERE selection = 's' LIMIT 1").fetchall()[0][0]
    )
    assert params["flags"]["include_flagged"] is False
    assert params["flags"]["left_out"] == {"contaminated:ev": 2, "lint:semantic.canary_floor": 1}
    assert params["flags"]["versions"] == flagged(store).versions
    # --include-flagged keeps them
    assert (
        run(capsys, "--store", root, "filter", "--band", "0.1,0.9", "--name", "all", "--include-flagged")[0]
        == 0
    )
    assert all(d == "keep" for d, _ in _sel(store, "all").values())
    # a task flagged after the filter: stratify leaves it out in the same commit as the buckets
    write_jsonl(tmp_path / "ev2.jsonl", [{"question": "5+1?"}])
    assert run(capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "ev2.jsonl"))[0] == 0
    cur = tmp_path / "b.yaml"
    code, _, err = run(capsys, "--store", root, "stratify", "-s", "s", "--quantiles", "2", "-c", str(cur))
    assert code == 0, err
    sel = _sel(store, "s")
    assert sel["t5"] == ("drop", "contaminated:ev2") and sum(d == "keep" for d, _ in sel.values()) == 8
    bucketed = store.sql(
        "SELECT count(*) FROM selections WHERE selection = 's' AND bucket IS NOT NULL"
    ).fetchall()
    assert bucketed == [(8,)]
    assert sum(b["count"] for b in yaml.safe_load(cur.read_text())["buckets"]) == 8


def test_export_leaves_flagged_tasks_out_and_blast_radius_finds_the_export_that_shipped_them(
    root, tmp_path, capsys
):
    store = open_store(root)
    assert (
        run(capsys, "--store", root, "filter", "--band", "0.1,0.9", "--name", "all", "--include-flagged")[0]
        == 0
    )
    out_a, out_b = tmp_path / "clean", tmp_path / "everything"
    code, _, err = run(capsys, "--store", root, "export", "-s", "all", "-f", "jsonl", "-o", str(out_a))
    assert code == 0 and "left out as flagged" in err, err
    shipped = [json.loads(x)["task_id"] for x in (out_a / "train.jsonl").read_text().splitlines()]
    assert sorted(shipped) == sorted(f"t{i}" for i in range(12) if i not in (1, 2, 4))
    m = read_manifest(out_a)
    assert m["flags"]["include_flagged"] is False and m["flags"]["left_out"] == {
        "contaminated:ev": 2,
        "lint:semantic.canary_floor": 1,
    }
    assert (
        run(
            capsys,
            "--store",
            root,
            "export",
            "-s",
            "all",
            "-f",
            "jsonl",
            "-o",
            str(out_b),
            "--include-flagged",
        )[0]
        == 0
    )
    assert len((out_b / "train.jsonl").read_text().splitlines()) == 12 and read_manifest(out_b)["flags"] == {
        "include_flagged": True
    }
    # the job takes its config: the library verb under the command reads include_flagged itself
    direct = export_selection(store, ExportConfig(selection="all", format="jsonl", out=tmp_path / "direct"))
    assert direct["flags"]["left_out"] == m["flags"]["left_out"] and direct["rows"] == len(shipped)
    exports = store.sql("SELECT summary FROM runs WHERE kind = 'export'").fetchall()
    assert sorted(json.loads(s)["out"] for (s,) in exports) == sorted(
        [str(out_a), str(out_b), str(tmp_path / "direct")]
    )
    # blast radius: only the export that shipped them, through its manifest
    code, out, err = run(capsys, "--store", root, "blast-radius", "--pack", "ev", "--format", "json")
    assert code == 0 and "1 export(s) shipped them" in err, err
    (row,) = [r for r in json.loads(out) if r["what"] == "export"]
    assert row["path"] == str(out_b) and row["tasks"] == 2 and row["selection"] == "all"
    # the manifest moved away: the runs row still rebuilds what it shipped
    Path(out_b / "rldata-manifest.json").unlink()
    code, out, _ = run(
        capsys, "--store", root, "blast-radius", "--rule", "semantic.canary_floor", "--format", "json"
    )
    assert [(r["path"], r["tasks"]) for r in json.loads(out) if r["what"] == "export"] == [(str(out_b), 1)]


def test_drop_deletes_the_tasks_and_a_selection_that_kept_them_still_exports(root, tmp_path, capsys):
    store = open_store(root)
    assert (
        run(capsys, "--store", root, "filter", "--band", "0.1,0.9", "--name", "all", "--include-flagged")[0]
        == 0
    )
    write_jsonl(tmp_path / "ev3.jsonl", [{"question": "7+1?"}, {"question": "8+1?"}])
    code, _, err = run(
        capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "ev3.jsonl"), "--action", "drop"
    )
    assert code == 0 and "2 of 12 tasks dropped" in err
    assert store.count("tasks") == 10 and {"t7", "t8"}.isdisjoint(store.read("tasks")["task_id"])
    assert set(store.read("contamination").filter(pl.col("pack") == "ev3")["action"]) == {"drop"}
    code, _, err = run(
        capsys, "--store", root, "export", "-s", "all", "-f", "jsonl", "-o", str(tmp_path / "x")
    )
    assert code == 0, err
    assert read_manifest(tmp_path / "x")["flags"]["left_out"]["contaminated:ev3"] == 2


def test_a_resumed_run_reads_back_the_flag_versions_its_start_recorded(root, tmp_path, capsys):
    """What rldata train records about the flags it left out (run_args' ``flags``) is what a resume
    reads back (rldata.api._resumed_flags): the same tasks stay out, though flags were added since."""
    from types import SimpleNamespace

    from rldata.api import _flags, _resumed_flags
    from rldata.configs.fields import load
    from rldata.runs.core import record_run
    from rldata.trainer.config import TrainCommand
    from rldata.trainer.driver import run_args

    store = open_store(root)
    at_start = _flags(store, False)
    command = load(TrainCommand, None, run_id="r1", output_dir=str(tmp_path / "runs"), resume=True)
    state = SimpleNamespace(
        base=SimpleNamespace(path="m"),
        start=0,
        flags={"exclude": len(at_start.ids), "versions": at_start.versions},
    )
    with record_run(store, "train", run_args(command.train, command.run, state), run_id="r1"):
        pass
    write_jsonl(tmp_path / "ev2.jsonl", [{"question": "5+1?"}])
    assert run(capsys, "--store", root, "decontaminate", "--eval", str(tmp_path / "ev2.jsonl"))[0] == 0
    assert len(_flags(store, False).ids) == len(at_start.ids) + 1
    versions = _resumed_flags(store, command)
    assert versions == at_start.versions
    assert _flags(store, False, versions=versions).ids == at_start.ids
