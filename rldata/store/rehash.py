"""Upgrade steps for the params hash without N (trajectories schema version 4, passrates version 5).

Earlier releases hashed N into ``params_hash``, so an N=16 and an N=32 job over the same tasks kept two
ledger rows and the second drew all 32 samples again.  Today's hash leaves N out
(:func:`rldata.configs.sampling.params_hash_of`).  These steps rewrite the hashes an earlier release stored:

- **trajectories**: a row whose ``params_hash`` is the old hash of its own ``sampling_params`` JSON (a
  complete ``SamplingSpec``, as ``rldata sample`` and the trainer write it) gets the new hash of that
  JSON.  Any other row keeps its hash: its params cannot be recovered (imported rollouts, 'imported'
  with no params; rows written by hand).  ``traj_id``s never change: ids are opaque.
- **passrates**: the old -> new map comes from the trajectories' JSON (the old hash is recomputed from
  it, so the map is the same before and after the trajectories step).  A row whose hash is in the map
  gets the new one; a row whose params cannot be recovered keeps its hash, a key no job writes again:
  it stays readable and filterable but pools with nothing.  Where old rows now share one key (an N=4
  and an N=8 job of one task), or a key pools the samples of several old hashes, the counts are
  recounted from the stored samples, each distinct sample once (:data:`rldata.ledger.core.SAMPLE_ID`: the
  two jobs drew samples 0..3 twice, under two traj_ids); the row's other columns (run, time, stopping
  rule) are those of the row that drew most.  With no sample left to recount, that row stands as it
  was.  The rows a merge replaces stay in the table's Delta history.
- **selections** are not rewritten: a selection names the ledger slice it read at its
  ``passrates_version``, where the hash is the old one (:func:`current_hash` maps it forward).

Each step rewrites its table in ONE overwrite commit whose predicate reads the whole table, as
:func:`rldata.store.migrate._rename` does: a row another writer appends meanwhile fails the commit, and the
upgrade re-reads and retries.  Re-running a step is harmless: rewritten rows hold the new hash, which
maps to nothing, so a second run finds nothing to do and writes nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from rldata.configs.sampling import HASHED_ALWAYS, NOT_HASHED, SamplingSpec, params_hash_of
from rldata.errors import DamagedTableError
from rldata.stats import wilson_interval
from rldata.store.ledger_sql import counts_sql

__all__ = ["current_hash", "hash_map", "legacy_hash", "rehash_passrates", "rehash_trajectories"]

_FIELDS = frozenset(f.name for f in dataclasses.fields(SamplingSpec))
# Fields SamplingSpec gained after the releases these steps upgrade (their spec was the fields the
# hash has always covered, plus N and the seed): the JSON those releases stored lacks them, and a
# field added since is hashed only off its default (rldata.configs.sampling.params_hash_of)
_ADDED_SINCE = _FIELDS - frozenset(HASHED_ALWAYS) - frozenset(NOT_HASHED)


def _params(sampling_params: str | None) -> dict | None:
    """The stored JSON as a dict when it is a whole ``SamplingSpec.to_json()`` (of this release or of
    one before the fields in ``_ADDED_SINCE``), else None."""
    try:
        d = json.loads(sampling_params) if sampling_params else None
    except ValueError:
        return None
    return d if isinstance(d, dict) and _FIELDS - _ADDED_SINCE <= set(d) <= _FIELDS else None


def legacy_hash(params: dict) -> str:
    """The hash releases before trajectories v4 stored: everything but the seed, N included."""
    blob = json.dumps({k: v for k, v in params.items() if k != "seed"}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _new_hash(params_hash: str | None, sampling_params: str | None) -> str | None:
    """A trajectory's new hash when it holds the old hash of its own params, else None."""
    d = _params(sampling_params)
    return params_hash_of(d) if d is not None and legacy_hash(d) == params_hash else None


def hash_map(store) -> dict[str, str]:
    """{old hash: new hash} of every complete sampling-params JSON the trajectories hold (rows already
    rehashed included: the old hash is recomputed from the JSON)."""
    if "trajectories" in store.damaged:
        raise DamagedTableError(
            "passrates cannot be upgraded to its params hash without N while trajectories is damaged "
            "(the new hashes come from the trajectories): repair it (rldata doctor --repair) and open "
            "the store again"
        )
    pairs = store.sql(
        "SELECT DISTINCT params_hash, sampling_params FROM trajectories WHERE sampling_params IS NOT NULL"
    ).fetchall()
    out = {}
    for ph, sp in pairs:
        d = _params(sp)
        if d is not None and ph in (legacy_hash(d), params_hash_of(d)):
            out[legacy_hash(d)] = params_hash_of(d)
    return {old: new for old, new in out.items() if old != new}


def current_hash(store, params_hash: str) -> str:
    """Today's hash for a hash an earlier release wrote (a selection made before the upgrade keeps it);
    any other hash is returned as it is."""
    return hash_map(store).get(params_hash, params_hash)


