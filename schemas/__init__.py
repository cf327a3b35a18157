"""One Arrow schema per store table, defined once.

Every writer goes through :func:`rldata.store.core.Store.append` (or ``upsert``), which validates rows
against these schemas; nothing infers a schema from data.  Each table carries a schema version,
recorded in the Delta table's configuration when the table is created, so a store written by a
newer rldata is refused rather than silently misread, and one written by an older rldata is upgraded
when opened (:mod:`rldata.store.migrate`: bumping a version here needs a step there).

Conventions
- ``*_id`` columns are stable content hashes or uuids (strings).
- Free-form structured values (metadata, sampling params, verifier detail, run arguments) are JSON
  strings: they stay queryable with DuckDB's ``json_extract`` and never force a schema change.
- Timestamps are UTC microseconds.  ``created_at`` / ``updated_at`` default to "now" when a
  writer leaves them out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

from rldata.errors import RldataError, UnknownNameError

__all__ = ["MESSAGE", "TABLES", "TOOL_CALL", "TURN", "TableSchema", "get", "register", "table_names"]

TS = pa.timestamp("us", tz="UTC")
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
MESSAGES = pa.list_(MESSAGE)
# a model's tool call: ``arguments`` is the JSON text of the arguments object (as OpenAI's API has it)
TOOL_CALL = pa.struct([("id", pa.string()), ("name", pa.string()), ("arguments", pa.string())])
# a turn of a stored conversation: assistant turns may carry tool calls, a tool result names its call
TURN = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(TOOL_CALL)),
        ("tool_call_id", pa.string()),
    ]
)
TURNS = pa.list_(TURN)


def _f(name: str, type_: pa.DataType, required: bool = False, doc: str = "") -> pa.Field:
    return pa.field(name, type_, nullable=not required, metadata={"doc": doc} if doc else None)


@dataclass(frozen=True)
class TableSchema:
    """A table's name, Arrow schema, schema version and row key."""

    name: str
    version: int
    schema: pa.Schema
    key: tuple[str, ...]  # columns that identify a row: re-writing the same key never duplicates it
    defaults_now: tuple[str, ...] = field(default=("created_at",))  # filled with the write time
    defaults: tuple[tuple[str, object], ...] = ()  # (column, value) filled where a writer leaves it null
    # A required string column that a row's key determines (or that is in the key): a keyed write
    # only looks for matches among the files whose statistics overlap the new rows' min..max of it,
    # so its cost stays flat as the table grows when writers append in its order (jobs go task by task).
    prune_by: str | None = None
    finite: tuple[str, ...] = ()  # float columns that may hold no NaN or infinity (rewards, scores)

    @property
    def required(self) -> list[str]:
        filled = set(self.defaults_now) | {c for c, _ in self.defaults}
        return [f.name for f in self.schema if not f.nullable and f.name not in filled]

    @property
    def columns(self) -> list[str]:
        return self.schema.names


TASKS = TableSchema(
    "tasks",
    2,  # 2: env_id, env_version (rldata.store.migrate upgrades version-1 tables)
    pa.schema(
        [
            _f("task_id", pa.string(), True, "hash of normalized (prompt, answer, source)"),
            _f("source", pa.string(), True, "where the task came from: a file stem, 'gsm8k', 'arith'"),
            _f("domain", pa.string(), True, "math | code | ... : picks the verifier"),
            _f("category", pa.string(), doc="finer grouping, e.g. 'add/2d' or a dataset subject"),
            _f("prompt", pa.string(), True, "plain-text prompt (for chat tasks: the last user turn)"),
            _f("messages", MESSAGES, doc="chat-format prompt, when the source had one"),
            _f("answer", pa.string(), doc="ground truth (math: final answer as text)"),
            _f("tests", pa.string(), doc="code tasks: JSON test spec (public and hidden tests)"),
            _f("metadata", pa.string(), doc="JSON object of anything else the source carried"),
            _f("created_at", TS, True),
            _f(
                "env_id",
                pa.string(),
                doc="environment the task runs in (environments.env_id); null = single-turn",
            ),
            _f("env_version", pa.string(), doc="that environment's version; null = single-turn"),
        ]
    ),
    key=("task_id",),
    prune_by="task_id",
)

