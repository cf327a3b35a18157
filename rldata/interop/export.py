"""Export a selection's kept tasks in the layout a trainer reads: veRL, TRL, OpenRLHF, HF datasets, JSONL.

Every export is a directory holding the data files and ``rldata-manifest.json`` (see
:mod:`rldata.interop.lineage`).  The directory is built next to its destination and moved into
place at the end, so a failed export leaves the previous one (or nothing) behind, never half a
dataset.  Rows are ordered by task id, so exporting unchanged data again gives the same content hash.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from rldata._version import __version__
from rldata.configs.fields import param
from rldata.console import log
from rldata.envs.base import EnvSpec, make_env
from rldata.envs.guard import guarded_close, guarded_reset
from rldata.errors import ConfigError, RldataError
from rldata.interop import lineage
from rldata.interop.formats import (
    ExportFormat,
    format_names,
    get_format,
    register_format,
    write_hf,
    write_jsonl,
    write_parquet,
)
from rldata.ledger.flags import flagged
from rldata.schemas import MESSAGES, SELECTIONS, TASKS
from rldata.store.core import Store
from rldata.store.outputs import check_output_path, os_reason

if TYPE_CHECKING:
    from rldata.interop.options import ExportConfig  # it imports this module's formats: no cycle at run time

__all__ = [
    "FORMATS",
    "VERL_SCHEMA",
    "HfOptions",
    "OpenRLHFOptions",
    "TrlOptions",
    "VerlOptions",
    "chat_template_of",
    "export_selection",
    "load_selection",
    "record_export",
    "write_export_dir",
]

_PROMPT_STYLES = ("auto", "text", "messages")
_STYLE_HELP = (
    "auto: messages when the selection was measured through the model's chat template (or its tasks run in "
    "an environment), else text; text: a plain string; messages: a [{role, content}] list, which the "
    "consumer renders with the model's chat template."
)

REWARD_MODEL = pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
VERL_EXTRA = pa.struct(
    [
        ("split", pa.string()),
        ("index", pa.int64()),
        ("task_id", pa.string()),
        ("category", pa.string()),
        ("bucket", pa.string()),
        ("pass_rate", pa.float64()),
    ]
)
VERL_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", MESSAGES),
        ("ability", pa.string()),
        ("reward_model", REWARD_MODEL),
        ("extra_info", VERL_EXTRA),
    ]
)
VERL_PLAIN_SCHEMA = VERL_SCHEMA.set(
    VERL_SCHEMA.get_field_index("extra_info"),
    pa.field("extra_info", pa.struct([*VERL_EXTRA, ("domain", pa.string())])),
)
_T = TASKS.schema
_S = SELECTIONS.schema
GENERIC_SCHEMA = pa.schema(
    [
        _T.field(c).with_nullable(True)
        for c in (
            "task_id",
            "source",
            "domain",
            "category",
            "prompt",
            "messages",
            "answer",
            "tests",
            "metadata",
        )
    ]
    + [_S.field(c) for c in ("bucket", "pass_rate", "n", "n_correct")]
)


# ---- each format's own options (``--option KEY=VALUE``; a config file's ``options`` section) -------
def _check_prompt_style(style: str) -> None:
    if style not in _PROMPT_STYLES:
        raise ConfigError(
            f"prompt_style must be 'auto', 'text' or 'messages', got {style!r}", field="prompt_style"
        )


def _check_shard_rows(rows: int) -> None:
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ConfigError(f"shard_rows must be >= 1, got {rows}", field="shard_rows")


@dataclass(frozen=True)
class VerlOptions:
    data_source: str | None = param(
        None, help="Overrides each task's source (veRL picks its scorer by data_source)."
    )
    env: str | None = param(
        None, help="The environment (NAME[@VERSION]) the tasks run in (default: each task's own)."
    )


@dataclass(frozen=True)
class TrlOptions:
    prompt_style: str = param("auto", help=_STYLE_HELP)
    answer_column: str = param(
        "solution", help="The column reward functions read (trl.rewards.accuracy_reward: solution)."
    )
    shard_rows: int = param(100_000, help="Rows per Parquet shard.")

    def __post_init__(self):
        _check_prompt_style(self.prompt_style)
        if not self.answer_column:
            raise ConfigError("answer_column must be non-empty", field="answer_column")
        _check_shard_rows(self.shard_rows)


@dataclass(frozen=True)
class OpenRLHFOptions:
    prompt_style: str = param("auto", help=_STYLE_HELP)
    input_key: str = param("input", help="OpenRLHF's --input_key.")
    label_key: str = param("label", help="OpenRLHF's --label_key.")

    def __post_init__(self):
        _check_prompt_style(self.prompt_style)
        for name in ("input_key", "label_key"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must be non-empty", field=name)
        if self.input_key == self.label_key:
            raise ConfigError("input_key and label_key must differ", field="label_key")


@dataclass(frozen=True)
class HfOptions:
    shard_rows: int = param(100_000, help="Rows per Parquet shard.")

    def __post_init__(self):
        _check_shard_rows(self.shard_rows)


# ---- reading the selection -------------------------------------------------------------------
def _filtered(
    store: Store, name: str, version: int | None, predicate: pl.Expr | None, columns: list[str] | None = None
) -> pl.DataFrame:
    """Rows of ``name`` matching ``predicate``, pushed down to the Parquet scan when possible.

    Files Delta wrote through a merge or a predicate overwrite hold ``string_view`` columns, and
    pyarrow has no kernel comparing those with a string literal: for them, filter after reading.
    """
    lf = store.scan(name, version=version)
    if columns:
        lf = lf.select(columns)
    if predicate is None:
        return lf.collect()
    try:
        return lf.filter(predicate).collect()
    except Exception as e:
        if "string_view" not in str(e):
            raise
    table = store.dataset(name, version=version).to_table(columns=columns)
    return pl.from_arrow(table).filter(predicate)


def load_selection(
    store: Store,
    *,
    selection: str,
    bucket: str | None = None,
    versions: dict[str, int] | None = None,
    exclude: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The kept rows of ``selection`` (and ``bucket``) joined with their tasks, ordered by task id,
    less the tasks in ``exclude`` (a frame with task_id: flagged tasks, which may be gone from tasks).

    Returns ``(rows, selection_rows)``.  Raises :class:`RldataError` for an unknown selection, one
    that keeps nothing, an empty bucket, or kept tasks missing from the tasks table.
    """
    versions = versions or {}
    sel = _filtered(store, "selections", versions.get("selections"), pl.col("selection") == selection)
    if sel.height == 0:
        known = sorted(
            _filtered(store, "selections", versions.get("selections"), None, ["selection"])["selection"]
            .unique()
            .to_list()
        )
        hint = (
            f"; known selections: {', '.join(known[:20])}"
            if known
            else "; the store has no selections (run `rldata filter`)"
        )
        raise RldataError(f"unknown selection {selection!r}{hint}")
    kept = sel.filter(pl.col("decision") == "keep")
    if kept.height == 0:
        raise RldataError(f"selection {selection!r} keeps no tasks ({sel.height} dropped): nothing to export")
    if bucket is not None:
        in_bucket = kept.filter(pl.col("bucket") == bucket)
        if in_bucket.height == 0:
            have = sorted(b for b in kept["bucket"].unique().to_list() if b is not None)
            raise RldataError(
                f"selection {selection!r} keeps no tasks in bucket {bucket!r}; "
                f"buckets: {', '.join(have) if have else 'none (run `rldata stratify`)'}"
            )
        kept = in_bucket
    if exclude is not None:
        kept = kept.join(exclude.select("task_id"), on="task_id", how="anti")
    ids = kept["task_id"]
    tasks = _filtered(store, "tasks", versions.get("tasks"), pl.col("task_id").is_in(ids.implode()))
    tasks = tasks.unique(subset=["task_id"], keep="first")
    missing = ids.filter(~ids.is_in(tasks["task_id"].implode()))
    if missing.len():
        raise RldataError(
            f"selection {selection!r} keeps {missing.len()} task(s) missing from the tasks table, "
            f"e.g. {missing[0]!r}"
        )
    cols = ["task_id", "bucket", "pass_rate", "n", "n_correct"]
    rows = tasks.drop("created_at").join(kept.select(cols), on="task_id", how="inner").sort("task_id")
    return rows, sel


