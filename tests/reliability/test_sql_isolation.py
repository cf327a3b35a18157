"""Issue 29: SQL sees the store and nothing else, outputs stay out of the store, a failed output write
is an error.  A hostile battery through the CLI (``rldata.cli.main``, as the console script runs it):
each case exits non-zero with one ``rldata: error:`` line, no traceback, nothing on stdout, leaks
nothing, and leaves every file of the store byte-identical.  Plus the library side (``Store.sql``,
the API verbs) and what must still work."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rldata
from rldata import open_store
from rldata.errors import ConfigError, RldataError
from tests.reliability.helpers import banded_store, fingerprint, one_error_line, run

SECRET = "leak-" + uuid.uuid4().hex  # written to files outside the store: no output may show it


@pytest.fixture
def root(tmp_path):
    return banded_store(tmp_path / "store")


@pytest.fixture
def outside(tmp_path):
    """Files outside the store that hold the secret: a text file and a Parquet file."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text(SECRET + "\n")
    pq.write_table(pa.table({"task_id": [SECRET], "x": [1]}), d / "secret.parquet")
    return d


def _refused(capsys, root, *argv, expect: str) -> str:
    """Run one hostile command: one error line containing ``expect``, nothing leaked, store unchanged."""
    capsys.readouterr()
    before = fingerprint(root)
    code, out, err = run(capsys, "--store", root, *argv)
    assert code != 0 and out == "", (argv, out, err)
    line = one_error_line(err)
    assert expect in line, (expect, line)
    assert SECRET not in err and fingerprint(root) == before
    return line


# ---- SQL reads nothing but the store --------------------------------------------------------------
_HOSTILE_SQL = [
    ("SELECT * FROM read_text('/etc/shadow')", 'cannot access file "/etc/shadow"'),
    ("SELECT * FROM read_text('/etc/passwd')", 'cannot access file "/etc/passwd"'),
    ("SELECT * FROM read_csv('/etc/passwd', sep = ':')", "cannot access file"),
    ("SELECT * FROM glob('/root/**')", 'cannot access file "/root/**"'),
    ("SELECT * FROM glob('/*')", "cannot access file"),
    ("SELECT * FROM read_blob('/proc/self/environ')", 'cannot access file "/proc/self/environ"'),
    ("SELECT * FROM read_text('/proc/self/cmdline')", "cannot access file"),
    ("SELECT getenv('HOME')", "getenv is not available"),
    ("SELECT * FROM read_text('OUT/secret.txt')", "cannot access file"),
    ("SELECT * FROM read_text(['OUT/secret.txt'])", "cannot access file"),
    ("SELECT * FROM read_text('OUT/*.txt')", "cannot access file"),
    ("SELECT * FROM read_parquet('OUT/secret.parquet')", "cannot access file"),
    ("SELECT * FROM parquet_metadata('OUT/secret.parquet')", "cannot access file"),
    ("SELECT * FROM sniff_csv('OUT/secret.txt')", "cannot access file"),
    ("SELECT * FROM read_json('OUT/secret.txt')", "cannot access file"),
    ("SELECT * FROM read_json_auto('OUT/secret.txt')", "cannot access file"),
    ("SELECT * FROM 'OUT/secret.parquet'", "SQL"),
    ("SELECT * FROM 'https://example.com/x.parquet'", 'cannot access file "https://example.com'),
    ("SELECT * FROM read_parquet('s3://bucket/x.parquet')", "cannot access file"),
    # the store's own files, other than the data files of the versions the query was given
    ("SELECT * FROM read_text('STORE/tasks/_delta_log/00000000000000000000.json')", "cannot access"),
    ("SELECT * FROM read_parquet('STORE/tasks/*.parquet')", "cannot access file"),
    ("SELECT * FROM read_text('STORE/tasks/../../outside/secret.txt')", "cannot access file"),
    # hidden inside a query that reads a table, a subquery, a nested query()
    ("SELECT count(*) FROM tasks, read_text('/etc/passwd')", "cannot access file"),
    (
        "SELECT task_id FROM tasks WHERE prompt IN (SELECT content FROM read_text('OUT/secret.txt'))",
        "cannot access file",
    ),
    ("SELECT * FROM query('SELECT * FROM read_text(''/etc/passwd'')')", "cannot access file"),
    ("SELECT * FROM query('SET enable_external_access = true')", "SQL error"),
    # statements refused by the read-only check, before any connection
    ("COPY (SELECT 1) TO 'OUT/x.csv'", "COPY statements are not allowed"),
    ("ATTACH 'OUT/x.db' AS x", "ATTACH"),
    ("INSTALL httpfs", "LOAD"),
    ("LOAD httpfs", "LOAD"),
    ("SET enable_external_access = true", "SET"),
    ("RESET lock_configuration", "SET"),
]


