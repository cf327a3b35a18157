"""The CLI's conventions: --help everywhere, exit codes, stdout for data and stderr for logs, formats,
--store / RLDATA_STORE.  In-process through ``rldata.cli.main`` and, for the real console script, by
subprocess."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import typer

from rldata import cli, open_store
from rldata.cli import _load, app, main

RLDATA = str(Path(sys.executable).parent / "rldata")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def script(*argv, env=None, cwd=None):
    full_env = {**os.environ, **(env or {})}
    full_env.pop("RLDATA_DEBUG", None)
    return subprocess.run(
        [RLDATA, *argv], capture_output=True, env=full_env, cwd=cwd, timeout=300, check=False
    )


def _command_names() -> list[str]:
    _load()
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    return names + [g.name for g in app.registered_groups if g.name]


def test_help_on_every_registered_command(capsys):
    names = _command_names()
    assert {"ingest", "sql", "tables", "compact"} <= set(names)
    for name in names:
        code, out, err = run(capsys, name, "--help")
        assert code == 0, (name, err)
        assert "Usage: rldata " + name in " ".join(out.split()), name


def test_root_help_and_version(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "--store" in out and "ingest" in out
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("rldata ")


def test_main_builds_the_command_once_and_again_after_a_registration(capsys, monkeypatch):
    """main() called again and again (a notebook, these tests) builds the click command from the
    command functions once, not per call, and builds it again when a command was registered since."""
    builds = []
    build = typer.main.get_command
    monkeypatch.setattr(typer.main, "get_command", lambda a: builds.append(a) or build(a))
    monkeypatch.setattr(cli, "_built", [])
    for _ in range(3):
        assert run(capsys, "--version")[0] == 0
    assert run(capsys, "tables", "--help")[0] == 0
    assert builds == [app]
    # a command registered later (on a copy of the registry, so the app is left as it was) is seen
    monkeypatch.setattr(app, "registered_commands", list(app.registered_commands))
    app.command("hello-later")(lambda: print("hello"))
    code, out, _ = run(capsys, "hello-later")
    assert (code, out, len(builds)) == (0, "hello\n", 2)
    assert run(capsys, "--version")[0] == 0 and len(builds) == 2


def test_console_script_data_on_stdout_logs_on_stderr(tmp_path):
    store = str(tmp_path / "s")
    r = script("--store", store, "ingest", "--sample", "arith")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b""
    assert b"read 3000, added 3000, duplicates 0, rejected 0, decontaminated 0" in r.stderr
    r = script("--store", store, "sql", "SELECT count(*) AS n FROM tasks", "--format", "csv")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"n\n3000\n", b"")
    r = script("--store", store, "sql", "SELECT domain, count(*) AS n FROM tasks GROUP BY 1", "-f", "parquet")
    assert r.returncode == 0
    assert pq.read_table(io.BytesIO(r.stdout)).to_pylist() == [{"domain": "math", "n": 3000}]


def test_store_commands_do_not_import_torch_or_vllm(tmp_path):
    """Every command is registered at start-up, the train command's config included: a store command
    (ingest, tables, sql...) must not pay torch's and vLLM's import (seconds per process)."""
    code = (
        "import sys\nfrom rldata.cli import main\n"
        f"rc = main(['--store', {str(tmp_path / 's')!r}, 'ingest', '--sample', 'arith'])\n"
        f"rc += main(['--store', {str(tmp_path / 's')!r}, 'tables'])\n"
        "print(rc, sorted(m for m in ('torch', 'vllm', 'transformers') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "0 []"


def test_console_script_errors_are_one_line_with_exit_1_and_debug_shows_the_traceback(tmp_path):
    store = str(tmp_path / "s")
    open_store(store)
    r = script("--store", store, "sql", "SELECT nope FROM tasks")
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b""
    assert err.startswith("rldata: error: SQL error") and err.count("\n") == 1 and "Traceback" not in err
    r = script("--store", store, "--debug", "sql", "SELECT nope FROM tasks")
    assert r.returncode != 0 and "Traceback" in r.stderr.decode()


def test_usage_errors_exit_2(capsys):
    code, out, err = run(capsys, "tables", "--no-such-option")
    assert code == 2 and out == "" and "No such option" in err
    code, _, err = run(capsys, "tables", "--format", "xml")
    assert code == 2 and "xml" in err


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "table"])
def test_formats_for_rows(capsys, tmp_path, fmt):
    store = str(tmp_path / "s")
    assert run(capsys, "--store", store, "ingest", "--sample", "gsm8k-test")[0] == 0
    query = "SELECT source, count(*) AS n FROM tasks GROUP BY 1"
    if fmt == "parquet":
        code, out, _ = run(
            capsys, "--store", store, "sql", query, "--format", "parquet", "--out", str(tmp_path / "o.pq")
        )
        assert code == 0 and out == ""
        assert pq.read_table(tmp_path / "o.pq").to_pylist() == [{"source": "gsm8k", "n": 200}]
        return
    code, out, _ = run(capsys, "--store", store, "sql", query, "--format", fmt)
    assert code == 0
    if fmt == "csv":
        assert out == "source,n\ngsm8k,200\n"
    elif fmt == "json":
        assert json.loads(out) == [{"source": "gsm8k", "n": 200}]
    else:
        assert "gsm8k" in out and "200" in out
    code, out, _ = run(capsys, "--store", store, "tables", "--format", "json" if fmt == "table" else fmt)
    assert code == 0 and "tasks" in out


def test_store_option_env_var_and_default(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RLDATA_STORE", str(tmp_path / "env"))
    assert run(capsys, "ingest", "--sample", "gsm8k-test")[0] == 0
    assert open_store(tmp_path / "env").count("tasks") == 200
    assert run(capsys, "--store", str(tmp_path / "opt"), "ingest", "--sample", "arith-heldout")[0] == 0
    assert open_store(tmp_path / "opt").count("tasks") == 500  # --store wins over the env var
    assert open_store(tmp_path / "env").count("tasks") == 200
    monkeypatch.delenv("RLDATA_STORE")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "tables")
    assert code == 1 and "no store at" in err  # only a command that writes creates the default store
    assert run(capsys, "ingest", "--sample", "arith-heldout")[0] == 0
    code, out, _ = run(capsys, "tables", "--format", "csv")
    assert code == 0 and out.startswith("table,rows,version")
    assert (tmp_path / "rldata-store" / "tasks" / "_delta_log").is_dir()  # the default store


def test_ingest_fail_then_skip_through_the_cli(capsys, tmp_path):
    store = str(tmp_path / "s")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok", "answer": "1"}\n{"prompt": "x"\n{"answer": "2"}\n')
    code, out, err = run(capsys, "--store", store, "ingest", str(bad))
    assert code == 1 and out == ""
    assert err.strip() == (
        f"rldata: error: {bad}:2: invalid JSON: Expecting ',' delimiter (column 15) "
        "(nothing was written; --on-error skip ingests the other records)"
    )
    assert open_store(store).count("tasks") == 0
    code, out, err = run(
        capsys,
        "--store",
        store,
        "ingest",
        str(bad),
        "--on-error",
        "skip",
        "--format",
        "json",
        "--rejects",
        str(tmp_path / "rej.jsonl"),
    )
    assert code == 0
    assert json.loads(out)[0] | {"path": None, "version": None} == {
        "path": None,
        "read": 3,
        "added": 1,
        "duplicates": 0,
        "rejected": 2,
        "decontaminated": 0,
        "version": None,
    }
    assert f"rejected {bad}:2: invalid JSON" in err and f"rejected {bad}:3: field 'prompt': missing" in err
    rejects = [json.loads(line) for line in (tmp_path / "rej.jsonl").read_text().splitlines()]
    assert [(r["where"], r["field"]) for r in rejects] == [("2", None), ("3", "prompt")]


def test_ingest_argument_errors(capsys, tmp_path):
    code, _, err = run(capsys, "--store", str(tmp_path / "s"), "ingest")
    assert code == 1 and "give exactly one of path, sample or gym" in err
    code, _, err = run(capsys, "--store", str(tmp_path / "s"), "ingest", "--sample", "nope")
    assert code == 1 and "unknown sample 'nope'" in err
    code, _, err = run(capsys, "--store", str(tmp_path / "s"), "ingest", "--preset", "alpaca", "x.jsonl")
    assert code == 2


def test_ingest_mapping_dry_run_and_decontaminate_options(capsys, tmp_path):
    store = str(tmp_path / "s")
    src = tmp_path / "qa.csv"
    src.write_text("q,a,kind\nWhat is one plus one?,2,easy\nJanet has ducks,3,hard\n")
    code, out, err = run(
        capsys,
        "--store",
        store,
        "ingest",
        str(src),
        "--prompt-field",
        "q",
        "--answer-field",
        "a",
        "--category-field",
        "kind",
        "--source",
        "mine",
        "--dry-run",
        "-f",
        "csv",
    )
    assert code == 0 and "would add 2" in err and out.splitlines()[1].split(",")[1:4] == ["2", "2", "0"]
    assert open_store(store).count("tasks") == 0
    code, _, err = run(
        capsys,
        "--store",
        store,
        "ingest",
        str(src),
        "--prompt-field",
        "q",
        "--answer-field",
        "a",
        "--decontaminate",
        str(src),
        "--ngram",
        "3",
    )
    assert code == 0 and "added 0" in err and "decontaminated 2" in err


def test_tables_compact_and_time_travel_through_the_cli(capsys, tmp_path):
    store = str(tmp_path / "s")
    run(capsys, "--store", store, "ingest", "--sample", "gsm8k-test")
    run(capsys, "--store", store, "ingest", "--sample", "arith-heldout")
    code, out, _ = run(capsys, "--store", store, "tables", "-f", "json")
    tasks = next(r for r in json.loads(out) if r["table"] == "tasks")
    assert code == 0 and (tasks["rows"], tasks["version"], tasks["files"]) == (700, 2, 2)
    code, out, _ = run(
        capsys, "--store", store, "sql", "SELECT count(*) AS n FROM tasks", "--as-of", "1", "-f", "csv"
    )
    assert (code, out) == (0, "n\n200\n")
    code, out, err = run(capsys, "--store", store, "compact", "--retention-hours", "0", "-f", "json")
    stats = next(r for r in json.loads(out) if r["table"] == "tasks")
    assert code == 0 and stats["files_removed"] == 2 and stats["files_added"] == 1 and "compacted" in err
    code, out, _ = run(capsys, "--store", store, "sql", "SELECT count(*) AS n FROM tasks", "-f", "csv")
    assert out == "n\n700\n"
    code, out, err = run(
        capsys, "--store", store, "sql", "SELECT count(*) AS n FROM tasks", "--as-of", "1", "-f", "csv"
    )
    assert (code, out) == (1, "")  # version 1's file was vacuumed: a clear error, never wrong rows
    assert err.strip() == (
        "rldata: error: table 'tasks' version 1 can no longer be read: "
        "1 of its files were removed by compact (vacuum)"
    )


def test_a_wide_table_fits_the_terminal_unless_a_format_asks_for_data(capsys, tmp_path, monkeypatch):
    st = open_store(tmp_path / "s")
    prompt = "Natalia sold clips to 48 of her friends in April, and then half as many in May. " * 2
    st.append(
        "tasks",
        [
            {"task_id": f"t{i}", "source": "gsm8k", "domain": "math", "prompt": prompt, "answer": "72"}
            for i in range(3)
        ],
    )
    wide = (
        "SELECT " + ", ".join(f"prompt AS p{i}" for i in range(6)) + ", task_id FROM tasks ORDER BY task_id"
    )
    monkeypatch.setenv("COLUMNS", "70")  # what a 70-column terminal reports
    code, out, err = run(capsys, "--store", st.root, "sql", wide)
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= 70 and "…" in out  # cut with an ellipsis, as Polars does
    assert "p0" in lines[0] and "task_id" in lines[0]  # columns from both ends, the middle hidden
    assert lines[-1] == "3 rows x 7 columns (5 hidden: --format csv or json prints all)"
    code, out, _ = run(capsys, "--store", st.root, "sql", wide, "--format", "csv")
    assert code == 0 and out.count(prompt.strip()) == 18  # data formats are never cut
    code, out, _ = run(capsys, "--store", st.root, "sql", "SELECT task_id, prompt FROM tasks")
    assert max(len(x) for x in out.splitlines()) == 70 and prompt[:50] in out and "hidden" not in out
    code, out, _ = run(capsys, "--store", st.root, "sql", wide + " LIMIT 1")  # a one-row summary
    lines = out.splitlines()
    assert lines[0].split() == ["field", "┃", "value"] and len(lines) == 2 + 7 and "hidden" not in out
    assert max(len(x) for x in lines) <= 70 and lines[-1].split()[:3] == ["task_id", "│", "t0"]
    monkeypatch.delenv("COLUMNS")  # a pipe: the whole table, cut nowhere
    code, out, _ = run(capsys, "--store", st.root, "sql", "SELECT task_id, prompt FROM tasks")
    assert code == 0 and "…" not in out and "half as many in May" in out