ENVIRONMENTS = TableSchema(
    "environments",
    1,
    pa.schema(
        [
            _f("env_id", pa.string(), True),
            _f("kind", pa.string(), True, "e.g. 'python-sandbox', 'single-turn'"),
            _f("spec", pa.string(), True, "JSON: how to create, reset and tear down the environment"),
            _f("version", pa.string(), True),
            _f("created_at", TS, True),
        ]
    ),
    key=("env_id", "version"),
)

TRAJECTORIES = TableSchema(
    "trajectories",
    5,  # 2: env_id, env_version; 3: num_turns, num_tool_calls, env_info (multi-turn episodes);
    # 4: params_hash leaves N out (rldata.store.rehash rewrote the old rows' hashes; the layout is unchanged);
    # 5: messages gain tool_calls (id, name, JSON arguments) and tool_call_id (standard tool calls)
    pa.schema(
        [
            _f(
                "traj_id",
                pa.string(),
                True,
                "hash of (run key, task_id, sample_idx): re-runs never duplicate",
            ),
            _f("task_id", pa.string(), True),
            _f("run_id", pa.string(), True),
            _f("sample_idx", pa.int32(), True, "0..N-1 within the task's group"),
            _f("model", pa.string(), True, "model id (path or name)"),
            _f("model_revision", pa.string(), doc="content hash of the weights, or a hub revision"),
            _f("policy_version", pa.int64(), True, "0 = the model as loaded; +1 per optimizer step"),
            # since v4 N is left out too (rldata.configs.sampling); the doc stays as stored (see finish_reason)
            _f("params_hash", pa.string(), True, "hash of the sampling params (seed excluded)"),
            _f("sampling_params", pa.string(), doc="JSON of the sampling params"),
            _f("seed", pa.int64()),
            _f("prompt", pa.string()),
            _f("completion", pa.string()),
            _f("messages", TURNS, doc="multi-turn rollouts: the whole conversation"),
            _f("prompt_tokens", pa.int32()),
            _f("completion_tokens", pa.int32()),
            _f(
                "cumulative_logprob", pa.float64(), doc="behaviour policy's summed log-prob of the completion"
            ),
            # (a column's doc is part of the stored schema: changing it breaks writes to existing tables)
            # values: stop | length | prompt_too_long, and for episodes env_done | max_turns | env_error
            _f("finish_reason", pa.string(), doc="stop | length | error"),
            _f("step", pa.int64(), doc="training step (null for sampling runs)"),
            _f("reward", pa.float64()),
            _f("advantage", pa.float64()),
            _f("bucket", pa.string(), doc="curriculum bucket the task was drawn from"),
            _f("kept", pa.bool_(), doc="training: did the group enter the loss"),
            _f("drop_reason", pa.string(), doc="training: why a group was dropped (zero_variance, ...)"),
            _f("created_at", TS, True),
            _f("env_id", pa.string(), doc="environment the episode ran in; null = single-turn"),
            _f("env_version", pa.string(), doc="that environment's version; null = single-turn"),
            # completion = the (last) assistant turn: what the verifier checked
            _f(
                "num_turns",
                pa.int32(),
                doc="assistant turns in the episode (1 for single-turn; null before v3)",
            ),
            _f("num_tool_calls", pa.int32(), doc="tool calls the environment counted (info 'tool_calls')"),
            _f(
                "env_info",
                pa.string(),
                doc="JSON: the environment's last info; env_error: its message under 'error'",
            ),
        ]
    ),
    key=("traj_id",),
    prune_by="task_id",  # a traj_id hashes its task_id: one traj_id, one task_id
    finite=("reward",),
)

VERIFICATIONS = TableSchema(
    "verifications",
    1,
    pa.schema(
        [
            _f("traj_id", pa.string(), True),
            _f("task_id", pa.string(), True),
            _f("verifier", pa.string(), True, "registry name, e.g. 'math', 'exact', 'code'"),
            _f("verifier_version", pa.string(), True),
            _f(
                "layer",
                pa.string(),
                True,
                "'answer' for single-layer verifiers; rule | public | hidden | judge",
            ),
            _f("passed", pa.bool_(), doc="null when the verifier errored"),
            _f("score", pa.float64()),
            _f("extracted", pa.string(), doc="the answer the verifier pulled out of the completion"),
            _f("error", pa.string(), doc="crash / timeout message; the sample counts as an error, not a 0"),
            _f("detail", pa.string(), doc="JSON detail (failing test, judge rationale, ...)"),
            _f("created_at", TS, True),
        ]
    ),
    key=(
        "traj_id",
        "verifier",
        "verifier_version",
        "layer",
    ),  # a new verifier version adds rows, never replaces
    prune_by="task_id",  # the sample's task: its traj_id determines it
    finite=("score",),
)

