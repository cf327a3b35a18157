"""``rldata env register|list|show|profile|validate``: environments as rows of the ``environments``
table, their learnability cards and OpenEnv validations."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.api import env_list, env_register, env_show
from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store, lazy_store, out_path_check
from rldata.cli._options import command
from rldata.console import log
from rldata.envs.profile import card_line
from rldata.envs.registration import EnvRegisterConfig
from rldata.envs.statistical import verdict
from rldata.envs.validation import EnvValidateConfig, validate_env
from rldata.jobs.profile import ProfileConfig, profile_env, stored_checks

_SPEC_ARG = typer.Argument(
    ...,
    help="YAML (or JSON) environment spec; or, with --openenv / --openenv-image / --verifiers, the "
    "environment's NAME. "
    "See docs/environments.md.",
)
_NAME_ARG = typer.Argument(..., help="The environment's name (env_id).")
env_app = typer.Typer(help="Register and list environments (docs/environments.md).", no_args_is_help=True)


# --config is a verifiers environment's own EnvConfig (EnvRegisterConfig.env_config, as ingest's
# --config is a dataset's); the file of register's fields is --config-file
@env_app.command("register")
@command(EnvRegisterConfig)
def register_cmd(
    ctx: typer.Context, config: EnvRegisterConfig, spec: str = _SPEC_ARG, fmt: Format = FORMAT_OPT
) -> None:
    """Validate SPEC, a spec file (fields, limits, that the class imports and takes its config), then add it;
    with --openenv URL, register NAME as that OpenEnv server (it must answer now); with
    --openenv-image IMAGE, as the server that image serves (docs/environments.md)."""
    import polars as pl

    res = env_register(lazy_store(ctx), config=config)
    log(f"{'registered' if res.new else 'already registered'}: {res.env_id}@{res.version}")
    row = {"env_id": res.env_id, "kind": res.kind, "spec": res.spec, "version": res.version}
    emit(pl.DataFrame([row]), fmt)


@env_app.command("list")
def list_cmd(ctx: typer.Context, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT) -> None:
    """Every registered environment version, with its newest learnability card in one line."""
    emit(env_list(get_store(ctx)).rows, fmt, out)


@env_app.command("show")
def show_cmd(
    ctx: typer.Context, name: str = _NAME_ARG, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT
) -> None:
    """Every version of environment NAME with its spec (JSON); its learnability cards on stderr."""
    from rldata.envs.catalog import env_cards  # start-up: loads yaml

    store = get_store(ctx)
    emit(env_show(store, name=name).rows, fmt, out)
    cards = env_cards(store, name)
    for r in cards.iter_rows(named=True):
        log(
            f"card {r['env_version']} {r['model']} n={r['n']} tasks={r['tasks']}: {r['verdict']}; "
            f"in-band {r['in_band']:.1%} [{r['in_band_lo']:.1%}, {r['in_band_hi']:.1%}], "
            f"histogram {r['histogram']}, turns {r['mean_turns']:.2f}, "
            f"tool calls {r['tool_call_rate']:.1%}, parse fails {r['parse_fail_rate'] or 0:.1%}, "
            f"env errors {r['env_error_rate']:.1%}, {r['tokens_per_episode']:.1f} tokens/episode"
        )
        checks = stored_checks(store, r["profile_id"])
        if checks:
            _log_checks(checks, verdict(checks))


_PROFILE_REPORT_OPT = typer.Option(
    None, "--report", help="Also write the card as one HTML page here.", callback=out_path_check("report")
)


@env_app.command("profile")
@command(ProfileConfig)
def profile_cmd(
    ctx: typer.Context,
    config: ProfileConfig,
    name: str = _NAME_ARG,  # ProfileConfig.name: goes into config
    report: Path = _PROFILE_REPORT_OPT,
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Sample K tasks of NAME n times and store its learnability card (table env_profiles)."""
    import polars as pl

    store = get_store(ctx, create=True)
    row = profile_env(store, config=config)
    log(f"{row['env_id']}@{row['env_version']}: {card_line(row)}")
    _log_checks(stored_checks(store, row["profile_id"]), row["statistical"])
    for path in (config.openenv_card, config.verifiers_metadata):
        if path:
            log(f"wrote {path}")
    if report is not None:
        from rldata.report.env_card import write_card  # start-up: loads matplotlib

        log(f"wrote {write_card(row, report, checks=stored_checks(store, row['profile_id']))}")
    emit(pl.DataFrame([row]), fmt, out)


def _log_checks(checks: list[dict], verdict: str) -> None:
    log(f"  statistical checks (OpenEnv RFC 008, policy v2): {verdict}")
    for c in checks:
        log(f"  {c['status']:5} {c['check_id']}: {(c['evidence'] or [''])[0]}"[:300])


@env_app.command("validate")
@command(EnvValidateConfig)
def validate_cmd(
    ctx: typer.Context,
    config: EnvValidateConfig,
    name: str = _NAME_ARG,  # EnvValidateConfig.name: goes into config
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Run OpenEnv's local validation (static, runtime, semantic) of OpenEnv environment NAME on its
    package directory and record it (table env_validations); exit 1 when its verdict is fail."""
    import json

    import polars as pl

    row = validate_env(get_store(ctx, create=True), config=config)
    log(
        f"{row['env_id']}@{row['env_version']}: {row['verdict']} (levels run: {', '.join(row['levels_run'])})"
    )
    for c in json.loads(row["checks"]):
        log(f"  {c['status']:5} {c['check_id']}: {(c['evidence'] or [''])[0]}"[:300])
    emit(pl.DataFrame([{k: v for k, v in row.items() if k != "report"}]), fmt, out)
    if row["verdict"] == "fail":
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")
