"""What every command shares: the store option, output formats, one-line errors."""

from __future__ import annotations

import io
import json
import sys
from enum import Enum
from functools import partial
from pathlib import Path

import polars as pl
import typer

from rldata.cli._options import config_of, field_flags
from rldata.errors import RldataError
from rldata.store.core import DEFAULT_STORE, open_store
from rldata.store.outputs import check_output_path, check_writable_file
from rldata.store.outputs import write_output as _write_output

__all__ = [
    "FORMAT_OPT",
    "OUT_OPT",
    "Format",
    "OnError",
    "emit",
    "flag_for",
    "get_store",
    "int_list",
    "lazy_store",
    "out_path_check",
]


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


class OnError(str, Enum):
    """What a bad input record does: ``fail`` aborts with nothing written, ``skip`` keeps the rest."""

    fail = "fail"
    skip = "skip"


FORMAT_OPT = typer.Option(
    Format.table, "--format", "-f", help="How to print rows: table, csv, json or parquet."
)


def _store_of(ctx) -> object:
    """The store this command names (opened or not): its Store, its --store root, or None (default)."""
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    return obj.get("store_obj") or obj.get("store")


def out_path_check(name: str, *, directory: bool = False):
    """An option callback that refuses an output path inside the store, or a file that cannot be
    created, before the command runs (``rldata.store.outputs``; ``name`` is the field the error names)."""

    def check(ctx: typer.Context, value):
        checked = check_output_path(value, store=_store_of(ctx), name=name, directory=directory)
        if not directory:  # a missing directory or a directory as a file: refused before any commit
            check_writable_file(value, name=name)
        return checked

    return check


OUT_OPT = typer.Option(
    None,
    "--out",
    "-o",
    help="Write the rows to this file instead of stdout.",
    callback=out_path_check("out"),
)


def int_list(text: str | None, what: str) -> list[int] | None:
    """'1,4,16' -> [1, 4, 16]; anything else is a one-line error naming the option."""
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise RldataError(f"{what} must be comma-separated integers, got {text!r}") from None


def _options(cmd) -> list:
    return [p for p in getattr(cmd, "params", []) if getattr(p, "param_type_name", None) == "option"]


def _commands_of(root, argv: list[str]) -> list:
    """The (sub)command ``argv`` runs and the groups above it, leaf first; skips the values of value options."""
    cmd, args, chain = root, list(argv), [root]
    while getattr(cmd, "commands", None) and args:  # a group (typer vendors click: duck-typed)
        takes_value = {o for p in _options(cmd) if not p.is_flag for o in p.opts}
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in takes_value else 1
        if i >= len(args) or args[i] not in cmd.commands:
            break
        cmd, args = cmd.commands[args[i]], args[i + 1 :]
        chain.append(cmd)
    return chain[::-1]


def flag_for(root, argv: list[str], field: str | None) -> str | None:
    """The long option of the command ``argv`` runs that sets library field ``field`` (None: none
    does): from the command's config (each field's own flag, rldata.cli._options), else the option
    whose parameter is named after the field (``--store`` sets ``root``).  A field no option of the
    failing command feeds gets no flag: a message never points at an option the command lacks."""
    if not field:
        return None
    try:
        chain = _commands_of(root, argv)
    except Exception:  # noqa: BLE001 - only a nicer message is at stake; never mask the real error
        return None
    for cmd in chain:  # the command's own first, then its groups (--store & co)
        cls = config_of(cmd)
        if cls is not None and field in (flags := field_flags(cls)):
            return flags[field]
        for p in _options(cmd):  # an option whose parameter is the field itself, e.g. `run_id` behind --run
            if p.name == field.replace(".", "_"):
                return next((o for o in p.opts if o.startswith("--")), None)
    return None


def get_store(ctx: typer.Context, *, create: bool = False):
    """The store named by the global --store option (opened once per command).

    Only commands that write pass ``create=True``: reading a missing store is an error naming the
    path, not a new empty store at a mistyped path.
    """
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    if "store_obj" not in obj:
        obj["store_obj"] = open_store(
            obj.get("store"), storage_options=obj.get("storage_options"), create=create
        )
        root.obj = obj
    return obj["store_obj"]


def lazy_store(ctx: typer.Context):
    """The store for a verb to open itself (``store(create=...)``) once its parameters passed: a
    refused command creates no store.  What :func:`get_store` opens, opened when the verb asks."""
    return _LazyStore(ctx)


class _LazyStore:
    """``lazy_store``'s callable: ``.root`` is the store's path before it is opened (output paths
    are checked against it without opening or creating the store)."""

    def __init__(self, ctx: typer.Context):
        root = ctx.find_root()

        self.root = (root.obj if isinstance(root.obj, dict) else {}).get("store") or DEFAULT_STORE
        self._open = partial(get_store, ctx)

    def __call__(self, *, create: bool = False):
        return self._open(create=create)


MAX_CELL = 40  # a fitted table's widest column, in characters (longer text ends in an ellipsis)


