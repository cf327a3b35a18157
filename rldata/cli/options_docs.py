"""The option tables of docs/options.md, generated from the commands' config classes.

``python -m rldata.cli.options_docs --docs`` prints them, ``--check`` compares them with the page (CI
and tests/configs/test_config.py).  The commands and their configs are read from the Typer app
itself (each command whose options come from a config, :func:`rldata.cli._options.command`): a new
command with a config gets its table with no edit here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from rldata.cli import _load, app
from rldata.cli._options import config_of
from rldata.configs.fields import REQUIRED, leaves
from rldata.interop.options import format_option_tables

__all__ = ["DOCS", "configs", "docs_table", "docs_tables", "main"]


def _cell(v: Any) -> str:
    if v is REQUIRED:
        return "required"
    if v is None:
        return ""
    if isinstance(v, (list, tuple)) and not v:
        return ""
    return f"`{v}`".replace("|", "\\|")


def docs_table(cls: type) -> str:
    rows = ["| option | field | default | meaning |", "|---|---|---|---|"]
    for leaf in leaves(cls):
        flag = f"`{leaf.meta.flag or '--' + leaf.name.replace('_', '-')}`" if leaf.meta.cli else "(file only)"
        field = ".".join(leaf.path)
        old = leaf.meta.deprecated + ((leaf.name,) if leaf.prefix else ())
        alias = "".join(f" (deprecated: `{o}`)" for o in old)
        text = leaf.meta.text().replace("|", "\\|").replace("\n", " ")
        default = f"the {leaf.follows}'s" if leaf.follows else _cell(leaf.default)
        rows.append(f"| {flag} | `{field}` | {default} | {text}{alias} |")
    return "\n".join(rows)


def configs() -> dict[str, type]:
    """Command (``"env register"``) -> the config its options come from, for every command of the
    app that has one, in the app's order: what the docs and the tests walk."""
    _load()
    out: dict[str, type] = {}

    def walk(cmd, path: tuple[str, ...]) -> None:
        cls = config_of(cmd)
        if cls is not None:
            out[" ".join(path)] = cls
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return out


DOCS = Path(__file__).resolve().parents[2] / "docs" / "options.md"
HEAD = """# Options of the commands

Generated from the config fields by `python -m rldata.cli.options_docs --docs > docs/options.md`; a test
fails when this page and the code differ.  Every option can also be set in the file given to
`--config FILE` (YAML or TOML), by its field name, flat or nested by section (`sampling: {n: 4}`
or `n: 4`); options given on the command line win over the file.  `rldata ingest` and `rldata env
register` name that file `--config-file`: their `--config` is the reasoning-gym dataset's config and
the verifiers environment's EnvConfig.
"""


def docs_tables() -> str:
    parts = [HEAD]
    for name, cls in configs().items():
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        parts.append(f"## rldata {name}\n\n`{cls.__module__}.{cls.__name__}`: {doc}\n\n{docs_table(cls)}\n")
    parts.append(
        "## Options of each format (`--option KEY=VALUE`, or a config file's `options:` mapping)\n\n"
        "Each format owns these (its options dataclass in the format registry).\n\n" + format_option_tables()
    )
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = docs_tables()
    if argv == ["--docs"]:
        sys.stdout.write(text)
        return 0
    if argv == ["--check"]:
        if DOCS.read_text() != text:
            print(
                f"{DOCS} differs from the config fields: run python -m rldata.cli.options_docs --docs > {DOCS}"
            )
            return 1
        return 0
    print("usage: python -m rldata.cli.options_docs --docs | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