PASSRATES = TableSchema(
    "passrates",
    5,  # 2: env_version joins the key; 3: stop_rule, alpha, confidence, n_max, band (adaptive N);
    # 4: verifier_version renamed verifier_key (it holds 'name@version', not verifications' bare version);
    # 5: params_hash leaves N out: rows of one task under several N merged, recounted (rldata.store.rehash)
    pa.schema(
        [
            _f("task_id", pa.string(), True),
            _f("model", pa.string(), True),
            _f("params_hash", pa.string(), True),
            _f("verifier_key", pa.string(), True, "'name@version' of the verifier that decided"),
            _f("n", pa.int32(), True, "verified samples (errors excluded)"),
            _f("n_correct", pa.int32(), True),
            _f("n_error", pa.int32(), True, "samples whose verifier crashed or timed out"),
            _f("pass_rate", pa.float64(), True),
            _f("ci_low", pa.float64(), doc="Wilson 95% interval"),
            _f("ci_high", pa.float64()),
            _f("run_id", pa.string(), doc="the run that last updated the row"),
            _f("updated_at", TS, True),
            # never null: the key is matched with '=' in Delta merges, where null = null is not true
            _f("env_version", pa.string(), True, "'name@version' of the environment; '' = plain single-turn"),
            _f("stop_rule", pa.string(), True, "how many samples were drawn: fixed | exact | sequential"),
            _f("alpha", pa.float64(), doc="sequential rule: the error rate it was run at"),
            _f(
                "confidence",
                pa.float64(),
                doc="confidence of the band decision when sampling stopped (1 = certain)",
            ),
            _f("n_max", pa.int32(), doc="the N the job would draw at most (n < n_max: stopped early)"),
            _f("band", pa.string(), doc="'lo,hi': the band the stopping rule decided about"),
        ]
    ),
    key=("task_id", "model", "params_hash", "verifier_key", "env_version"),
    prune_by="task_id",
    defaults_now=("updated_at",),
    defaults=(("env_version", ""), ("stop_rule", "fixed")),
)

RUNS = TableSchema(
    "runs",
    1,
    pa.schema(
        [
            _f("run_id", pa.string(), True),
            _f("kind", pa.string(), True, "sample | train | ingest | filter | ..."),
            _f("args", pa.string(), doc="JSON of the command's arguments"),
            _f("store_versions", pa.string(), doc="JSON {table: version} read at the start"),
            _f("status", pa.string(), True, "running | done | failed"),
            _f("started_at", TS, True),
            _f("ended_at", TS),
            _f("error", pa.string()),
            _f("summary", pa.string(), doc="JSON of the run's headline numbers"),
        ]
    ),
    key=("run_id",),
    defaults_now=("started_at",),
)

SELECTIONS = TableSchema(
    "selections",
    2,  # 2: verifier_version renamed verifier_key, as in passrates
    pa.schema(
        [
            _f("selection", pa.string(), True, "selection name"),
            _f("task_id", pa.string(), True),
            _f("decision", pa.string(), True, "keep | drop"),
            _f("reason", pa.string(), True, "in_band | too_easy | too_hard | insufficient_samples | ..."),
            _f("pass_rate", pa.float64()),
            _f("n", pa.int32()),
            _f("n_correct", pa.int32()),
            _f("bucket", pa.string(), doc="set by stratify"),
            _f("model", pa.string()),
            _f("params_hash", pa.string()),
            _f("verifier_key", pa.string(), doc="passrates.verifier_key of the slice the decision read"),
            _f("passrates_version", pa.int64(), doc="Delta version of passrates the decision read"),
            _f("params", pa.string(), doc="JSON of the filter parameters"),
            _f("created_at", TS, True),
        ]
    ),
    key=("selection", "task_id"),
    prune_by="task_id",
)

METRICS = TableSchema(
    "metrics",
    1,
    pa.schema(
        [
            _f("run_id", pa.string(), True),
            _f("step", pa.int64(), True),
            _f("name", pa.string(), True, "e.g. reward_mean/easy, kl, clip_frac, time/generate"),
            _f("value", pa.float64()),
            _f("created_at", TS, True),
        ]
    ),
    key=("run_id", "step", "name"),
)

