"""Which tasks are flagged, and why: what filter, stratify, train and export leave out.

A task is flagged when any of these holds (one reason per task, the first that applies):

- ``contaminated:PACK``: a ``contamination`` row (any detector) against eval pack PACK;
- ``lint:RULE``: a ``lint_findings`` row of severity ``error`` (warnings and infos are recorded only);
- ``near_duplicate``: a ``near_duplicates`` row that is not its cluster's kept task.

:func:`flagged` reads the three tables at one version each (given, for a reproduction, or the current
ones) and returns the reasons with those versions, which the commands record (a selection's
``params``, an export's manifest, a training run's arguments): what was left out can always be read
back with ``rldata sql --as-of``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

__all__ = ["FLAG_TABLES", "Flags", "flagged", "no_flags"]

FLAG_TABLES = ("contamination", "lint_findings", "near_duplicates")

_QUERY = """
SELECT task_id, arg_min(reason, pri) AS reason FROM (
    SELECT task_id, 'contaminated:' || min(pack) AS reason, 0 AS pri FROM contamination GROUP BY task_id
    UNION ALL
    SELECT task_id, 'lint:' || min(rule), 1 FROM lint_findings WHERE severity = 'error' GROUP BY task_id
    UNION ALL
    SELECT task_id, 'near_duplicate', 2 FROM near_duplicates WHERE NOT keep
) GROUP BY task_id ORDER BY task_id
"""


@dataclass(frozen=True)
class Flags:
    """The flagged tasks (columns task_id, reason) and the versions of the tables they were read at."""

    tasks: pl.DataFrame
    versions: dict[str, int] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return self.tasks["task_id"].to_list()

    def counts(self) -> dict[str, int]:
        return dict(self.tasks.group_by("reason").len().sort("reason").iter_rows())

    def info(self, *, left_out: pl.DataFrame | None = None) -> dict:
        """What a command records: the table versions read and, per reason, the tasks it left out."""
        out = left_out if left_out is not None else self.tasks
        return {
            "versions": dict(self.versions),
            "left_out": dict(out.group_by("reason").len().sort("reason").iter_rows()),
        }


def no_flags() -> Flags:
    return Flags(pl.DataFrame(schema={"task_id": pl.String, "reason": pl.String}))


def flagged(store, *, versions: dict[str, int] | None = None) -> Flags:
    """Every flagged task with its reason, read at ``versions`` (default: the tables' current ones)."""
    at = {t: (versions or {}).get(t, store.version(t)) for t in FLAG_TABLES}
    df = store.sql(_QUERY, as_of=at).pl()
    if not df.height:
        return Flags(no_flags().tasks, at)
    return Flags(df.select(pl.col("task_id").cast(pl.String), pl.col("reason").cast(pl.String)), at)
