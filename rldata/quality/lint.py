"""``rldata lint``: run the rules (:mod:`rldata.quality.rules`) over the tasks and keep the findings.

One row per (task, rule) in ``lint_findings``, with the rule's version and severity and a JSON detail.
A rerun replaces the findings of the rules it ran on the tasks it checked, in one commit: new ones
added, changed ones updated, ones that no longer hold deleted, the same ones left as they were (so a
rerun on unchanged data commits nothing).  The run is recorded in ``runs`` (kind ``lint``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import polars as pl

from rldata.quality.config import LintConfig
from rldata.quality.decontaminate import read_tasks
from rldata.quality.rules import RULES, select_rules
from rldata.quality.suspect_key import suspect_findings
from rldata.quality.tables import new_or_changed, replace_rows
from rldata.quality.verifier_rules import verifier_findings
from rldata.results import Result
from rldata.runs.core import record_run
from rldata.verify.run import resolve_verifier

__all__ = ["LintResult", "lint_store"]

_COLUMNS = ("task_id", "prompt", "answer", "domain", "tests", "metadata")


@dataclass(frozen=True)
class LintResult(Result):
    tasks: int  # tasks checked
    rules: tuple[str, ...]  # rules run
    findings: int
    by_rule: dict = field(default_factory=dict)  # rule -> findings
    flagged: int = 0  # distinct tasks with an error finding
    skipped: dict = field(default_factory=dict)  # rule -> tasks it could not check
    stale: int = 0  # findings of an earlier run that no longer hold (deleted)
    run_id: str | None = None
    seconds: float = 0.0
    dry_run: bool = False
    rows: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)  # task_id, rule, severity, detail


def lint_store(store, cfg: LintConfig) -> LintResult:
    """Run ``cfg.rules`` over the tasks ``cfg.where`` picks; see the module doc."""
    started = time.monotonic()
    rules = select_rules(cfg.rules)
    if cfg.verifier is not None:
        resolve_verifier(cfg.verifier)  # an unknown verifier is refused before anything runs
    tasks = read_tasks(store, cfg.where, _COLUMNS)
    parts: list[pl.DataFrame] = []
    skipped: dict[str, int] = {}
    for rule in rules:
        if rule.kind == "format":
            parts.append(rule.check(tasks, cfg).with_columns(pl.lit(rule.name).alias("rule")))
    wanted = [r.name for r in rules if r.kind == "verifier"]
    if wanted:
        found, skip = verifier_findings(tasks, wanted, verifier=cfg.verifier, timeout_s=cfg.timeout_s)
        parts.append(found.select("task_id", "detail", "rule"))
        skipped.update(skip)
    if "suspect_key" in {r.name for r in rules}:
        found = suspect_findings(
            store,
            tasks.select("task_id", "answer"),
            share=cfg.suspect_share,
            min_samples=cfg.suspect_min_samples,
            max_pass_rate=cfg.suspect_max_pass_rate,
            model=cfg.suspect_model,
        )
        parts.append(found.with_columns(pl.lit("suspect_key").alias("rule")))
    rows = pl.concat([p.select("task_id", "rule", "detail") for p in parts]) if parts else _empty()
    meta = pl.DataFrame(
        {
            "rule": list(RULES),
            "rule_version": [r.version for r in RULES.values()],
            "severity": [r.severity for r in RULES.values()],
        }
    )
    rows = rows.join(meta, on="rule", how="left").sort("task_id", "rule")
    names = tuple(r.name for r in rules)
    result = {
        "tasks": tasks.height,
        "rules": names,
        "findings": rows.height,
        "by_rule": dict(rows.group_by("rule").len().sort("rule").iter_rows()),
        "flagged": rows.filter(pl.col("severity") == "error")["task_id"].n_unique(),
        "skipped": skipped,
        "dry_run": cfg.dry_run,
        "rows": rows.select("task_id", "rule", "severity", "detail"),
    }
    if cfg.dry_run:
        return LintResult(**result, seconds=time.monotonic() - started)
    with record_run(store, "lint", {k: v for k, v in asdict(cfg).items() if k != "dry_run"}) as run:
        old = (
            store.scan("lint_findings")
            .filter(pl.col("rule").is_in(list(names)))
            .select("task_id", "rule")
            .collect()
            .join(tasks.select("task_id"), on="task_id", how="semi")
        )
        stale = old.join(rows.select("task_id", "rule"), on=["task_id", "rule"], how="anti")
        fresh = new_or_changed(store, "lint_findings", rows, ["rule_version", "severity", "detail"])
        replace_rows(store, "lint_findings", fresh.with_columns(pl.lit(run.run_id).alias("run_id")), stale)
        out = LintResult(**result, stale=stale.height, run_id=run.run_id, seconds=time.monotonic() - started)
        run.summary = {k: v for k, v in out.to_dict().items() if k != "rows"}
    return out


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={"task_id": pl.String, "rule": pl.String, "detail": pl.String})