ENV_PROFILES = TableSchema(
    "env_profiles",
    1,  # new in this release: a store made earlier gets it, empty, when opened
    pa.schema(
        [
            _f("profile_id", pa.string(), True, "hash of (env version, model, params, n, tasks)"),
            _f("env_id", pa.string(), True),
            _f("env_version", pa.string(), True),
            _f("model", pa.string(), True),
            _f("params_hash", pa.string(), True, "sampling parameters the card was measured with"),
            _f("n", pa.int32(), True, "samples per task"),
            _f("tasks", pa.int32(), True, "tasks sampled"),
            _f("histogram", pa.list_(pa.int32()), doc="tasks per pass-rate decile [0,0.1) .. [0.9,1]"),
            _f("in_band", pa.float64(), doc="fraction of tasks with pass rate in [0.1, 0.9]"),
            _f("in_band_lo", pa.float64(), doc="Wilson 95% interval of in_band"),
            _f("in_band_hi", pa.float64()),
            _f("verdict", pa.string(), doc="learnable | not learnable by this model | undetermined"),
            _f("mean_turns", pa.float64()),
            _f("tool_call_rate", pa.float64(), doc="episodes with at least one tool call"),
            _f("parse_fail_rate", pa.float64(), doc="samples with no answer to check"),
            _f("env_error_rate", pa.float64()),
            _f("tokens_per_episode", pa.float64(), doc="generated tokens"),
            _f("seconds_per_episode", pa.float64(), doc="sampling wall time / episodes"),
            _f("run_id", pa.string(), doc="the sampling run the card was measured from"),
            _f("created_at", TS, True),
        ]
    ),
    key=("profile_id",),
)

ENV_VALIDATIONS = TableSchema(
    "env_validations",
    1,  # new in this release: a store made earlier gets it, empty, when opened
    pa.schema(
        [
            _f("validation_id", pa.string(), True, "hash of (env version, source digest, level, policy)"),
            _f("env_id", pa.string(), True),
            _f("env_version", pa.string(), True, "the environments row validated"),
            _f("package", pa.string(), True, "the package directory validated (its openenv.yaml)"),
            _f("source_digest", pa.string(), True, "OpenEnv's sha256 over the package's files"),
            _f("max_level", pa.string(), True, "static | runtime | semantic: the highest level asked for"),
            _f("levels_run", pa.list_(pa.string()), doc="the levels that ran"),
            _f("verdict", pa.string(), True, "pass | warn | fail (OpenEnv's severity policy)"),
            _f("policy_version", pa.string(), True),
            _f("openenv_version", pa.string(), True, "the openenv package that validated"),
            _f("checks", pa.string(), doc="JSON list of {check_id, status, evidence, measured}"),
            _f("report", pa.string(), doc="JSON: OpenEnv's whole validation report"),
            _f("created_at", TS, True),
        ]
    ),
    key=("validation_id",),
)

# ---- pass-rate predictions (rldata predict, docs/predict.md) ----------------------------------------
PREDICTIONS = TableSchema(
    "predictions",
    1,  # new in this release: a store made earlier gets it, empty, when opened
    pa.schema(
        [
            _f("task_id", pa.string(), True),
            _f(
                "model",
                pa.string(),
                True,
                "ledger name of the policy predicted for (BASE+RUN/vV for a run's version)",
            ),
            _f("fit_id", pa.string(), True, "hash of the fit: model, ledger slice, cutoff, features, seed"),
            _f(
                "predictor",
                pa.string(),
                True,
                "live (the task's own rows, on the cross-task prior) | prior (cross-task only)",
            ),
            _f("p_mean", pa.float64(), True),
            _f("p_low", pa.float64(), True, "equal-tailed interval of Beta(alpha, beta) at level"),
            _f("p_high", pa.float64(), True),
            _f("level", pa.float64(), True),
            _f("alpha", pa.float64(), True, "the prediction: Beta(alpha, beta)"),
            _f("beta", pa.float64(), True),
            _f("prior_alpha", pa.float64(), True, "the cross-task prior alone, before the task's own rows"),
            _f("prior_beta", pa.float64(), True),
            _f(
                "n_seen",
                pa.float64(),
                True,
                "the task's own (discounted) samples in the prediction; 0 = unseen",
            ),
            _f("params_hash", pa.string(), doc="ledger slice the fit read"),
            _f("verifier_key", pa.string()),
            _f("store_version", pa.int64(), True, "cutoff: the passrates Delta version the fit read"),
            _f("policy_version", pa.int64(), True, "cutoff: the policy version (0 = the model itself)"),
            _f("params", pa.string(), doc="JSON of the fit: features, C, recalibration, strength, folds"),
            _f("created_at", TS, True),
        ]
    ),
    key=("task_id", "model", "fit_id"),
    prune_by="task_id",
)

