"""The parameters of `rldata export` and `rldata import-rollouts`, declared once (rldata.configs.fields).

A format's own options are not fields here: each format owns them (its options dataclass in the
format registry, rldata.interop.formats / .readers).  They arrive as ``options``, a mapping, from
``--option KEY=VALUE`` (repeatable) or a config file's ``options:`` section, and the format's
dataclass checks them.  :func:`format_option_tables` lists them for the docs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rldata.configs.fields import KEY, REQUIRED, config, one_of, param, sql_predicate, validate, validator
from rldata.errors import ConfigError, RldataError
from rldata.ingest.options import ON_ERROR, choice_value, choices
from rldata.interop.formats import (
    NAMESPACES,
    UnknownFormat,
    format_names,
    get_format,
    make_options,
    option_names,
    parse_option_pairs,
)
from rldata.interop.readers import JSONL_FIELDS, READERS
from rldata.names import check_name

__all__ = ["DEPRECATED_FLAT", "ExportConfig", "ImportConfig", "format_option_tables"]

# The flat keyword of each export format option before formats owned their options: deprecated
# aliases, kept for one release (``prompt_style="messages"`` is ``options={"prompt_style": "messages"}``).
# Given for a format without that option, such a keyword is ignored, as it always was.
DEPRECATED_FLAT = (
    "prompt_style",
    "answer_column",
    "input_key",
    "label_key",
    "data_source",
    "shard_rows",
    "env",
)


def _pairs(items: Any) -> dict[str, str]:
    """``["answer_column=solution"]`` (the CLI's -O) -> a mapping; a mapping stays as it is."""
    if items is None or isinstance(items, dict):
        return dict(items or {})
    return parse_option_pairs(list(items))


def _field_map(items: Any) -> tuple[tuple[str, str], ...]:
    if isinstance(items, dict):
        return tuple(items.items())
    out = []
    for p in items or ():
        if not isinstance(p, str):  # a (name, key) pair from Python
            out.append(tuple(p))
            continue
        name, sep, key = p.partition("=")
        if not sep or not name.strip() or not key.strip():
            raise ConfigError(
                f"--field {p!r}: expected NAME=KEY, e.g. completion=response", field="field_map"
            )
        out.append((name.strip(), key.strip()))
    return tuple(out)


def _columns(text: Any) -> tuple[str, ...]:
    if isinstance(text, str):
        return tuple(c.strip() for c in text.split(",") if c.strip())
    return tuple(text or ())


def _export_format(name: str) -> str | None:
    """None for a name some namespace knows (which one applies: the config's export_rules)."""

    for ns in ("selection", "rollouts"):
        try:
            get_format(name, ns)
            return None
        except UnknownFormat:
            pass
    known = dict.fromkeys(n for ns in NAMESPACES if ns != "preferences" for n in format_names(ns))
    return f"unknown export format {name!r}; choices: {', '.join(known)}"


def _export_format_help() -> str:
    def names(ns: str) -> str:
        return ", ".join(format_names(ns, plugins=False))

    return (
        f"Layout: {names('selection')}; with --rollouts: {names('rollouts')}. "
        "More from installed plugins (entry point group rldata.exports)."
    )


def _option_help() -> str:
    keys = "; ".join(
        f"{n}: {', '.join(option_names(get_format(n)))}"
        for n in format_names("selection", plugins=False)
        if option_names(get_format(n))
    )
    return (
        "An option of the format, KEY=VALUE, repeatable (e.g. -O answer_column=solution); in a config "
        f"file an options: mapping. Keys: {keys}."
    )


def _import_format(name: str) -> str | None:
    try:
        READERS.resolve(name)
    except RldataError as e:
        return str(e)
    return None


def _import_format_help() -> str:
    return f"{', '.join(READERS.names(plugins=False))}, or an installed plugin's (entry point group rldata.imports)."


def _split(v: str) -> str | None:
    return None if v and "/" not in v else f"must be a plain name, got {v!r}"


def _run_id(v: str | None) -> str | None:
    try:
        check_name(v, field="run_id") if v is not None else None
    except ConfigError as e:
        return str(e).partition(": ")[2]
    return None


def _deprecated_option(key: str, formats: str) -> Any:
    """A flat flag of one format's option, before formats owned their options (one release)."""
    return param(None, help=f"Deprecated: -O {key}=... ({formats}).")


@config
class ExportConfig:
    """What `rldata export` writes: a selection's kept tasks in a trainer's layout (the format's own
    options under ``options``), or with rollouts, stored trajectories as conversations."""

    format: str = param(
        flag="--format",
        short="-f",
        check=_export_format,
        usage_check=True,
        help_fn=_export_format_help,
        help="Layout: a registered export format.",
    )
    out: str = param(short="-o", help="Output directory (replaced if it holds an earlier export).")
    selection: str | None = param(None, short="-s", help="Selection to export (its 'keep' rows).")
    bucket: str | None = param(None, short="-b", help="Only tasks in this curriculum bucket.")
    split: str = param("train", check=_split, help="Split name: file names and veRL's extra_info.split.")
    options: dict[str, Any] = param(
        default_factory=dict,
        flag="--option",
        short="-O",
        cli_type=list[str],
        to_field=_pairs,
        from_field=lambda d: None,
        help_fn=_option_help,
        help="An option of the format, KEY=VALUE, repeatable; in a config file an options: mapping.",
    )
    rollouts: bool = param(
        False,
        help="Export stored trajectories as conversations instead of a selection's tasks (--format jsonl, "
        "hf, verl: a messages column; trl: prompt and completion, as TRL's SFTTrainer reads them).",
    )
    run_id: str | None = param(None, flag="--run", help="--rollouts: only this run's trajectories.")
    where: str | None = param(
        None,
        check=sql_predicate("where"),
        help="--rollouts: SQL predicate over trajectories t (and tasks k).",
    )
    correct_only: bool = param(False, help="--rollouts: only trajectories that passed.")
    include_flagged: bool = param(
        False,
        help="Also export tasks flagged by rldata decontaminate, lint (errors) or dedup --near (default: "
        "left out, counted in the manifest).",
    )
    prompt_style: str | None = _deprecated_option("prompt_style", "trl/openrlhf")
    answer_column: str | None = _deprecated_option("answer_column", "trl")
    input_key: str | None = _deprecated_option("input_key", "openrlhf")
    label_key: str | None = _deprecated_option("label_key", "openrlhf")
    data_source: str | None = _deprecated_option("data_source", "verl")
    shard_rows: int | None = _deprecated_option("shard_rows", "hf/trl")
    env: str | None = _deprecated_option("env", "verl")

    def __post_init__(self):
        object.__setattr__(self, "options", _pairs(self.options))
        validate(self)
        opts = None
        if not self.rollouts:  # the format's own options, checked by its options dataclass
            fmt = get_format(self.format)
            keys = option_names(fmt)
            flat = {k: v for k, v in self.deprecated_given().items() if k in keys}
            object.__setattr__(self, "options", {**flat, **self.options})
            opts = make_options(fmt, self.options)
        # what the format's build and write read (its options object), beside the fields
        object.__setattr__(self, "opts", opts)

    @validator
    def export_rules(self) -> None:
        """A selection's tasks or, with rollouts, trajectories: each with its own fields and formats."""
        namespace = "rollouts" if self.rollouts else "selection"
        try:
            get_format(self.format, namespace)
        except UnknownFormat as e:
            raise ConfigError.of("format", str(e)) from None
        if self.rollouts:
            if self.selection:
                raise ConfigError(
                    "give selection (tasks) or rollouts (trajectories), not both", field="selection"
                )
            bad = "options" if self.options else "bucket" if self.bucket else None
            if bad:
                raise ConfigError(
                    f"rollouts export takes no {bad}: conversation formats have none", field=bad
                )
            return
        if not self.selection:
            raise ConfigError(
                "selection is required (or rollouts, to export trajectories)", field="selection"
            )
        if self.run_id or self.where is not None or self.correct_only:
            bad = "run_id" if self.run_id else "where" if self.where is not None else "correct_only"
            raise ConfigError(f"{bad} goes with rollouts (trajectories), not with a selection", field=bad)

    def deprecated_given(self) -> dict[str, Any]:
        """The deprecated flat options that were set (each warns once where the export runs)."""
        return {k: getattr(self, k) for k in DEPRECATED_FLAT if getattr(self, k) is not None}


@config
class ImportConfig:
    """What `rldata import-rollouts` reads (a dump's format and its own options) and how the
    trajectories it adds are named."""

    format: str = param(
        flag="--format",
        short="-f",
        check=_import_format,
        usage_check=True,
        help_fn=_import_format_help,
        help="A registered import format.",
    )
    path: str | None = param(
        None, cli=False, help="A dump file, or a directory of them (veRL rollout_data_dir, TRL output_dir)."
    )
    on_error: str = param(
        "fail",
        check=one_of(*ON_ERROR),
        cli_type=choices("OnError", ON_ERROR),  # a misspelt choice: a usage error listing them
        to_field=choice_value,
        help="fail: a bad record aborts, nothing written; skip: import the rest.",
    )
    model: str = param(
        "unknown",
        check=lambda v: None if v else "must be non-empty",
        help="Model name recorded on the trajectories.",
    )
    domain: str = param(
        "math",
        check=lambda v: None if v else "must be non-empty",
        help="Domain of the tasks the import adds.",
    )
    source: str | None = param(None, help="Source of added tasks (default import:<format>).")
    run_id: str | None = param(None, check=_run_id, help="Run id (default: derived from the dump's path).")
    options: dict[str, Any] = param(
        default_factory=dict,
        flag="--option",
        short="-O",
        cli_type=list[str],
        to_field=_pairs,
        from_field=lambda d: None,
        help="An option of the format, KEY=VALUE, repeatable: jsonl's file key per name "
        "(-O completion=response), trl's reward_columns (-O reward_columns=acc,fmt); in a config "
        "file an options: mapping.",
    )
    field_map: tuple[tuple[str, str], ...] = param(
        (),
        flag="--field",
        cli_type=list[str],
        to_field=_field_map,
        from_field=lambda t: None,
        help="jsonl: NAME=KEY, repeatable; names: prompt completion answer score step advantage (same "
        "as -O NAME=KEY).",
    )
    reward_columns: tuple[str, ...] = param(
        (),
        flag="--reward-cols",
        cli_type=str,
        to_field=_columns,
        from_field=lambda t: None,
        help="trl: comma-separated reward columns (default: all numeric ones); same as -O reward_columns=...",
    )

    def __post_init__(self):
        object.__setattr__(self, "options", _pairs(self.options))
        object.__setattr__(self, "field_map", _field_map(self.field_map))
        object.__setattr__(self, "reward_columns", _columns(self.reward_columns))
        validate(self)
        # the format's own options: the deprecated flat ones (jsonl's --field, trl's --reward-cols)
        # under the options, then its options dataclass (what its reader reads, beside the fields)
        fmt = READERS.resolve(self.format)
        flat = dict(self.field_map) if self.format == "jsonl" else {}
        if self.format == "trl" and self.reward_columns:
            flat["reward_columns"] = self.reward_columns
        values = {**flat, **self.options}
        known = [f.name for f in dataclasses.fields(fmt.options)] if fmt.options is not None else []
        bad = sorted(set(values) - set(known))
        if bad:
            raise ConfigError(
                f"import format {fmt.name!r} has no option {bad[0]!r}; its options: {', '.join(known) or '(none)'}",
                field="options",
            )
        object.__setattr__(self, "options", values)
        object.__setattr__(self, "opts", fmt.options(**values) if fmt.options is not None else None)

    @validator
    def import_rules(self) -> None:
        unknown = [k for k, _ in self.field_map if k not in JSONL_FIELDS]
        if unknown:
            raise ConfigError(
                f"unknown field {unknown[0]!r} in the field map; fields: {', '.join(JSONL_FIELDS)}",
                field="field_map",
            )


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else REQUIRED


def format_option_tables() -> str:
    """One table per export and import format with options: key, default, meaning (the comment-free
    fields of a format's options dataclass carry ``metadata['help']``, or rldata.configs.fields.param's)."""
    found = [
        (f"export --format {n}", get_format(n).options) for n in format_names("selection", plugins=False)
    ]
    found += [
        (f"import-rollouts --format {n}", READERS.resolve(n).options) for n in READERS.names(plugins=False)
    ]
    parts = []
    for title, cls in found:
        if cls is None:
            continue
        rows = [f"### {title}\n", "| -O key | default | meaning |", "|---|---|---|"]
        for f in dataclasses.fields(cls):
            meta = f.metadata.get(KEY)
            text = meta.help if meta is not None else f.metadata.get("help", "")
            default = _default(f)
            cell = (
                "required" if default is REQUIRED else f"`{default}`" if default not in (None, (), "") else ""
            )
            rows.append(
                f"| `{f.name}` | {cell.replace('|', chr(92) + '|')} | {text.replace('|', chr(92) + '|')} |"
            )
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)
