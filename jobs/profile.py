"""``rldata env profile NAME``: measure and store an environment's learnability card.

The card's contents and verdict rule are :mod:`rldata.envs.profile`'s, the statistical checks
(OpenEnv RFC 008's level 4) :mod:`rldata.envs.statistical`'s; this job picks the tasks, samples them
through the ordinary sample job (the episodes land in the store; a killed profile resumes), reads the
pass-rate ledger rows of those samples back (the rows ``rldata filter`` reads), writes one
``env_profiles`` row and its ``env_checks`` rows, and, when asked, the card section and taskset
metadata a publisher ships (:mod:`rldata.envs.publish`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pyarrow as pa

from rldata.configs.fields import at_least, config, load, nested, param, validate
from rldata.configs.sampling import EngineConfig, SampleConfig, SamplingSpec
from rldata.envs.profile import card_from_rates
from rldata.envs.publish import card_section, taskset_metadata
from rldata.envs.statistical import CHECKS, POLICY_VERSION, SEVERITY, Evidence, run_checks, verdict
from rldata.errors import RldataError
from rldata.ledger.core import SAMPLE_ID
from rldata.store.outputs import check_output_path, check_writable_file, staged_output

__all__ = ["ProfileConfig", "check_rows", "ledger_rows", "profile_env", "stored_checks"]


def _pick_tasks(store, binding, k: int) -> list[str]:
    own = store.sql(
        "SELECT task_id FROM tasks WHERE env_id = $1 AND env_version = $2 ORDER BY task_id LIMIT $3",
        params=[binding.env_id, binding.version, k],
    ).fetchall()
    if own:
        return [r[0] for r in own]
    plain = store.sql(
        "SELECT task_id FROM tasks WHERE env_id IS NULL ORDER BY task_id LIMIT $1", params=[k]
    ).fetchall()
    return [r[0] for r in plain]


@config
class ProfileConfig:
    """How `rldata env profile` measures an environment: which one, how many tasks, sampled how and
    on which engines."""

    name: str | None = param(
        None,
        cli=False,
        check=lambda v: None if v else "the environment to profile is required",
        help="The environment, NAME or NAME@VERSION (the argument).",
    )
    tasks: int = param(32, check=at_least(1), help="Tasks to sample (K).")
    sampling: SamplingSpec = nested(SamplingSpec)
    engine: EngineConfig = nested(EngineConfig)
    batch_tasks: int = param(128, check=at_least(1), help="Tasks per engine call and per store commit.")
    openenv_card: str | None = param(
        None,
        help="Also write the statistical checks (OpenEnv RFC 008) as a section of the OpenEnv "
        "environment card (Markdown, for the environment's README) to this file.",
    )
    verifiers_metadata: str | None = param(
        None,
        help="Also write the card, the checks and each task's pass rate (keyed by Task.key) as verifiers "
        "taskset metadata (JSON, schema rldata.taskset-learnability/1) to this file.",
    )
    group_size: int = param(
        8, check=at_least(2), help="G of the training_signal check: the group size GRPO would sample."
    )

    def __post_init__(self):
        validate(self)


def profile_env(store, name: str | None = None, *, config=None, **overrides) -> dict[str, Any]:
    """Sample and store the learnability card of environment ``name`` (NAME or NAME@VERSION).

    ``config`` (a :class:`ProfileConfig`, a mapping or a YAML/TOML file) and ``overrides`` are its
    fields by name (``n``, ``tasks``, ``max_tokens``, ``model``, ``dtype``...).  The tasks: the first
    ``tasks`` (by task_id) tied to this environment version, or, for an environment without tasks of
    its own (``calculator``, ``single-turn``), the first tasks that name no environment, run in it as
    ``rldata sample --env`` would.  Returns the ``env_profiles`` row.
    """
    # the sample job and the rollout path load when a profile runs: `rldata` imports this module's
    # ProfileConfig at start-up (its options), and they would add ~0.3 s to every command (measured
    # with -X importtime on `rldata tables`)
    from rldata.jobs.sample import run_sample  # start-up: `rldata tables` does not load rldata.adaptive
    from rldata.rollout.bind import env_binding  # start-up: `rldata tables` does not load rldata.rollout

    cfg = load(ProfileConfig, config, **({"name": name} if name is not None else {}), **overrides)
    name, tasks, spec, engine = cfg.name, cfg.tasks, cfg.sampling, cfg.engine
    for field, path in (("openenv_card", cfg.openenv_card), ("verifiers_metadata", cfg.verifiers_metadata)):
        check_output_path(path, store=store, name=field)  # refused before any sampling
        check_writable_file(path, name=field)
    n = spec.n
    b = env_binding(store, name)
    ids = _pick_tasks(store, b, tasks)
    if not ids:
        raise RldataError(
            f"environment {b.env_id!r} has no tasks to profile: ingest some (rldata ingest --env "
            f"{b.env_id} --n K, or a file)"
        )
    where = "task_id IN (" + ", ".join("'" + t.replace("'", "''") + "'" for t in ids) + ")"
    job = SampleConfig(
        sampling=spec, engine=engine, where=where, env=f"{b.env_id}@{b.version}", batch_tasks=cfg.batch_tasks
    )
    s = run_sample(store, job)
    spec = replace(spec, chat_template=s.chat_template)  # as the job resolved it: the params hash it keyed
    row = _measure(store, b, ids, s.model, spec)
    row["seconds_per_episode"] = s.seconds / s.samples if s.samples else None
    row["run_id"] = s.run_id
    key = json.dumps([b.ledger_key, s.model, spec.params_hash, n, sorted(ids)])
    row["profile_id"] = hashlib.sha256(key.encode()).hexdigest()[:16]
    rows = ledger_rows(store, b.ledger_key, ids, model=s.model, params_hash=spec.params_hash)
    ev = _evidence(store, b.ledger_key, rows, model=s.model, params_hash=spec.params_hash)
    checks = run_checks(replace(ev, group_size=cfg.group_size))
    card = card_section(row, checks) if cfg.openenv_card else None
    meta = None
    if cfg.verifiers_metadata:
        meta = taskset_metadata(row, checks, _with_keys(store, rows), verifiers=_verifiers_source(b))
        meta = json.dumps(meta, indent=2) + "\n"
    with (
        staged_output(cfg.openenv_card, card or "", name="openenv_card"),
        staged_output(cfg.verifiers_metadata, meta or "", name="verifiers_metadata"),
    ):
        store.append("env_profiles", [row], dedupe=True)
        store.append("env_checks", check_rows(row, checks), dedupe=True)
    row["statistical"] = verdict(checks)
    return row


def _with_keys(store, rows: list[dict]) -> list[dict]:
    """Ledger rows with each task's ``Task.key`` (a verifiers taskset's content hash, kept in
    ``metadata.verifiers.key`` by the import), None for other tasks."""
    keys = dict(
        store.sql(
            "SELECT task_id, json_extract_string(metadata, '$.verifiers.key') FROM tasks "
            "WHERE task_id IN (SELECT unnest($ids))",
            params={"ids": [r["task_id"] for r in rows]},
        ).fetchall()
    )
    return [{**r, "key": keys.get(r["task_id"])} for r in rows]


def _verifiers_source(b) -> dict | None:
    """A verifiers environment's hub id and installed package, as its spec records them."""
    cfg = b.spec.config or {}
    if b.spec.env != "verifiers":
        return None
    return {k: cfg[k] for k in ("id", "package", "harness", "env_config") if k in cfg}


