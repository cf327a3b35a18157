"""Export manifests: what they record, and detecting a changed dataset from the hash."""

from __future__ import annotations

import json

import pytest

from rldata.errors import RldataError
from rldata.interop import ExportConfig, export_selection
from rldata.interop.lineage import (
    MANIFEST_NAME,
    dataset_changed,
    dataset_hash,
    find_manifest,
    read_manifest,
    verify,
)


def seed(store, selection="band"):
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{i}",
                "source": "arith",
                "domain": "math",
                "prompt": f"{i}*2=",
                "answer": str(2 * i),
            }
            for i in range(4)
        ],
    )
    store.append(
        "selections",
        [
            {
                "selection": selection,
                "task_id": f"t{i}",
                "decision": "keep" if i < 3 else "drop",
                "reason": "in_band",
                "pass_rate": 0.5,
                "n": 8,
                "n_correct": 4,
                "bucket": "mid",
                "model": "tiny-arith",
                "params_hash": "ph1",
                "verifier_key": "math@1",
                "passrates_version": 12,
                "params": json.dumps({"low": 0.2, "high": 0.8}),
            }
            for i in range(4)
        ],
    )


def test_manifest_records_versions_selection_filter_counts_and_hashes(store, tmp_path):
    seed(store)
    m = export_selection(
        store, ExportConfig(selection="band", format="verl", bucket="mid", out=tmp_path / "v")
    )
    on_disk = json.loads((tmp_path / "v" / MANIFEST_NAME).read_text())
    assert on_disk == m
    assert m["store_versions"] == {
        "tasks": store.version("tasks"),
        "selections": store.version("selections"),
        "passrates": store.version("passrates"),
    }
    assert (m["selection"], m["bucket"], m["format"], m["split"]) == ("band", "mid", "verl", "train")
    assert m["passrates_version"] == 12
    assert m["filter"]["params"] == {"low": 0.2, "high": 0.8}
    assert m["filter"]["model"] == ["tiny-arith"] and m["filter"]["verifier_key"] == ["math@1"]
    assert (m["rows"], m["rows_by_bucket"]) == (3, {"mid": 3})
    assert m["content_hash"].startswith("sha256:") and len(m["content_hash"]) == 71
    assert [f["path"] for f in m["files"]] == ["train.parquet", "verl_overrides.txt"]
    assert m["store"] == store.root


def test_same_data_same_hash_changed_selection_new_hash(store, tmp_path):
    seed(store)
    first = export_selection(store, ExportConfig(selection="band", format="hf", out=tmp_path / "a"))
    again = export_selection(store, ExportConfig(selection="band", format="hf", out=tmp_path / "b"))
    assert again["content_hash"] == first["content_hash"]
    assert not dataset_changed(tmp_path / "b", first["content_hash"])
    store.upsert(
        "selections",
        [{"selection": "band", "task_id": "t3", "decision": "keep", "reason": "in_band", "bucket": "mid"}],
    )
    changed = export_selection(
        store, ExportConfig(selection="band", format="hf", out=tmp_path / "a")
    )  # replaces the old export
    assert changed["rows"] == 4
    assert changed["content_hash"] != first["content_hash"]
    assert dataset_changed(tmp_path / "a", first["content_hash"])
    assert dataset_hash(tmp_path / "a") == changed["content_hash"]


def test_an_edited_file_is_detected(store, tmp_path):
    seed(store)
    m = export_selection(store, ExportConfig(selection="band", format="jsonl", out=tmp_path / "j"))
    assert verify(tmp_path / "j") == []
    data = tmp_path / "j" / "train.jsonl"
    data.write_text(data.read_text().replace('"0*2="', '"0*3="'))
    assert verify(tmp_path / "j") == ["train.jsonl: modified since export (sha256 differs)"]
    assert dataset_changed(tmp_path / "j", m["content_hash"])
    with pytest.raises(RldataError, match="export changed after it was written"):
        dataset_hash(tmp_path / "j")
    data.unlink()
    assert verify(tmp_path / "j") == ["train.jsonl: missing"]


def test_manifest_found_from_a_file_inside_the_export(store, tmp_path):
    seed(store)
    export_selection(store, ExportConfig(selection="band", format="hf", out=tmp_path / "h"))
    shard = next((tmp_path / "h" / "data").glob("*.parquet"))
    assert find_manifest(shard) == tmp_path / "h" / MANIFEST_NAME
    assert read_manifest(shard)["selection"] == "band"


def test_no_manifest_is_a_clear_error(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"")
    with pytest.raises(RldataError, match="no rldata-manifest.json found"):
        read_manifest(tmp_path / "x.parquet")
    (tmp_path / MANIFEST_NAME).write_text("{}")
    with pytest.raises(RldataError, match="not an rldata export manifest"):
        read_manifest(tmp_path)
