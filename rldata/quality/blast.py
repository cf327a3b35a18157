"""``rldata blast-radius``: which runs, checkpoints and exports touched the flagged tasks.

For the tasks one eval pack flagged (``pack``), one lint rule found (``rule``), or every flagged task
(:mod:`rldata.ledger.flags`), the store answers:

- runs: every run with trajectories on them (``trajectories.run_id``): the tasks it touched, its
  rollouts and tokens (prompt + completion) on them, and for a training run the steps that drew them,
  the rollouts that entered the loss (``kept``) and their tokens, and the checkpoints saved at or after
  the first step that learned from one (``OUT/RUN_ID/checkpoints/step-N``, the run's ``output_dir``);
- exports: every export recorded in ``runs`` (kind ``export``) and every export directory given,
  through its lineage manifest: the selection's kept rows at the ``selections`` version the manifest
  recorded, less the tasks it left out as flagged then (the flag tables at the versions the manifest
  recorded), met with the flagged tasks now.

A held-out evaluation samples under the checkpoint's own run: it shows as a ``sample`` run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa

from rldata.errors import RldataError
from rldata.interop.lineage import MANIFEST_NAME, read_manifest
from rldata.ledger.flags import flagged
from rldata.quality.config import BlastConfig
from rldata.results import Result

__all__ = ["BlastResult", "blast_radius_store", "flags_by_source", "target_tasks"]

_RUNS = """
SELECT j.run_id,
       count(*) AS rollouts,
       count(DISTINCT j.task_id) AS tasks,
       sum(coalesce(j.prompt_tokens, 0) + coalesce(j.completion_tokens, 0)) AS tokens,
       count(j.step) AS train_rollouts,
       sum(CASE WHEN j.kept THEN 1 ELSE 0 END) AS trained_rollouts,
       sum(CASE WHEN j.kept THEN coalesce(j.prompt_tokens, 0) + coalesce(j.completion_tokens, 0) ELSE 0 END)
           AS trained_tokens,
       min(j.step) AS first_step,
       max(j.step) AS last_step,
       min(CASE WHEN j.kept THEN j.step END) AS first_trained_step,
       list(DISTINCT j.step ORDER BY j.step) FILTER (WHERE j.step IS NOT NULL) AS steps
FROM trajectories j JOIN _flagged f ON f.task_id = j.task_id
GROUP BY j.run_id
"""


@dataclass(frozen=True)
class BlastResult(Result):
    target: str  # "pack P", "rule R" or "every flag"
    tasks: int  # flagged tasks traced
    runs: pl.DataFrame = field(default_factory=pl.DataFrame)
    exports: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def table(self) -> pl.DataFrame:
        """Runs and exports in one frame (what the command prints)."""
        runs = self.runs.select(
            pl.lit("run").alias("what"), pl.col("run_id").alias("id"), *self.runs.columns[1:]
        ).with_columns(
            pl.col("checkpoints").list.join(", "), pl.col("steps").cast(pl.List(pl.String)).list.join(",")
        )
        exports = self.exports.select(
            pl.lit("export").alias("what"),
            pl.col("run_id").alias("id"),
            pl.lit("export").alias("kind"),
            pl.col("tasks"),
            pl.col("out").alias("path"),
            pl.col("selection"),
            pl.col("note"),
        )
        return pl.concat([runs, exports], how="diagonal_relaxed")


def target_tasks(store, cfg: BlastConfig) -> tuple[str, pl.DataFrame]:
    """(what is traced, its tasks: columns task_id, reason)."""
    if cfg.pack is not None:
        df = store.sql(
            "SELECT task_id, 'contaminated:' || pack AS reason FROM contamination WHERE pack = $1 "
            "GROUP BY task_id, pack ORDER BY task_id",
            params=[cfg.pack],
        ).pl()
        if (
            not df.height
            and not store.sql(
                "SELECT 1 FROM eval_items WHERE pack = $1 LIMIT 1", params=[cfg.pack]
            ).fetchall()
        ):
            raise RldataError(
                f"no eval pack {cfg.pack!r} in the store (rldata decontaminate --name)", field="pack"
            )
        return f"pack {cfg.pack}", df
    if cfg.rule is not None:
        df = store.sql(
            "SELECT task_id, 'lint:' || rule AS reason FROM lint_findings WHERE rule = $1 ORDER BY task_id",
            params=[cfg.rule],
        ).pl()
        return f"rule {cfg.rule}", df
    return "every flag", flagged(store).tasks


def _checkpoints(args: dict, run_id: str, first_trained_step) -> list[str]:
    """The run's checkpoint directories that hold an update made from a flagged task."""
    if first_trained_step is None:
        return []
    out_dir = ((args or {}).get("config") or {}).get("output_dir")
    root = Path(out_dir) / run_id / "checkpoints" if out_dir else None
    if root is None or not root.is_dir():
        return []
    found = []
    for d in sorted(root.glob("step-*")):
        try:
            step = int(d.name.split("-", 1)[1])
        except ValueError:  # step-000010.tmp: a checkpoint still being written
            continue
        if step >= first_trained_step:
            found.append(str(d))
    return found