def _measure(store, b, ids: list[str], model: str, spec) -> dict[str, Any]:
    """The card: its pass rates are the ledger rows of the profiled samples (what ``rldata filter``
    reads, :func:`ledger_rows`); turns, tool calls, parse fails, env errors and tokens are counted over
    the profile's own episodes (its n samples of each task)."""
    params = {"ids": ids, "m": model, "ph": spec.params_hash, "ev": b.version, "n": spec.n}
    seed_cond = "t.seed IS NULL" if spec.seed is None else f"t.seed = {int(spec.seed)}"
    base = (
        "FROM trajectories t WHERE t.task_id IN (SELECT unnest($ids)) AND t.model = $m "
        f"AND t.params_hash = $ph AND t.env_version = $ev AND t.sample_idx < $n AND {seed_cond}"
    )
    # one outcome per sample: an error on any layer is an error, else a pass when every layer passed
    per_task = store.sql(
        "WITH s AS (SELECT t.task_id, t.traj_id " + base + "), "
        "o AS (SELECT s.task_id, bool_or(v.passed IS NULL) AS err, "
        "  bool_and(v.extracted IS NULL AND v.passed IS NOT NULL) AS no_ans "
        "  FROM s JOIN verifications v USING (traj_id) WHERE v.layer <> 'judge' GROUP BY s.task_id, s.traj_id) "
        "SELECT count(*) FILTER (WHERE no_ans AND NOT err), count(*) FROM o",
        params=params,
    ).fetchall()[0]
    rows = ledger_rows(store, b.ledger_key, ids, model=model, params_hash=spec.params_hash)
    episodes = store.sql(
        "SELECT count(*), avg(t.num_turns), avg(CASE WHEN t.num_tool_calls > 0 THEN 1.0 ELSE 0.0 END), "
        "avg(CASE WHEN t.finish_reason = 'env_error' THEN 1.0 ELSE 0.0 END), avg(t.completion_tokens) "
        + base,
        params=params,
    ).fetchall()[0]
    no_answer, total = per_task
    return {
        "env_id": b.env_id,
        "env_version": b.version,
        "model": model,
        "params_hash": spec.params_hash,
        "n": spec.n,
        "tasks": len(ids),
        **card_from_rates([r["n_correct"] / r["n"] for r in rows if r["n"]]),
        "mean_turns": episodes[1],
        "tool_call_rate": episodes[2],
        "parse_fail_rate": no_answer / total if total else None,
        "env_error_rate": episodes[3],
        "tokens_per_episode": episodes[4],
    }


