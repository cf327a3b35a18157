"""Export the judge's verdicts as preference pairs (prompt, chosen, rejected) for reward-model training.

Two sources of pairs, both from ``verifications`` rows with ``layer = 'judge'`` (error verdicts left out):

- pairwise (``genrm_pair``): the response the judge preferred is chosen, the other rejected;
- pointwise (``genrm``): a passed and a failed sample of the same task and judge, each sample used once.

Like every export, the result is a directory: the pairs as ``<split>.jsonl`` or ``<split>.parquet``
(formats of the ``preferences`` namespace, :mod:`rldata.interop.formats`) and
``rldata-manifest.json`` (:mod:`rldata.interop.lineage`): the store versions read, the kinds, the
judges, row counts, file hashes and a content hash.  Rows are ordered by kind, task and trajectory
ids, so exporting unchanged verdicts again gives the same content hash.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pyarrow as pa

from rldata.errors import RldataError
from rldata.interop.export import _check_out, write_export_dir
from rldata.interop.formats import (
    ExportFormat,
    UnknownFormat,
    get_format,
    register_format,
    write_jsonl,
    write_parquet,
)
from rldata.rewards.judge import PAIRWISE, POINTWISE

__all__ = ["KINDS", "PREFERENCE_SCHEMA", "export_preferences"]

KINDS = ("pairwise", "pointwise")
PREFERENCE_SCHEMA = pa.schema(
    [
        (c, pa.string())
        for c in (
            "task_id",
            "prompt",
            "chosen",
            "rejected",
            "chosen_traj_id",
            "rejected_traj_id",
            "kind",
            "judge",
            "rationale",
        )
    ]
)
_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


def _pairs_pairwise(store) -> pl.DataFrame:
    q = (
        "SELECT v.task_id, v.verifier_version AS judge, v.passed, v.detail, k.prompt FROM verifications v "
        "JOIN tasks k USING (task_id) WHERE v.verifier = $v AND v.layer = 'judge' AND v.passed IS NOT NULL"
    )
    df = store.sql(q, params={"v": PAIRWISE}).pl()
    if df.is_empty():
        return pl.DataFrame()
    det = [json.loads(d) for d in df["detail"]]
    win = [d["a"] if p else d["b"] for d, p in zip(det, df["passed"])]
    lose = [d["b"] if p else d["a"] for d, p in zip(det, df["passed"])]
    return df.select("task_id", "prompt", "judge").with_columns(
        pl.Series("chosen_traj_id", win),
        pl.Series("rejected_traj_id", lose),
        pl.Series("rationale", [d.get("rationale", "") for d in det]),
        pl.lit("pairwise").alias("kind"),
    )


def _pairs_pointwise(store) -> pl.DataFrame:
    q = (
        "SELECT v.task_id, v.traj_id, v.verifier_version AS judge, v.passed, v.detail, k.prompt "
        "FROM verifications v JOIN tasks k USING (task_id) "
        "WHERE v.verifier = $v AND v.layer = 'judge' AND v.passed IS NOT NULL ORDER BY v.task_id, v.traj_id"
    )
    df = store.sql(q, params={"v": POINTWISE}).pl()
    rows = []
    for _key, g in df.group_by(["task_id", "judge"], maintain_order=True):
        pos, neg = g.filter(pl.col("passed")), g.filter(~pl.col("passed"))
        for p, n in zip(pos.iter_rows(named=True), neg.iter_rows(named=True)):  # each sample in one pair
            rows.append(
                {
                    "task_id": p["task_id"],
                    "prompt": p["prompt"],
                    "judge": p["judge"],
                    "chosen_traj_id": p["traj_id"],
                    "rejected_traj_id": n["traj_id"],
                    "rationale": json.loads(p["detail"]).get("rationale", ""),
                    "kind": "pointwise",
                }
            )
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def _pairs(store, kinds: Sequence[str]) -> pl.DataFrame:
    cols = PREFERENCE_SCHEMA.names
    frames = [
        f
        for f in (
            (_pairs_pairwise(store) if "pairwise" in kinds else pl.DataFrame()),
            (_pairs_pointwise(store) if "pointwise" in kinds else pl.DataFrame()),
        )
        if f.height
    ]
    if not frames:
        return pl.DataFrame({c: [] for c in cols}, schema={c: pl.String for c in cols})
    pairs = pl.concat(frames, how="vertical_relaxed")
    comp = store.sql("SELECT traj_id, completion FROM trajectories").pl()
    return (
        pairs.join(comp.rename({"traj_id": "chosen_traj_id", "completion": "chosen"}), on="chosen_traj_id")
        .join(comp.rename({"traj_id": "rejected_traj_id", "completion": "rejected"}), on="rejected_traj_id")
        .select(cols)
        .sort("kind", "task_id", "chosen_traj_id", "rejected_traj_id")
    )


def export_preferences(
    store, out: str | Path, *, kinds: Sequence[str] = KINDS, fmt: str = "jsonl", split: str = "train"
) -> int:
    """Write (prompt, chosen, rejected) pairs from the judge rows to the export directory ``out``
    (``<split>.jsonl`` or ``<split>.parquet`` and the manifest); returns the number of pairs."""
    out = Path(out).absolute()
    if out.suffix.lower() in _FILE_SUFFIXES:
        raise RldataError(
            f"{out}: the preference export writes a directory (the pairs and rldata-manifest.json), "
            f"not a {out.suffix} file: give a directory and the format (jsonl or parquet)"
        )
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise RldataError(f"preference kinds must be pairwise and/or pointwise, got {', '.join(bad)}")
    if not split or "/" in split:
        raise RldataError(f"split must be a plain name, got {split!r}")
    try:
        layout = get_format(fmt, "preferences")
    except UnknownFormat as e:
        raise RldataError(str(e)) from None
    _check_out(out, store=store)
    versions = {t: store.version(t) for t in ("verifications", "trajectories", "tasks")}
    pairs = _pairs(store, kinds)
    table = pairs.to_arrow().cast(PREFERENCE_SCHEMA)
    spec = SimpleNamespace(split=split, kinds=tuple(kinds))
    if layout.build is not None:
        table = layout.build(table, spec)
    by_kind = pairs.group_by("kind").len().sort("kind").to_dicts()
    fields = {
        "format": f"preferences-{fmt}",
        "source": "verifications",
        "kinds": list(kinds),
        "split": split,
        "judges": sorted(set(pairs["judge"].to_list())),
        "store": store.root,
        "store_versions": versions,
        "rows": table.num_rows,
        "rows_by_kind": {r["kind"]: r["len"] for r in by_kind},
        "columns": table.schema.names,
    }
    write_export_dir(out, table, lambda d: layout.write(table, d, spec), fields)
    return table.num_rows


register_format(
    ExportFormat("jsonl", write=write_jsonl, namespace="preferences", help="JSONL, one pair a line.")
)
register_format(
    ExportFormat("parquet", write=write_parquet, namespace="preferences", help="One Parquet file.")
)