SAMPLE_PREDICTIONS = TableSchema(
    "sample_predictions",
    1,  # new in this release
    pa.schema(
        [
            _f("run_id", pa.string(), True, "the rldata sample run that acted on the prediction"),
            _f("task_id", pa.string(), True),
            _f("decision", pa.string(), True, "skip | sample"),
            _f("reason", pa.string(), doc="a skip's: predicted_too_hard | predicted_too_easy"),
            _f("p_mean", pa.float64()),
            _f("p_out", pa.float64(), doc="predicted probability that the pass rate is outside band"),
            _f("confidence", pa.float64(), doc="--skip-predicted: the p_out a skip needed"),
            _f("band", pa.string(), doc="'lo,hi'"),
            _f("prior_alpha", pa.float64(), doc="the Beta prior the sequential rule used (quantized)"),
            _f("prior_beta", pa.float64()),
            _f("fit_id", pa.string(), True, "predictions.fit_id"),
            _f("model", pa.string(), True),
            _f("params_hash", pa.string(), True),
            _f("created_at", TS, True),
        ]
    ),
    key=("run_id", "task_id"),
    prune_by="task_id",
)
# ---- end of pass-rate predictions -------------------------------------------------------------------

ENV_CHECKS = TableSchema(
    "env_checks",
    1,  # new in this release: a store made earlier gets it, empty, when opened
    pa.schema(
        [
            _f("profile_id", pa.string(), True, "the env_profiles row (learnability card) measured with"),
            _f("check_id", pa.string(), True, "OpenEnv RFC 008 check id, e.g. statistical.headroom"),
            _f("env_id", pa.string(), True),
            _f("env_version", pa.string(), True),
            _f("model", pa.string(), True, "the profiled model (passrates.model)"),
            _f("params_hash", pa.string(), True),
            _f("severity", pa.string(), True, "fail | warn | advisory (OpenEnv's severity policy)"),
            _f("status", pa.string(), True, "pass | fail | skip | error"),
            _f("measured", pa.string(), doc="JSON object of the measured values and the bound applied"),
            _f("evidence", pa.string(), doc="JSON list of evidence lines"),
            _f("remediation", pa.string(), doc="what to change when the check failed"),
            _f("policy_version", pa.string(), True, "OpenEnv severity policy the ids and bounds are from"),
            _f("created_at", TS, True),
        ]
    ),
    key=("profile_id", "check_id"),
)

# ---- data quality (rldata.quality, docs/quality.md): eval packs, contamination, lint, near-duplicates ----
EVAL_ITEMS = TableSchema(
    "eval_items",
    1,
    pa.schema(
        [
            _f("pack", pa.string(), True, "eval pack name (rldata decontaminate --name)"),
            _f(
                "pack_version",
                pa.string(),
                True,
                "content hash of the pack's items: a changed file is a new version",
            ),
            _f("eval_id", pa.string(), True, "sha256 of the item's normalized prompt"),
            _f("prompt", pa.string(), True),
            _f("answer", pa.string(), doc="the item's answer, when the file has one"),
            _f("origin", pa.string(), doc="file:line (or file:row N) the item was read from"),
            _f("created_at", TS, True),
        ]
    ),
    key=("pack", "pack_version", "eval_id"),
)

