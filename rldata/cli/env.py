"""``rldata env register|list|show``: environments as rows of the ``environments`` table."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store
from rldata.console import log

_SPEC_ARG = typer.Argument(
    ...,
    help="YAML (or JSON) environment spec; or, with --openenv, the environment's NAME. "
    "See docs/environments.md.",
)
_NAME_ARG = typer.Argument(..., help="The environment's name (env_id).")
env_app = typer.Typer(help="Register and list environments (docs/environments.md).", no_args_is_help=True)


@env_app.command("register")
def register_cmd(
    ctx: typer.Context,
    spec_file: str = _SPEC_ARG,
    openenv: str = typer.Option(
        None, "--openenv", help="Register NAME as the OpenEnv server at this URL (http://HOST:PORT)."
    ),
    observation_role: str = typer.Option(
        "user", help="--openenv: the role of the server's observations, user or tool."
    ),
    pass_reward: float = typer.Option(1.0, help="--openenv: the episode return that counts as a pass."),
    max_turns: int = typer.Option(8, min=1, help="--openenv: assistant turns per episode at most."),
    step_timeout_s: float = typer.Option(10.0, help="--openenv: seconds per reset/step call at most."),
    fmt: Format = FORMAT_OPT,
) -> None:
    """Validate SPEC_FILE (fields, limits, that the class imports and takes its config), then add it;
    with --openenv URL, register NAME as that OpenEnv server (it must answer now)."""
    import polars as pl

    from rldata.api import env_register
    from rldata.envs.catalog import openenv_spec

    spec = spec_file
    if openenv is not None:
        spec = openenv_spec(
            spec_file,
            openenv,
            observation_role=observation_role,
            pass_reward=pass_reward,
            max_turns=max_turns,
            step_timeout_s=step_timeout_s,
        )
    res = env_register(get_store(ctx, create=True), spec=spec)
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
