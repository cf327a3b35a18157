"""What ``rldata env register`` (and ``rldata.env_register``) takes: a spec file, or a NAME and one
of an OpenEnv server's URL, an OpenEnv container image or a verifiers module.

The options are declared once, here; the CLI's options, the Python keywords and docs/options.md
come from these fields, and the checks (one source at most, the role, the limits) run when the
config is built, so a Python caller meets the same one-line errors as the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rldata.configs.fields import at_least, one_of, param, validate
from rldata.errors import ConfigError

__all__ = ["SOURCES", "EnvRegisterConfig"]

SOURCES = ("openenv", "openenv_image", "verifiers")  # what NAME is registered as; at most one


def _seconds(v):
    return None if v > 0 else f"must be > 0 seconds, got {v}"


@dataclass(frozen=True)
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
    tool_parser: str | None = param(
        None,
        help="--mcp: how the model's tool calls are read (hermes, llama3_json, mistral); default: the "
        "one the model's chat template names.",
    )
    pass_reward: float = param(
        1.0, help="--openenv/--verifiers: the episode return (rubric reward) that counts as a pass."
    )
    max_turns: int = param(
        8, check=at_least(1), help="--openenv/--verifiers: assistant turns per episode at most."
    )
    step_timeout_s: float = param(
        10.0, check=_seconds, help="--openenv/--verifiers: seconds per reset/step call at most."
    )
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
        help="Register NAME as the verifiers environment this installed module loads "
        "(verifiers 0.1.x: pip install 'rldata[verifiers]').",
    )

    def __post_init__(self):
        validate(self)
        given = [s for s in SOURCES if getattr(self, s) is not None]
        if len(given) > 1:
            a, b = given[:2]
            raise ConfigError(
                f"{b}: give one of openenv (a URL), openenv_image (an image) and verifiers (a module), "
                f"not {a} and {b}",
                field=b,
            )
        mcp_options = self.mcp or self.tool_parser is not None or self.reward != "server"
        if mcp_options and self.openenv is None and self.openenv_image is None:
            raise ConfigError(
                "mcp, reward and tool_parser go with openenv (a URL) or openenv_image (an image)", field="mcp"
            )
        if (self.tool_parser is not None or self.reward != "server") and not self.mcp:
            raise ConfigError("reward and tool_parser are for an MCP environment: add --mcp", field="mcp")
        if given and not isinstance(self.spec, str):
            raise ConfigError(
                f"spec: with {given[0]}, the environment's NAME, got {self.spec!r}", field="spec"
            )

    def spec_data(self, url: str | None = None) -> dict[str, Any] | None:
        """The spec mapping to register (``url``: the started container's), or None when ``spec``
        is a file to read."""
        from rldata.envs.catalog import openenv_spec

        if self.verifiers is not None:
            return {
                "name": self.spec,
                "env": "verifiers",
                "config": {"module": self.verifiers, "pass_reward": self.pass_reward},
                "max_turns": self.max_turns,
                "step_timeout_s": self.step_timeout_s,
            }
        if self.openenv is not None or url is not None:
            return openenv_spec(
                self.spec,
                url or self.openenv,
                observation_role=self.observation_role,
                pass_reward=self.pass_reward,
                max_turns=self.max_turns,
                step_timeout_s=self.step_timeout_s,
                image=self.openenv_image,
                mcp=self.mcp,
                reward=self.reward,
                tool_parser=self.tool_parser,
            )
        return dict(self.spec) if not isinstance(self.spec, str) and hasattr(self.spec, "keys") else None
