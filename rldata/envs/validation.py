"""``rldata env validate NAME --package DIR``: OpenEnv's own validation (``openenv.validation``, the
RFC 008 pipeline of ``openenv validate``) of a registered OpenEnv environment, recorded in the
``env_validations`` table with the environment's version.

The levels are OpenEnv's local ones, up to ``--level`` (default ``semantic``):

- **static**: ``openenv.yaml``'s ``validation:`` block parsed into OpenEnv's normalized manifest and
  checked against its severity policy's bounds (``static.manifest``); reads files, runs nothing.
- **runtime**: the manifest's ``validation.execution`` runtime plan (a reset and actions, JSON) is
  played on one WebSocket session, and OpenEnv's graders check the raw exchanges (rewards well formed,
  observations that fit the server's schema, the state contract).  ``openenv validate`` builds the
  package's image and starts it with Docker; rldata plays the plan against the server the environment
  is registered with (its ``url``), so what is validated is what rldata's episodes talk to.  The
  "image" the report names is a digest of that URL (no image is built); network-policy checks, which
  need a sandbox rldata does not own, are skipped with that reason, as OpenEnv skips them.
- **semantic**: every check OpenEnv 0.10 lists at this level; it ships no local grader for them, so
  each is ``skip: grader not implemented in this build`` (the statistical level is not local at all).

One row per (environment version, package digest, level, policy): validating the same package again
adds nothing; a changed package (or a new environment version) adds a row.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import json
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rldata.configs.fields import load, one_of, param, validate
from rldata.errors import ConfigError, RldataError

__all__ = ["LEVELS", "EnvValidateConfig", "validate_env"]

LEVELS = ("static", "runtime", "semantic")
OPENENV_KINDS = ("openenv", "openenv-mcp")


@dataclass(frozen=True)
class EnvValidateConfig:
    """Validate a registered OpenEnv environment with OpenEnv's own local levels."""

    name: str | None = param(None, cli=False, help="The environment, NAME or NAME@VERSION (the argument).")
    package: str | None = param(
        None, help="The environment's package directory (with its openenv.yaml and validation: block)."
    )
    level: str = param(
        "semantic",
        check=one_of(*LEVELS),
        help="The highest level to run: static (the manifest), runtime (the plan against the "
        "registered server), semantic.",
    )

    def __post_init__(self):
        validate(self)
        if not self.name:
            raise ConfigError("name: the environment to validate is required", field="name")
        if not self.package:
            raise ConfigError("package: the environment's package directory is required", field="package")


class _Running:
    """The registered server as OpenEnv's validation runner sees a started subject."""

    def __init__(self, url: str):
        self.base_url = url

    def inspect(self) -> dict:
        return {"registered_url": self.base_url}

    def logs(self, max_bytes: int = 65536) -> str:
        return ""

    def exec(self, argv, timeout_s):
        from openenv.validation.providers import ProviderError

        raise ProviderError("rldata validates the registered server: no exec into it")

    def stop(self) -> None:  # the server is the user's: it keeps running
        return None


class _RegisteredServer:
    """An ``openenv.validation`` provider whose subject is the server a registered environment names:
    nothing is built or started; ``start`` waits for its ``/health``, at most ``HEALTH_WAIT_S`` (the
    server is already running: the validator's 30 s are for a container it has just started)."""

    HEALTH_WAIT_S = 10.0

    name = "rldata-registered-server"
    supported_network_modes = frozenset({"public"})

    def __init__(self, url: str):
        from openenv.validation.types import ProviderCapability

        self.url = url.rstrip("/")
        self.capabilities = frozenset({ProviderCapability.IMAGE_BUILD})

    def build(self, root, execution) -> str:
        return "sha256:" + hashlib.sha256(self.url.encode()).hexdigest()

    def start(self, spec):
        from openenv.validation.providers import StartupError

        wait = min(spec.startup_timeout_s, self.HEALTH_WAIT_S)
        deadline = time.monotonic() + wait
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2):
                    return _Running(self.url)
            except OSError as e:
                if time.monotonic() > deadline:
                    raise StartupError(
                        f"the registered server {self.url} does not answer /health after {wait:g} s: {e} "
                        "(start it, then validate again)"
                    ) from None
                time.sleep(0.2)


def _row_of(store, name: str) -> dict[str, Any]:
    from rldata.envs.catalog import get_env  # start-up: loads yaml

    env_id, _, version = name.partition("@")
    rows = [r for r in get_env(store, env_id).iter_rows(named=True) if r.get("registered", True)]
    if version:
        rows = [r for r in rows if r["version"] == version]
    if not rows:
        raise RldataError(f"environment {name!r} is not registered (see: rldata env show {env_id})")
    return rows[-1]


def validate_env(store, name: str | None = None, *, config=None, **overrides) -> dict[str, Any]:
    """Run OpenEnv's local validation of environment ``name`` (NAME or NAME@VERSION, an OpenEnv
    one) on its package directory and record it in ``env_validations``; returns the row."""
    cfg = load(EnvValidateConfig, config, **({"name": name} if name is not None else {}), **overrides)
    row = _row_of(store, cfg.name)
    if row["kind"] not in OPENENV_KINDS:
        raise RldataError(
            f"environment {row['env_id']!r} is a {row['kind']!r} environment; rldata env validate runs "
            "OpenEnv's validation, for environments registered with --openenv or --openenv-image"
        )
    try:
        from openenv.validation import Level, run_validation
        from openenv.validation.signature import SignatureError
    except ImportError:
        raise RldataError(
            "rldata env validate needs the openenv package (0.10+): pip install --no-deps 'openenv>=0.10' "
            "(docs/environments.md)"
        ) from None
    package = Path(cfg.package)
    if not (package / "openenv.yaml").is_file():
        raise RldataError(f"package: {package} has no openenv.yaml", field="package")
    url = json.loads(row["spec"])["config"]["url"]
    level = Level[cfg.level.upper()]
    provider = _RegisteredServer(url) if level >= Level.RUNTIME else None
    try:
        report = run_validation(package, max_level=level, provider=provider)
    except SignatureError as e:
        raise RldataError(f"package: {package}: {e}", field="package") from None
    checks = [
        {
            "check_id": r.check_id,
            "status": r.status.value,
            "evidence": list(r.evidence),
            "measured": r.measured,
        }
        for r in report.results
    ]
    key = json.dumps([row["env_id"], row["version"], report.source_digest, cfg.level, report.policy_version])
    out = {
        "validation_id": hashlib.sha256(key.encode()).hexdigest()[:16],
        "env_id": row["env_id"],
        "env_version": row["version"],
        "package": str(package.resolve()),
        "source_digest": report.source_digest or "",
        "max_level": cfg.level,
        "levels_run": [lv.name.lower() for lv in report.levels_run],
        "verdict": report.verdict.value,
        "policy_version": str(report.policy_version),
        "openenv_version": importlib.metadata.version("openenv"),
        "checks": json.dumps(checks, default=str),
        "report": report.model_dump_json(),
        "created_at": dt.datetime.now(dt.UTC),
    }
    store.append("env_validations", [out], dedupe=True)
    return out
