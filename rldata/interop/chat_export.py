"""Export stored rollouts as chat / SFT data: one row per trajectory with its whole conversation.

``messages`` is the conversation as a list of ``{role, content}``: for an episode, the stored
``trajectories.messages`` (system, user, assistant, tool turns, in order); for a plain sample, the
task's prompt (or chat messages) followed by the completion as the assistant turn.  That is the
conversational layout TRL's ``SFTTrainer`` and most chat fine-tuning tools read (``messages``
column), as JSONL or as an HF dataset (``load_from_disk`` / ``load_dataset``).  Beside it: the
trajectory and task ids, the run, the model, the environment, the reward, whether every
verification passed, and the episode's turns and end.

Standard tool calls: when an exported episode called tools, each message also has ``tool_calls``
(``[{id, type: "function", function: {name, arguments}}]``, the arguments as JSON text, as OpenAI's API
and TRL's SFT datasets write them) and ``tool_call_id``; and when an exported trajectory's environment
declares tools, a ``tools`` column holds their schemas as JSON text (null for the other rows), which
TRL's ``SFTTrainer`` reads and passes to the chat template.  Exports without either keep the plain
layout.

Rows are ordered by ``traj_id`` and the directory carries ``rldata-manifest.json`` like every export.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rldata.envs.base import EnvSpec
from rldata.envs.tools import env_tool_schemas
from rldata.errors import ConfigError, RldataError
from rldata.interop.export import _check_out, write_export_dir
from rldata.interop.formats import (
    ExportFormat,
    UnknownFormat,
    get_format,
    register_format,
    write_hf,
    write_jsonl,
    write_parquet,
)
from rldata.schemas import MESSAGES
from rldata.sql_guard import check_predicate
from rldata.store.core import Store

if TYPE_CHECKING:
    from rldata.interop.options import ExportConfig

__all__ = ["CHAT_SCHEMA", "CHAT_TURN", "export_conversations", "split_conversation"]

# a turn with standard tool calls, in the chat form templates and TRL read
CHAT_TURN = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        (
            "tool_calls",
            pa.list_(
                pa.struct(
                    [
                        ("id", pa.string()),
                        ("type", pa.string()),
                        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
                    ]
                )
            ),
        ),
        ("tool_call_id", pa.string()),
    ]
)

CHAT_SCHEMA = pa.schema(
    [
        ("messages", MESSAGES),
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
       t.num_tool_calls, t.finish_reason, t.messages AS episode, t.completion, t.prompt, k.messages AS task_messages,
       json_extract_string(t.sampling_params, '$.chat_template') AS chat_template
FROM trajectories t LEFT JOIN verdict v USING (traj_id) LEFT JOIN tasks k USING (task_id)
{where}
ORDER BY t.traj_id
"""


def _turn(m: dict[str, Any]) -> dict[str, Any]:
    calls = m.get("tool_calls")
    return {
        "role": m["role"],
        "content": m["content"],
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
        if calls
        else None,
        "tool_call_id": m.get("tool_call_id"),
    }


def _has_tool_fields(rows: list[dict[str, Any]]) -> bool:
    return any(m.get("tool_calls") or m.get("tool_call_id") for r in rows for m in (r["episode"] or []))


def _conversation(r: dict[str, Any], *, tool_fields: bool = False) -> list[dict[str, Any]]:
    if r["episode"]:
        if tool_fields:
            return [_turn(m) for m in r["episode"]]
        return [{"role": m["role"], "content": m["content"]} for m in r["episode"]]
    opening = [{"role": m["role"], "content": m["content"]} for m in (r["task_messages"] or [])] or [
        {"role": "user", "content": r["prompt"] or ""}
    ]
    return [*opening, {"role": "assistant", "content": r["completion"] or ""}]


def _tools_of(store: Store, rows: list[dict[str, Any]]) -> list[str | None]:
    """Each row's environment's tool schemas as JSON text (None: no environment, or one without tools)."""
    import json

    wanted = {(r["env_id"], r["env_version"]) for r in rows if r["env_id"] and r["env_version"]}
    found: dict[tuple[str, str], str | None] = {}
    if wanted:
        for env_id, version, spec in store.sql("SELECT env_id, version, spec FROM environments").fetchall():
            if (env_id, version) in wanted:
                try:
                    schemas_ = env_tool_schemas(EnvSpec.from_dict(json.loads(spec)))
                except RldataError:  # the environment no longer builds: its rows export without tools
                    schemas_ = None
                found[(env_id, version)] = json.dumps(schemas_) if schemas_ else None
    return [found.get((r["env_id"], r["env_version"])) for r in rows]