CONTAMINATION = TableSchema(
    "contamination",
    1,
    pa.schema(
        [
            _f("task_id", pa.string(), True),
            _f("pack", pa.string(), True),
            _f("eval_id", pa.string(), True, "the eval item the task matched (eval_items.eval_id)"),
            _f("method", pa.string(), True, "ngram | coverage | minhash"),
            _f("pack_version", pa.string(), True),
            _f("score", pa.float64(), True, "the detector's score (share of n-grams, coverage, Jaccard)"),
            _f("threshold", pa.float64(), True, "the score the run flagged at"),
            _f("span", pa.string(), doc="the matched text, in the task's normalized tokens"),
            _f("detector_version", pa.string(), True),
            _f("action", pa.string(), True, "flag (kept, left out downstream) | drop (removed from tasks)"),
            _f("run_id", pa.string(), doc="the decontaminate run (runs.run_id)"),
            _f("created_at", TS, True),
        ]
    ),
    key=("task_id", "pack", "eval_id", "method"),
    prune_by="task_id",
    finite=("score", "threshold"),
)

LINT_FINDINGS = TableSchema(
    "lint_findings",
    1,
    pa.schema(
        [
            _f("task_id", pa.string(), True),
            _f("rule", pa.string(), True, "e.g. answer.sentinel, semantic.oracle_max, suspect_key"),
            _f("rule_version", pa.string(), True),
            _f("severity", pa.string(), True, "error (left out downstream) | warning | info"),
            _f("detail", pa.string(), doc="JSON: what the rule saw"),
            _f("run_id", pa.string(), doc="the lint run (runs.run_id)"),
            _f("created_at", TS, True),
        ]
    ),
    key=("task_id", "rule"),
    prune_by="task_id",
)

NEAR_DUPLICATES = TableSchema(
    "near_duplicates",
    1,
    pa.schema(
        [
            _f("task_id", pa.string(), True),
            _f("cluster_id", pa.string(), True, "the task_id of the cluster's kept task"),
            _f("keep", pa.bool_(), True, "the one task of the cluster that is kept"),
            _f("similarity", pa.float64(), doc="MinHash Jaccard estimate with the kept task"),
            _f("rule", pa.string(), doc="JSON: the keep rule (source priority, then oldest)"),
            _f("method_version", pa.string(), True),
            _f("action", pa.string(), True, "flag | drop"),
            _f("run_id", pa.string()),
            _f("created_at", TS, True),
        ]
    ),
    key=("task_id",),
    prune_by="task_id",
)

TABLES: dict[str, TableSchema] = {}  # name -> schema, in creation order: what a store opens


def register(table: TableSchema) -> TableSchema:
    """Add ``table`` to :data:`TABLES` (docs/contributing.md, "Add a table"); return it.

    Every store opened afterwards creates it, empty, with ``table.version`` recorded.  Refused: a
    name taken by another schema or unfit for a directory and a SQL identifier, a version below 1,
    a key or default naming no column, and a nullable key column (Delta merges match keys with
    '=', where null never equals null, so such rows would duplicate).
    """

    def bad(why: str) -> RldataError:
        return RldataError(f"table {table.name!r} cannot be registered: {why}")

    if not re.fullmatch(r"[a-z][a-z0-9_]*", table.name):
        raise bad("a table name is lowercase letters, digits and '_'")
    if TABLES.get(table.name, table) != table:
        raise bad("another schema has that name")
    if table.version < 1:
        raise bad(f"schema versions start at 1, got {table.version}")
    if not table.key:
        raise bad("it has no key")
    names = set(table.schema.names)
    unknown = [
        c for c in (*table.key, *table.defaults_now, *(c for c, _ in table.defaults)) if c not in names
    ]
    if unknown:
        raise bad(f"no column {unknown[0]!r} (named by its key or defaults)")
    nullable = [k for k in table.key if table.schema.field(k).nullable]
    if nullable:
        raise bad(f"key column {nullable[0]!r} must be required")
    TABLES[table.name] = table
    return table


for _t in (
    TASKS,
    ENVIRONMENTS,
    TRAJECTORIES,
    VERIFICATIONS,
    PASSRATES,
    RUNS,
    SELECTIONS,
    METRICS,
    ENV_PROFILES,
    ENV_VALIDATIONS,
    PREDICTIONS,
    SAMPLE_PREDICTIONS,
    ENV_CHECKS,
    EVAL_ITEMS,
    CONTAMINATION,
    LINT_FINDINGS,
    NEAR_DUPLICATES,
):
    register(_t)
del _t


def get(name: str) -> TableSchema:
    try:
        return TABLES[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown table {name!r}; tables: {', '.join(TABLES)}", field="table"
        ) from None


def table_names() -> list[str]:
    return list(TABLES)
