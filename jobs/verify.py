"""`rldata verify`: re-score stored trajectories with a verifier, or a new version of one.

Verification is a stage of its own: completions stay, verifiers change.  ``run_verify`` selects
trajectories (a run, and/or a SQL predicate over ``trajectories t`` joined with ``tasks k``),
verifies those without a result under the chosen verifier's CURRENT version, appends the new
``verifications`` rows under that version, and rebuilds the pass-rate ledger rows of that version
for every (model, params_hash) it touched.

- Old results stay: ``verifications`` is keyed on (traj_id, verifier, verifier_version, layer),
  so a new version adds rows beside the old ones, and the ledger keys on ``verifier_key``
  (``name@version``): two versions never mix in one pass rate.
- Resumable and idempotent, like ``rldata sample``: rows are committed per batch (appended with
  ``dedupe``), a re-run verifies only what has no result yet, and a run with nothing left to do
  and ledger rows in place is a no-op that records nothing.

The checks run through :func:`rldata.verify.parallel.verify_on_ray` (identical answer/gold pairs
checked once; crashes and timeouts become error verdicts), on Ray when it is initialized or an
address is given, else in this process's killable child.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from rldata.configs.fields import at_least, nested, param, sql_predicate, validate
from rldata.configs.sampling import VerifyConfig
from rldata.console import log, progress
from rldata.errors import ConfigError, RldataError
from rldata.ledger.core import recompute_passrates, verifier_key
from rldata.results import VerifyResult, accumulator
from rldata.runs.core import record_run
from rldata.sql_guard import check_predicate
from rldata.store.core import Store
from rldata.verify import for_domain, get_verifier
from rldata.verify.base import all_passed, no_answer, verdict_rows

__all__ = ["VerifyJob", "VerifySummary", "run_verify", "select_trajectories"]


@dataclass(frozen=True)
class VerifyJob:
    """Which stored trajectories `rldata verify` re-scores, under which verifier."""

    # which verifier and how long a check may take: the knobs every verifying verb shares
    verify: VerifyConfig = nested(VerifyConfig)
    run_id: str | None = param(None, help="Only this run's trajectories.")
    where: str | None = param(
        None, check=sql_predicate("where"), help="SQL predicate over trajectories t JOIN tasks k."
    )
    batch: int = param(1024, check=at_least(1), help="Trajectories per verification call and per commit.")
    address: str | None = param(
        None, help="Ray cluster address (default: Ray if already initialized, else this machine)."
    )

    def __post_init__(self):
        validate(self)


# What the job fills in while it runs; its ``result()`` is the frozen rldata.results.VerifyResult, whose
# field list is the one declaration of both.
VerifySummary = accumulator(VerifyResult, "VerifySummary", module=__name__)


def select_trajectories(store: Store, *, run_id: str | None = None, where: str | None = None) -> pl.DataFrame:
    """traj_id, task_id, model, params_hash, completion, domain, answer, tests, metadata and prompt (the
    math verifier skips boxes quoted from it) of the selected trajectories."""
    if where is not None:
        check_predicate(where)
    conds = [f"({where})"] if where else []
    params = {}
    if run_id:
        conds.append("t.run_id = $run")
        params["run"] = run_id
    q = (
        "SELECT t.traj_id, t.task_id, t.model, t.params_hash, t.completion, k.domain, k.answer, k.tests, k.metadata, "
        "k.prompt "
        "FROM trajectories t JOIN tasks k USING (task_id)"
        + (" WHERE " + " AND ".join(conds) if conds else "")
        + " ORDER BY t.traj_id"
    )
    try:
        return store.sql(q, params=params or None).pl()
    except Exception as e:
        if not where:
            raise
        raise ConfigError(f"where {where!r}: {str(e).splitlines()[0]}", field="where") from None


def _verifiers(job: VerifyJob, domains: list[str]) -> dict[str, tuple[str, str]]:
    """domain -> (registry name, version) of the verifier that scores it."""
    # start-up: `rldata tables` does not load rldata.verify.deadline
    from rldata.verify.run import resolve_verifier

    out = {}
    for d in domains:
        try:
            name = job.verify.verifier
            v = get_verifier(resolve_verifier(name)) if name else for_domain(d)
        except KeyError as e:
            raise RldataError(str(e.args[0])) from None
        out[d] = (v.name, v.version)
    return out


def _verified(store: Store, traj_ids: list[str], vkeys: set[str]) -> set[str]:
    ids = {"_ids": pa.table({"traj_id": pa.array(traj_ids, pa.string())})}
    rows = store.sql(
        "SELECT DISTINCT v.traj_id FROM verifications v JOIN _ids USING (traj_id) "
        "WHERE v.verifier || '@' || v.verifier_version IN (SELECT unnest($vkeys))",
        params={"vkeys": sorted(vkeys)},
        extra=ids,
    ).fetchall()
    return {t for (t,) in rows}


def _ledger_complete(store: Store, sel: pl.DataFrame, vkeys: set[str]) -> bool:
    """Whether every selected (task, model, params_hash) has a ledger row for its verifier."""
    want = sel.select("task_id", "model", "params_hash", "vkey").unique()
    have = store.sql(
        "SELECT task_id, model, params_hash, verifier_key AS vkey FROM passrates "
        "WHERE verifier_key IN (SELECT unnest($vkeys))",
        params={"vkeys": sorted(vkeys)},
    ).pl()
    return want.join(have, on=["task_id", "model", "params_hash", "vkey"], how="anti").height == 0


def run_verify(store: Store, job: VerifyJob) -> VerifySummary:
    """Verify (or finish verifying) the selected trajectories; rebuild the ledger for the version."""
    sel = select_trajectories(store, run_id=job.run_id, where=job.where)
    if sel.height == 0:
        what = " and ".join(
            x
            for x in (
                f"run {job.run_id!r}" if job.run_id else "",
                f"where {job.where!r}" if job.where else "",
            )
            if x
        )
        raise RldataError("no trajectories to verify" + (f" for {what}" if what else ": the store has none"))
    verifiers = _verifiers(job, sel["domain"].unique().sort().to_list())
    vkeys = {verifier_key(*nv) for nv in verifiers.values()}
    sel = sel.with_columns(
        pl.col("domain").replace_strict({d: verifier_key(*nv) for d, nv in verifiers.items()}).alias("vkey")
    )
    done = _verified(store, sel["traj_id"].to_list(), vkeys)
    todo = sel.filter(~pl.col("traj_id").is_in(list(done)))
    summary = VerifySummary(None, sorted(vkeys), sel.height, len(done))
    if todo.height == 0 and sel["model"].null_count() == 0 and _ledger_complete(store, sel, vkeys):
        summary.noop = True
        log(
            f"nothing to do: all {sel.height} trajectories have results under {', '.join(sorted(vkeys))} "
            "and ledger rows"
        )
        return summary
    args = {
        "verifier": job.verify.verifier,
        "run_id": job.run_id,
        "where": job.where,
        "verifiers": sorted(vkeys),
    }
    with record_run(store, "verify", args) as run:
        summary.run_id = run.run_id
        t0 = time.monotonic()
        if todo.height:
            if job.address:
                from rldata.engine.actors import ensure_ray  # start-up: loads ray

                ensure_ray(job.address)
            log(
                f"verifying {todo.height} trajectories with {', '.join(sorted(vkeys))} ({len(done)} already done)"
            )
            with progress("verifying", total=todo.height, unit="samples") as bar:
                for i in range(0, todo.height, job.batch):
                    part = todo.slice(i, job.batch)
                    _verify_batch(store, part, verifiers, job, summary)
                    bar.advance(part.height)
        summary.seconds = time.monotonic() - t0
        for (model, ph), part in sel.filter(pl.col("model").is_not_null()).group_by("model", "params_hash"):
            summary.ledger_rows += len(
                recompute_passrates(
                    store,
                    model=model,
                    params_hash=ph,
                    verifier_keys=vkeys,
                    task_ids=part["task_id"].unique().to_list(),
                    run_id=run.run_id,
                )
            )
        run.summary = summary.to_dict()
    return summary


def _verify_batch(
    store: Store, part: pl.DataFrame, verifiers: dict, job: VerifyJob, s: VerifySummary
) -> None:
    # start-up: `rldata tables` does not load rldata.verify.deadline
    from rldata.verify.parallel import verify_on_ray

    rows = part.to_dicts()
    items = [
        {
            "key": r["traj_id"],
            "verifier": verifiers[r["domain"]][0],
            "domain": r["domain"],
            "completion": r["completion"],
            "answer": r["answer"],
            "tests": r["tests"],
            "metadata": r["metadata"],
            "prompt": r["prompt"],
        }
        for r in rows
    ]
    # Verification is all this job does: every core of the cluster checks, not one child of the driver.
    verdicts = verify_on_ray(items, timeout_s=job.verify.timeout_s, where="ray")
    out = []
    for r in rows:
        vs = verdicts[r["traj_id"]]  # keyed by traj_id: a failed check cannot shift results between samples
        name, version = verifiers[r["domain"]]
        out += verdict_rows(r["task_id"], r["traj_id"], name, version, vs)
        ok = all_passed(vs)
        s.correct += int(bool(ok))
        s.errors += int(ok is None)
        s.no_answer += int(no_answer(vs))
    store.append("verifications", out, dedupe=True)  # one commit per batch: a kill loses at most this batch
    s.verified += len(rows)
