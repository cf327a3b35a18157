"""Plugins: verifiers, environments, export and import formats, tool-call parsers and ingest presets
that other installed packages add.

A package declares them as entry points in its ``pyproject.toml``::

    [project.entry-points."rldata.verifiers"]
    yesno = "mypkg.verifiers:YesNo"          # a verifier class (name, version, verify)
    [project.entry-points."rldata.envs"]
    maze = "mypkg.envs:Maze"                 # an environment class (reset, step, close)
    [project.entry-points."rldata.exports"]
    mylayout = "mypkg.export:MY_LAYOUT"      # an rldata.interop.formats.ExportFormat
    [project.entry-points."rldata.imports"]
    mydump = "mypkg.dumps:MY_DUMP"           # an rldata.interop.readers.ImportFormat
    [project.entry-points."rldata.tool_parsers"]
    mytools = "mypkg.tools:parse"            # a tool-call parser: text -> rldata.envs.tool_parsers.Parsed
    [project.entry-points."rldata.presets"]
    mydata = "mypkg.ingest:FIELDS"           # an ingest preset: an rldata.ingest.presets.Fields

The entry point's name is the name the CLI and the library accept.  Nothing is imported at start-up:
a registry asked for a name it does not hold loads the entry point of that name, once, then keeps
what it got like any built-in.  Listing the known names reads the installed metadata only.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from rldata.errors import ConfigError, RldataError

__all__ = ["GROUPS", "PluginError", "entry_point_names", "load_entry_point"]

GROUPS = (
    "rldata.verifiers",
    "rldata.envs",
    "rldata.exports",
    "rldata.imports",
    "rldata.tool_parsers",
    "rldata.presets",
)


class PluginError(RldataError):
    """An entry point that does not import, or does not give what its group expects."""


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    if group not in GROUPS:
        raise ConfigError(f"unknown plugin group {group!r}; groups: {', '.join(GROUPS)}", field="group")
    return list(metadata.entry_points(group=group))


def entry_point_names(group: str) -> list[str]:
    """The names declared in ``group`` by installed distributions (nothing is imported)."""
    return sorted({ep.name for ep in _entry_points(group)})


def load_entry_point(group: str, name: str) -> Any | None:
    """The object the entry point ``name`` of ``group`` names, or None if no distribution declares one.

    Two distributions declaring the same name is an error rather than a silent pick of one.
    """
    found = [ep for ep in _entry_points(group) if ep.name == name]
    if not found:
        return None
    if len({ep.value for ep in found}) > 1:
        raise PluginError(
            f"{group} entry point {name!r} is declared more than once: "
            f"{', '.join(sorted({ep.value for ep in found}))}"
        )
    ep = found[0]
    try:
        return ep.load()
    except Exception as e:  # noqa: BLE001 - a broken plugin is the user's to fix: say which one
        raise PluginError(
            f"{group} entry point {name!r} ({ep.value}) does not load: {type(e).__name__}: {e}"
        ) from None
