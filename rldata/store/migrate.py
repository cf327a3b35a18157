"""Upgrade store tables written by an older rldata, in place and with no data lost.

A table's schema version lives in its Delta description (``rldata.schema_version=N``, see
:mod:`rldata.store.core`).  When a store is opened and a table is older than ``rldata.schemas`` says,
:func:`upgrade` runs that table's steps in order, ``STEPS[(table, N)]`` taking it from N to N+1, and
records the new version once they have all landed.  Most steps only add nullable columns (a Delta
metadata commit: no data file is rewritten) and fill a default, so old readers' rows keep every
value.  A renamed column is the exception: delta-rs (1.6) has no column rename (Delta renames need
column mapping), so :func:`_rename` rewrites the rows under the new name in ONE overwrite commit:
the table is renamed whole or not at all.

Each step is idempotent: a process killed between a step's commits, or two processes opening the same
old store at once, re-run it harmlessly (columns already present, or already renamed, are skipped).

Most steps see only their own table.  One that derives values from other tables (the params hash
without N, :mod:`rldata.store.rehash`, reads the trajectories' sampling params) is marked with
:func:`_with_store` and gets the store too; tables are upgraded in ``TABLES`` order, and such
a step must work whether the tables it reads were upgraded yet or not.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pyarrow as pa
import pyarrow.dataset as pads
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Field

from rldata.errors import RldataError
from rldata.schemas import get as table_schema
from rldata.store.rehash import rehash_passrates, rehash_trajectories

__all__ = ["RENAMED", "STEPS", "VERSION_KEY", "renamed_since", "table_version", "upgrade"]

VERSION_KEY = "rldata.schema_version"  # the same key rldata.store.core writes

Step = Callable[..., None]  # step(dtable), or step(dtable, store) for a step marked _with_store


def table_version(dtable: DeltaTable) -> int:
    """The schema version recorded in ``dtable``'s description (1 when none: the first release)."""
    m = re.search(rf"{re.escape(VERSION_KEY)}=(\d+)", dtable.metadata().description or "")
    return int(m.group(1)) if m else 1


def _add_columns(dtable: DeltaTable, table: str, names: tuple[str, ...]) -> None:
    present = set(dtable.schema().to_arrow().names)
    wanted = table_schema(table).schema
    # Delta can only add nullable columns; a required one (with a default) is filled by the step
    fields = [Field.from_arrow(wanted.field(n).with_nullable(True)) for n in names if n not in present]
    if fields:
        dtable.alter.add_columns(fields)


def _env_columns(table: str) -> Step:
    def step(dtable: DeltaTable) -> None:
        _add_columns(dtable, table, ("env_id", "env_version"))

    return step


def _passrates_env_version(dtable: DeltaTable) -> None:
    _add_columns(dtable, "passrates", ("env_version",))
    dtable.update(new_values={"env_version": ""}, predicate="env_version IS NULL")


def _episode_columns(dtable: DeltaTable) -> None:
    _add_columns(dtable, "trajectories", ("num_turns", "num_tool_calls", "env_info"))


def _message_tool_fields(dtable: DeltaTable) -> None:
    """messages' struct gains tool_calls and tool_call_id: a schema merge (metadata only, no data file
    rewritten); rows written before read them as null."""
    stored = pa.schema(dtable.schema().to_arrow())
    wanted = table_schema("trajectories").schema.field("messages")
    if stored.field("messages").type == wanted.type:
        return  # merged by an earlier run that died before recording the version
    i = stored.get_field_index("messages")
    merged = stored.set(i, pa.field("messages", wanted.type, True, metadata=stored.field(i).metadata))
    write_deltalake(dtable, merged.empty_table(), mode="append", schema_mode="merge")


def _passrates_stopping(dtable: DeltaTable) -> None:
    # every row before version 3 came from a fixed-N job: say so rather than leave it null
    _add_columns(dtable, "passrates", ("stop_rule", "alpha", "confidence", "n_max", "band"))
    dtable.update(new_values={"stop_rule": "fixed"}, predicate="stop_rule IS NULL")


