"""``rldata env register|list|show``: environments as rows of the ``environments`` table."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store
from rldata.console import log

_SPEC_ARG = typer.Argument(..., help="YAML (or JSON) environment spec; see docs/environments.md.")
_NAME_ARG = typer.Argument(..., help="The environment's name (env_id).")
env_app = typer.Typer(help="Register and list environments (docs/environments.md).", no_args_is_help=True)


@env_app.command("register")
def register_cmd(
    ctx: typer.Context,
    spec_file: Path = _SPEC_ARG,
    fmt: Format = FORMAT_OPT,
) -> None:
    """Validate SPEC_FILE (fields, limits, that the class imports and takes its config), then add it."""
    import polars as pl

    from rldata.api import env_register

    res = env_register(get_store(ctx, create=True), spec=spec_file)
    log(f"{'registered' if res.new else 'already registered'}: {res.env_id}@{res.version}")
    row = {"env_id": res.env_id, "kind": res.kind, "spec": res.spec, "version": res.version}
    emit(pl.DataFrame([row]), fmt)


@env_app.command("list")
def list_cmd(ctx: typer.Context, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT) -> None:
    """Every registered environment version."""
    from rldata.api import env_list

    emit(env_list(get_store(ctx)).rows, fmt, out)


@env_app.command("show")
def show_cmd(
    ctx: typer.Context, name: str = _NAME_ARG, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT
) -> None:
    """Every version of environment NAME with its spec (JSON)."""
    from rldata.api import env_show

    emit(env_show(get_store(ctx), name=name).rows, fmt, out)


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")
