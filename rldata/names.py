"""Names a user gives that end up in paths, ids and tables: run ids, tags, ...

One rule for all of them: 1-128 characters, letters, digits, ``.``, ``_``, ``:`` and ``-``, starting with a
letter, digit or ``_``.  So no path separator, no ``..``-only name, no whitespace or control character,
and nothing an option parser or a shell glob would read differently.  A run id names its checkpoint
directory (``<out>/<run_id>/``): ``../../escape`` would write outside ``--out``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from rldata.errors import ConfigError

__all__ = ["NAME_RULE", "check_name", "did_you_mean"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:-]{0,127}")
NAME_RULE = "1-128 letters, digits, '.', '_', ':' or '-', not starting with '.', ':' or '-'"


def check_name(value, *, field: str) -> str:
    """``value`` if it is a safe name, else a one-line :class:`ConfigError` naming ``field``."""
    if isinstance(value, str) and _NAME.fullmatch(value):
        return value
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise ConfigError(f"{field}: expected {NAME_RULE}, got {shown}", field=field)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'prompts_per_step'?"`` for the known name closest to a misspelt ``name``
    (difflib's ratio, as click suggests an option), or "" when none is close."""
    near = difflib.get_close_matches(str(name), sorted(set(known)), n=1, cutoff=0.75)
    return f"; did you mean {near[0]!r}?" if near else ""
