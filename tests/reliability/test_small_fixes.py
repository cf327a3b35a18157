"""Issue 11's small fixes, each through the CLI: undecodable text, read-only SQL, errors that name
their cause, read-only commands on a missing store, stratify's output checked before its commit,
and ``train --resume`` of an unknown run."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rldata import open_store
from rldata.errors import SchemaError
from tests.reliability.helpers import fingerprint, one_error_line, run


@pytest.fixture
def root(tmp_path):
    store = open_store(tmp_path / "store")
    store.append(
        "tasks",
        [
            {"task_id": f"t{k}", "source": "s", "domain": "math", "prompt": f"{k}+1?", "answer": str(k + 1)}
            for k in range(4)
        ],
    )
    return str(tmp_path / "store")


# ---- invalid UTF-8 ------------------------------------------------------------------------------
def test_invalid_utf8_jsonl_rejected_with_file_and_line(root, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"prompt": "ok?", "answer": "1"}\n{"prompt": "2+\xff\xfe2?", "answer": "4"}\n')
    before = fingerprint(root)
    code, _, err = run(capsys, "--store", root, "ingest", str(bad))
    assert code != 0 and f"{bad}:2:" in one_error_line(err) and "UTF-8" in err
    assert fingerprint(root) == before

    code, _, err = run(capsys, "--store", root, "ingest", str(bad), "--on-error", "skip")
    assert code == 0, err
    assert f"{bad}:2" in err and "added 1" in err
    code, out, err = run(
        capsys, "--store", root, "sql", "select prompt from tasks order by prompt", "-f", "csv"
    )
    assert code == 0, err
    assert "ok?" in out and "\ufffd" not in out
    assert run(capsys, "--store", root, "compact")[0] == 0  # the store stays readable and writable


def test_invalid_utf8_csv_rejected_with_line(root, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"prompt,answer\n1+3,4\n2+\xff,4\n")
    code, _, err = run(capsys, "--store", root, "ingest", str(bad))
    assert code != 0 and f"{bad}:3:" in one_error_line(err)
    code, _, err = run(capsys, "--store", root, "ingest", str(bad), "--on-error", "skip")
    assert code == 0 and "added 1" in err


def test_store_refuses_undecodable_text_from_any_writer(tmp_path):
    store = open_store(tmp_path / "s")
    prompts = pa.array([b"fine", b"2+\xff"], type=pa.binary()).view(pa.string())
    table = pa.table(
        {"task_id": ["a", "b"], "source": ["s", "s"], "domain": ["math", "math"], "prompt": prompts}
    )
    with pytest.raises(SchemaError, match=r"row 1, field 'prompt': text is not valid UTF-8"):
        store.append("tasks", table)
    with pytest.raises(SchemaError, match="utf-8"):
        store.append("tasks", [{"task_id": "c", "source": "s", "domain": "math", "prompt": "x\udcff"}])
    assert store.count("tasks") == 0


# ---- rldata sql reads only ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "query, reason",
    [
        ("COPY (SELECT * FROM tasks) TO 'STORE/leak.csv'", "COPY statements are not allowed"),
        ("ATTACH 'STORE/x.db' AS x", "ATTACH"),
        ("CREATE TABLE x AS SELECT 1", "CREATE"),
        ("DROP VIEW tasks", "DROP"),
        ("SELECT 1; SELECT 2", "one SQL statement at a time"),
        ("", "empty SQL query"),
        ("  ;  ", "empty SQL query"),
        ("INSTALL httpfs", "LOAD"),
        ("SET memory_limit='1GB'", "SET"),
    ],
)
def test_sql_refuses_anything_but_one_read(root, capsys, query, reason):
    before = fingerprint(root)
    code, out, err = run(capsys, "--store", root, "sql", query.replace("STORE", root))
    assert code != 0 and out == ""
    assert reason in one_error_line(err)
    assert fingerprint(root) == before


def test_sql_still_reads(root, capsys):
    for q in (
        "SELECT count(*) AS n FROM tasks",
        "WITH a AS (SELECT * FROM tasks) SELECT count(*) AS n FROM a",
        "FROM tasks SELECT count(*) AS n",
        "EXPLAIN SELECT * FROM tasks",
        "DESCRIBE tasks",
    ):
        code, _out, err = run(capsys, "--store", root, "sql", q, "-f", "csv")
        assert code == 0, (q, err)


# ---- errors that explain ------------------------------------------------------------------------
def test_passrates_k_not_an_integer(root, capsys):
    code, _, err = run(capsys, "--store", root, "passrates", "--k", "abc")
    assert code != 0 and "--k must be comma-separated integers, got 'abc'" in one_error_line(err)


def test_binary_curriculum_file_names_the_path(tmp_path, capsys):
    path = tmp_path / "buckets.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    code, _, err = run(capsys, "curriculum", str(path))
    assert code != 0 and str(path) in one_error_line(err) and "not a text file" in err


def test_sample_where_syntax_error_quotes_the_users_text(root, capsys):
    before = fingerprint(root)
    code, _, err = run(capsys, "--store", root, "sample", "--where", "nonsense((")
    line = one_error_line(err)
    assert code != 0 and "'nonsense(('" in line and "ORDER" not in line
    assert fingerprint(root) == before  # no run recorded


def test_empty_input_file_is_an_error_and_records_no_run(root, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    before = fingerprint(root)
    code, _, err = run(capsys, "--store", root, "ingest", str(empty))
    assert code != 0 and f"{empty}: no records" in one_error_line(err)
    assert fingerprint(root) == before


def test_store_that_is_a_regular_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    for argv in (["tables"], ["ingest", "--sample", "arith"]):
        code, _, err = run(capsys, "--store", str(f), *argv)
        assert code != 0 and f"store {f} is a file" in one_error_line(err)


def test_read_only_commands_do_not_create_a_store(tmp_path, capsys):
    missing = tmp_path / "typo"
    for argv in (["tables"], ["sql", "select 1"], ["passrates"], ["stats"], ["compact"]):
        code, _, err = run(capsys, "--store", str(missing), *argv)
        assert code != 0 and f"no store at {missing}" in one_error_line(err), argv
        assert not missing.exists()


def test_stratify_checks_the_curriculum_path_before_committing(root, tmp_path, capsys):
    store = open_store(root)
    store.upsert(
        "passrates",
        [
            {
                "task_id": f"t{k}",
                "model": "m",
                "params_hash": "p",
                "verifier_key": "v",
                "n": 16,
                "n_correct": 4 + k,
                "n_error": 0,
                "pass_rate": (4 + k) / 16,
            }
            for k in range(4)
        ],
    )
    assert run(capsys, "--store", root, "filter", "--band", "0.1,0.9", "--name", "s1")[0] == 0
    outdir = tmp_path / "outdir"
    outdir.mkdir()
    before = fingerprint(root)
    for target in (outdir, tmp_path / "no" / "such" / "b.yaml"):
        code, _, err = run(
            capsys, "--store", root, "stratify", "-s", "s1", "--quantiles", "2", "--curriculum", str(target)
        )
        assert code != 0 and str(target) in one_error_line(err)
        assert fingerprint(root) == before  # no bucket assignment committed
    assert list(outdir.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["outdir", "store"]


def test_train_resume_unknown_run_is_an_error(root, tmp_path, capsys):
    before = fingerprint(root)
    code, _, err = run(
        capsys, "--store", root, "train", "--resume", "--run-id", "nosuchrun", "--out", str(tmp_path / "runs")
    )
    assert code != 0 and "unknown run 'nosuchrun'" in one_error_line(err)
    assert fingerprint(root) == before