def export_conversations(store: Store, spec: ExportConfig) -> dict:
    """Write the conversations of the trajectories ``spec`` selects (``run_id``, ``where``: a SQL
    predicate over ``trajectories t`` and ``tasks k``, ``correct_only``) to the directory
    ``spec.out`` in its format; return the manifest."""
    # export.py registers the selection formats, this module the rollouts ones: it imports this
    # module's registrations through formats' registry, so its helpers are imported on use

    if not spec.rollouts:
        raise ConfigError("rollouts: a selection export (rldata.interop.export)", field="rollouts")
    fmt, run_id, where, correct_only, split = (
        spec.format,
        spec.run_id,
        spec.where,
        spec.correct_only,
        spec.split,
    )
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
    tool_fields = _has_tool_fields(rows)
    tools = _tools_of(store, rows)
    schema = CHAT_SCHEMA
    if tool_fields:
        schema = schema.set(0, pa.field("messages", pa.list_(CHAT_TURN)))
    if any(t is not None for t in tools):
        schema = schema.insert(1, pa.field("tools", pa.string()))
    table = pa.Table.from_pylist(
        [
            {
                **{k: r[k] for k in CHAT_SCHEMA.names if k != "messages"},
                "messages": _conversation(r, tool_fields=tool_fields),
                "tools": t,
            }
            for r, t in zip(rows, tools)
        ],
        schema=schema,
    )
    out = Path(spec.out).absolute()
    _check_out(out, store=store)
    # what the shared writers read, and how each row's prompt reached the model (an episode is always
    # templated; a plain sample as its params' chat_template says): the trl and verl layouts need it
    templated = [bool(r["episode"]) or r["chat_template"] == "on" for r in rows]
    spec = SimpleNamespace(split=split, shard_rows=100_000, templated=templated)
    if layout.build is not None:  # a rollouts format may reshape the conversation table
        table = layout.build(table, spec)
    fields = {
        "format": f"chat-{fmt}",
        "chat_template": "on" if all(templated) else "off" if not any(templated) else "mixed",
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


# ---- trainer layouts of the same conversations ------------------------------------------------
def split_conversation(messages: list) -> tuple[list, list]:
    """(prompt, completion): the turns before the first assistant turn, and the rest (the model's turns
    and the tool or environment turns between them)."""
    k = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    return list(messages[:k]), list(messages[k:])


def _one_kind(spec, what: str) -> bool:
    """True when every row was templated, False when none was; mixed rows are refused."""
    t = spec.templated
    if any(t) and not all(t):
        raise RldataError(
            f"a {what} export holds prompts of one kind: {sum(t)} of these {len(t)} trajectories were sampled "
            "through the chat template and the rest as raw text (chat_template off): export them separately "
            "(--where \"json_extract_string(t.sampling_params, '$.chat_template') = 'on'\", or --run)"
        )
    return bool(t) and all(t)


def _trl_rollouts(table: pa.Table, spec) -> pa.Table:
    """TRL's prompt-completion layout (SFTTrainer trains on the completion only; the ``tools`` column
    goes to the chat template).  Conversational when the prompts were templated; raw samples as text
    (``prompt``: the prompt text, ``completion``: the completion), as the model saw them."""
    rows = table.to_pylist()
    templated = _one_kind(spec, "trl")
    prompts, completions = [], []
    for r in rows:
        if templated:
            p, c = split_conversation(r["messages"])
        else:
            p, c = r["messages"][-2]["content"], r["messages"][-1]["content"]
        prompts.append(p)
        completions.append(c)
    turn = table.schema.field("messages").type
    kind = turn if templated else pa.string()
    out = table.drop_columns(["messages"])
    return out.add_column(0, pa.field("completion", kind), pa.array(completions, kind)).add_column(
        0, pa.field("prompt", kind), pa.array(prompts, kind)
    )


def _verl_rollouts(table: pa.Table, spec) -> pa.Table:
    """veRL's multi-turn SFT layout (``MultiTurnSFTDataset``: ``data.multiturn.messages_key=messages``,
    ``tools_key=tools``): the whole conversation, tool calls included, and the tool schemas as a list of
    objects (veRL hands them to the chat template as they are).  veRL always applies the template, so
    raw samples are refused."""
    import json

    if not _one_kind(spec, "verl"):
        raise RldataError(
            "veRL's SFT datasets apply the model's chat template to every conversation, and these "
            "trajectories were sampled as raw text (chat_template off): export them as jsonl or hf"
        )
    if "tools" not in table.column_names:
        return table
    tools = table["tools"].to_pylist()
    kinds = {t for t in tools if t is not None}
    if len(kinds) > 1:
        raise RldataError(
            "a veRL SFT export holds one set of tools (a Parquet column has one type): these trajectories "
            f"come from {len(kinds)} environments with different tools; export them separately (--where)"
        )
    parsed = [json.loads(t) if t is not None else None for t in tools]
    i = table.column_names.index("tools")
    return table.set_column(i, "tools", pa.array(parsed))


register_format(
    ExportFormat(
        "trl",
        build=_trl_rollouts,
        write=write_hf,
        namespace="rollouts",
        help="TRL prompt-completion dataset (SFTTrainer; conversational when the prompts were templated).",
    )
)
register_format(
    ExportFormat(
        "verl",
        build=_verl_rollouts,
        write=write_parquet,
        namespace="rollouts",
        help="veRL multi-turn SFT Parquet (messages, tools).",
    )
)
