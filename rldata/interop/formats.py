"""Export formats: one :class:`ExportFormat` record per format, registered in one place.

A record says everything ``rldata export`` needs about a layout: how to turn the exported rows into
the format's table (``build``), how to write that table into the export directory (``write``), its
own options (``options``: a frozen dataclass whose fields, with their defaults, are the keys
``--option KEY=VALUE`` sets; the manifest records their values), and the help line the CLI shows.
Adding a format, options included, is one ``register_format(...)`` call; the CLI's ``--format``
choices and help come from here.

Formats live in namespaces, one per kind of export, each with its own rows:

- ``selection``: a selection's kept tasks (:mod:`rldata.interop.export`);
- ``rollouts``: stored trajectories as conversations (:mod:`rldata.interop.chat_export`);
- ``preferences``: judge verdicts as (chosen, rejected) pairs (:mod:`rldata.interop.preferences`).

Formats of installed packages come in through the ``rldata.exports`` entry point group
(:mod:`rldata.plugins`), loaded when a name is not found among the registered ones.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rldata.errors import ConfigError, RldataError
from rldata.plugins import PluginError, entry_point_names, load_entry_point
from rldata.registry import Registry

__all__ = [
    "NAMESPACES",
    "ExportFormat",
    "UnknownFormat",
    "format_names",
    "get_format",
    "make_options",
    "option_names",
    "parse_option_pairs",
    "register_format",
    "write_hf",
    "write_jsonl",
    "write_parquet",
]

# namespace -> the module whose import registers its built-in formats
_BUILTIN = {
    "selection": "rldata.interop.export",
    "rollouts": "rldata.interop.chat_export",
    "preferences": "rldata.interop.preferences",
}
NAMESPACES = tuple(_BUILTIN)
_GROUP = "rldata.exports"


@dataclass(frozen=True)
class ExportFormat:
    """One export layout.

    ``write(table, directory, spec)`` writes the files and returns their paths relative to the
    directory.  ``build(frame, spec)`` turns the namespace's rows (a Polars frame) into the Arrow
    table to write; None writes the namespace's own table as it is (rollouts, preferences).
    ``prepare(store, frame, spec)`` adds what the build needs from elsewhere in the store (veRL:
    each task's environment).  ``options``: the format's own options, a frozen dataclass (None: it
    has none), built from ``--option KEY=VALUE`` pairs or a config section and found by the build
    and the writers as ``spec.opts``; the manifest records their values.  ``spec`` is the
    namespace's spec (an ``ExportConfig`` for selections).
    """

    name: str
    write: Callable[[Any, Path, Any], list[str]]
    build: Callable[[Any, Any], Any] | None = None
    options: type | None = None
    help: str = ""
    prepare: Callable[[Any, Any, Any], Any] | None = None
    namespace: str = "selection"

    def __post_init__(self):
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(
                f"export format name must be letters, digits, '-' or '_', got {self.name!r}", field="name"
            )
        if self.namespace not in NAMESPACES:
            raise ConfigError(
                f"export format {self.name!r}: namespace must be one of {', '.join(NAMESPACES)}, "
                f"got {self.namespace!r}",
                field="namespace",
            )
        if not callable(self.write):
            raise TypeError(f"export format {self.name!r}: write must be callable")
        for f in ("build", "prepare"):
            if getattr(self, f) is not None and not callable(getattr(self, f)):
                raise TypeError(f"export format {self.name!r}: {f} must be callable or None")
        if self.options is not None and not (
            isinstance(self.options, type) and dataclasses.is_dataclass(self.options)
        ):
            raise TypeError(f"export format {self.name!r}: options must be a dataclass or None")


class UnknownFormat(RldataError, ValueError):
    """No export format of that name in the namespace (the message lists the choices)."""


def _check_record(obj: Any, what: str) -> Any:
    if not isinstance(obj, ExportFormat):
        raise PluginError(f"export format {what} is not an ExportFormat record")
    return obj


# One registry per namespace; each imports its namespace's module (the built-ins) on first lookup.
_REGISTRY: dict[str, Registry] = {
    ns: Registry("export format", builtin=mod, check=_check_record, sort_known=False)
    for ns, mod in _BUILTIN.items()
}


def register_format(fmt: ExportFormat | None = None, /, *, replace: bool = False, **fields: Any):
    """Register an export format; returns it.

    ``register_format(ExportFormat(...))`` registers a record.  As a decorator,
    ``@register_format(name=..., write=..., help=...)`` over a build function registers
    ``ExportFormat(build=function, ...)`` and returns the function.  A second format of the same
    name in the same namespace is an error unless ``replace=True``.
    """
    if fmt is None:

        def deco(build):
            register_format(ExportFormat(build=build, **fields), replace=replace)
            return build

        return deco
    if fields:
        raise TypeError("register_format takes a record or keyword fields (as a decorator), not both")
    if not isinstance(fmt, ExportFormat):
        raise TypeError(f"register_format takes an ExportFormat, got {type(fmt).__name__}")
    reg = _REGISTRY[fmt.namespace]
    if not replace and fmt.name in reg and reg[fmt.name] != fmt:
        raise RldataError(f"export format {fmt.name!r} ({fmt.namespace}) is already registered")
    return reg.register(fmt.name, fmt)


def _registry(namespace: str) -> Registry:
    if namespace not in NAMESPACES:
        raise ConfigError(
            f"unknown export namespace {namespace!r}; namespaces: {', '.join(NAMESPACES)}", field="namespace"
        )
    reg = _REGISTRY[namespace]
    reg.load_builtin()
    return reg


def _load_plugin(name: str) -> None:
    """Load the ``rldata.exports`` entry point ``name``: an ExportFormat is registered; anything
    else (a module, a function) is taken to have registered its formats on import."""
    if any(name in reg for reg in _REGISTRY.values()):
        return
    obj = load_entry_point(_GROUP, name)
    if isinstance(obj, ExportFormat):
        if obj.name != name:
            raise PluginError(f"{_GROUP} entry point {name!r} gives a format named {obj.name!r}")
        register_format(obj)


def _load_plugins() -> None:
    for name in entry_point_names(_GROUP):
        _load_plugin(name)


def format_names(namespace: str = "selection", *, plugins: bool = True) -> list[str]:
    """The formats of ``namespace``: built-ins in registration order, then others.  With
    ``plugins``, every ``rldata.exports`` entry point is loaded first (without, only those
    already loaded are listed: the CLI's help, which must not import plugins at start-up)."""
    reg = _registry(namespace)
    if plugins:
        _load_plugins()
    return list(reg)


def get_format(name: str, namespace: str = "selection") -> ExportFormat:
    """The format ``name`` of ``namespace``; :class:`UnknownFormat` (listing the choices) if none."""
    reg = _registry(namespace)
    fmt = reg.get(name)
    if fmt is None:
        _load_plugin(name)
        fmt = reg.get(name)
    if fmt is None:
        what = {
            "selection": "selections",
            "rollouts": "conversations (--rollouts)",
            "preferences": "preference pairs",
        }[namespace]
        raise UnknownFormat(
            f"unknown export format {name!r} for {what}: format must be one of "
            f"{', '.join(format_names(namespace))}"
        )
    return fmt


# ---- a format's options ------------------------------------------------------------------------
def option_names(fmt: ExportFormat) -> tuple[str, ...]:
    """The keys ``--option`` takes for ``fmt`` (its options dataclass's fields)."""
    return tuple(f.name for f in dataclasses.fields(fmt.options)) if fmt.options is not None else ()


def parse_option_pairs(pairs: list[str] | tuple[str, ...] | None) -> dict[str, str]:
    """``["KEY=VALUE", ...]`` (the CLI's repeatable ``--option``) -> ``{KEY: VALUE}``."""
    out: dict[str, str] = {}
    for p in pairs or ():
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"option {p!r}: expected KEY=VALUE, e.g. answer_column=solution", field="options"
            )
        out[key.strip()] = value
    return out


def _coerce(f: dataclasses.Field, value: Any, fmt: str) -> Any:
    """A string from the command line (or a config file's scalar) as the field's declared type."""
    if not isinstance(value, str):
        return value
    kind = str(f.type)
    if value == "" and "None" in kind:
        return None
    if kind.startswith("int"):
        try:
            return int(value)
        except ValueError:
            raise ConfigError(
                f"{fmt} option {f.name} must be an integer, got {value!r}", field=f.name
            ) from None
    if kind.startswith("bool"):
        if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"{fmt} option {f.name} must be true or false, got {value!r}", field=f.name)
        return value.lower() in ("true", "1", "yes")
    return value


