"""A learnability profile in the forms an environment's publisher ships: a section of the OpenEnv
environment card (Markdown for the environment's README, with RFC 008's statistical results as a JSON
block), and verifiers taskset metadata (one JSON document, schema ``rldata.taskset-learnability/1``,
documented in docs/environments.md).

Both are built from an ``env_profiles`` row, its ``env_checks`` rows (:mod:`rldata.envs.statistical`)
and the per-task ledger counts the checks read; nothing here touches the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rldata.envs.statistical import LANE, LEVEL, POLICY_VERSION, SEVERITY, verdict

__all__ = ["METADATA_SCHEMA", "card_section", "openenv_results", "taskset_metadata"]

METADATA_SCHEMA = "rldata.taskset-learnability/1"


def openenv_results(checks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The statistical level as OpenEnv's report fields: ``policy_version``, ``lane``, ``levels_run``,
    ``results`` (each one OpenEnv ``CheckResult``: check_id, status, measured, evidence, remediation,
    duration_s) and ``verdict`` (OpenEnv's policy rule over them)."""
    results = [
        {k: c[k] for k in ("check_id", "status", "measured", "evidence", "remediation", "duration_s")}
        for c in checks
    ]
    return {
        "policy_version": POLICY_VERSION,
        "lane": LANE,
        "levels_run": [LEVEL],
        "results": results,
        "verdict": verdict(results),
    }


def _measured_line(c: Mapping[str, Any]) -> str:
    return (c["evidence"] or [""])[0].replace("|", "\\|")


def card_section(row: Mapping[str, Any], checks: Sequence[Mapping[str, Any]], *, heading: str = "##") -> str:
    """A Markdown section for the environment's card (its README): what was measured, one table row per
    RFC 008 statistical check, the verdict, and the results as JSON an operator's tooling can read."""
    report = openenv_results(checks)
    lines = [
        f"{heading} Learnability (OpenEnv RFC 008, statistical level)",
        "",
        (
            f"Measured by rldata on `{row['env_id']}@{row['env_version']}` with `{row['model']}`: "
            f"{row['tasks']} tasks x {row['n']} samples (sampling parameters `{row['params_hash']}`), "
            f"scored by the pass-rate ledger. Severity policy `{POLICY_VERSION}` (lane `{LANE}`); "
            f"verdict **{report['verdict']}**."
        ),
        "",
        "| check | severity | status | measured |",
        "|---|---|---|---|",
    ]
    for c in checks:
        lines.append(
            f"| `{c['check_id']}` | {SEVERITY[c['check_id']]} | {c['status']} | {_measured_line(c)} |"
        )
    lines += [
        "",
        "<details><summary>results (JSON, OpenEnv CheckResult fields)</summary>",
        "",
        "```json",
        json.dumps(report, indent=2, sort_keys=False),
        "```",
        "",
        "</details>",
        "",
    ]
    return "\n".join(lines)


def taskset_metadata(
    row: Mapping[str, Any],
    checks: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    *,
    verifiers: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The profile as verifiers taskset metadata: the environment (and, for a verifiers environment, its
    id and package), what measured it, the card, the statistical results and one entry per task keyed
    by ``Task.key`` where the task came from a verifiers taskset (see docs/environments.md)."""
    card_keys = ("histogram", "in_band", "in_band_lo", "in_band_hi", "verdict")
    return {
        "schema": METADATA_SCHEMA,
        "environment": {
            "env_id": row["env_id"],
            "env_version": row["env_version"],
            "verifiers": dict(verifiers) if verifiers else None,
        },
        "measured_with": {
            "model": row["model"],
            "params_hash": row["params_hash"],
            "n": row["n"],
            "tasks": row["tasks"],
            "run_id": row.get("run_id"),
            "profile_id": row.get("profile_id"),
        },
        "card": {k: row.get(k) for k in card_keys},
        "statistical": openenv_results(checks),
        "tasks": [
            {
                "key": t.get("key"),
                "task_id": t["task_id"],
                "verifier_key": t["verifier_key"],
                "n": t["n"],
                "n_correct": t["n_correct"],
                "n_error": t["n_error"],
                "pass_rate": t["n_correct"] / t["n"] if t["n"] else None,
            }
            for t in tasks
        ],
    }