# ---- one table per format (Polars expressions, then a cast to the format's Arrow schema) --------
def _messages() -> pl.Expr:
    """The task's messages, or its prompt as one user turn."""
    one_turn = pl.concat_list(pl.struct(role=pl.lit("user"), content=pl.col("prompt")))
    has = pl.col("messages").is_not_null() & (pl.col("messages").list.len() > 0)
    return pl.when(has).then(pl.col("messages")).otherwise(one_turn)


def _prompt(style: str) -> pl.Expr:
    return _messages() if style == "messages" else pl.col("prompt")


def _style(frame: pl.DataFrame, spec: ExportConfig) -> str:
    """The prompt style a build writes: ``auto`` is messages when the selection's slice was sampled
    through the chat template (the consumer then applies the same template to the same messages, so
    it sees the prompt rldata measured) or its tasks run in an environment (episodes are always
    templated), else text (the raw prompt the slice was measured on)."""
    style = spec.opts.prompt_style
    if style != "auto":
        return style
    templated = "_chat_template" in frame.columns and (frame["_chat_template"] == "on").any()
    return "messages" if templated or frame["env_id"].is_not_null().any() else "text"


def chat_template_of(store: Store, sel: pl.DataFrame) -> str:
    """``on`` when the ledger slice a selection was decided from was sampled with plain prompts through
    the model's chat template (the ``chat_template`` stored in its samples' params), else ``off``."""
    hashes, models = _distinct(sel, "params_hash"), _distinct(sel, "model")
    if not hashes:
        return "off"
    rows = store.sql(
        "SELECT DISTINCT json_extract_string(sampling_params, '$.chat_template') FROM trajectories "
        "WHERE params_hash IN (SELECT unnest($h)) AND model IN (SELECT unnest($m)) AND sampling_params IS NOT NULL",
        params={"h": [str(h) for h in hashes], "m": [str(m) for m in models]},
    ).fetchall()
    return "on" if any(v == "on" for (v,) in rows) else "off"