def _rename(table: str, old: str, new: str) -> Step:
    def step(dtable: DeltaTable) -> None:
        dataset = dtable.to_pyarrow_dataset()
        stored = dataset.schema
        if old not in stored.names or new in stored.names:
            return  # renamed by an earlier run that died before recording the version
        i = stored.get_field_index(old)
        # the stored type and nullability stay; the doc is today's, because writers compare it
        doc = table_schema(table).schema.field(new).metadata
        renamed = stored.set(i, pa.field(new, stored.field(i).type, stored.field(i).nullable, metadata=doc))
        columns = {n: pads.field(o) for n, o in zip(renamed.names, stored.names)}
        batches = (b.cast(renamed) for b in dataset.scanner(columns=columns).to_batches())  # streamed
        # predicate "true" makes the overwrite a read of the whole table: a row appended by another
        # writer after our read fails the commit (upgrade re-reads and retries) instead of staying
        # behind in a file that still has the old column name
        write_deltalake(
            dtable,
            pa.RecordBatchReader.from_batches(renamed, batches),
            mode="overwrite",
            schema_mode="overwrite",
            predicate="true",
        )

    return step


# (table, version the step upgrades from): (old name, new name).  Readers of a table's history (a
# selection pins the passrates version it read) map these back: see rldata.store.read.read_where
RENAMED: dict[tuple[str, int], tuple[str, str]] = {
    # verifier_version held 'name@version', unlike verifications.verifier_version (the bare version)
    ("passrates", 3): ("verifier_version", "verifier_key"),
    ("selections", 1): ("verifier_version", "verifier_key"),
}


def renamed_since(table: str) -> dict[str, str]:
    """{new name: old name} of every column of ``table`` that an upgrade step renamed."""
    return {new: old for (t, _), (old, new) in RENAMED.items() if t == table}


def _with_store(step: Step) -> Step:
    step.needs_store = True  # upgrade() passes it the store: it reads other tables
    return step


STEPS: dict[tuple[str, int], Step] = {
    ("tasks", 1): _env_columns("tasks"),
    ("trajectories", 1): _env_columns("trajectories"),
    ("passrates", 1): _passrates_env_version,
    ("trajectories", 2): _episode_columns,
    ("passrates", 2): _passrates_stopping,
    **{(t, v): _rename(t, old, new) for (t, v), (old, new) in RENAMED.items()},
    # the params hash leaves N out: old rows get the new hash, ledger rows that now share a key merge
    ("trajectories", 3): rehash_trajectories,
    ("passrates", 4): _with_store(rehash_passrates),
    ("trajectories", 4): _message_tool_fields,
}


def upgrade(dtable: DeltaTable, table: str, *, store=None, tries: int = 10) -> int:
    """Bring ``table`` up to this rldata's schema version; return the version it was at.

    Several processes may open the same old store at once: a step that loses the race to another
    upgrader (a conflicting metadata commit) re-reads the table and carries on from where it is.
    ``store``: the store being opened, for the steps that read other tables (:func:`_with_store`).
    """
    target = table_schema(table).version
    found = table_version(dtable)
    for attempt in range(tries):
        try:
            for v in range(table_version(dtable), target):
                step = STEPS.get((table, v))
                if getattr(step, "needs_store", False):
                    if store is None:
                        raise RldataError(f"table {table!r}: upgrading from version {v} needs the store")
                    step(dtable, store)
                elif step is not None:  # a table may keep its layout while its version moves with a release
                    step(dtable)
            # recorded once, after every step: an intermediate version recorded on a table whose step
            # was missing would make the fixed code skip that step (steps re-run harmlessly instead)
            _check(dtable, table)  # never record the current version on a table that lacks its columns
            dtable.alter.set_table_description(f"{VERSION_KEY}={target}")
            break
        except RldataError:
            raise
        except Exception as e:  # noqa: BLE001 - delta-rs raises CommitFailedError and friends
            if attempt == tries - 1 or "commit" not in f"{type(e).__name__} {e}".lower():
                raise RldataError(
                    f"table {table!r}: could not upgrade from schema version {found}: {e}"
                ) from None
            dtable.update_incremental()
    return found


def _check(dtable: DeltaTable, table: str) -> None:
    have = set(dtable.schema().to_arrow().names)
    missing = [c for c in table_schema(table).columns if c not in have]
    if missing:
        raise RldataError(f"table {table!r}: upgrade left columns missing: {', '.join(missing)}")
