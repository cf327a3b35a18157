"""The preference export writes an export directory like every other export: the pairs and a lineage
manifest that records what they were made from and hashes what was written."""

from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq
import pytest

from rldata.cli import main
from rldata.errors import RldataError
from rldata.interop import lineage
from rldata.interop.preferences import PREFERENCE_SCHEMA, export_preferences
from rldata.rewards.judge import PAIRWISE, POINTWISE, judge_rows, parse_pairwise, parse_pointwise


def _seed(store):
    store.append(
        "tasks",
        [
            {"task_id": "t1", "source": "s", "domain": "math", "prompt": "2+3=", "answer": "5"},
            {"task_id": "t2", "source": "s", "domain": "math", "prompt": "4*4=", "answer": "16"},
        ],
    )
    comps = {"t1": ["5", "6", "5", "7"], "t2": ["16", "61"]}
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"{t}/{i}",
                "task_id": t,
                "run_id": "r1",
                "sample_idx": i,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
                "completion": c,
            }
            for t, cs in comps.items()
            for i, c in enumerate(cs)
        ],
    )
    rows = judge_rows(
        [parse_pairwise(x) for x in ("5 is right\nVERDICT: B", "16 is right\nVERDICT: A")],
        ["t1/1", "t2/0"],
        ["t1", "t2"],
        verifier=PAIRWISE,
        version="v1:m",
        others=["t1/0", "t2/1"],
    )
    rows += judge_rows(
        [parse_pointwise(x) for x in ("VERDICT: 1", "VERDICT: 0", "VERDICT: 1", "VERDICT: 0")],
        ["t1/0", "t1/1", "t1/2", "t1/3"],
        ["t1"] * 4,
        verifier=POINTWISE,
        version="v1:m",
    )
    store.append("verifications", rows)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_preference_export_writes_a_manifest_that_describes_it(store, tmp_path, fmt):
    _seed(store)
    out = tmp_path / "prefs"
    assert export_preferences(store, out, fmt=fmt) == 4
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted([f"train.{fmt}", lineage.MANIFEST_NAME])
    pairs = pl.read_ndjson(out / "train.jsonl") if fmt == "jsonl" else pl.read_parquet(out / "train.parquet")
    assert pairs.columns == PREFERENCE_SCHEMA.names and pairs.height == 4

    m = lineage.read_manifest(out)
    assert m["kind"] == "rldata-export" and m["format"] == f"preferences-{fmt}"
    assert (
        m["source"] == "verifications" and m["kinds"] == ["pairwise", "pointwise"] and m["split"] == "train"
    )
    assert m["rows"] == 4 and m["rows_by_kind"] == {"pairwise": 2, "pointwise": 2} and m["judges"] == ["v1:m"]
    assert m["columns"] == PREFERENCE_SCHEMA.names and m["store"] == store.root
    assert m["store_versions"] == {t: store.version(t) for t in ("verifications", "trajectories", "tasks")}
    assert [f["path"] for f in m["files"]] == [f"train.{fmt}"]
    assert m["files"][0]["sha256"] == lineage.file_sha256(out / f"train.{fmt}")
    # the content hash is over the rows that were written, read back from the file
    table = (
        pq.read_table(out / "train.parquet")
        if fmt == "parquet"
        else pl.read_ndjson(out / "train.jsonl").to_arrow().cast(PREFERENCE_SCHEMA)
    )
    assert m["content_hash"] == lineage.rows_hash(table)
    assert lineage.verify(out) == [] and lineage.dataset_hash(out) == m["content_hash"]

    # unchanged verdicts give the same content; a new verdict a different one
    again = tmp_path / "again"
    export_preferences(store, again, fmt=fmt)
    assert lineage.read_manifest(again)["content_hash"] == m["content_hash"]
    store.append(
        "verifications",
        judge_rows([parse_pointwise("VERDICT: 1")], ["t2/0"], ["t2"], verifier=POINTWISE, version="v1:m")
        + judge_rows([parse_pointwise("VERDICT: 0")], ["t2/1"], ["t2"], verifier=POINTWISE, version="v1:m"),
    )
    export_preferences(store, out, fmt=fmt)  # replaces the earlier export in place
    assert lineage.dataset_changed(out, m["content_hash"]) and lineage.read_manifest(out)["rows"] == 5


def test_a_hand_edited_preference_file_fails_the_lineage_check(store, tmp_path):
    _seed(store)
    out = tmp_path / "prefs"
    export_preferences(store, out, kinds=("pairwise",))
    assert main(["lineage", str(out), "--check"]) == 0
    with open(out / "train.jsonl", "a") as f:
        f.write('{"task_id": "forged"}\n')
    assert lineage.verify(out) == ["train.jsonl: modified since export (sha256 differs)"]
    assert main(["lineage", str(out), "--check"]) == 1


def test_preference_export_refuses_a_file_name_and_an_unknown_format(store, tmp_path):
    _seed(store)
    with pytest.raises(RldataError, match="writes a directory"):
        export_preferences(store, tmp_path / "prefs.jsonl")
    with pytest.raises(RldataError, match="format must be one of jsonl, parquet"):
        export_preferences(store, tmp_path / "p", fmt="csv")
    assert not (tmp_path / "p").exists() and not (tmp_path / "prefs.jsonl").exists()