def _runs(store, ids: pa.Table) -> pl.DataFrame:
    per_run = store.sql(_RUNS, extra={"_flagged": ids}).pl()
    if not per_run.height:
        return pl.DataFrame(
            schema={
                "run_id": pl.String, "kind": pl.String, "status": pl.String, "tasks": pl.Int64,
                "rollouts": pl.Int64, "tokens": pl.Int64, "trained_rollouts": pl.Int64,
                "trained_tokens": pl.Int64, "first_step": pl.Int64, "last_step": pl.Int64,
                "steps": pl.List(pl.Int64), "checkpoints": pl.List(pl.String),
            }
        )  # fmt: skip
    runs = store.sql("SELECT run_id, kind, status, args FROM runs").pl()
    per_run = per_run.join(runs, on="run_id", how="left")
    ckpts = [
        _checkpoints(json.loads(a) if a else {}, r, s)
        for r, a, s in per_run.select("run_id", "args", "first_trained_step").iter_rows()
    ]
    return (
        per_run.with_columns(pl.Series("checkpoints", ckpts, dtype=pl.List(pl.String)))
        .select(
            "run_id", pl.col("kind").fill_null("(unrecorded)"), "status",
            *(pl.col(c).cast(pl.Int64) for c in ("tasks", "rollouts", "tokens", "trained_rollouts", "trained_tokens")),
            pl.col("first_step").cast(pl.Int64), pl.col("last_step").cast(pl.Int64),
            pl.col("steps").cast(pl.List(pl.Int64)), "checkpoints",
        )
        .sort("run_id")
    )  # fmt: skip


def _exports(store, cfg: BlastConfig) -> list[tuple[str, dict | None, str]]:
    """(id, manifest or None, where it is) of every export recorded in runs and every one given."""
    seen: dict[str, tuple[str, dict | None, str]] = {}
    for run_id, summary in store.sql(
        "SELECT run_id, summary FROM runs WHERE kind = 'export' ORDER BY started_at"
    ).fetchall():
        s = json.loads(summary or "{}")
        out = s.get("out")
        manifest = None
        if out and (Path(out) / MANIFEST_NAME).is_file():
            try:
                manifest = read_manifest(out)
            except RldataError:
                manifest = None
        seen[str(Path(out).absolute()) if out else run_id] = (
            run_id,
            manifest or (s if s.get("selection") else None),
            out or "",
        )
    for path in cfg.exports:
        key = str(Path(path).absolute())
        if key not in seen:
            seen[key] = (Path(path).name, read_manifest(path), path)
    return list(seen.values())


def _shipped(store, manifest: dict) -> pl.DataFrame:
    """The task ids an export shipped, rebuilt from the store at the versions its manifest recorded."""
    versions = manifest.get("store_versions") or {}
    q = "SELECT task_id, bucket FROM selections WHERE selection = $1 AND decision = 'keep'"
    kept = store.sql(q, params=[manifest["selection"]], as_of={"selections": versions.get("selections")}).pl()
    if manifest.get("bucket") is not None:
        kept = kept.filter(pl.col("bucket") == manifest["bucket"])
    flags = manifest.get("flags") or {"include_flagged": True}
    if not flags.get("include_flagged", True):
        then = flagged(store, versions=flags.get("versions") or {})
        kept = kept.join(then.tasks, on="task_id", how="anti")
    return kept.select("task_id")


def blast_radius_store(store, cfg: BlastConfig) -> BlastResult:
    """Trace the tasks ``cfg`` names to the runs, checkpoints and exports that touched them."""
    target, tasks = target_tasks(store, cfg)
    ids = pa.table({"task_id": pa.array(tasks["task_id"].unique().to_list(), pa.string())})
    runs = _runs(store, ids)
    rows = []
    for run_id, manifest, out in _exports(store, cfg):
        if manifest is None or not manifest.get("selection"):
            rows.append((run_id, out, None, None, "no manifest (moved or deleted)"))
            continue
        try:
            shipped = _shipped(store, manifest)
        except RldataError as e:  # a version vacuumed away
            rows.append((run_id, out, manifest.get("selection"), None, f"cannot rebuild: {e}"))
            continue
        hit = shipped.join(tasks.select("task_id"), on="task_id", how="semi").height
        if hit:
            rows.append((run_id, out, manifest.get("selection"), hit, ""))
    exports = pl.DataFrame(
        rows,
        schema={
            "run_id": pl.String,
            "out": pl.String,
            "selection": pl.String,
            "tasks": pl.Int64,
            "note": pl.String,
        },
        orient="row",
    )
    return BlastResult(target=target, tasks=ids.num_rows, runs=runs, exports=exports)


_BY_SOURCE = """
SELECT coalesce(k.source, '(dropped)') AS source, f.flag, f.severity, count(DISTINCT f.task_id) AS tasks FROM (
    SELECT task_id, 'contaminated:' || pack AS flag, 'error' AS severity FROM contamination
    UNION ALL SELECT task_id, rule, severity FROM lint_findings
    UNION ALL SELECT task_id, 'near_duplicate', 'error' FROM near_duplicates WHERE NOT keep
) f LEFT JOIN tasks k ON k.task_id = f.task_id
GROUP BY ALL ORDER BY source, flag
"""


def flags_by_source(store) -> pl.DataFrame:
    """Tasks per (source, flag, severity): every contamination pack, lint rule and near-duplicate
    (``error`` rows are the ones left out downstream).  The report's data-quality page."""
    return store.sql(_BY_SOURCE).pl()
