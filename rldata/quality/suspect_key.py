"""The store-driven lint rule ``suspect_key``: when the sampled answers agree and the key does not.

For each task, the answers the verifier extracted from its stored samples (``verifications.extracted``
of the ``answer`` layer, joined to ``trajectories`` for the model that wrote them; the task's most
used verifier version only, one verdict per sample) are grouped after light normalisation (a number's
value: ``1,000.0``, ``$1000`` and ``1000`` are one answer; text case-folded).  A task is a suspect when

- it has at least ``min_samples`` verified samples,
- one answer holds at least ``share`` of them,
- that answer fails the key (none of its samples passed), and
- the task's pass rate over those samples is at most ``max_pass_rate``.

The finding reports the majority answer, its share, the key, the pass rate, and the models (name,
revision, policy versions) behind the majority answer, so a reader can weigh who agreed.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation

import polars as pl
import pyarrow as pa

from rldata.verify.extract import HEDGE_SEP
from rldata.verify.numbers import clean_number

__all__ = ["canonical_answer", "suspect_findings"]

_QUERY = """
SELECT v.task_id, v.traj_id, v.verifier || '@' || v.verifier_version AS verifier, v.passed, v.extracted,
       t.model, t.model_revision, t.policy_version
FROM verifications v JOIN trajectories t ON t.traj_id = v.traj_id JOIN _ids i ON i.task_id = v.task_id
WHERE v.layer = 'answer' AND v.passed IS NOT NULL {model}
"""


def canonical_answer(text: str | None) -> str | None:
    """One spelling per answer: a number's canonical form, else the stripped, case-folded text; None
    for no answer or a hedge (several answers)."""
    if text is None or HEDGE_SEP in text:
        return None
    t = text.strip()
    if not t:
        return None
    num = clean_number(t)
    if num is None:
        return " ".join(t.rstrip(".").split()).casefold()
    try:  # one spelling per value: 27, 27.0 and 27.00 are one answer
        return format(Decimal(num).normalize(), "f")
    except InvalidOperation:  # a fraction or another form Decimal does not read
        return num


def suspect_findings(
    store,
    tasks: pl.DataFrame,
    *,
    share: float,
    min_samples: int,
    max_pass_rate: float,
    model: str | None = None,
) -> pl.DataFrame:
    """Rows (task_id, detail) for the suspects among ``tasks`` (columns task_id, answer)."""
    empty = pl.DataFrame(schema={"task_id": pl.String, "detail": pl.String})
    if not tasks.height:
        return empty
    ids = pa.table({"task_id": pa.array(tasks["task_id"].to_list(), pa.string())})
    q = _QUERY.format(model="AND t.model = $model" if model else "")
    rows = store.sql(q, params={"model": model} if model else None, extra={"_ids": ids}).pl()
    if not rows.height:
        return empty
    # one verifier version per task (its most used), one verdict per sample
    use = rows.group_by("task_id", "verifier").len().sort("len", "verifier", descending=[True, False])
    use = use.unique("task_id", keep="first").select("task_id", "verifier")
    rows = rows.join(use, on=["task_id", "verifier"], how="semi").unique(["traj_id"], keep="first")
    rows = rows.with_columns(
        pl.col("extracted").map_elements(canonical_answer, return_dtype=pl.String).alias("ans")
    )
    per_task = rows.group_by("task_id").agg(
        pl.len().alias("n"), pl.col("passed").cast(pl.Int64).sum().alias("k"), pl.first("verifier")
    )
    votes = (
        rows.filter(pl.col("ans").is_not_null())
        .group_by("task_id", "ans")
        .agg(pl.len().alias("votes"), pl.col("passed").any().alias("ans_passed"))
        .sort("votes", "ans", descending=[True, False])
        .unique("task_id", keep="first")
    )
    cand = (
        per_task.join(votes, on="task_id")
        .with_columns(
            (pl.col("votes") / pl.col("n")).alias("share"), (pl.col("k") / pl.col("n")).alias("pass_rate")
        )
        .filter(
            (pl.col("n") >= min_samples)
            & (pl.col("share") >= share)
            & ~pl.col("ans_passed")
            & (pl.col("pass_rate") <= max_pass_rate)
        )
        .join(tasks.select("task_id", "answer"), on="task_id")
    )
    if not cand.height:
        return empty
    who = (
        rows.join(cand.select("task_id", "ans"), on=["task_id", "ans"], how="semi")
        .group_by("task_id", "model", "model_revision")
        .agg(pl.len().alias("samples"), pl.col("policy_version").unique().sort().alias("policy_versions"))
        .sort("task_id", "samples", "model", descending=[False, True, False])
    )
    models: dict[str, list] = {}
    for r in who.iter_rows(named=True):
        models.setdefault(r["task_id"], []).append(
            {k: r[k] for k in ("model", "model_revision", "samples", "policy_versions")}
        )
    out = []
    for r in cand.sort("task_id").iter_rows(named=True):
        detail = {
            "majority": r["ans"],
            "share": round(r["share"], 4),
            "samples": r["n"],
            "pass_rate": round(r["pass_rate"], 4),
            "key": r["answer"],
            "verifier": r["verifier"],
            "models": models.get(r["task_id"], []),
        }
        out.append((r["task_id"], json.dumps(detail, sort_keys=True)))
    return pl.DataFrame(out, schema={"task_id": pl.String, "detail": pl.String}, orient="row")
