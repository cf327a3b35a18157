"""Held-out evaluation: ``rldata sample`` (the same job, engines and ledger) on a checkpoint.

The samples and ledger rows land under the checkpoint's own model name (``step-000010@<weights
hash>``, from :func:`rldata.engine.core.model_identity`), so an evaluation is an ordinary pass-rate
slice: ``rldata passrates --model step-000010@...``.  Accuracy = mean pass rate over the held-out
tasks (each task has ``eval.n`` samples), verifier errors excluded as everywhere in the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from rldata.configs.sampling import HELDOUT_WHERE, SampleConfig
from rldata.engine.core import model_identity
from rldata.errors import RldataError
from rldata.jobs.sample import override_verifier, run_sample
from rldata.ledger.core import verifier_key
from rldata.sql_guard import check_predicate
from rldata.stats import accuracy_interval
from rldata.store.core import Store
from rldata.trainer.config import TrainConfig
from rldata.verify import for_domain

__all__ = ["HELDOUT_WHERE", "EvalResult", "eval_job", "eval_task_ids", "evaluate"]

# HELDOUT_WHERE (rldata.configs.sampling): the bundled arith tasks mark their held-out split in metadata
# (rldata ingest --sample arith-heldout)


@dataclass(frozen=True)
class EvalResult:
    model: str  # the ledger name the samples landed under
    accuracy: float  # mean pass rate over the tasks
    tasks: int
    samples: int
    errors: int
    ci_low: float = 0.0  # 95% interval of the accuracy over the tasks (rldata.stats.accuracy_interval)
    ci_high: float = 1.0


def eval_task_ids(store: Store, cfg: TrainConfig) -> list[str]:
    """The first ``cfg.eval.size`` held-out tasks (task_id order), from ``cfg.eval``'s selection or
    predicate (EvalConfig refuses both at once); none without either."""
    ev = cfg.eval
    where = ev.tasks_where
    if ev.selection:
        rows = store.sql(
            "SELECT task_id FROM selections WHERE selection = $1 AND decision = 'keep' "
            "ORDER BY task_id LIMIT $2",
            params=[ev.selection, ev.size],
        ).fetchall()
        what = f"selection {ev.selection!r}"
    elif where:
        check_predicate(where, field="eval.where")  # checked by EvalConfig; spliced into SQL here
        rows = store.sql(
            f"SELECT task_id FROM tasks WHERE {where} ORDER BY task_id LIMIT {int(ev.size)}"
        ).fetchall()
        what = f"tasks matching {where!r}"
    else:
        return []
    if not rows:
        raise RldataError(
            f"no held-out tasks: {what} is empty (ingest them first, e.g. rldata ingest --sample arith-heldout)"
        )
    return [t for (t,) in rows]


def eval_job(
    cfg: TrainConfig, model_dir: str | Path, task_ids: list[str], *, address: str | None = None
) -> SampleConfig:
    """The sampling job of an evaluation: the eval's sampling (:meth:`TrainConfig.eval_spec`), the
    run's engine settings, environment and verifier, on ``model_dir``, over ``task_ids``."""
    # A sample job takes a predicate: name the tasks by id (a literal list stays exact whatever the store holds).
    where = "t.task_id IN (" + ", ".join("'" + t.replace("'", "''") + "'" for t in task_ids) + ")"
    return SampleConfig(
        sampling=cfg.eval_spec(),
        engine=cfg.engine.replace(model=str(model_dir)),
        verify=cfg.verify,  # the run's verifier scores its evals too
        where=where,
        address=address,
        env=cfg.env,
    )


def evaluate(
    store: Store,
    model_dir: str | Path,
    cfg: TrainConfig,
    task_ids: list[str],
    *,
    address: str | None = None,
    engines: list | None = None,
) -> EvalResult:
    """Sample the eval's ``n`` completions per held-out task from ``model_dir`` (the run's engine
    settings, environment and verifier; :meth:`TrainConfig.eval_spec`'s sampling) and read back the
    accuracy.

    ``engines``: running engine actors that hold ``model_dir``'s weights (the run's own); without them
    the evaluation starts engines of its own, as many as the run has."""
    job = eval_job(cfg, model_dir, task_ids, address=address)
    name = model_identity(str(model_dir)).name
    ids = pa.table({"task_id": pa.array(task_ids, pa.string())})
    done = run_sample(store, job, engines=engines)
    # the slice this evaluation's verifier wrote: the same checkpoint (or the base model, which every
    # run evaluates at step 0) may have ledger rows under another verifier or version too
    rows = store.sql(
        "SELECT pass_rate, n, n_error FROM passrates p JOIN _ids USING (task_id) "
        "WHERE p.model = $1 AND p.params_hash = $2 AND p.verifier_key IN (SELECT unnest($3))",
        params=[name, done.params_hash, _verifier_keys(store, cfg, ids)],  # its chat template resolved
        extra={"_ids": ids},
    ).fetchall()
    if not rows:
        raise RldataError(f"evaluation of {name} wrote no ledger rows")
    rates = [float(r[0]) for r in rows]
    lo, hi = accuracy_interval(rates)
    return EvalResult(
        model=name,
        accuracy=sum(rates) / len(rates),
        tasks=len(rows),
        samples=sum(int(r[1] or 0) for r in rows),
        errors=sum(int(r[2] or 0) for r in rows),
        ci_low=lo,
        ci_high=hi,
    )


def _verifier_keys(store: Store, cfg: TrainConfig, ids: pa.Table) -> list[str]:
    """The ledger keys the evaluation's samples were verified under (rldata.jobs.sample picks the
    verifiers the same way: the override, else each task's domain's)."""
    if cfg.verify.verifier:
        v = override_verifier(cfg.verify.verifier)
        return [verifier_key(v.name, v.version)]
    domains = store.sql("SELECT DISTINCT domain FROM tasks JOIN _ids USING (task_id)", extra={"_ids": ids})
    return sorted({verifier_key(for_domain(d).name, for_domain(d).version) for (d,) in domains.fetchall()})
