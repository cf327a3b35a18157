"""Export formats: one :class:`ExportFormat` record per format, registered in one place.

A record says everything ``rldata export`` needs about a layout: how to turn the exported rows into
the format's table (``build``), how to write that table into the export directory (``write``), which
options shape the files (recorded in the manifest), and the help line the CLI shows.  Adding a
format is one ``register_format(...)`` call; the CLI's ``--format`` choices and help come from here.

Formats live in namespaces, one per kind of export, each with its own rows:

- ``selection``: a selection's kept tasks (:mod:`rldata.interop.export`);
- ``rollouts``: stored trajectories as conversations (:mod:`rldata.interop.chat_export`);
- ``preferences``: judge verdicts as (chosen, rejected) pairs (:mod:`rldata.interop.preferences`).

Formats of installed packages come in through the ``rldata.exports`` entry point group
(:mod:`rldata.plugins`), loaded when a name is not found among the registered ones.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rldata.errors import ConfigError, RldataError

__all__ = [
    "NAMESPACES",
    "ExportFormat",
    "UnknownFormat",
    "format_names",
    "get_format",
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
    each task's environment).  ``options`` are the spec fields that shape the files; the manifest
    records their values.  ``spec`` is the namespace's spec (an ``ExportSpec`` for selections).
    """

    name: str
    write: Callable[[Any, Path, Any], list[str]]
    build: Callable[[Any, Any], Any] | None = None
    options: tuple[str, ...] = ()
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


class UnknownFormat(RldataError, ValueError):
    """No export format of that name in the namespace (the message lists the choices)."""


_REGISTRY: dict[tuple[str, str], ExportFormat] = {}
_loaded: set[str] = set()


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
    key = (fmt.namespace, fmt.name)
    if not replace and key in _REGISTRY and _REGISTRY[key] != fmt:
        raise RldataError(f"export format {fmt.name!r} ({fmt.namespace}) is already registered")
    _REGISTRY[key] = fmt
    return fmt


def _load_builtin(namespace: str) -> None:
    if namespace not in NAMESPACES:
        raise ConfigError(
            f"unknown export namespace {namespace!r}; namespaces: {', '.join(NAMESPACES)}", field="namespace"
        )
    if namespace not in _loaded:
        importlib.import_module(_BUILTIN[namespace])
        _loaded.add(namespace)


def _load_plugin(name: str) -> None:
    """Load the ``rldata.exports`` entry point ``name``: an ExportFormat is registered; anything
    else (a module, a function) is taken to have registered its formats on import."""
    from rldata.plugins import PluginError, load_entry_point

    if any(n == name for _, n in _REGISTRY):
        return
    obj = load_entry_point(_GROUP, name)
    if isinstance(obj, ExportFormat):
        if obj.name != name:
            raise PluginError(f"{_GROUP} entry point {name!r} gives a format named {obj.name!r}")
        register_format(obj)


def _load_plugins() -> None:
    from rldata.plugins import entry_point_names

    for name in entry_point_names(_GROUP):
        _load_plugin(name)


def format_names(namespace: str = "selection", *, plugins: bool = True) -> list[str]:
    """The formats of ``namespace``: built-ins in registration order, then others.  With
    ``plugins``, every ``rldata.exports`` entry point is loaded first (without, only those
    already loaded are listed: the CLI's help, which must not import plugins at start-up)."""
    _load_builtin(namespace)
    if plugins:
        _load_plugins()
    return [n for ns, n in _REGISTRY if ns == namespace]


def get_format(name: str, namespace: str = "selection") -> ExportFormat:
    """The format ``name`` of ``namespace``; :class:`UnknownFormat` (listing the choices) if none."""
    _load_builtin(namespace)
    fmt = _REGISTRY.get((namespace, name))
    if fmt is None:
        _load_plugin(name)
        fmt = _REGISTRY.get((namespace, name))
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


# ---- writers formats share: each returns the files it wrote, relative to the export directory ---
# ``spec`` needs ``split`` (names the files) and, for write_hf, ``shard_rows``.
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
    k = max(1, -(-table.num_rows // spec.shard_rows))
    names = []
    for i in range(k):
        name = f"data/{spec.split}-{i:05d}-of-{k:05d}.parquet"
        pq.write_table(table.slice(i * spec.shard_rows, spec.shard_rows), d / name)
        names.append(name)
    names += sorted(str(p.relative_to(d)) for p in (d / "dataset").rglob("*") if p.is_file())
    return names