def table_width() -> int | None:
    """The width a table is fitted to: the terminal's when stdout is one, else $COLUMNS when set;
    None (no fitting) for a pipe or a file."""
    import os
    import shutil

    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    cols = os.environ.get("COLUMNS", "")
    return int(cols) if cols.isdigit() and int(cols) > 0 else None


def _cell(v) -> str:
    return "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))


def _fit_columns(df: pl.DataFrame, cells: list[list[str]], width: int) -> list[int | None]:
    """Column indices that fit ``width``, taken from both ends as Polars does (None: the hidden ones)."""
    natural = [min(MAX_CELL, max([len(c)] + [len(r[i]) for r in cells])) for i, c in enumerate(df.columns)]
    need = lambda idx: sum(natural[i] for i in idx) + 3 * max(len(idx) - 1, 0)  # " │ " between columns
    if need(range(len(natural))) <= width:
        return list(range(len(natural)))
    left, right = [], []
    lo, hi = 0, len(natural) - 1
    while lo <= hi:
        side = left if len(left) <= len(right) else right
        i = lo if side is left else hi
        # a hidden-columns marker takes 4 more characters; keep at least one column
        if left and need(left + right + [i]) + 4 > width:
            break
        side.append(i)
        lo, hi = (lo + 1, hi) if side is left else (lo, hi - 1)
    return left + [None] + right[::-1]


def _rich_table(df: pl.DataFrame) -> str:
    """A table for people: fitted to the terminal (columns from both ends, long cells ending in an
    ellipsis, as Polars prints a frame) when stdout is one; whole otherwise."""
    from rich.console import Console
    from rich.table import Table

    width = table_width()
    cells = [[_cell(v) for v in row] for row in df.iter_rows()]
    t = Table(show_edge=False, header_style="bold")
    if width is None:
        for c in df.columns:
            t.add_column(c, overflow="fold")
        for row in cells:
            t.add_row(*row)
        con_width = max(80, min(200, 20 * len(df.columns)))
    elif df.height == 1 and None in _fit_columns(df, cells, width):
        # a one-row summary wider than the terminal: one line per field instead of hidden columns
        t.add_column("field", no_wrap=True, min_width=max(len(c) for c in df.columns))
        t.add_column("value", overflow="ellipsis", no_wrap=True)
        for c, v in zip(df.columns, cells[0], strict=True):
            t.add_row(c, v)
        con_width, shown = width, []
    else:
        shown = _fit_columns(df, cells, width)
        cap = MAX_CELL if None in shown else None  # every column shown: the long ones share the width
        for i in shown:
            if i is None:
                t.add_column("…", no_wrap=True)
            else:
                t.add_column(df.columns[i], overflow="ellipsis", no_wrap=True, max_width=cap)
        for row in cells:
            t.add_row(*["…" if i is None else row[i] for i in shown])
        con_width = width
    buf = io.StringIO()
    Console(file=buf, width=con_width, force_terminal=sys.stdout.isatty()).print(t)
    text = buf.getvalue()
    if width is not None and None in shown:
        hidden = len(df.columns) - len(shown) + 1
        text += f"{df.height} rows x {len(df.columns)} columns ({hidden} hidden: --format csv or json prints all)\n"
    return text


def _flatten_nested(df: pl.DataFrame) -> pl.DataFrame:
    """CSV has no nested values: lists and structs become JSON text."""
    nested = [c for c, t in df.schema.items() if t.is_nested()]
    if not nested:
        return df
    enc = {c: [None if v is None else json.dumps(v, default=str) for v in df[c].to_list()] for c in nested}
    return df.with_columns([pl.Series(c, vals, dtype=pl.String) for c, vals in enc.items()])


def emit(
    df: pl.DataFrame,
    fmt: Format | str = Format.table,
    out: Path | None = None,
    *,
    committed: str | None = None,
) -> None:
    """Print (or write to ``out``) a frame in the chosen format; data goes to stdout only.
    ``committed``: what the command committed before its summary rows, said when ``out`` cannot be
    written (a device that refuses bytes passes every check made before the commit)."""
    fmt = Format(fmt)

    def write_output(path, data, *, name):
        try:
            if path is None:  # stdout (a closed pipe, a full disk: rldata.cli.main names it)
                if isinstance(data, bytes):
                    sys.stdout.buffer.write(data)
                    sys.stdout.buffer.flush()
                else:
                    sys.stdout.write(data)
                    sys.stdout.flush()
            else:
                _write_output(path, data, name=name)
        except RldataError as e:
            if committed is None:
                raise
            raise RldataError(f"{e}; {committed}: only this output is missing", field=e.field) from None

    if fmt is Format.parquet:
        if out is None and sys.stdout.isatty():
            raise RldataError("--format parquet writes binary: give --out FILE or redirect stdout")
        buf = io.BytesIO()
        df.write_parquet(buf)
        write_output(out, buf.getvalue(), name="out")
        return
    if fmt is Format.csv:
        text = _flatten_nested(df).write_csv()
    elif fmt is Format.json:
        text = json.dumps(df.to_dicts(), default=str, ensure_ascii=False) + "\n"
    else:
        text = _rich_table(df)
    write_output(out, text, name="out")
