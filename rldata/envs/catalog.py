"""Environments as data: each row of the ``environments`` table is one environment version.

A spec file (YAML or JSON) is an :class:`EnvSpec` plus an optional ``name`` (the row's ``env_id``;
default: the registered name).  The row's ``version`` is the class's ``version`` plus a hash of the
whole spec, so changing a limit, the config or the prompt makes a new version whose results never
mix with the old one's (``passrates.env_version`` holds ``env_id@version``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from rldata.configs import yaml_safe
from rldata.envs.base import REGISTRY, EnvSpec, EpisodeConfig, make_env, resolve
from rldata.envs.guard import guarded_close
from rldata.envs.openenv_mcp import list_tools
from rldata.envs.profile import card_line
from rldata.errors import ConfigError, RldataError

__all__ = [
    "bundled_rows",
    "default_spec",
    "env_cards",
    "env_row",
    "get_env",
    "list_envs",
    "load_spec_file",
    "openenv_spec",
    "register_env",
    "spec_of",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def load_spec_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = yaml_safe.safe_load(path.read_text())
    except OSError as e:
        raise RldataError(f"{path}: cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise RldataError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise RldataError(f"{path}: expected a mapping of spec fields, got {type(data).__name__}")
    return data


def env_row(data: dict[str, Any], *, build: bool = True) -> dict[str, Any]:
    """Validate a spec (fields, limits, that the class imports and accepts its config) into a row
    (``build=False``: the row it would make, without building an environment)."""
    data = dict(data)
    name = data.pop("name", None)
    spec = EnvSpec.from_dict(data)
    cls = resolve(spec.env)
    if build:
        env = make_env(spec)  # builds one: a config the class rejects fails here, not mid-run
        guarded_close(env, timeout_s=spec.episode.step_timeout_s)
        preflight = getattr(cls, "preflight", None)
        if callable(preflight):  # a served environment (OpenEnv): its server must answer now
            preflight(spec.config, timeout_s=spec.episode.step_timeout_s)
    if name is None:
        name = spec.env if ":" not in spec.env else spec.env.rpartition(":")[2]
    if not isinstance(name, str) or not _NAME.match(name):
        raise RldataError(f"spec field 'name': {name!r} is not a name (letters, digits, '.', '_', '-')")
    version = str(getattr(cls, "version", "") or "")
    if not version or "@" in version:
        raise RldataError(f"environment {spec.env!r}: its class has no usable 'version' string")
    digest = hashlib.sha256(spec.to_json().encode()).hexdigest()[:10]
    return {"env_id": name, "kind": spec.env, "spec": spec.to_json(), "version": f"{version}+{digest}"}


def openenv_spec(
    name: str,
    url: str,
    *,
    observation_role: str = "user",
    pass_reward: float = 1.0,
    episode: EpisodeConfig | None = None,
    image: str | None = None,
    mcp: bool = False,
    reward: str = "server",
    **episode_fields: Any,
) -> dict[str, Any]:
    """The spec ``rldata env register NAME --openenv URL`` registers (rldata.envs.openenv), with its
    ``episode`` settings (limits, system prompt, tool parser), or those settings by name
    (``max_turns=2``, over ``episode``'s); with ``--openenv-image``, the image that served it too.
    ``mcp``: an MCP tool environment (rldata.envs.openenv_mcp): its tools are listed now and recorded
    in the spec."""
    unknown = sorted(set(episode_fields) - {f.name for f in fields(EpisodeConfig)})
    if unknown:
        raise ConfigError(f"{unknown[0]}: not an episode setting of an environment", field=unknown[0])
    episode = replace(episode if episode is not None else EpisodeConfig(), **episode_fields)
    config: dict[str, Any] = {"url": url, "observation_role": observation_role, "pass_reward": pass_reward}
    if mcp:
        tools = list_tools(url, timeout_s=episode.step_timeout_s)
        config = {"url": url, "tools": tools, "reward": reward, "pass_reward": pass_reward}
    if image is not None:
        config["image"] = image
    spec = {"name": name, "env": "openenv-mcp" if mcp else "openenv", "config": config}
    return {**spec, **{k: v for k, v in asdict(episode).items() if v is not None}}


def default_spec(name: str) -> dict[str, Any]:
    """The bundled spec file ``sample_data/envs/NAME.yaml`` when there is one, else ``{env: NAME}``."""
    from importlib.resources import files

    path = files("rldata.sample_data").joinpath("envs", f"{name}.yaml")
    if path.is_file():
        return yaml_safe.safe_load(path.read_text())
    return {"env": name}


def bundled_rows() -> list[dict[str, Any]]:
    """The row each environment shipped with rldata gets when first used or registered with its
    default spec (``created_at`` None): what ``env list`` shows before that happens."""
    REGISTRY.load_builtin()
    names = sorted(
        n
        for n, cls in REGISTRY.items()
        if getattr(cls, "__module__", "").startswith("rldata.") and not getattr(cls, "needs_config", False)
    )
    return [{**env_row(default_spec(n), build=False), "created_at": None} for n in names]


def register_env(store, data: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Validate and write one environment version; return (row, whether it was new)."""
    row = env_row(data)
    added = store.append("environments", [row], dedupe=True)
    return row, bool(added)


def _with_bundled(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (rows of the table, ``registered`` true) and a row for each bundled environment whose
    name has none yet (``registered`` false: it is registered with its default spec on first use)."""
    have = set(df["env_id"].to_list())
    extra = [r for r in bundled_rows() if r["env_id"] not in have]
    df = df.with_columns(pl.lit(True).alias("registered"))
    if not extra:
        return df
    more = pl.DataFrame(extra).with_columns(pl.lit(False).alias("registered"))
    return pl.concat([df, more.select(df.columns).cast(df.schema)])


def env_cards(store, name: str | None = None) -> pl.DataFrame:
    """The learnability cards (``env_profiles`` rows) of environment ``name`` (all: None), newest first."""
    df = store.read("env_profiles")
    if name is not None:
        df = df.filter(pl.col("env_id") == name)
    return df.sort("created_at", descending=True)


def list_envs(store) -> pl.DataFrame:
    """Every registered environment version, and the bundled environments not registered yet, with
    its newest learnability card in one line (``profile``; null when it has none)."""
    df = (
        _with_bundled(store.read("environments"))
        .sort(["env_id", "created_at"], nulls_last=True)
        .select("env_id", "version", "kind", "created_at", "registered")
    )
    newest: dict[tuple[str, str], str] = {}
    for r in env_cards(store).iter_rows(named=True):
        newest.setdefault((r["env_id"], r["env_version"]), card_line(r))
    lines = [newest.get((e, v)) for e, v in zip(df["env_id"], df["version"], strict=True)]
    return df.with_columns(pl.Series("profile", lines, dtype=pl.String))


def get_env(store, name: str) -> pl.DataFrame:
    """Every version of environment ``name``, oldest first (RldataError if there is none); a bundled
    environment not registered yet is its default spec's row, ``registered`` false."""
    df = _with_bundled(store.read("environments"))
    found = df.filter(pl.col("env_id") == name).sort("created_at", nulls_last=True)
    if found.height == 0:
        known = sorted(set(df.filter(pl.col("registered"))["env_id"].to_list()))
        bundled = sorted(set(df.filter(~pl.col("registered"))["env_id"].to_list()))
        raise RldataError(
            f"unknown environment {name!r}; registered: {', '.join(known) or '(none)'}"
            + (f"; bundled: {', '.join(bundled)}" if bundled else "")
        )
    return found


def spec_of(row: dict[str, Any]) -> EnvSpec:
    """The EnvSpec a stored ``environments`` row describes."""
    return EnvSpec.from_dict(json.loads(row["spec"]))
