"""What ``rldata env register`` (and ``rldata.env_register``) takes: a spec file, or a NAME and one
of an OpenEnv server's URL, an OpenEnv container image or a verifiers v1 environment.

The options are declared once, here (the episode settings in :class:`rldata.envs.base.EpisodeConfig`,
nested); the CLI's options, the Python keywords and docs/options.md come from these fields, and the
checks (one source at most, the role, the limits) run when the config is built, so a Python caller meets the same one-line errors as the command line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rldata.configs.fields import at_least, config, nested, one_of, param, read_file, validate, validator
from rldata.envs.base import EpisodeConfig
from rldata.errors import ConfigError, DuplicateKeyError, InputError, unique_keys

__all__ = ["SOURCES", "EnvRegisterConfig"]

SOURCES = ("openenv", "openenv_image", "verifiers")  # what NAME is registered as; at most one


def _env_config(v: Any) -> dict[str, Any] | None:
    """env_config (--config): a JSON object, or a JSON/YAML/TOML file of one (from Python also a mapping)."""
    if v is None or isinstance(v, Mapping):
        return None if v is None else dict(v)
    text = str(v).strip()
    if not text.startswith(("{", "[")):
        try:
            data = read_file(Path(text))
        except InputError as e:
            raise ConfigError(f"env_config: {e}", field="env_config") from None
    else:
        try:
            data = json.loads(text, object_pairs_hook=unique_keys)
        except DuplicateKeyError as e:
            raise ConfigError(f"env_config: not valid JSON: {e}", field="env_config") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"env_config: not a JSON object: {e}", field="env_config") from None
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"env_config: expected a JSON object, got {type(data).__name__}", field="env_config"
        )
    return dict(data)


@config
class EnvRegisterConfig:
    """Register an environment: a YAML/JSON spec, or NAME served by OpenEnv or a verifiers module."""

    # the command's SPEC_FILE argument; from Python also the spec's mapping
    spec: Any = param(
        cli=False,
        help="YAML (or JSON) environment spec (from Python also its mapping); or, with --openenv / "
        "--openenv-image / --verifiers, the environment's NAME.",
    )
    openenv: str | None = param(
        None, help="Register NAME as the OpenEnv server at this URL (http://HOST:PORT)."
    )
    observation_role: str = param(
        "user",
        check=one_of("user", "tool"),
        help="--openenv: the role of the server's observations, user or tool.",
    )
    mcp: bool = param(
        False,
        help="--openenv/--openenv-image: an MCP tool environment (CallToolAction): its tools are listed "
        "now, laid out in the chat template and called by the model's tool calls.",
    )
    reward: str = param(
        "server",
        check=one_of("server", "verifier"),
        help="--mcp: what judges an episode: server (its rewards, e.g. from a submit tool) or verifier "
        "(the task's verifier on the last answer; tasks from a dataset).",
    )
    pass_reward: float = param(
        1.0, help="--openenv/--verifiers: the episode return (rubric reward) that counts as a pass."
    )
    # --openenv/--verifiers: the registered spec's episode settings (a spec file has its own)
    episode: EpisodeConfig = nested(EpisodeConfig)
    openenv_image: str | None = param(
        None,
        help="Register NAME as the OpenEnv server this container image serves: it runs with docker "
        "(or podman) on 127.0.0.1:--port while NAME is registered, then stops.",
    )
    port: int = param(8000, help="--openenv-image: the port of 127.0.0.1 the server is published on.")
    start_timeout_s: float = param(
        120.0, check=at_least(1), help="--openenv-image: seconds to wait for the container's /health."
    )
    verifiers: str | None = param(
        None,
        help="Register NAME as this installed verifiers v1 environment: a module or a hub id "
        "owner/name[@version] (verifiers>=0.4: pip install 'rldata[verifiers]').",
    )
    # `--config` is the verifiers environment's own EnvConfig (as `rldata ingest --gym`'s `--config` is the
    # dataset's); the file of these fields is `--config-file` for this command
    env_config: Any = param(
        None,
        flag="--config",
        cli_type=str,
        help="--verifiers: the environment's EnvConfig beside its id, as a JSON object or a JSON/YAML/"
        'TOML file of one (e.g. \'{"taskset": {"split": "test"}, "agent": {"harness": {"id": "null"}}}\').',
    )

    def __post_init__(self):
        validate(self)

    @validator
    def register_rules(self) -> None:
        """One source at most; the MCP settings with an MCP server; a spec file's own settings."""
        given = [s for s in SOURCES if getattr(self, s) is not None]
        if len(given) > 1:
            a, b = given[:2]
            raise ConfigError(
                f"{b}: give one of openenv (a URL), openenv_image (an image) and verifiers (a module), "
                f"not {a} and {b}",
                field=b,
            )
        object.__setattr__(self, "env_config", _env_config(self.env_config))
        if self.env_config is not None and self.verifiers is None:
            raise ConfigError("env_config goes with verifiers (an environment id)", field="env_config")
        served = self.openenv is not None or self.openenv_image is not None
        if (self.mcp or self.reward != "server") and not served:
            raise ConfigError(
                "mcp and reward go with openenv (a URL) or openenv_image (an image)", field="mcp"
            )
        if self.episode.tool_parser is not None and not (self.mcp or self.verifiers is not None):
            raise ConfigError(
                "tool_parser is for a tool environment: add --mcp (OpenEnv) or use --verifiers", field="mcp"
            )
        if self.reward != "server" and not self.mcp:
            raise ConfigError("reward is for an MCP environment: add --mcp", field="mcp")
        if given and not isinstance(self.spec, str):
            raise ConfigError(
                f"spec: with {given[0]}, the environment's NAME, got {self.spec!r}", field="spec"
            )
        unset = asdict(type(self.episode)())
        changed = [k for k, v in asdict(self.episode).items() if v != unset[k]]
        if not given and changed:
            raise ConfigError(
                f"{changed[0]}: set with openenv, openenv_image or verifiers; a spec file sets its own",
                field=changed[0],
            )

    def spec_data(self, url: str | None = None) -> dict[str, Any] | None:
        """The spec mapping to register (``url``: the started container's), or None when ``spec``
        is a file to read."""
        if self.verifiers is not None:
            # verifiers (and the environment's package) load when one is registered, not at start-up
            from rldata.envs.verifiers_env import describe  # start-up: `rldata tables` does not load asyncio

            config = {"id": self.verifiers, "pass_reward": self.pass_reward}
            if self.env_config:
                config["env_config"] = self.env_config
            config |= describe(self.verifiers, self.env_config)  # the installed package, the harness
            return {
                "name": self.spec,
                "env": "verifiers",
                "config": config,
                **{k: v for k, v in asdict(self.episode).items() if v is not None},
            }
        if self.openenv is not None or url is not None:
            # the catalog (Polars, the OpenEnv clients) loads when a server is registered: `rldata`
            # imports this config at start-up for its options
            from rldata.envs.catalog import openenv_spec  # start-up: loads yaml

            return openenv_spec(
                self.spec,
                url or self.openenv,
                observation_role=self.observation_role,
                pass_reward=self.pass_reward,
                episode=self.episode,
                image=self.openenv_image,
                mcp=self.mcp,
                reward=self.reward,
            )
        return dict(self.spec) if not isinstance(self.spec, str) and hasattr(self.spec, "keys") else None
