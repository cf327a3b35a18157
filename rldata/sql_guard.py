"""What user SQL may do: ``rldata sql`` only reads, a ``--where`` is one predicate, and SQL sees the
store's tables and nothing else.

The statement check goes by DuckDB's own parse of the text (its statement types), not by a regex: a
query is allowed when it is exactly one SELECT (which covers WITH, VALUES, FROM-first, DESCRIBE,
SHOW, SUMMARIZE) or EXPLAIN.  Writing results is what ``--out`` is for.

A SELECT can still call table functions (``read_text('/etc/shadow')``, ``glob('/root/**')``,
``read_blob('/proc/self/environ')``, which holds any secret passed through ``AWS_*``) or a URL.  So
every connection that runs store SQL is locked down by :func:`lock_down` once the tables are
registered: DuckDB's external access is off (no file, glob, URL, COPY, ATTACH, INSTALL or LOAD,
no ``getenv``), extensions neither load nor install by themselves, Python variables are not
scanned, and the configuration is locked so the query cannot turn any of it back on.  The only
files left readable are the Parquet files of the table versions the query was given (DuckDB's
``allowed_paths``) and DuckDB's own spill directory, a private one; remote tables are Arrow datasets
that delta-rs reads, not DuckDB.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading

import duckdb

from rldata.errors import RldataError

__all__ = ["check_predicate", "check_read_only", "lock_down", "sql_error"]

_READ_TYPES = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
# Past this many files the allow-list costs more than it is worth (0.34 s to set 5,000 paths, against
# 0.04 s for a directory), so the tables' own directories are allowed instead: their data files and
# Delta logs, still nothing outside the store (DuckDB normalises ``..`` before it checks a path).
_MAX_ALLOWED_FILES = 1000
_LOCKDOWN = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET python_enable_replacements = false",
    "SET lock_configuration = true",  # last: nothing after it, the query included, can undo the above
)
_CONFINED = "SQL reads only the store's tables"
_temp_dir: str | None = None


def _private_temp_dir() -> str:
    """DuckDB allows reads of its temp directory even with external access off; by default that is
    ``./.tmp`` (whatever the working directory holds there), so spill to a private one instead."""
    global _temp_dir
    if _temp_dir is None:
        _temp_dir = tempfile.mkdtemp(prefix="rldata-duckdb-")  # mode 0700, this process's own
        atexit.register(shutil.rmtree, _temp_dir, True)
    return _temp_dir


def lock_down(con: duckdb.DuckDBPyConnection, *, files=(), directories=()) -> None:
    """Confine ``con`` to what is registered on it now, plus the local Parquet ``files`` its views read
    (or, for very many files, their ``directories``): call it after the tables, before user SQL."""
    files = list(files)
    con.execute("SET temp_directory = $1", [_private_temp_dir()])
    if len(files) > _MAX_ALLOWED_FILES:
        con.execute("SET allowed_directories = $1", [[d.rstrip("/") + "/" for d in directories]])
    elif files:
        con.execute("SET allowed_paths = $1", [files])
    for stmt in _LOCKDOWN:
        con.execute(stmt)


def sql_error(e: duckdb.Error, *, prefix: str = "SQL error") -> RldataError:
    """One line for a DuckDB error; a refusal of the lock-down says what SQL may read."""
    line = str(e).splitlines()[0] if str(e).strip() else type(e).__name__
    if isinstance(e, duckdb.PermissionException) or "disabled by configuration" in line:
        if "extension" in line.lower():
            return RldataError(f"{_CONFINED}: extensions cannot be installed or loaded")
        what = line.split("Cannot access ", 1)[-1].split(" - ", 1)[0] if "Cannot access " in line else line
        return RldataError(f"{_CONFINED}: cannot access {what}")
    if "configuration has been locked" in line:
        return RldataError(f"{_CONFINED}: settings cannot be changed")
    if "getenv" in line and "does not exist" in line:
        return RldataError(f"{_CONFINED}: getenv is not available")
    return RldataError(f"{prefix}: {line}")


_parsers = threading.local()  # each thread's connection for parsing only (it holds no data, runs nothing)


def _statements(text: str) -> list:
    """DuckDB's parse of ``text``.  One connection per thread does every parse: opening a DuckDB
    database takes ~15 ms, more than the parse (a connection is not shared between threads)."""
    con = getattr(_parsers, "con", None)
    if con is None:
        con = _parsers.con = duckdb.connect()
    return con.extract_statements(text)


def check_read_only(query: str) -> None:
    """Raise unless ``query`` is exactly one statement that only reads."""
    try:
        stmts = _statements(query)
    except duckdb.Error as e:
        raise RldataError(f"SQL error: {str(e).splitlines()[0]}") from None
    if not stmts:
        raise RldataError("empty SQL query")
    if len(stmts) > 1:
        raise RldataError(f"one SQL statement at a time, got {len(stmts)}")
    kind = stmts[0].type
    if kind not in _READ_TYPES:
        name = getattr(kind, "name", str(kind))
        raise RldataError(
            f"rldata sql only reads: {name} statements are not allowed (use --out to write results)"
        )


def check_predicate(text: str, *, field: str = "where", option: str | None = None) -> None:
    """Raise unless ``text`` parses as one SQL predicate on its own (so an error quotes the user's
    text, not the query it is spliced into, and no second statement can ride along).

    Every verb that splices a predicate into its SQL calls this first; the error names ``field``
    (the parameter, e.g. ``where`` or ``eval.where``) and the CLI puts the option's flag in front.
    ``option`` is the older name of ``field`` (``"--eval-where"`` is read as ``eval_where``)."""
    if option is not None:
        field = option.lstrip("-").replace("-", "_")
    if not text.strip():
        raise RldataError(f"{field} is empty", field=field)
    try:
        stmts = _statements(f"SELECT 1 WHERE {text}")
    except duckdb.Error as e:
        reason = str(e).splitlines()[0].removeprefix("Parser Error: ")
        raise RldataError(f"{field} {text!r} is not a valid SQL predicate: {reason}", field=field) from None
    if len(stmts) != 1 or stmts[0].type != duckdb.StatementType.SELECT:
        raise RldataError(f"{field} {text!r} is not a single SQL predicate", field=field)
