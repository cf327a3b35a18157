"""Re-profiling a run's pool when held-out accuracy plateaus (``live.reprofile_after`` K).

After a held-out evaluation, when the last K evaluations did not beat the best accuracy so far
(:func:`rldata.curriculum.gaussian.reprofile_due`, a pure function of the evaluation history, so a
resumed run decides the same), every task the sampler can draw is sampled ``live.reprofile_n`` times
at the current policy: the ordinary sample job on the checkpoint just saved, on the run's own engines
(they hold its weights for the evaluation), so the samples and the ledger rows land under the
checkpoint's model name at the run's sampling parameters, as ``rldata sample --model CHECKPOINT`` would
write them.  The counts then go to the sampler's live posteriors as evidence of the current policy
version (a verifier error counts as a fail, as in the rewards): ``gaussian`` and the ``live:*``
samplers read the re-profiled rates from the next draw on.

The checkpoint of that step was saved before the re-profile, so a run resumed from it re-profiles
again: the sample job finds its samples in the store and draws nothing, and the posteriors get the same
evidence.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from rldata.configs.sampling import SampleConfig
from rldata.curriculum.gaussian import reprofile_due
from rldata.engine.core import model_identity
from rldata.jobs.sample import run_sample
from rldata.store.core import Store
from rldata.trainer.config import TrainConfig
from rldata.trainer.evaluate import _verifier_keys

__all__ = ["ReprofileResult", "eval_history", "reprofile", "reprofile_now"]


@dataclass(frozen=True)
class ReprofileResult:
    model: str  # the ledger name the samples landed under (the checkpoint's)
    tasks: int
    pass_rate: float  # mean over the tasks
    samples: int


def reprofile(
    store: Store,
    cfg: TrainConfig,
    sampler,
    model_dir: str | Path,
    *,
    version: int,
    engines: list | None = None,
    address: str | None = None,
) -> ReprofileResult:
    """Sample the pool of ``sampler`` at ``model_dir`` (the current policy, policy version ``version``),
    upsert its ledger rows and feed the counts to ``sampler.live``."""
    ids = sampler.pool_tasks()
    spec = dataclasses.replace(cfg.rollout, n=cfg.live.reprofile_n)
    name = model_identity(str(model_dir)).name
    where = "t.task_id IN (" + ", ".join("'" + t.replace("'", "''") + "'" for t in ids) + ")"
    job = SampleConfig(
        sampling=spec,
        engine=cfg.engine.replace(model=str(model_dir)),
        verify=cfg.verify,  # the run's verifier, as its rollouts and evaluations
        where=where,
        address=address,
        env=cfg.env,
    )
    run_sample(store, job, engines=engines)
    table = pa.table({"task_id": pa.array(ids, pa.string())})
    rows = store.sql(
        "SELECT task_id, sum(n), sum(n_correct), sum(n_error) FROM passrates JOIN _ids USING (task_id) "
        "WHERE model = $1 AND params_hash = $2 AND verifier_key IN (SELECT unnest($3)) "
        "GROUP BY task_id ORDER BY task_id",
        params=[name, spec.params_hash, _verifier_keys(store, cfg, table)],
        extra={"_ids": table},
    ).fetchall()
    for task, n, k, err in rows:
        sampler.live.update(task, version=version, passes=int(k), fails=int(n) - int(k) + int(err))
    rates = [k / n for _, n, k, _ in rows if n]
    return ReprofileResult(
        model=name,
        tasks=len(rows),
        pass_rate=sum(rates) / len(rates) if rates else 0.0,
        samples=sum(int(n) + int(e) for _, n, _, e in rows),
    )


def eval_history(store: Store, run_id: str, upto: int) -> list[tuple[int, float]]:
    """(step, held-out accuracy) of the run's evaluations up to step ``upto``, in step order."""
    rows = store.sql(
        "SELECT step, value FROM metrics WHERE run_id = $1 AND name = 'eval/accuracy' AND step <= $2 "
        "ORDER BY step",
        params=[run_id, upto],
    ).fetchall()
    return [(int(s), float(v)) for s, v in rows]


def reprofile_now(cfg: TrainConfig, history: list[tuple[int, float]], step: int) -> bool:
    """Whether a re-profile follows the evaluation of ``step`` (the last of ``history``); never after
    the last step (nothing is drawn after it)."""
    if cfg.live.reprofile_after <= 0 or step >= cfg.steps or not history or history[-1][0] != step:
        return False
    return reprofile_due([a for _, a in history], cfg.live.reprofile_after)[-1]
