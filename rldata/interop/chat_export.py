"""Export stored rollouts as chat / SFT data: one row per trajectory with its whole conversation.

``messages`` is the conversation as a list of ``{role, content}``: for an episode, the stored
``trajectories.messages`` (system, user, assistant, tool turns, in order); for a plain sample, the
task's prompt (or chat messages) followed by the completion as the assistant turn.  That is the
conversational layout TRL's ``SFTTrainer`` and most chat fine-tuning tools read (``messages``
column), as JSONL or as an HF dataset (``load_from_disk`` / ``load_dataset``).  Beside it: the
trajectory and task ids, the run, the model, the environment, the reward, whether every
verification passed, and the episode's turns and end.

Rows are ordered by ``traj_id`` and the directory carries ``rldata-manifest.json`` like every export.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from rldata import schemas
from rldata.errors import RldataError
from rldata.interop.formats import (
    ExportFormat,
    UnknownFormat,
    get_format,
    register_format,
    write_hf,
    write_jsonl,
)
from rldata.store import Store

__all__ = ["CHAT_SCHEMA", "export_conversations"]

CHAT_SCHEMA = pa.schema(
    [
        ("messages", schemas.MESSAGES),
        ("traj_id", pa.string()),
        ("task_id", pa.string()),
        ("run_id", pa.string()),
        ("model", pa.string()),
        ("env_id", pa.string()),
        ("env_version", pa.string()),
        ("reward", pa.float64()),
        ("correct", pa.bool_()),
        ("num_turns", pa.int32()),
        ("num_tool_calls", pa.int32()),
        ("finish_reason", pa.string()),
    ]
)

_QUERY = """
WITH verdict AS (
    SELECT traj_id, bool_and(coalesce(passed, false)) AND NOT bool_or(passed IS NULL) AS correct
    FROM verifications WHERE layer <> 'judge' GROUP BY 1
)
SELECT t.traj_id, t.task_id, t.run_id, t.model, t.env_id, t.env_version, t.reward, v.correct, t.num_turns,
       t.num_tool_calls, t.finish_reason, t.messages AS episode, t.completion, t.prompt, k.messages AS task_messages
FROM trajectories t LEFT JOIN verdict v USING (traj_id) LEFT JOIN tasks k USING (task_id)
{where}
ORDER BY t.traj_id
"""


def _conversation(r: dict[str, Any]) -> list[dict[str, str]]:
    if r["episode"]:
        return [{"role": m["role"], "content": m["content"]} for m in r["episode"]]
    opening = [{"role": m["role"], "content": m["content"]} for m in (r["task_messages"] or [])] or [
        {"role": "user", "content": r["prompt"] or ""}
    ]
    return [*opening, {"role": "assistant", "content": r["completion"] or ""}]


def export_conversations(
    store: Store,
    *,
    out: str | Path,
    fmt: str = "jsonl",
    run_id: str | None = None,
    where: str | None = None,
    correct_only: bool = False,
    split: str = "train",
) -> dict:
    """Write the selected trajectories' conversations to the directory ``out``; return the manifest.
    ``where`` is a SQL predicate over ``trajectories t`` (and ``tasks k``)."""
    from rldata.interop.export import _check_out, write_export_dir
    from rldata.sql_guard import check_predicate

    try:
        layout = get_format(fmt, "rollouts")
    except UnknownFormat as e:
        raise RldataError(str(e)) from None
    conds, params = [], {}
    if where is not None:
        check_predicate(where)
        conds.append(f"({where})")
    if run_id:
        conds.append("t.run_id = $run")
        params["run"] = run_id
    if correct_only:
        conds.append("v.correct")
    q = _QUERY.format(where=("WHERE " + " AND ".join(conds)) if conds else "")
    try:
        rows = store.sql(q, params=params or None).pl().to_dicts()
    except Exception as e:
        if not where:
            raise
        raise RldataError(f"where {where!r}: {str(e).splitlines()[0]}", field="where") from None
    if not rows:
        raise RldataError(
            "no trajectories to export"
            + (f" for run {run_id!r}" if run_id else "")
            + (f" matching {where!r}" if where else "")
            + (" that are correct" if correct_only else "")
        )
    table = pa.Table.from_pylist(
        [
            {**{k: r[k] for k in CHAT_SCHEMA.names if k != "messages"}, "messages": _conversation(r)}
            for r in rows
        ],
        schema=CHAT_SCHEMA,
    )
    out = Path(out).absolute()
    _check_out(out, store=store)
    spec = SimpleNamespace(split=split, shard_rows=100_000)  # what the shared writers read
    if layout.build is not None:  # a rollouts format may reshape the conversation table
        table = layout.build(table, spec)
    fields = {
        "format": f"chat-{fmt}",
        "source": "trajectories",
        "run_id": run_id,
        "where": where,
        "correct_only": correct_only,
        "split": split,
        "store": store.root,
        "store_versions": {t: store.version(t) for t in ("trajectories", "verifications", "tasks")},
        "rows": table.num_rows,
        "columns": table.schema.names,
    }
    return write_export_dir(out, table, lambda d: layout.write(table, d, spec), fields)


register_format(
    ExportFormat("jsonl", write=write_jsonl, namespace="rollouts", help="JSONL, one conversation a line.")
)
register_format(
    ExportFormat(
        "hf",
        write=write_hf,
        namespace="rollouts",
        help="HF dataset (load_from_disk and load_dataset layouts).",
    )
)
