"""``rldata dedup --near``: MinHash clusters of near-duplicate tasks, one task kept per cluster.

Exact duplicates never enter the store (ingest drops a prompt it has seen).  Near-duplicates do: the
same problem reworded, re-spaced, or with a prefix.  Every task's token-bigram set is sketched with
MinHash and indexed with LSH (rensa, as the ``minhash`` contamination detector does); each task's
candidates are checked against the ``jaccard`` threshold and must hold the same numbers (a template
with other numbers is another problem: ``9+8+7=`` and ``8+8+7=`` share most bigrams), and the pairs
that pass are joined into clusters (connected components).  In each cluster one task is kept by a stated rule: the first source
in ``source_priority`` (every unlisted source after the listed ones, as one), then the oldest
``created_at``, then the smallest ``task_id``.

The clusters go to ``near_duplicates`` (one row per task of a cluster of two or more; ``cluster_id`` is
the kept task's id).  With ``action = flag`` the other members are flagged (filter, stratify, train and
export leave them out); with ``drop`` they are deleted from ``tasks``.  A rerun replaces the rows of
the tasks it checked, in one commit.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl
import rensa

from rldata.quality.config import DedupConfig
from rldata.quality.decontaminate import read_tasks
from rldata.quality.detectors import BANDS, CHUNK, NUM_PERM, VERSIONS, byte_docs
from rldata.quality.normalise import normalise, shingles, token_hashes
from rldata.quality.tables import delete_tasks, new_or_changed, replace_rows
from rldata.results import Result
from rldata.runs.core import record_run

__all__ = ["DedupResult", "clusters", "dedup_store"]


@dataclass(frozen=True)
class DedupResult(Result):
    tasks: int  # tasks checked
    clusters: int  # clusters of two or more
    duplicates: int  # tasks in a cluster that are not its kept task
    action: str = "flag"
    dropped: int = 0
    rule: dict = field(default_factory=dict)
    run_id: str | None = None
    seconds: float = 0.0
    dry_run: bool = False
    rows: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)


def _find(parent: np.ndarray, i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _numbers(prompts: pl.Series) -> list[str]:
    """Each text's numbers, sorted: two texts with different numbers are two problems."""
    nums = normalise(prompts).str.extract_all(r"\d+(?:\.\d+)?").list.sort()
    return nums.list.join(" ").fill_null("").to_list()


def clusters(prompts: pl.Series, *, jaccard: float) -> tuple[np.ndarray, dict[tuple[int, int], float]]:
    """A cluster label per text (the smallest index in it) and the Jaccard estimate of each joined pair
    (pairs at or over ``jaccard`` that hold the same numbers)."""
    n = len(prompts)
    numbers = _numbers(prompts)
    lsh = rensa.RMinHashLSH(jaccard, NUM_PERM, BANDS)
    sketches: list = []
    for at in range(0, n, CHUNK):
        docs = byte_docs(shingles(token_hashes(prompts.slice(at, CHUNK))))
        objs = rensa.RMinHash.from_token_sets(docs, NUM_PERM, 0)
        lsh.insert_pairs(list(zip(range(at, at + len(objs)), objs, strict=True)))
        sketches += objs
    parent = np.arange(n)
    sims: dict[tuple[int, int], float] = {}
    for i, obj in enumerate(sketches):
        for j in lsh.query(obj):
            if j <= i or numbers[i] != numbers[j]:
                continue
            s = obj.jaccard(sketches[j])
            if s >= jaccard:
                sims[(i, j)] = s
                a, b = _find(parent, i), _find(parent, j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return np.array([_find(parent, i) for i in range(n)]), sims


def _keep_order(tasks: pl.DataFrame, priority: tuple[str, ...] | None) -> pl.DataFrame:
    rank = {s: i for i, s in enumerate(priority or ())}
    return tasks.with_columns(
        pl.col("source").replace_strict(rank, default=len(rank), return_dtype=pl.Int64).alias("__rank")
    ).sort("cluster", "__rank", "created_at", "task_id")


def dedup_store(store, cfg: DedupConfig) -> DedupResult:
    """Cluster the tasks ``cfg.where`` picks and record (or drop) the near-duplicates; see the module doc."""
    started = time.monotonic()
    tasks = read_tasks(store, cfg.where, ("task_id", "prompt", "source", "created_at"))
    labels, sims = clusters(tasks["prompt"], jaccard=cfg.jaccard)
    tasks = tasks.with_columns(
        pl.Series("cluster", labels, dtype=pl.Int64), pl.int_range(pl.len()).alias("__i")
    )
    sizes = tasks.group_by("cluster").len()
    members = _keep_order(
        tasks.join(sizes.filter(pl.col("len") > 1), on="cluster", how="semi"), cfg.source_priority
    )
    kept = (
        members.group_by("cluster", maintain_order=True)
        .first()
        .select("cluster", "task_id", pl.col("__i").alias("__k"))
    )
    rule = {
        "source_priority": list(cfg.source_priority or ()),
        "then": ["created_at", "task_id"],
        "jaccard": cfg.jaccard,
    }
    rows = members.join(kept.rename({"task_id": "cluster_id"}), on="cluster").with_columns(
        (pl.col("task_id") == pl.col("cluster_id")).alias("keep"),
        pl.struct("__i", "__k")
        .map_elements(
            lambda r: sims.get((min(r["__i"], r["__k"]), max(r["__i"], r["__k"]))), return_dtype=pl.Float64
        )
        .alias("similarity"),
        pl.lit(json.dumps(rule, sort_keys=True)).alias("rule"),
        pl.lit(VERSIONS["minhash"]).alias("method_version"),
        pl.lit(cfg.action).alias("action"),
    )
    rows = rows.select(
        "task_id", "cluster_id", "keep", "similarity", "rule", "method_version", "action"
    ).sort("cluster_id", "task_id")
    result = {
        "tasks": tasks.height,
        "clusters": kept.height,
        "duplicates": int((~rows["keep"]).sum()),
        "action": cfg.action,
        "rule": rule,
        "dry_run": cfg.dry_run,
        "rows": rows,
    }
    if cfg.dry_run:
        return DedupResult(**result, seconds=time.monotonic() - started)
    with record_run(store, "dedup", {k: v for k, v in asdict(cfg).items() if k != "dry_run"}) as run:
        old = store.scan("near_duplicates").select("task_id").collect()
        stale = old.join(tasks.select("task_id"), on="task_id", how="semi").join(
            rows, on="task_id", how="anti"
        )
        fresh = new_or_changed(
            store, "near_duplicates", rows, ["cluster_id", "keep", "rule", "method_version", "action"]
        )
        replace_rows(store, "near_duplicates", fresh.with_columns(pl.lit(run.run_id).alias("run_id")), stale)
        gone = rows.filter(~pl.col("keep"))["task_id"].to_list()
        dropped = delete_tasks(store, gone) if cfg.action == "drop" else 0
        out = DedupResult(**result, dropped=dropped, run_id=run.run_id, seconds=time.monotonic() - started)
        run.summary = {k: v for k, v in out.to_dict().items() if k != "rows"}
    return out
