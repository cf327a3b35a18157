"""reasoning-gym glue shared by ``rldata ingest --gym``, the ``reasoning-gym`` environment and verifier.

``reasoning_gym`` (the optional extra ``rldata[gym]``) is imported only when a generator is built,
so ``rldata``, ``rldata.envs`` and ``rldata.verify`` import without it.  Versions come from the
installed distribution's metadata (``importlib.metadata``): the package's own ``__version__``
attribute is not kept up to date (0.1.25 reports ``0.1.19``).

A gym task's ``metadata`` (JSON) has three parts::

    {"reasoning_gym": {"dataset": "chain_sum", "config": {...}, "seed": 0, "size": 1000, "index": 7,
                       "version": "0.1.25"},          # the generator: rebuilds the scoring dataset
     "difficulty": {"num_terms": [2, 6], ...},        # the entry's difficulty settings (config ranges)
     "entry": {"question": ..., "answer": ..., "metadata": {...}}}   # the entry as generated

The verifier scores with ``dataset.score_answer(answer, entry)`` on exactly that stored entry.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import Any

import polars as pl

from rldata.errors import RldataError

__all__ = [
    "DOMAIN",
    "INSTRUCTION",
    "SOURCE",
    "GymError",
    "StoredEntry",
    "difficulty",
    "knob_sql",
    "make_dataset",
    "prompt_for",
    "rg_version",
    "stored_entry",
    "task_metadata",
]

DIST = "reasoning-gym"
DOMAIN = "reasoning-gym"  # tasks.domain: picks the reasoning-gym verifier
SOURCE = "reasoning-gym"  # tasks.source (part of task_id); tasks.category is the dataset name
# Appended to every question: the verifier reads the answer from these tags and nowhere else.
INSTRUCTION = "Put your final answer inside <answer></answer> tags."
_RESERVED = ("seed", "size")  # set by --seed and --n, never by --config
_KNOB = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class GymError(RldataError):
    """reasoning-gym is missing, or a dataset name, config or stored entry is bad."""


def rg_version() -> str | None:
    """The installed reasoning-gym version (distribution metadata), or None when it is not installed."""
    try:
        return _dist_version(DIST)
    except PackageNotFoundError:
        return None


def _import_rg():
    try:
        import reasoning_gym
        from reasoning_gym.factory import DATASETS
    except ImportError as e:
        raise GymError(f"reasoning-gym is not installed (pip install 'rldata[gym]'): {e}") from None
    return reasoning_gym, DATASETS


def _check_config(config: Any) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        raise GymError(f"reasoning-gym config: expected a JSON object, got {type(config).__name__}")
    bad = [k for k in config if k in _RESERVED]
    if bad:
        raise GymError(
            f"reasoning-gym config: {bad[0]!r} is set by {'n' if bad[0] == 'size' else 'seed'}, "
            "not by config",
            field="config",
        )
    try:
        json.dumps(dict(config), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise GymError(f"reasoning-gym config: not JSON ({e})") from None
    return dict(config)


@lru_cache(maxsize=32)
def _cached(name: str, config_json: str, seed: int, size: int):
    rg, _ = _import_rg()
    return rg.create_dataset(name, size=size, seed=seed, **json.loads(config_json))


def make_dataset(name: str, config: Mapping[str, Any] | None = None, *, seed: int = 0, size: int = 1):
    """The dataset object (cached per process); GymError for an unknown name or a config it rejects."""
    _, datasets = _import_rg()
    if not isinstance(name, str) or name not in datasets:
        near = difflib.get_close_matches(str(name), list(datasets), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else f" ({len(datasets)} datasets are registered)"
        raise GymError(f"unknown reasoning-gym dataset {name!r}{hint}")
    cfg = _check_config(config or {})
    if (
        isinstance(seed, bool)
        or not isinstance(seed, int)
        or isinstance(size, bool)
        or not isinstance(size, int)
    ):
        raise GymError(f"reasoning-gym seed and size must be integers, got {seed!r}, {size!r}")
    try:
        return _cached(name, json.dumps(cfg, sort_keys=True), seed, size)
    except Exception as e:  # noqa: BLE001 - a config dataclass raises TypeError, ValueError or AssertionError
        msg = " ".join(str(e).split())[:300] or type(e).__name__
        raise GymError(
            f"reasoning-gym dataset {name!r} rejected the config {json.dumps(cfg)}: {type(e).__name__}: {msg}"
        ) from None


def prompt_for(question: str) -> str:
    return f"{question.rstrip()}\n\n{INSTRUCTION}"


def task_metadata(
    name: str, config: Mapping[str, Any], seed: int, size: int, index: int, entry: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``metadata`` object of one gym task (layout in the module docstring)."""
    meta = entry.get("metadata")
    diff = meta.get("difficulty") if isinstance(meta, Mapping) else None
    return {
        "reasoning_gym": {
            "dataset": name,
            "config": dict(config),
            "seed": seed,
            "size": size,
            "index": index,
            "version": rg_version(),
        },
        "difficulty": dict(diff) if isinstance(diff, Mapping) else {},
        "entry": dict(entry),
    }


