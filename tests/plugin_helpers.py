"""Shared by the plugin and contributing-recipe tests: code blocks read from docs/contributing.md, and
a temporary installed distribution (a dist-info with entry_points.txt on sys.path), which
importlib.metadata finds like any installed package."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "contributing.md"


def recipe_blocks(section: str, lang: str) -> list[str]:
    """The ``lang`` code blocks of a section of docs/contributing.md, dedented."""
    body = DOC.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.compile(rf"^( *)```{lang}\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
    return [textwrap.dedent(m.group(2)) for m in block.finditer(body)]


def install_distribution(site: Path, name: str, files: dict[str, str], entry_points: dict | str) -> Path:
    """Write ``files`` (path under ``site`` -> source) and a ``NAME-0.1.dist-info`` declaring
    ``entry_points`` ({group: {name: "module:attr"}} or the entry_points.txt text); return ``site``,
    which the caller puts on sys.path."""
    for rel, code in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    if not isinstance(entry_points, str):
        entry_points = "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in names.items())
            for group, names in entry_points.items()
        )
    (info / "entry_points.txt").write_text(entry_points)
    return site


def export_registries() -> list[dict]:
    """The export format registries (one per namespace), built-ins loaded: what a test that registers
    a toy format saves with :func:`saved` and restores."""
    from rldata.interop import formats

    for ns in formats.NAMESPACES:
        formats.format_names(ns, plugins=False)
    return list(formats._REGISTRY.values())


def saved(registries: list[dict]):
    """Restore each registry (a dict, or an rldata.registry.Registry) to its present content."""
    copies = [(r, dict(r)) for r in registries]

    def restore() -> None:
        for r, c in copies:
            r.clear()
            r.update(c)

    return restore
