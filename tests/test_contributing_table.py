"""docs/contributing.md, "Add a table", followed step by step for a toy table, then "Changing it
later" for its next version: through the real registry, store and migration code."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from rldata import open_store, schemas
from rldata.errors import RldataError, SchemaError
from rldata.store.migrate import STEPS, _add_columns, table_version

TS, TableSchema, _f, register = schemas.TS, schemas.TableSchema, schemas._f, schemas.register

# steps 1-3: columns, key, version 1
NOTES = TableSchema(
    "toy_notes",
    1,
    pa.schema(
        [
            _f("note_id", pa.string(), True, "hash of the note's text"),
            _f("task_id", pa.string(), True),
            _f("text", pa.string(), True),
            _f("tags", pa.string(), doc="JSON list of strings"),
            _f("kind", pa.string(), True, "free | review"),
            _f("created_at", TS, True),
        ]
    ),
    key=("note_id",),
    defaults=(("kind", "free"),),
)

# "Changing it later": version 2 adds a column and says so
NOTES_V2 = TableSchema(
    "toy_notes",
    2,  # 2: score
    pa.schema([*NOTES.schema, _f("score", pa.float64(), doc="reviewer's score, 0..1")]),
    key=("note_id",),
    defaults=(("kind", "free"),),
)


def _reset(registry: dict) -> None:
    """The registry holds exactly ``registry`` (changed in place: the store reads this very dict)."""
    schemas.TABLES.clear()
    schemas.TABLES.update(registry)


@pytest.fixture
def tables():
    """A test-local registry: the toy table never leaks into other tests."""
    base = dict(schemas.TABLES)
    yield base
    _reset(base)


def _rows() -> list[dict]:
    return [
        {"note_id": "n1", "task_id": "t1", "text": "too easy", "tags": '["easy"]'},
        {"note_id": "n2", "task_id": "t2", "text": "wrong answer key", "kind": "review"},
    ]


def test_a_registered_table_is_created_written_and_read_by_the_store(tables, tmp_path):
    assert register(NOTES) is NOTES  # step 4
    assert "toy_notes" not in tables and schemas.get("toy_notes") is NOTES
    store = open_store(tmp_path / "s")  # step 5: opening creates it
    assert table_version(store.table("toy_notes")) == 1 and store.count("toy_notes") == 0
    assert store.append("toy_notes", _rows(), dedupe=True) == 2
    assert store.append("toy_notes", _rows(), dedupe=True) == 0  # the key: a re-run adds nothing
    got = {r["note_id"]: r for r in store.read("toy_notes").to_dicts()}
    assert got["n1"]["kind"] == "free" and got["n2"]["kind"] == "review"  # the default
    assert got["n1"]["created_at"] is not None  # defaults_now
    assert store.upsert("toy_notes", [{**_rows()[0], "text": "too easy for 7B"}]) == 1
    assert store.sql("SELECT note_id, text FROM toy_notes ORDER BY 1").fetchall() == [
        ("n1", "too easy for 7B"),
        ("n2", "wrong answer key"),
    ]
    with pytest.raises(SchemaError, match="table 'toy_notes', row 0, field 'text': missing required field"):
        store.append("toy_notes", [{"note_id": "n3", "task_id": "t3"}])
    assert store.count("toy_notes") == 2
    assert open_store(tmp_path / "s").count("toy_notes") == 2  # reopening finds it


def test_register_refuses_what_the_recipe_rules_out(tables):
    register(NOTES)
    assert register(NOTES) is NOTES  # the same schema again is harmless
    with pytest.raises(RldataError, match="another schema has that name"):
        register(TableSchema("tasks", 1, NOTES.schema, key=("note_id",)))
    with pytest.raises(RldataError, match="key column 'tags' must be required"):
        register(TableSchema("toy_bad", 1, NOTES.schema, key=("note_id", "tags")))
    with pytest.raises(RldataError, match="no column 'nope'"):
        register(TableSchema("toy_bad", 1, NOTES.schema, key=("nope",)))
    with pytest.raises(RldataError, match="lowercase"):
        register(TableSchema("Toy-Bad", 1, NOTES.schema, key=("note_id",)))
    with pytest.raises(RldataError, match="versions start at 1"):
        register(TableSchema("toy_bad", 0, NOTES.schema, key=("note_id",)))
    assert "toy_bad" not in schemas.TABLES


def _add_score(dtable: DeltaTable) -> None:  # the step rldata/store/migrate.py would hold
    _add_columns(dtable, "toy_notes", ("score",))


def test_changing_it_later_upgrades_a_store_of_the_release_before(tables, tmp_path, monkeypatch):
    register(NOTES)
    store = open_store(tmp_path / "s")
    store.append("toy_notes", _rows())
    before = sorted(store.read("toy_notes").to_dicts(), key=lambda r: r["note_id"])
    # the next release: NOTES_V2 in place of NOTES, and its step
    _reset(tables)
    register(NOTES_V2)
    with pytest.raises(RldataError, match="table 'toy_notes': upgrade left columns missing: score"):
        open_store(tmp_path / "s")  # a bump without its step is caught, and not recorded
    assert table_version(DeltaTable(str(tmp_path / "s" / "toy_notes"))) == 1
    monkeypatch.setitem(STEPS, ("toy_notes", 1), _add_score)
    store = open_store(tmp_path / "s")
    assert table_version(store.table("toy_notes")) == 2
    after = sorted(store.read("toy_notes").to_dicts(), key=lambda r: r["note_id"])
    assert [{k: r[k] for k in before[0]} for r in after] == before and {r["score"] for r in after} == {None}
    store.upsert("toy_notes", [{**_rows()[1], "score": 0.25}])
    assert store.sql("SELECT score FROM toy_notes WHERE note_id = 'n2'").fetchall() == [(0.25,)]
