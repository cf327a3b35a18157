"""What user SQL may do: ``rldata sql`` only reads, and a ``--where`` is one predicate.

The check goes by DuckDB's own parse of the text (its statement types), not by a regex: a query
is allowed when it is exactly one SELECT (which covers WITH, VALUES, FROM-first, DESCRIBE, SHOW,
SUMMARIZE) or EXPLAIN.  Writing results is what ``--out`` is for.
"""

from __future__ import annotations

import duckdb

from rldata.errors import RldataError

__all__ = ["check_predicate", "check_read_only"]

_READ_TYPES = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


def _statements(text: str) -> list:
    return duckdb.connect().extract_statements(text)


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
    (the parameter, e.g. ``where`` or ``eval_where``) and the CLI puts the option's flag in front.
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