@pytest.mark.parametrize(("query", "expect"), _HOSTILE_SQL, ids=[q for q, _ in _HOSTILE_SQL])
def test_sql_reads_nothing_but_the_store(root, outside, capsys, query, expect):
    q = query.replace("OUT", str(outside)).replace("STORE", root)
    _refused(capsys, root, "sql", q, "-f", "csv", expect=expect)


_HOSTILE_WHERE = "task_id IN (SELECT content FROM read_text('OUT/secret.txt'))"


@pytest.mark.parametrize(
    "argv",
    [
        ["passrates", "--where", _HOSTILE_WHERE],
        ["passrates", "--where", "getenv('HOME') IS NOT NULL"],
        ["passrates", "--where", "EXISTS (SELECT * FROM glob('/root/**'))"],
        ["sample", "--where", _HOSTILE_WHERE, "--n", "1"],
        ["export", "--rollouts", "--format", "jsonl", "--out", "OUT/exp", "--where", _HOSTILE_WHERE],
        ["audit", "--verifier", "math@1", "--against", "labels", "--where", _HOSTILE_WHERE],
    ],
    ids=["passrates", "passrates-getenv", "passrates-glob", "sample", "export-rollouts", "audit"],
)
def test_a_where_predicate_reads_nothing_but_the_store(root, outside, capsys, argv):
    argv = [a.replace("OUT", str(outside)) for a in argv]
    _refused(capsys, root, *argv, expect="SQL reads only the store's tables: ")
    assert not (outside / "exp").exists()


def test_store_sql_is_locked_down_for_every_caller(root, outside):
    store = open_store(root)
    with pytest.raises(RldataError, match="SQL reads only the store's tables: cannot access file"):
        store.sql(f"SELECT * FROM read_text('{outside}/secret.txt')")
    with pytest.raises(RldataError, match="SQL reads only the store's tables"):
        store.sql("SELECT count(*) FROM tasks WHERE getenv('HOME') IS NOT NULL")
    # the lock-down stays on for the whole connection: settings cannot be turned back
    rel = store.sql("SELECT count(*) FROM tasks")
    assert rel.fetchall() == [(12,)]
    con = store._conns[-1]
    with pytest.raises(Exception, match="locked"):
        con.execute("SET enable_external_access = true")
    assert con.sql("SELECT current_setting('enable_external_access')").fetchall() == [(False,)]


def test_a_connection_for_several_queries_is_locked_down_too(root, outside):
    """Store.connect: the tables asked for, at their versions, for several queries (doctor runs one
    per table on it), under the same lock-down as Store.sql."""
    store = open_store(root)
    con = store.connect(["tasks", "passrates"], as_of={"tasks": 0})
    assert con.sql("SELECT count(*) FROM tasks").fetchall() == [(0,)]  # version 0: created, empty
    assert con.sql("SELECT count(*) FROM passrates").fetchall() == [(12,)]
    with pytest.raises(duckdb.CatalogException):  # only the tables asked for
        con.sql("SELECT count(*) FROM selections")
    with pytest.raises(duckdb.PermissionException):
        con.sql(f"SELECT * FROM read_text('{outside}/secret.txt')")
    with pytest.raises(Exception, match="locked"):
        con.execute("SET enable_external_access = true")


def test_what_sql_may_still_read(root, capsys):
    store = open_store(root)
    v1 = store.version("tasks")
    store.append("tasks", [{"task_id": "t99", "source": "s", "domain": "math", "prompt": "x", "answer": "1"}])
    for q, want in (
        ("SELECT count(*) AS n FROM tasks", "13"),
        ("SELECT count(*) AS n FROM tasks t JOIN passrates p USING (task_id)", "12"),
        ("WITH a AS (SELECT * FROM tasks) SELECT count(*) AS n FROM a", "13"),
        ("SELECT count(*) AS n FROM (SUMMARIZE tasks)", "12"),
        ("SELECT count(*) AS n FROM selections WHERE selection = 's1'", "12"),
    ):
        code, out, err = run(capsys, "--store", root, "sql", q, "-f", "csv")
        assert code == 0 and out.splitlines()[1] == want, (q, out, err)
    code, out, err = run(
        capsys, "--store", root, "sql", "SELECT count(*) AS n FROM tasks", "--as-of", str(v1), "-f", "csv"
    )
    assert code == 0 and out.splitlines()[1] == "12", err  # time travel reads that version's files
    code, out, err = run(capsys, "--store", root, "passrates", "--where", "p.n_correct > 10", "-f", "csv")
    assert code == 0 and len(out.splitlines()) == 1 + 3, err