# The ledger slice of the profiled samples: per task, the row of the verifier that scored them (the
# newest when several did), for the profiled model, sampling parameters and environment version.
_LEDGER_SQL = """
WITH scored AS (
    SELECT DISTINCT t.task_id, v.verifier || '@' || v.verifier_version AS vkey
    FROM trajectories t JOIN verifications v USING (traj_id)
    WHERE t.task_id IN (SELECT unnest($ids)) AND t.model = $m AND t.params_hash = $ph
      AND t.env_id || '@' || t.env_version = $ek AND v.layer <> 'judge'
)
SELECT p.task_id, arg_max(p.verifier_key, p.updated_at) AS verifier_key,
       arg_max(p.n, p.updated_at) AS n, arg_max(p.n_correct, p.updated_at) AS n_correct,
       arg_max(p.n_error, p.updated_at) AS n_error
FROM passrates p JOIN scored s ON s.task_id = p.task_id AND s.vkey = p.verifier_key
WHERE p.model = $m AND p.params_hash = $ph AND p.env_version = $ek
GROUP BY p.task_id ORDER BY p.task_id
"""


def ledger_rows(store, ledger_key: str, ids: list[str], *, model: str, params_hash: str) -> list[dict]:
    """The pass-rate ledger rows (``passrates``) of ``model``'s samples of tasks ``ids`` in environment
    ``ledger_key`` (``env_id@version``): one per task, as ``rldata filter`` reads them (all samples of
    that model, parameters and verifier pooled)."""
    cur = store.sql(_LEDGER_SQL, params={"ids": ids, "m": model, "ph": params_hash, "ek": ledger_key})
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _evidence(store, ledger_key: str, rows: list[dict], *, model: str, params_hash: str) -> Evidence:
    """What the statistical checks read (:class:`rldata.envs.statistical.Evidence`), for the ledger
    slice ``rows``: other models' rows of the same slice, and the slice's samples (each distinct
    sample once, as the ledger counts them) grouped by identical input and by degenerate completion."""
    slice_ = pa.table(
        {
            "task_id": pa.array([r["task_id"] for r in rows], pa.string()),
            "vkey": pa.array([r["verifier_key"] for r in rows], pa.string()),
        }
    )
    others: dict[str, dict[str, tuple[int, int]]] = {}
    for m, task, n, k in store.sql(
        "SELECT p.model, p.task_id, p.n, p.n_correct FROM passrates p "
        "JOIN _slice s ON s.task_id = p.task_id AND s.vkey = p.verifier_key "
        "WHERE p.model <> $m AND p.params_hash = $ph AND p.env_version = $ek",
        params={"m": model, "ph": params_hash, "ek": ledger_key},
        extra={"_slice": slice_},
    ).fetchall():
        others.setdefault(m, {})[task] = (int(n), int(k))
    # one outcome per distinct sample of the slice, with what identifies its input
    samples = f"""
        WITH per_traj AS (
            SELECT t.task_id, {SAMPLE_ID} AS sample, t.completion,
                   md5(coalesce(CAST(t.messages AS VARCHAR), '')) AS transcript,
                   bool_or(v.passed IS NULL OR v.error IS NOT NULL) AS err,
                   bool_and(coalesce(v.passed, false)) AS ok,
                   bool_and(v.extracted IS NULL) AS no_answer
            FROM trajectories t JOIN verifications v USING (traj_id)
            JOIN _slice s ON s.task_id = t.task_id AND s.vkey = v.verifier || '@' || v.verifier_version
            WHERE t.model = $m AND t.params_hash = $ph AND t.env_id || '@' || t.env_version = $ek
            GROUP BY ALL
        ), per_sample AS (
            SELECT task_id, sample, any_value(completion) AS completion, any_value(transcript) AS transcript,
                   bool_and(err) AS err, arg_min(ok, err) AS ok, bool_and(no_answer) AS no_answer
            FROM per_traj GROUP BY task_id, sample
        )"""
    params = {"m": model, "ph": params_hash, "ek": ledger_key}
    repeats = store.sql(
        samples + " SELECT count(*), count(*) FILTER (WHERE ok) FROM per_sample WHERE NOT err "
        "GROUP BY task_id, completion, transcript HAVING count(*) >= 2",
        params=params,
        extra={"_slice": slice_},
    ).fetchall()
    degenerate = store.sql(
        samples + " SELECT count(*), count(*) FILTER (WHERE ok) FROM per_sample WHERE NOT err "
        "AND (no_answer OR trim(coalesce(completion, '')) = '')",
        params=params,
        extra={"_slice": slice_},
    ).fetchall()[0]
    canary = None
    if _lint_ran(store, "semantic.canary_floor"):  # rldata lint (issue 41): a no-op answer that passes
        canary = store.sql(
            "SELECT count(DISTINCT task_id) FROM lint_findings WHERE rule = 'semantic.canary_floor' "
            "AND task_id IN (SELECT task_id FROM _slice)",
            extra={"_slice": slice_},
        ).fetchall()[0][0]
    return Evidence(
        rows=[(r["task_id"], r["n"], r["n_correct"], r["n_error"]) for r in rows],
        model=model,
        others=others,
        repeats=[(int(s), int(p)) for s, p in repeats],
        degenerate=(int(degenerate[0]), int(degenerate[1] or 0)),
        canary=None if canary is None else int(canary),
    )


