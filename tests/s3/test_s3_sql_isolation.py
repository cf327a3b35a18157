"""Issue 29 on a store in S3 (the moto server): SQL reads the store's tables and nothing else (no local
file, no ``/proc``, no object outside the tables DuckDB was given, no environment variable), a local
output path is never inside the store, and a secret given as ``--storage-option`` never enters the
process's environment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from s3_helpers import SECRET

from rldata import open_store
from tests.reliability.helpers import run, seed_passrates


def _argv(s3_server, uri: str, *args: str) -> list[str]:
    opts = [x for k, v in s3_server.options.items() for x in ("--storage-option", f"{k}={v}")]
    return ["--store", uri, *opts, *args]


@pytest.fixture
def s3_root(s3_server, s3_uri):
    seed_passrates(open_store(s3_uri, storage_options=s3_server.options), 4, n=8, offset=0)
    return s3_uri


def _run(capsys, argv):
    capsys.readouterr()
    return run(capsys, *argv)


def test_sql_on_s3_reads_the_tables_and_nothing_else(s3_server, s3_root, tmp_path, capsys):
    bucket_prefix = s3_root
    code, out, err = _run(
        capsys, _argv(s3_server, s3_root, "sql", "SELECT count(*) AS n FROM tasks", "-f", "csv")
    )
    assert code == 0 and out.splitlines() == ["n", "4"], err
    code, out, err = _run(
        capsys, _argv(s3_server, s3_root, "passrates", "--where", "p.n_correct >= 2", "-f", "csv")
    )
    assert code == 0 and len(out.splitlines()) == 1 + 2, err
    # a local output is never inside an S3 store
    code, _, err = _run(
        capsys,
        _argv(s3_server, s3_root, "sql", "SELECT 1 AS one", "-o", str(tmp_path / "o.csv"), "-f", "csv"),
    )
    assert code == 0 and (tmp_path / "o.csv").read_text().splitlines() == ["one", "1"], err

    store = open_store(s3_root, storage_options=s3_server.options)
    objects_before = sorted(f for t in ("tasks", "passrates") for f in store.table(t).file_uris())
    for q in (
        "SELECT * FROM read_text('/proc/self/cmdline')",
        "SELECT * FROM read_blob('/proc/self/environ')",
        "SELECT * FROM read_text('/etc/passwd')",
        f"SELECT * FROM read_parquet('{bucket_prefix}/tasks/*.parquet')",
        f"SELECT * FROM glob('{bucket_prefix}/**')",
        f"SELECT count(*) FROM tasks, read_text('{s3_server.endpoint}/')",
        "SELECT getenv('AWS_SECRET_ACCESS_KEY')",
    ):
        code, out, err = _run(capsys, _argv(s3_server, s3_root, "sql", q))
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 1 and out == "" and len(lines) == 1, (q, err)
        assert lines[0].startswith("rldata: error: SQL reads only the store's tables: "), (q, lines)
        assert SECRET not in err
    code, out, err = _run(
        capsys,
        _argv(
            s3_server,
            s3_root,
            "passrates",
            "--where",
            "task_id IN (SELECT content FROM read_text('/etc/passwd'))",
        ),
    )
    assert code == 1 and out == "" and "SQL reads only the store's tables" in err and err.count("\n") == 1
    after = open_store(s3_root, storage_options=s3_server.options)
    assert sorted(f for t in ("tasks", "passrates") for f in after.table(t).file_uris()) == objects_before


def test_a_storage_option_secret_never_enters_the_environment(s3_server, s3_root, tmp_path, capsys):
    for args in (
        ["sql", "SELECT count(*) FROM tasks t JOIN passrates p USING (task_id)"],
        ["tables"],
        ["passrates"],
        ["ingest", "--sample", "arith"],
    ):
        code, out, err = _run(capsys, _argv(s3_server, s3_root, *args))
        assert code == 0, (args, err)
        assert SECRET not in out + err
    assert all(SECRET not in v for v in os.environ.values())
    with open("/proc/self/environ", "rb") as f:
        assert SECRET.encode() not in f.read()
    child = subprocess.run(["env"], capture_output=True, text=True, check=True)
    assert SECRET not in child.stdout  # nothing a child process inherits holds it either


@pytest.mark.slow  # one subprocess on a loaded machine: 10-20 s
def test_the_command_line_secret_is_out_of_sqls_reach(s3_server, s3_root):
    """The console script's own /proc/self/cmdline holds the --storage-option secret: SQL cannot open it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "rldata",
            *_argv(s3_server, s3_root, "sql", "SELECT * FROM read_text('/proc/self/cmdline')"),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**env, "RAY_ADDRESS": ""},
        timeout=300,
    )
    assert p.returncode == 1 and p.stdout == "", p.stderr[-2000:]
    assert (
        p.stderr.strip()
        == 'rldata: error: SQL reads only the store\'s tables: cannot access file "/proc/self/cmdline"'
    )
    assert SECRET not in p.stderr