def test_many_files_allow_the_tables_directories_only(root, outside, monkeypatch):
    """Past the allow-list's size the tables' own directories are allowed: still nothing outside."""
    import rldata.sql_guard as guard

    monkeypatch.setattr(guard, "_MAX_ALLOWED_FILES", 1)
    store = open_store(root)
    store.append("tasks", [{"task_id": "t98", "source": "s", "domain": "math", "prompt": "y", "answer": "2"}])
    assert len(store.table("tasks").file_uris()) > 1
    assert store.sql("SELECT count(*) FROM tasks").fetchall() == [(13,)]
    sibling = Path(root) / "tasks2"  # shares the allowed directory's name as a prefix
    sibling.mkdir()
    (sibling / "secret.txt").write_text(SECRET)
    for q in (
        f"SELECT * FROM read_text('{outside}/secret.txt')",
        f"SELECT * FROM read_text('{root}/tasks/../../outside/secret.txt')",
        f"SELECT count(*) FROM tasks, read_text('{sibling}/secret.txt')",
    ):
        with pytest.raises(RldataError, match="cannot access file"):
            store.sql(q).fetchall()


def test_duckdbs_temp_directory_is_private(root, tmp_path, capsys, monkeypatch):
    """With external access off DuckDB still reads its temp directory, ./.tmp by default."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "notes.txt").write_text(SECRET)
    _refused(capsys, root, "sql", "SELECT * FROM read_text('.tmp/notes.txt')", expect="cannot access file")
    _refused(
        capsys, root, "sql", f"SELECT * FROM read_text('{tmp_path}/.tmp/*')", expect="cannot access file"
    )


# ---- outputs stay out of the store ---------------------------------------------------------------
LOG0 = "tasks/_delta_log/00000000000000000000.json"
_INSIDE = [
    (["sql", "SELECT 1", "--out", f"STORE/{LOG0}"], "--out: out "),
    (["sql", "SELECT 1", "-o", "STORE/x.csv"], "--out: out "),
    (["sql", "SELECT 1", "--out", "STORE"], "--out: out "),
    (["passrates", "--out", f"STORE/{LOG0}"], "--out: out "),
    (["tables", "--out", "STORE/tables.txt"], "--out: out "),
    (["filter", "--band", "0.2,0.8", "--name", "s2", "--out", "STORE/f.txt"], "--out: out "),
    (["stratify", "-s", "s1", "--quantiles", "2", "--curriculum", f"STORE/{LOG0}"], "--curriculum: "),
    (["stratify", "-s", "s1", "--quantiles", "2", "--out", "STORE/counts.txt"], "--out: out "),
    (["ingest", "OUT/bad.jsonl", "--on-error", "skip", "--rejects", "STORE/rejects.jsonl"], "--rejects: "),
    (["report", "--out", "STORE/report"], "--out: out "),
    (["export", "--selection", "s1", "--format", "jsonl", "--out", "STORE/export"], "--out: out "),
    (["export", "--selection", "s1", "--format", "jsonl", "--out", "STORE/.."], "holds the store"),
    (["judge", "export", "STORE/pairs"], "out "),
    (["metrics", "export", "STORE/tb", "--run", "r1", "--to", "tensorboard"], "out "),
    (["train", "--out", "STORE/runs"], "--out: output_dir "),
    (["train", "--tracker", "tensorboard", "--tracker-dir", "STORE/tb"], "--tracker-dir: tracker_dir "),
    (["cost", "--params", "7e9", "--tokens", "1e9", "--gpu", "h100", "--out", "STORE/cost.txt"], "--out"),
    (["sql", "SELECT 1", "--out", "LINK/00000000000000000001.json"], "--out: out "),
]


@pytest.mark.parametrize(("argv", "flag"), _INSIDE, ids=[" ".join(a[:2]) + " " + a[-2] for a, _ in _INSIDE])
def test_outputs_refuse_paths_inside_the_store(root, outside, capsys, argv, flag):
    (outside / "bad.jsonl").write_text('{"prompt": "x"}\n')
    link = outside / "link"
    if not link.exists():
        link.symlink_to(Path(root) / "tasks" / "_delta_log")  # a symbolic link into the store
    argv = [a.replace("STORE", root).replace("OUT", str(outside)).replace("LINK", str(link)) for a in argv]
    line = _refused(capsys, root, *argv, expect=flag)
    assert "the store" in line and "outside the store" in line or "holds the store" in line


def test_the_store_from_the_environment_or_the_default_is_guarded(root, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RLDATA_STORE", root)
    before = fingerprint(root)
    code, out, err = run(capsys, "sql", "SELECT 1", "--out", str(Path(root) / LOG0))
    assert code == 1 and "inside the store" in one_error_line(err) and out == ""
    monkeypatch.delenv("RLDATA_STORE")
    monkeypatch.chdir(Path(root).parent)  # the default store, ./rldata-store
    default = Path(root).parent / "rldata-store"
    open_store(default)
    code, out, err = run(capsys, "cost", "--params", "7e9", "--tokens", "1e9", "-o", "rldata-store/x.csv")
    assert code == 1 and "--out: out rldata-store/x.csv is inside the store" in one_error_line(err)
    assert fingerprint(root) == before and not (default / "x.csv").exists()


def test_outputs_outside_the_store_still_work(root, tmp_path, capsys):
    dest = tmp_path / "elsewhere"
    dest.mkdir()
    code, _, err = run(
        capsys,
        "--store",
        root,
        "sql",
        "SELECT count(*) AS n FROM tasks",
        "-o",
        str(dest / "n.csv"),
        "-f",
        "csv",
    )
    assert code == 0 and (dest / "n.csv").read_text().splitlines() == ["n", "12"], err
    code, _, err = run(capsys, "--store", root, "passrates", "-o", str(dest / "p.parquet"), "-f", "parquet")
    assert code == 0 and pq.read_table(dest / "p.parquet").num_rows == 12, err
    # a sibling whose name starts like the store's is not inside it
    code, _, err = run(
        capsys, "--store", root, "sql", "SELECT 1 AS one", "-o", root + "-sibling.csv", "-f", "csv"
    )
    assert code == 0 and Path(root + "-sibling.csv").exists(), err


def test_the_api_verbs_refuse_the_store_too(root, tmp_path):
    store = open_store(root)
    before = fingerprint(root)
    with pytest.raises(ConfigError, match="is inside the store") as e:
        rldata.stratify(store, selection="s1", quantiles=2, curriculum=Path(root) / LOG0)
    assert e.value.field == "curriculum"
    with pytest.raises(ConfigError, match="is inside the store") as e:
        rldata.report(store, out=Path(root) / "report")
    assert e.value.field == "out"
    with pytest.raises(ConfigError, match="is inside the store") as e:
        rldata.export(store, selection="s1", format="jsonl", out=Path(root) / "exp")
    assert e.value.field == "out"
    with pytest.raises(ConfigError, match="holds the store"):
        rldata.export(store, selection="s1", format="jsonl", out=tmp_path)
    with pytest.raises(ConfigError, match="is inside the store") as e:
        rldata.train(store, output_dir=str(Path(root) / "runs"))  # refused before Ray starts
    assert e.value.field == "output_dir"
    assert fingerprint(root) == before


# ---- a failed output write is an error --------------------------------------------------------------
_full = pytest.mark.skipif(
    not (os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)),
    reason="no /dev/full character device here",
)


@_full
@pytest.mark.parametrize(
    "argv",
    [
        ["sql", "SELECT 1", "--out", "/dev/full"],
        ["sql", "SELECT 1", "--out", "/dev/full", "-f", "csv"],
        ["sql", "SELECT 1", "--out", "/dev/full", "-f", "json"],
        ["sql", "SELECT 1", "--out", "/dev/full", "-f", "parquet"],
        ["passrates", "--out", "/dev/full"],
        ["tables", "--out", "/dev/full"],
        ["cost", "--params", "7e9", "--tokens", "1e9", "--gpu", "h100", "--out", "/dev/full"],
        ["ingest", "OUT/bad.jsonl", "--on-error", "skip", "--dry-run", "--rejects", "/dev/full"],
    ],
    ids=lambda a: " ".join(a[:1] + a[-3:]),
)
def test_a_full_device_is_an_error(root, outside, capsys, argv):
    (outside / "bad.jsonl").write_text('{"prompt": "x"}\n')
    argv = [a.replace("OUT", str(outside)) for a in argv]
    capsys.readouterr()
    before = fingerprint(root)
    code, out, err = run(capsys, "--store", root, *argv)
    lines = [ln for ln in err.splitlines() if ln.startswith("rldata: error:")]
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert len(lines) == 1 and "/dev/full: cannot write: No space left on device" in lines[0], err
    assert fingerprint(root) == before


@_full
def test_a_curriculum_to_a_device_is_written_in_place_never_replaced(root, capsys):
    code, _, err = run(
        capsys, "--store", root, "stratify", "-s", "s1", "--quantiles", "2", "--curriculum", "/dev/full"
    )
    assert code == 1 and "--curriculum: curriculum /dev/full: cannot write" in one_error_line(err)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # an atomic rename would have replaced the device


def test_a_directory_as_out_is_one_line(root, tmp_path, capsys):
    code, out, err = run(capsys, "--store", root, "sql", "SELECT 1", "--out", str(tmp_path))
    assert code == 1 and out == "" and f"{tmp_path}: cannot write" in one_error_line(err)