@dataclass(frozen=True)
class StoredEntry:
    """What the verifier rebuilds from a task's metadata."""

    dataset: str  # reasoning-gym dataset name
    config: Mapping[str, Any]  # the --config the tasks were generated with
    seed: int
    size: int  # --n of the ingest (provenance: the verifier rebuilds the scorer with size 1)
    index: int  # the entry's index in that dataset
    entry: Mapping[str, Any]  # {"question", "answer", "metadata"} as generated

    def __post_init__(self):
        if not isinstance(self.dataset, str) or not self.dataset:
            raise GymError("metadata field 'reasoning_gym.dataset': expected a dataset name")
        if not isinstance(self.config, Mapping):
            raise GymError("metadata field 'reasoning_gym.config': expected an object")
        for f in ("seed", "size", "index"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int):
                raise GymError(f"metadata field 'reasoning_gym.{f}': expected an integer, got {v!r}")
        if (
            not isinstance(self.entry, Mapping)
            or not isinstance(self.entry.get("question"), str)
            or "answer" not in self.entry
            or not isinstance(self.entry.get("metadata"), Mapping)
        ):
            raise GymError("metadata field 'entry': expected {question, answer, metadata}")


def stored_entry(metadata: str | Mapping[str, Any] | None) -> StoredEntry:
    """Parse a gym task's metadata; GymError naming the field when it is missing or corrupt."""
    if metadata is None or metadata == "":
        raise GymError(
            "task has no metadata (a reasoning-gym task carries its entry there: rldata ingest --gym)"
        )
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError as e:
            raise GymError(f"task metadata is not valid JSON: {e}") from None
    if not isinstance(metadata, Mapping):
        raise GymError("task metadata: expected a JSON object")
    gen = metadata.get("reasoning_gym")
    if not isinstance(gen, Mapping):
        raise GymError("metadata field 'reasoning_gym': missing (not a reasoning-gym task?)")
    return StoredEntry(
        gen.get("dataset"),
        gen.get("config"),
        gen.get("seed"),
        gen.get("size"),
        gen.get("index"),
        metadata.get("entry"),
    )


# ---- ground-truth difficulty --------------------------------------------------------------------
def knob_sql(knob: str, *, column: str = "metadata", part: str = "value") -> str:
    """DuckDB SQL for one difficulty knob of a gym task: its ``value`` for the task (the entry's own
    metadata, e.g. ``num_terms = 3``) or its ``range`` in the config (``[2, 6]``), as JSON."""
    if not isinstance(knob, str) or not _KNOB.match(knob):
        raise GymError(f"difficulty knob {knob!r}: expected an identifier")
    if part not in ("value", "range"):
        raise GymError(f"difficulty part {part!r}: expected 'value' or 'range'")
    path = f"$.entry.metadata.{knob}" if part == "value" else f"$.difficulty.{knob}"
    return f"json_extract({column}, '{path}')"


def difficulty(store, knobs: list[str] | None = None, *, dataset: str | None = None) -> pl.DataFrame:
    """task_id, category, and per knob ``<knob>`` (the task's value, JSON text) and ``<knob>_range``.

    ``knobs`` default: every key of the tasks' ``difficulty`` objects (of ``dataset``, if given).
    """
    where = f"domain = '{DOMAIN}'" + (" AND category = $dataset" if dataset else "")
    params = {"dataset": dataset} if dataset else {}
    if knobs is None:
        rows = store.sql(
            f"SELECT DISTINCT unnest(json_keys(json_extract(metadata, '$.difficulty'))) FROM tasks "
            f"WHERE {where}",
            params=params,
        ).fetchall()
        knobs = sorted(r[0] for r in rows if r[0] is not None and _KNOB.match(r[0]))
    cols = ", ".join(
        f'CAST({knob_sql(k)} AS VARCHAR) AS "{k}", CAST({knob_sql(k, part="range")} AS VARCHAR) '
        f'AS "{k}_range"'
        for k in knobs
    )
    q = f"SELECT task_id, category{', ' + cols if cols else ''} FROM tasks WHERE {where} ORDER BY task_id"
    return store.sql(q, params=params).pl()
