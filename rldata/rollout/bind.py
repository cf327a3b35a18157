"""Which environment a task runs in: the task's own (``tasks.env_id`` / ``env_version``) or the job's
``--env``, looked up in the ``environments`` table.

An :class:`EnvBinding` names one environment version (``env_id``, ``version``) and its
:class:`~rldata.envs.EnvSpec`.  Tasks without an environment get ``None`` and run as plain
single-turn prompts, exactly as before environments existed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rldata.envs.base import REGISTRY, EnvSpec, resolve
from rldata.errors import RldataError
from rldata.names import did_you_mean

__all__ = ["EnvBinding", "bind_envs", "env_binding"]


@dataclass(frozen=True)
class EnvBinding:
    env_id: str  # environments.env_id
    version: str  # environments.version
    spec: EnvSpec

    @property
    def ledger_key(self) -> str:
        """``env_id@version``: passrates.env_version, and the env part of a trajectory's identity."""
        return f"{self.env_id}@{self.version}"

    @property
    def fast_single_turn(self) -> bool:
        """A plain single-turn env with no system prompt: its episode IS the task's prompt and one
        completion, so it can share the prompt's prefill over N samples like a task without env."""
        return self.spec.env == "single-turn" and not self.spec.episode.system_prompt

    def check(self) -> None:
        cls = resolve(self.spec.env)  # the class still imports (RldataError naming it otherwise)
        preflight = getattr(cls, "preflight", None)
        if callable(preflight):  # a served environment: is its server up?  one line before any work
            preflight(self.spec.config, timeout_s=self.spec.episode.step_timeout_s)


def env_binding(store, env: str) -> EnvBinding:
    """``NAME`` (its newest version) or ``NAME@VERSION`` from the environments table.  A bundled
    environment name that was never registered is registered with its default spec first."""
    from rldata.envs.catalog import default_spec, register_env  # start-up: loads yaml

    name, _, version = env.partition("@")
    rows = store.sql(
        "SELECT env_id, version, spec, created_at FROM environments WHERE env_id = $1 "
        "ORDER BY created_at DESC, version DESC",
        params=[name],
    ).fetchall()
    if version:
        rows = [r for r in rows if r[1] == version]
    if not rows:
        if version:
            raise RldataError(f"environment {env!r} is not registered (see: rldata env show {name})")
        try:
            if ":" in name:  # a module:Class path goes through a spec file (rldata env register)
                raise RldataError(name)
            resolve(name)  # a bundled environment, or an installed package's entry point
        except RldataError:
            # the names it may have meant: those registered in this store, and the bundled ones
            stored = [r for (r,) in store.sql("SELECT DISTINCT env_id FROM environments").fetchall()]
            near = did_you_mean(name, [*stored, *REGISTRY.names(plugins=False)])
            raise RldataError(
                f"environment {name!r} is not registered (rldata env register SPEC.yaml) "
                f"and is not a bundled one ({', '.join(sorted(REGISTRY.names(plugins=False)))}){near}",
                field="env",
            ) from None
        row, _ = register_env(store, default_spec(name))
        rows = [(row["env_id"], row["version"], row["spec"], None)]
    env_id, ver, spec, _ = rows[0]
    b = EnvBinding(env_id, ver, EnvSpec.from_dict(json.loads(spec)))
    b.check()
    return b


def bind_envs(
    store, tasks: Iterable[Mapping[str, Any]], *, env: str | None = None
) -> dict[str, EnvBinding | None]:
    """task_id -> the binding it runs in.  ``env`` (the job's ``--env``) overrides every task's own;
    a task naming an environment version that is not registered is an error naming the task."""
    tasks = list(tasks)
    if env:
        b = env_binding(store, env)
        return {t["task_id"]: b for t in tasks}
    wanted = {(t.get("env_id"), t.get("env_version")) for t in tasks if t.get("env_id")}
    found: dict[tuple[str, str], EnvBinding] = {}
    if wanted:
        for env_id, ver, spec in store.sql("SELECT env_id, version, spec FROM environments").fetchall():
            if (env_id, ver) in wanted:
                found[(env_id, ver)] = EnvBinding(env_id, ver, EnvSpec.from_dict(json.loads(spec)))
    out: dict[str, EnvBinding | None] = {}
    for t in tasks:
        key = (t.get("env_id"), t.get("env_version"))
        if not key[0]:
            out[t["task_id"]] = None
            continue
        if key not in found:
            raise RldataError(
                f"task {t['task_id']}: environment {key[0]}@{key[1]} is not registered "
                "(rldata env list shows what is)"
            )
        out[t["task_id"]] = found[key]
    for b in found.values():
        b.check()
    return out
