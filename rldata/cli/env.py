"""``rldata env register|list|show``: environments as rows of the ``environments`` table."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store, out_path_check
from rldata.cli._options import command
from rldata.console import log
from rldata.jobs.profile import ProfileConfig

_SPEC_ARG = typer.Argument(
    ...,
    help="YAML (or JSON) environment spec; or, with --openenv / --openenv-image / --verifiers, the "
    "environment's NAME. "
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
    mcp: bool = typer.Option(
        False,
        "--mcp",
        help="--openenv/--openenv-image: an MCP tool environment (CallToolAction): its tools are listed "
        "now, laid out in the chat template and called by the model's tool calls.",
    ),
    reward: str = typer.Option(
        "server",
        help="--mcp: what judges an episode: server (its rewards, e.g. from a submit tool) or verifier "
        "(the task's verifier on the last answer; tasks from a dataset).",
    ),
    tool_parser: str = typer.Option(
        None,
        help="--mcp: how the model's tool calls are read (hermes, llama3_json, mistral); default: the "
        "one the model's chat template names.",
    ),
    pass_reward: float = typer.Option(
        1.0, help="--openenv/--verifiers: the episode return (rubric reward) that counts as a pass."
    ),
    max_turns: int = typer.Option(
        8, min=1, help="--openenv/--verifiers: assistant turns per episode at most."
    ),
    step_timeout_s: float = typer.Option(
        10.0, help="--openenv/--verifiers: seconds per reset/step call at most."
    ),
    openenv_image: str = typer.Option(
        None,
        "--openenv-image",
        help="Register NAME as the OpenEnv server this container image serves: it runs with docker "
        "(or podman) on 127.0.0.1:--port while NAME is registered, then stops.",
    ),
    port: int = typer.Option(8000, help="--openenv-image: the port of 127.0.0.1 the server is published on."),
    start_timeout_s: float = typer.Option(
        120.0, min=1, help="--openenv-image: seconds to wait for the container's /health."
    ),
    verifiers: str = typer.Option(
        None,
        "--verifiers",
        help="Register NAME as the verifiers environment this installed module loads "
        "(verifiers 0.1.x: pip install 'rldata[verifiers]').",
    ),
    fmt: Format = FORMAT_OPT,
) -> None:
    """Validate SPEC_FILE (fields, limits, that the class imports and takes its config), then add it;
    with --openenv URL, register NAME as that OpenEnv server (it must answer now); with
    --openenv-image IMAGE, as the server that image serves (docs/environments.md)."""
    import contextlib

    import polars as pl

    from rldata.api import env_register
    from rldata.envs.catalog import openenv_spec
    from rldata.errors import RldataError

    if sum(x is not None for x in (openenv, openenv_image, verifiers)) > 1:
        raise RldataError("--openenv URL, --openenv-image IMAGE and --verifiers MODULE: give one of them")
    if (mcp or tool_parser is not None or reward != "server") and openenv is None and openenv_image is None:
        raise RldataError("--mcp, --reward and --tool-parser go with --openenv URL or --openenv-image IMAGE")
    if (tool_parser is not None or reward != "server") and not mcp:
        raise RldataError("--reward and --tool-parser are for an MCP environment: add --mcp")
    spec, container = spec_file, contextlib.nullcontext()
    if verifiers is not None:
        spec = {
            "name": spec_file,
            "env": "verifiers",
            "config": {"module": verifiers, "pass_reward": pass_reward},
            "max_turns": max_turns,
            "step_timeout_s": step_timeout_s,
        }
    if openenv_image is not None:
        from rldata.envs.openenv_container import OpenEnvContainer, container_runtime

        # the arguments are checked, then the runtime looked for, before anything runs or the
        # store is opened: each says so in one line
        container = OpenEnvContainer(openenv_image, port)
        container.runtime = container_runtime()
        log(f"starting {openenv_image} on {container.url} ...")
        container.started(start_timeout_s)
        openenv = container.url
    with container:
        if openenv is not None:
            spec = openenv_spec(
                spec_file,
                openenv,
                observation_role=observation_role,
                pass_reward=pass_reward,
                max_turns=max_turns,
                step_timeout_s=step_timeout_s,
                image=openenv_image,
                mcp=mcp,
                reward=reward,
                tool_parser=tool_parser,
            )
        res = env_register(get_store(ctx, create=True), spec=spec)
    log(f"{'registered' if res.new else 'already registered'}: {res.env_id}@{res.version}")
    row = {"env_id": res.env_id, "kind": res.kind, "spec": res.spec, "version": res.version}
    emit(pl.DataFrame([row]), fmt)


@env_app.command("list")
def list_cmd(ctx: typer.Context, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT) -> None:
    """Every registered environment version, with its newest learnability card in one line."""
    from rldata.api import env_list

    emit(env_list(get_store(ctx)).rows, fmt, out)


@env_app.command("show")
def show_cmd(
    ctx: typer.Context, name: str = _NAME_ARG, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT
) -> None:
    """Every version of environment NAME with its spec (JSON); its learnability cards on stderr."""
    from rldata.api import env_show
    from rldata.envs.catalog import env_cards

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

    from rldata.envs.profile import card_line
    from rldata.jobs.profile import profile_env

    row = profile_env(get_store(ctx, create=True), config=config)
    log(f"{row['env_id']}@{row['env_version']}: {card_line(row)}")
    if report is not None:
        from rldata.report.env_card import write_card

        log(f"wrote {write_card(row, report)}")
    emit(pl.DataFrame([row]), fmt, out)


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")