def _lint_ran(store, rule: str) -> bool:
    """Whether a finished ``rldata lint`` run checked ``rule`` (its findings are then a measurement:
    none found means none, while no run means not measured)."""
    return bool(
        store.sql(
            "SELECT count(*) FROM runs WHERE kind = 'lint' AND status = 'done' "
            "AND list_contains(CAST(json_extract(summary, '$.rules') AS VARCHAR[]), $rule)",
            params={"rule": rule},
        ).fetchall()[0][0]
    )


def check_rows(profile: dict[str, Any], checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``env_checks`` rows of a card's statistical checks."""
    keys = ("env_id", "env_version", "model", "params_hash")
    return [
        {
            "profile_id": profile["profile_id"],
            "check_id": c["check_id"],
            **{k: profile[k] for k in keys},
            "severity": SEVERITY[c["check_id"]],
            "status": c["status"],
            "measured": json.dumps(c["measured"]),
            "evidence": json.dumps(c["evidence"]),
            "remediation": c["remediation"],
            "policy_version": POLICY_VERSION,
        }
        for c in checks
    ]


def stored_checks(store, profile_id: str) -> list[dict[str, Any]]:
    """A card's statistical checks as stored (``env_checks``), in RFC 008's order, with ``measured``
    and ``evidence`` parsed."""
    rows = store.sql(
        "SELECT check_id, status, measured, evidence, remediation FROM env_checks WHERE profile_id = $1",
        params=[profile_id],
    ).fetchall()
    order = list(CHECKS)
    out = [
        {
            "check_id": c,
            "status": st,
            "measured": json.loads(m or "{}"),
            "evidence": json.loads(e or "[]"),
            "remediation": r,
            "duration_s": 0.0,
        }
        for c, st, m, e, r in rows
    ]
    return sorted(out, key=lambda c: order.index(c["check_id"]) if c["check_id"] in order else len(order))