def _truth() -> pl.Expr:
    return pl.coalesce("answer", "tests")  # code tasks: the test spec JSON


def _to_arrow(df: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    return df.to_arrow().select(schema.names).cast(schema)  # Polars gives large/view types: cast to ours


def _verl_env_table(frame: pl.DataFrame, spec: ExportConfig) -> pa.Table:
    """Environment tasks for veRL's multi-turn tool agent loop: ``agent_name: tool_agent``, the
    environment's opening messages as the prompt, and in ``extra_info`` what veRL hands its tools and
    its interaction (rldata.interop.verl): ``need_tools_kwargs``, ``tools_kwargs`` (per tool, named by
    the tool, and one entry named by the environment id: ``create_kwargs`` with the ground truth, the
    task id, the environment's spec and the task as JSON) and ``interaction_kwargs`` (the interaction's
    name, the spec and the task), plus the environment's id, version and spec and ``rldata_episode``
    (the reward function's cue).  The files written beside it (tool_config.yaml, interaction_config.yaml,
    verl_overrides.txt) are generated from the environment's tools (:func:`_write_verl`)."""
    # start-up: `rldata tables` does not load asyncio
    from rldata.interop.verl import INTERACTION_NAME, verl_schema_problem

    env_ids = sorted(set(frame["_env_id"].to_list()))
    if len(env_ids) != 1:
        raise RldataError(
            f"a veRL export holds one environment, the selection's tasks run in {', '.join(env_ids)}: "
            "export them separately (--env) or per bucket"
        )
    tool = env_ids[0]
    # standard tools: one tools_kwargs entry per tool (veRL looks a tool's kwargs up by its name), with
    # its OpenAI schema as JSON text (what veRL's tool config calls tool_schema); the environment's own
    # entry stays for a tool class that drives the whole environment
    tools_json = frame["_env_tools"][0] if "_env_tools" in frame.columns else None
    schemas_ = json.loads(tools_json) if tools_json else []
    for sc in schemas_:
        problem = verl_schema_problem(sc)
        if problem:
            raise RldataError(f"environment {tool!r}: veRL cannot load this tool schema: {problem}")
    names = [t["function"]["name"] for t in schemas_]
    schema_of = {t["function"]["name"]: json.dumps(t) for t in schemas_}
    create = pa.struct(
        [
            ("ground_truth", pa.string()),
            ("task_id", pa.string()),
            ("env_spec", pa.string()),
            ("task", pa.string()),
        ]
    )
    per_tool = pa.struct([("create_kwargs", create), ("tool_schema", pa.string())])
    interaction = pa.struct([("name", pa.string()), ("env_spec", pa.string()), ("task", pa.string())])
    extra = pa.struct(
        [
            *VERL_EXTRA,
            ("domain", pa.string()),
            ("need_tools_kwargs", pa.bool_()),
            (
                "tools_kwargs",
                pa.struct(
                    [(tool, pa.struct([("create_kwargs", create)]))]
                    + [(n, per_tool) for n in names if n != tool]
                ),
            ),
            ("interaction_kwargs", interaction),
            ("rldata_episode", pa.bool_()),
            ("env_id", pa.string()),
            ("env_version", pa.string()),
            ("env_spec", pa.string()),
            *([("tools", pa.string())] if names else []),
        ]
    )
    schema = pa.schema(
        [
            *[VERL_SCHEMA.field(n) for n in ("data_source", "prompt", "ability", "reward_model")],
            ("agent_name", pa.string()),
            ("extra_info", extra),
        ]
    )
    task_json = pl.struct(
        "task_id", "domain", "prompt", "messages", "answer", "tests", "metadata"
    ).map_elements(lambda t: json.dumps(t, default=str), return_dtype=pl.String)
    kwargs = pl.struct(ground_truth=_truth(), task_id="task_id", env_spec="_env_spec", task="_task")
    df = (
        frame.with_row_index("index")
        .with_columns(task_json.alias("_task"))
        .select(
            data_source=pl.lit(spec.opts.data_source) if spec.opts.data_source else pl.col("source"),
            prompt=pl.col("_opening"),
            ability=pl.col("domain"),
            reward_model=pl.struct(style=pl.lit("rule"), ground_truth=_truth()),
            agent_name=pl.lit("tool_agent"),
            extra_info=pl.struct(
                split=pl.lit(spec.split),
                index=pl.col("index").cast(pl.Int64),
                task_id="task_id",
                category="category",
                bucket="bucket",
                pass_rate="pass_rate",
                domain="domain",
                need_tools_kwargs=pl.lit(True),
                tools_kwargs=pl.struct(
                    pl.struct(create_kwargs=kwargs).alias(tool),
                    *[
                        pl.struct(create_kwargs=kwargs, tool_schema=pl.lit(schema_of[n])).alias(n)
                        for n in names
                        if n != tool
                    ],
                ),
                interaction_kwargs=pl.struct(
                    name=pl.lit(INTERACTION_NAME), env_spec="_env_spec", task="_task"
                ),
                rldata_episode=pl.lit(True),
                env_id="_env_id",
                env_version="_env_version",
                env_spec="_env_spec",
                **({"tools": pl.lit(tools_json)} if names else {}),
            ),
        )
    )
    return _to_arrow(df, schema)


def _with_envs(store: Store, frame: pl.DataFrame, env: str | None, *, mixed: bool = False) -> pl.DataFrame:
    """The frame with each task's environment and its opening messages (``reset`` of a fresh env), as
    the episode's first turn sees them (the spec's system prompt included).  ``mixed``: tasks without
    an environment may sit beside them (their columns null); otherwise that is an error."""
    from rldata.rollout import bind_envs  # start-up: `rldata tables` does not load rldata.rollout

    rows = frame.to_dicts()
    bindings = bind_envs(store, rows, env=env)
    if all(b is None for b in bindings.values()):
        return frame
    missing = [r["task_id"] for r in rows if bindings[r["task_id"]] is None]
    if missing and not mixed:
        raise RldataError(
            f"task {missing[0]!r} runs in no environment while others do: export them separately"
        )
    openings, tools = [], []
    for r in rows:
        b = bindings[r["task_id"]]
        if b is None:
            openings.append(None)
            tools.append(None)
            continue
        env_obj = make_env(b.spec)
        schemas_ = getattr(env_obj, "tool_schemas", None)
        tools.append(json.dumps([dict(t) for t in schemas_]) if schemas_ else None)
        g = guarded_reset(env_obj, r, None, timeout_s=b.spec.episode.step_timeout_s)
        if g.finish_reason == "env_error":
            raise RldataError(f"task {r['task_id']!r}: environment {b.ledger_key} failed to open: {g.error}")
        guarded_close(env_obj, timeout_s=b.spec.episode.step_timeout_s)
        openings.append(g.messages)
    return frame.with_columns(
        pl.Series("_opening", openings, dtype=pl.List(pl.Struct({"role": pl.String, "content": pl.String}))),
        pl.Series(
            "_env_id", [b.env_id if (b := bindings[r["task_id"]]) else None for r in rows], dtype=pl.String
        ),
        pl.Series(
            "_env_version",
            [b.version if (b := bindings[r["task_id"]]) else None for r in rows],
            dtype=pl.String,
        ),
        pl.Series(
            "_env_spec",
            [b.spec.to_json() if (b := bindings[r["task_id"]]) else None for r in rows],
            dtype=pl.String,
        ),
        pl.Series("_env_tools", tools, dtype=pl.String),
    )


def _verl_table(frame: pl.DataFrame, spec: ExportConfig) -> pa.Table:
    if "_env_id" in frame.columns:  # scored by the episode's environment or verifier (rldata.interop.verl)
        return _verl_env_table(frame, spec)
    no_truth = frame.filter(_truth().is_null())
    if no_truth.height:
        raise RldataError(
            f"task {no_truth['task_id'][0]!r} has no answer or tests: veRL's rule reward needs a ground_truth"
        )
    df = frame.with_row_index("index").select(
        data_source=pl.lit(spec.opts.data_source) if spec.opts.data_source else pl.col("source"),
        prompt=_messages(),
        ability=pl.col("domain"),
        reward_model=pl.struct(style=pl.lit("rule"), ground_truth=_truth()),
        extra_info=pl.struct(
            split=pl.lit(spec.split),
            index=pl.col("index").cast(pl.Int64),
            task_id="task_id",
            category="category",
            bucket="bucket",
            pass_rate="pass_rate",
            domain="domain",  # rldata.interop.verl.compute_score picks the domain's verifier
        ),
    )
    return _to_arrow(df, VERL_PLAIN_SCHEMA)


def _prepare_trl(store: Store, frame: pl.DataFrame, spec: ExportConfig) -> pl.DataFrame:
    """Tasks in an environment (messages prompts): the environment's opening messages as the prompt (the
    spec's system prompt included, as the episode opens) and a ``tools`` column (JSON text of the
    schemas) when it has standard tools: TRL passes it to the chat template (None for other tasks)."""
    if _style(frame, spec) != "messages" or frame["env_id"].is_null().all():
        return frame
    frame = _with_envs(store, frame, None, mixed=True)
    if "_env_tools" not in frame.columns:
        return frame
    frame = frame.with_columns(
        pl.when(pl.col("_opening").is_not_null())
        .then(pl.col("_opening"))
        .otherwise(pl.col("messages"))
        .alias("messages")
    )
    if frame["_env_tools"].is_null().all():
        return frame
    return frame.with_columns(pl.col("_env_tools").alias("tools"))


def _trl_table(frame: pl.DataFrame, spec: ExportConfig) -> pa.Table:
    reserved = {"prompt", "task_id", "source", "domain", "category", "bucket", "tests", "tools"}
    if spec.opts.answer_column in reserved:
        raise RldataError(f"answer column {spec.opts.answer_column!r} clashes with a column TRL exports need")
    style = _style(frame, spec)
    prompt_type = MESSAGES if style == "messages" else pa.string()
    fields = [("prompt", prompt_type), (spec.opts.answer_column, pa.string())] + [
        (c, pa.string()) for c in ("task_id", "source", "domain", "category", "bucket")
    ]
    if frame["tests"].is_not_null().any():  # code tasks: their reward functions read the tests
        fields.append(("tests", pa.string()))
    if "tools" in frame.columns:  # standard tools of the tasks' environment (_prepare_trl)
        fields.append(("tools", pa.string()))
    df = frame.with_columns(_prompt(style).alias("prompt"), pl.col("answer").alias(spec.opts.answer_column))
    return _to_arrow(df, pa.schema(fields))


def _openrlhf_table(frame: pl.DataFrame, spec: ExportConfig) -> pa.Table:
    style = _style(frame, spec)  # messages: run OpenRLHF with --apply_chat_template
    prompt_type = MESSAGES if style == "messages" else pa.string()
    schema = pa.schema(
        [
            (spec.opts.input_key, prompt_type),
            (spec.opts.label_key, pa.string()),
            ("datasource", pa.string()),
            ("task_id", pa.string()),
        ]
    )
    df = frame.select(
        _prompt(style).alias(spec.opts.input_key),
        _truth().alias(spec.opts.label_key),
        pl.col("source").alias("datasource"),
        "task_id",
    )
    return _to_arrow(df, schema)


def _generic_table(frame: pl.DataFrame, spec: ExportConfig) -> pa.Table:
    return _to_arrow(frame, GENERIC_SCHEMA)


# ---- putting the directory in place -----------------------------------------------------------
def _check_out(out: Path, *, store) -> None:
    check_output_path(out, store=store, name="out", directory=True)  # the swap below replaces it whole
    if out.exists() and not out.is_dir():  # a file, a device (/dev/full), a pipe: never replaced
        raise RldataError(f"out {out}: not a directory (a file or device is there)", field="out")
    if out.is_dir() and any(out.iterdir()) and not (out / lineage.MANIFEST_NAME).is_file():
        raise RldataError(
            f"{out}: directory is not empty and holds no earlier export; refusing to write into it"
        )


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Replace ``out`` (absent, empty, or an earlier export) by ``tmp`` with renames only."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    try:
        os.replace(tmp, out)
    except OSError:
        if old is not None:
            os.replace(old, out)  # put the earlier export back
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _distinct(df: pl.DataFrame, col: str) -> list:
    return sorted({v for v in df[col].to_list() if v is not None}, key=str)


def _filter_lineage(sel: pl.DataFrame) -> dict[str, Any]:
    params = []
    for raw in _distinct(sel, "params"):
        try:
            params.append(json.loads(raw))
        except json.JSONDecodeError:
            params.append(raw)
    pv = _distinct(sel, "passrates_version")
    return {
        "passrates_version": pv[0] if len(pv) == 1 else (pv or None),
        "filter": {
            "params": params[0] if len(params) == 1 else params,
            "model": _distinct(sel, "model"),
            "params_hash": _distinct(sel, "params_hash"),
            "verifier_key": _distinct(sel, "verifier_key"),
            "selected_at": str(sel["created_at"].max()) if sel.height else None,
        },
    }


def export_selection(store: Store, spec: ExportConfig) -> dict[str, Any]:
    """Write the kept tasks of ``spec.selection`` to the directory ``spec.out``; return the manifest.

    Kept tasks that the store's flag tables flag (:mod:`rldata.ledger.flags`, read at their current
    versions) are left out unless ``spec.include_flagged``; the manifest's ``flags`` records those
    versions and how many tasks each reason left out.  Each export is recorded in ``runs`` (kind
    ``export``): ``rldata blast-radius`` finds the exports that shipped a task through them."""
    if spec.rollouts:
        raise ConfigError("rollouts: a conversation export (rldata.interop.chat_export)", field="rollouts")
    out = Path(spec.out).absolute()
    _check_out(out, store=store)
    versions = {t: store.version(t) for t in ("tasks", "selections", "passrates")}
    # ---- flagged tasks (rldata decontaminate, lint, dedup --near) left out: issue 41 ----
    flags: dict[str, Any] = {"include_flagged": spec.include_flagged}
    exclude = None
    if not spec.include_flagged:
        read = flagged(store)
        exclude = read.tasks
        kept = _filtered(store, "selections", versions["selections"], pl.col("selection") == spec.selection)
        kept = kept.filter(pl.col("decision") == "keep")
        if spec.bucket is not None:
            kept = kept.filter(pl.col("bucket") == spec.bucket)
        left = kept.select("task_id").join(exclude.select("task_id", "reason"), on="task_id")
        flags |= {
            "versions": dict(read.versions),
            "left_out": dict(left.group_by("reason").len().sort("reason").iter_rows()),
        }
        if left.height and left.height == kept.height:
            raise RldataError(
                f"selection {spec.selection!r} keeps {left.height} task(s), all flagged "
                f"({', '.join(flags['left_out'])}): nothing to export (include_flagged exports them)"
            )
    frame, sel = load_selection(
        store, selection=spec.selection, bucket=spec.bucket, versions=versions, exclude=exclude
    )
    # how the slice was measured: a format that lets the consumer choose renders prompts the same way
    chat_template = chat_template_of(store, sel)
    frame = frame.with_columns(pl.lit(chat_template).alias("_chat_template"))
    fmt = get_format(spec.format)
    if fmt.prepare is not None:
        frame = fmt.prepare(store, frame, spec)
    table = fmt.build(frame, spec) if fmt.build is not None else _to_arrow(frame, GENERIC_SCHEMA)
    per_bucket = frame.group_by("bucket").len().sort("bucket").to_dicts()
    fields = {
        "format": spec.format,
        "selection": spec.selection,
        "bucket": spec.bucket,
        "split": spec.split,
        "store": store.root,
        "store_versions": versions,
        **_filter_lineage(sel),
        "chat_template": chat_template,
        "rows": table.num_rows,
        "rows_by_bucket": {str(b["bucket"]): b["len"] for b in per_bucket},
        "columns": table.schema.names,
        "options": asdict(spec.opts) if spec.opts is not None else {},
        "flags": flags,
    }
    manifest = write_export_dir(out, table, lambda d: fmt.write(table, d, spec), fields)
    record_export(store, manifest, out)
    return manifest


def record_export(store: Store, manifest: dict[str, Any], out: Path) -> None:
    """A ``runs`` row (kind ``export``, status done) for a finished export: where it is, what it
    read.  The export stands whether or not the row lands: a store that cannot take it gets a warning."""
    now = dt.datetime.now(dt.UTC)
    keys = ("selection", "bucket", "format", "split", "store_versions", "flags", "rows", "content_hash")
    row = {
        "run_id": f"export-{now:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}",
        "kind": "export",
        "args": json.dumps(
            {"out": str(out), "selection": manifest.get("selection"), "format": manifest.get("format")}
        ),
        "store_versions": json.dumps(manifest.get("store_versions", {})),
        "status": "done",
        "started_at": now,
        "ended_at": now,
        "summary": json.dumps({"out": str(out), **{k: manifest.get(k) for k in keys}}, default=str),
    }
    try:
        store.upsert("runs", [row])
    except (RldataError, OSError) as e:
        log(f"warning: exported to {out}, but could not record the export in runs: {e}")


def write_export_dir(out: Path, table: pa.Table, write, fields: dict[str, Any]) -> dict[str, Any]:
    """Build an export directory next to ``out`` (``write(tmp_dir)`` returns the files it wrote), add
    the manifest (``fields`` + version, time, content hash, files with sizes and sha256) and move it
    into place; on any failure nothing is left behind.  Returns the manifest."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        names = write(tmp)
        manifest = {
            "kind": "rldata-export",
            "manifest_version": lineage.MANIFEST_VERSION,
            "rldata_version": __version__,
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            **fields,
            "content_hash": lineage.rows_hash(table),
            "files": [
                {"path": n, "bytes": (tmp / n).stat().st_size, "sha256": lineage.file_sha256(tmp / n)}
                for n in names
            ],
        }
        lineage.write_manifest(tmp, manifest)
        _swap_into_place(tmp, out)
    except OSError as e:  # a full disk or quota: one line naming the output, nothing left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise RldataError(f"out {out}: cannot write: {os_reason(e)}", field="out") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


# ---- the built-in formats: one record each (a new format is one more register_format call) ----
def _prepare_verl(store: Store, frame: pl.DataFrame, spec: ExportConfig) -> pl.DataFrame:
    frame = _with_envs(store, frame, spec.opts.env)
    if "_env_id" not in frame.columns and (frame["_chat_template"] == "off").all():
        log(
            "note: veRL renders every prompt with the model's chat template, and this selection's pass rates "
            "were measured on raw prompts (chat_template off); for a chat model, measure with "
            "--chat-template on to export what veRL will see"
        )
    return frame


REWARD_OVERRIDES = (
    "custom_reward_function.path=pkg://rldata.interop.verl",
    "custom_reward_function.name=compute_score",
)


def _write_verl(table: pa.Table, d: Path, spec: ExportConfig) -> list[str]:
    """The Parquet file, and ``verl_overrides.txt``: the Hydra overrides of a veRL run on it (rldata's
    reward function; for environment tasks the multi-turn tool agent loop, the tool and interaction
    configs written beside it from the environment's tools, its turn limit and tool-call format).
    Paths are relative to the export directory: run veRL from it, or prefix them."""
    import yaml

    # start-up: `rldata tables` does not load asyncio
    from rldata.interop.verl import interaction_config, tool_config

    names = write_parquet(table, d, spec)
    lines = [f"data.train_files={names[0]}", *REWARD_OVERRIDES]
    if "agent_name" in table.column_names:
        extra = table["extra_info"][0].as_py()
        es = EnvSpec.from_dict(json.loads(extra["env_spec"]))
        tools = json.loads(extra.get("tools") or "[]")
        (d / "interaction_config.yaml").write_text(yaml.safe_dump(interaction_config(), sort_keys=False))
        names.append("interaction_config.yaml")
        lines += [
            "data.return_raw_chat=True",
            "actor_rollout_ref.rollout.mode=async",
            "actor_rollout_ref.rollout.multi_turn.enable=True",
            f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={es.episode.max_turns}",
            "actor_rollout_ref.rollout.multi_turn.interaction_config_path=interaction_config.yaml",
        ]
        if tools:
            (d / "tool_config.yaml").write_text(yaml.safe_dump(tool_config(tools), sort_keys=False))
            names.append("tool_config.yaml")
            parser = {"qwen": "hermes"}.get(
                es.episode.tool_parser or "hermes", es.episode.tool_parser or "hermes"
            )
            if parser != "hermes":  # veRL's agent loop parses hermes (and gpt-oss) tool calls only
                raise RldataError(
                    f"environment tool_parser {es.episode.tool_parser!r}: veRL's tool agent loop reads hermes tool calls "
                    "(<tool_call>{...}</tool_call>) only"
                )
            lines += [
                "actor_rollout_ref.rollout.multi_turn.tool_config_path=tool_config.yaml",
                f"actor_rollout_ref.rollout.multi_turn.format={parser}",
            ]
    (d / "verl_overrides.txt").write_text("\n".join(lines) + "\n")
    return [*names, "verl_overrides.txt"]


register_format(
    ExportFormat(
        "verl",
        build=_verl_table,
        write=_write_verl,
        options=VerlOptions,
        prepare=_prepare_verl,
        help="veRL RL dataset: one Parquet file, chat prompt, reward_model.ground_truth, extra_info.",
    )
)
register_format(
    ExportFormat(
        "trl",
        build=_trl_table,
        write=write_hf,
        options=TrlOptions,
        prepare=_prepare_trl,
        help="TRL (GRPOTrainer): an HF dataset with prompt and answer columns (and tools, for tool environments).",
    )
)
register_format(
    ExportFormat(
        "openrlhf",
        build=_openrlhf_table,
        write=write_jsonl,
        options=OpenRLHFOptions,
        help="OpenRLHF: JSONL with --input_key / --label_key fields.",
    )
)
register_format(
    ExportFormat(
        "hf",
        build=_generic_table,
        write=write_hf,
        options=HfOptions,
        help="HF datasets: load_from_disk and load_dataset layouts of the task rows.",
    )
)
register_format(
    ExportFormat("jsonl", build=_generic_table, write=write_jsonl, help="JSONL of the task rows.")
)

FORMATS = tuple(format_names("selection", plugins=False))  # the built-in ones; plugins add to the registry