def make_options(fmt: ExportFormat, values: Mapping[str, Any] | None) -> Any:
    """``fmt``'s options object from ``values`` (keys its options dataclass declares; the rest default).
    A key the format does not declare is a ConfigError listing the ones it does."""
    values = dict(values or {})
    known = option_names(fmt)
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(
            f"export format {fmt.name!r} has no option {unknown[0]!r}; "
            f"its options: {', '.join(known) or '(none)'}",
            field="options",
        )
    if fmt.options is None:
        return None
    fields_ = {f.name: f for f in dataclasses.fields(fmt.options)}
    return fmt.options(**{k: _coerce(fields_[k], v, fmt.name) for k, v in values.items()})


def shard_rows(spec: Any, default: int = 100_000) -> int:
    """Rows per Parquet shard: the format's ``shard_rows`` option, else the spec's, else ``default``."""
    for holder in (getattr(spec, "opts", None), spec):
        v = getattr(holder, "shard_rows", None)
        if v is not None:
            return v
    return default


# ---- writers formats share: each returns the files it wrote, relative to the export directory ---
# ``spec`` needs ``split`` (names the files); write_hf reads :func:`shard_rows` too.
def write_parquet(table: pa.Table, d: Path, spec: Any) -> list[str]:
    name = f"{spec.split}.parquet"
    pq.write_table(table, d / name)
    return [name]


def write_jsonl(table: pa.Table, d: Path, spec: Any) -> list[str]:
    name = f"{spec.split}.jsonl"
    with open(d / name, "w", encoding="utf-8") as f:
        for batch in table.to_batches(max_chunksize=8192):
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in batch.to_pylist())
    return [name]


def write_hf(table: pa.Table, d: Path, spec: Any) -> list[str]:
    """``dataset/`` for ``datasets.load_from_disk`` and ``data/<split>-*.parquet`` for ``load_dataset(dir)``."""
    import datasets
    from datasets.utils import logging as ds_logging

    was_enabled = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()  # its bars would clutter the CLI's stderr
    try:
        datasets.Dataset(table).save_to_disk(str(d / "dataset"))
    finally:
        if was_enabled:
            ds_logging.enable_progress_bar()
    (d / "data").mkdir()
    rows = shard_rows(spec)
    k = max(1, -(-table.num_rows // rows))
    names = []
    for i in range(k):
        name = f"data/{spec.split}-{i:05d}-of-{k:05d}.parquet"
        pq.write_table(table.slice(i * rows, rows), d / name)
        names.append(name)
    names += sorted(str(p.relative_to(d)) for p in (d / "dataset").rglob("*") if p.is_file())
    return names
