"""What every stage returns: a frozen dataclass with ``to_dict()`` (plain, JSON-friendly data)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = ["Result", "frozen", "plain"]


def plain(v: Any) -> Any:
    """A JSON-friendly copy: dataclasses and mappings to dicts, tuples to lists, paths to str, frames to rows."""
    if is_dataclass(v) and not isinstance(v, type):
        return {f.name: plain(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, Mapping):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    if hasattr(v, "to_dicts"):  # a Polars frame
        return v.to_dicts()
    return v


def frozen(v: Any) -> Any:
    """Lists become tuples and dicts read-only mappings, so a frozen result cannot change in place."""
    if isinstance(v, list):
        return tuple(frozen(x) for x in v)
    if isinstance(v, dict):
        return MappingProxyType({k: frozen(x) for k, x in v.items()})
    return v


class Result:
    """Mixin of the stage results (each a ``@dataclass(frozen=True)``)."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def of(cls, summary: Any):
        """The frozen result holding the fields of a job's summary (which it accumulates while running)."""
        return cls(**{f.name: frozen(getattr(summary, f.name)) for f in fields(cls)})