def _overwrite(dtable: DeltaTable, reader) -> None:
    # predicate "true": the overwrite reads the whole table, so a concurrent append fails our commit
    # (the upgrade re-reads and retries) rather than leaving a row with an old hash behind
    write_deltalake(dtable, reader, mode="overwrite", predicate="true")


def rehash_trajectories(dtable: DeltaTable) -> None:
    dataset = dtable.to_pyarrow_dataset()
    pairs = dataset.to_table(columns=["params_hash", "sampling_params"]).group_by(
        ["params_hash", "sampling_params"]
    )
    new = {}
    for ph, sp in zip(*pairs.aggregate([]).to_pydict().values()):
        h = _new_hash(ph, sp)
        if h is not None and h != ph:
            new[(ph, sp)] = h
    if not new:
        return  # no row of an earlier release (or rehashed by an earlier run of this step)
    schema = dataset.schema
    i = schema.get_field_index("params_hash")

    def batches():  # streamed: the table can be large
        for b in dataset.to_batches():
            b = b.cast(schema)
            ph, sp = b.column(i).to_pylist(), b.column("sampling_params").to_pylist()
            col = pa.array([new.get(k, k[0]) for k in zip(ph, sp)], schema.field(i).type)
            yield b.set_column(i, schema.field(i), col)

    _overwrite(dtable, pa.RecordBatchReader.from_batches(schema, batches()))


_KEY = ["task_id", "model", "_new", "verifier_key", "env_version"]


def rehash_passrates(dtable: DeltaTable, store) -> None:
    hmap = hash_map(store)
    dataset = dtable.to_pyarrow_dataset()
    schema = dataset.schema
    df = pl.from_arrow(dataset.to_table())
    if not hmap or not df.height or not df["params_hash"].is_in(list(hmap)).any():
        return  # nothing an earlier release wrote (or rehashed by an earlier run of this step)
    df = df.with_columns(
        pl.col("params_hash").replace(hmap).alias("_new"), pl.int_range(pl.len()).alias("_row")
    ).with_columns(pl.len().over(_KEY).alias("_rows"))
    # keys whose samples come from several old hashes (several N): no old row counted all of them
    maps = pa.table({"old": list(hmap), "new": list(hmap.values())})
    pooled = store.sql(
        "SELECT t.task_id, t.model, coalesce(m.new, t.params_hash) AS _new, "
        "       coalesce(t.env_id || '@' || t.env_version, '') AS env_version, "
        "       count(DISTINCT json_extract_string(t.sampling_params, '$.n')) AS _sources "
        "FROM trajectories t LEFT JOIN _map m ON m.old = t.params_hash "
        "WHERE coalesce(m.new, t.params_hash) IN (SELECT new FROM _map) GROUP BY ALL HAVING _sources > 1",
        extra={"_map": maps},
    ).pl()
    df = df.join(pooled, on=["task_id", "model", "_new", "env_version"], how="left")
    merge = (pl.col("_rows") > 1) | (pl.col("_sources").fill_null(0) > 1)
    rebuilt = _rebuild(store, df.filter(merge), maps, wilson_interval)
    out = pl.concat([df.filter(~merge), rebuilt], how="diagonal_relaxed").sort("_row")
    out = out.with_columns(pl.col("_new").alias("params_hash")).select(schema.names)
    _overwrite(dtable, out.to_arrow().cast(schema))


def _rebuild(store, rows: pl.DataFrame, maps: pa.Table, wilson) -> pl.DataFrame:
    """One row per key of ``rows``: the one that drew most, its counts recounted from the samples."""
    if not rows.height:
        return rows
    # the row that drew most (then the latest) speaks for the key: its run, time and stopping rule
    best = rows.sort(
        [pl.col("n") + pl.col("n_error"), "updated_at", "run_id"], descending=True, nulls_last=True
    ).unique(_KEY, keep="first")
    ids = pa.table({"task_id": pa.array(best["task_id"].unique().to_list(), pa.string())})
    counts = store.sql(
        counts_sql(
            where="coalesce(m.new, t.params_hash) IN (SELECT new FROM _map) AND t.task_id IN (SELECT task_id FROM _ids)",
            joins="LEFT JOIN _map m ON m.old = t.params_hash",
            params_hash="coalesce(m.new, t.params_hash)",
        ),
        extra={"_map": maps, "_ids": ids},
    ).pl()
    counts = counts.rename({"params_hash": "_new", "vkey": "verifier_key", "ekey": "env_version"}).rename(
        {"n": "_n", "n_correct": "_k", "n_error": "_e"}
    )
    out = []
    for r in best.join(counts, on=_KEY, how="left").iter_rows(named=True):
        if r["_n"] is not None:  # no sample left to recount: the row that drew most stands
            lo, hi = wilson(r["_k"], r["_n"])
            r |= {
                "n": r["_n"],
                "n_correct": r["_k"],
                "n_error": r["_e"],
                "pass_rate": r["_k"] / r["_n"] if r["_n"] else 0.0,
                "ci_low": lo,
                "ci_high": hi,
            }
        out.append({k: v for k, v in r.items() if k not in ("_n", "_k", "_e")})
    return pl.DataFrame(out, schema={**best.schema})
