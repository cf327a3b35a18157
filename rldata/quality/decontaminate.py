"""``rldata decontaminate``: match every task against an eval pack and record each match as a row.

One run: read the pack (a bad file stops here, nothing written), read the tasks (``where``), run the
detectors (:mod:`rldata.quality.detectors`), then commit: the pack's items (a version already stored
adds nothing), the ``contamination`` rows of this pack for the tasks checked (new matches upserted,
matches a rerun no longer finds deleted, one commit: :func:`rldata.quality.tables.replace_rows`), and
with ``action = drop`` the matched tasks deleted from ``tasks`` (their rows stay, marked ``drop``).  The
run is recorded in ``runs`` (kind ``decontaminate``).  A rerun on the same data writes nothing new.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import polars as pl

from rldata.console import progress
from rldata.ingest.presets import preset
from rldata.quality.config import DecontaminateConfig
from rldata.quality.detectors import VERSIONS, EvalIndex, detect
from rldata.quality.evalpack import EvalPack, load_pack, write_pack
from rldata.quality.tables import delete_tasks, new_or_changed, replace_rows
from rldata.results import Result
from rldata.runs.core import record_run
from rldata.sql_guard import check_predicate

__all__ = ["DecontaminateResult", "decontaminate_store", "read_tasks"]

_COLUMNS = ["task_id", "pack", "eval_id", "method", "score", "threshold", "span"]
# a stored row that equals a new one on these is left as it is
_SAME = ["pack_version", "score", "threshold", "span", "detector_version", "action"]


@dataclass(frozen=True)
class DecontaminateResult(Result):
    pack: str
    pack_version: str
    items: int  # eval items in the pack
    items_added: int  # of those, newly stored (0 for a pack already stored)
    tasks: int  # tasks checked
    flagged: int  # distinct tasks with a match
    by_method: dict = field(default_factory=dict)  # method -> tasks matched
    action: str = "flag"
    dropped: int = 0  # tasks deleted (action drop)
    stale: int = 0  # rows of an earlier run this run no longer found (deleted)
    run_id: str | None = None
    seconds: float = 0.0
    dry_run: bool = False
    rows: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)  # the matches


def read_tasks(store, where: str | None, columns=("task_id", "prompt", "domain")) -> pl.DataFrame:
    """The tasks a quality command checks: all, or those matching ``where`` (one SQL predicate)."""
    cols = ", ".join(columns)
    if where is None:
        return store.scan("tasks").select(list(columns)).collect().sort("task_id")
    check_predicate(where, field="where")
    return store.sql(f"SELECT {cols} FROM tasks WHERE ({where}) ORDER BY task_id").pl()


def _fields(cfg: DecontaminateConfig):
    if cfg.eval_sample is not None and cfg.preset is None:
        base = preset("gsm8k")
    else:
        base = preset(cfg.preset)
    return base.with_overrides(prompt=cfg.prompt_field, answer=cfg.answer_field)


def decontaminate_store(
    store, cfg: DecontaminateConfig, *, show_progress: bool = False
) -> DecontaminateResult:
    """Check the tasks against the pack ``cfg`` names and record the matches; see the module doc."""
    started = time.monotonic()
    pack = load_pack(store, path=cfg.eval, sample=cfg.eval_sample, name=cfg.name, fields=_fields(cfg))
    tasks = read_tasks(store, cfg.where)
    index = EvalIndex(pack.items["prompt"], cfg)
    with progress(f"decontaminate {pack.name}", total=max(tasks.height, 1), unit="tasks") as bar:
        found = detect(tasks, index, progress=bar.advance if show_progress else None)
    rows = _rows(found, pack, cfg.action)
    result = {
        "pack": pack.name,
        "pack_version": pack.version,
        "items": pack.size,
        "items_added": 0,
        "tasks": tasks.height,
        "flagged": rows["task_id"].n_unique(),
        "by_method": dict(
            rows.group_by("method").agg(pl.col("task_id").n_unique()).sort("method").iter_rows()
        ),
        "action": cfg.action,
        "dry_run": cfg.dry_run,
        "rows": rows.select(_COLUMNS),
    }
    if cfg.dry_run:
        return DecontaminateResult(**result, seconds=time.monotonic() - started)
    args = {k: v for k, v in asdict(cfg).items() if k != "dry_run"} | {"pack_version": pack.version}
    with record_run(store, "decontaminate", args) as run:
        added = write_pack(store, pack)
        rows = rows.with_columns(pl.lit(run.run_id).alias("run_id"))
        stale = _stale(store, pack.name, cfg.methods, tasks, rows)
        fresh = new_or_changed(store, "contamination", rows, _SAME)
        replace_rows(store, "contamination", fresh, stale)
        dropped = delete_tasks(store, rows["task_id"].unique().to_list()) if cfg.action == "drop" else 0
        out = DecontaminateResult(
            **{**result, "items_added": added},
            dropped=dropped,
            stale=stale.height,
            run_id=run.run_id,
            seconds=time.monotonic() - started,
        )
        run.summary = {k: v for k, v in out.to_dict().items() if k != "rows"}
    return out


def _rows(found: pl.DataFrame, pack: EvalPack, action: str) -> pl.DataFrame:
    """Detector output -> ``contamination`` rows (the best score per task, item and method)."""
    ids = pack.items["eval_id"]
    rows = found.with_columns(
        ids.gather(found["eval_idx"]).alias("eval_id")
        if found.height
        else pl.lit(None, dtype=pl.String).alias("eval_id"),
        pl.lit(pack.name).alias("pack"),
        pl.lit(pack.version).alias("pack_version"),
        pl.col("method").replace_strict(VERSIONS, return_dtype=pl.String).alias("detector_version"),
        pl.lit(action).alias("action"),
    )
    rows = rows.sort("score", descending=True).unique(["task_id", "eval_id", "method"], keep="first")
    return rows.select(*_COLUMNS, "pack_version", "detector_version", "action").sort(
        "task_id", "eval_id", "method"
    )


def _stale(store, pack: str, methods, tasks: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Keys of this pack's stored rows (for the methods run, on the tasks checked) that this run did
    not find again."""
    old = (
        store.scan("contamination")
        .filter((pl.col("pack") == pack) & pl.col("method").is_in(list(methods)))
        .select("task_id", "pack", "eval_id", "method")
        .collect()
    )
    old = old.join(tasks.select("task_id"), on="task_id", how="semi")
    return old.join(
        rows.select("task_id", "pack", "eval_id", "method"),
        on=["task_id", "pack", "eval_id", "method"],
        how="anti",
    )
