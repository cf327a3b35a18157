"""Errors a user can act on.  The CLI prints their message as one line and exits non-zero.

A message names the library's own field (``band``, ``n``, ``max_staleness``), never a CLI flag:
the library is called from Python too.  An error about one field sets ``field``; the CLI then puts
the flag that feeds that field in front of the message (``--band: band must be ...``).
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DamagedTableError",
    "DuplicateKeyError",
    "InputError",
    "RldataError",
    "SchemaError",
    "UnknownNameError",
    "unique_keys",
]


class RldataError(Exception):
    """Base class: a failure with a message meant for the user (no traceback needed).

    ``field``: the parameter or config field the error is about (None when it is about no single
    one).  SchemaError and InputError use it for a table column or a record's field.
    """

    exit_code = 1
    field: str | None = None

    def __init__(self, *args, field: str | None = None):
        super().__init__(*args)
        if field is not None:
            self.field = field

    def __reduce__(self):
        # Subclasses take other arguments than ``args``: pickle (Ray hands an actor's error to the
        # driver pickled) rebuilds from args and attributes, or the driver gets Ray's
        # "UnserializableException" instead of the message.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls, args, state):
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class ConfigError(RldataError, ValueError):
    """A bad parameter or config value; ``field`` names it.  A ValueError too, for older callers.

    ``reason`` is what is wrong without the field's name in front (``must be >= 1, got 0``): a
    config file's loader re-raises it as an InputError naming the file and the field.  The one
    class for every config (rldata.trainer.config re-exports it, and its older call
    ``ConfigError(field, reason)`` still works: it is ``ConfigError.of(field, reason)``).
    """

    def __init__(self, message: str, reason: str | None = None, *, field: str | None = None):
        if reason is not None and field is None:  # the older trainer form: ConfigError(field, reason)
            message, field = f"{message}: {reason}", message
        super().__init__(message, field=field)
        self.reason = message if reason is None else reason

    @classmethod
    def of(cls, field: str, reason: str) -> ConfigError:
        """The error ``field: reason`` about config field ``field``."""
        return cls(f"{field}: {reason}", field=field, reason=reason)


class UnknownNameError(RldataError, KeyError):
    """A name (table, verifier, preset, estimator) nothing is registered under; the message lists the known ones.

    A KeyError too, for older callers; printed as its message (KeyError alone would quote it).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DamagedTableError(RldataError):
    """A table whose Delta log cannot be read completely; nothing may be written on top of it.

    Raised by the store (``rldata.store.core``, which re-exports it) and by the upgrade steps it runs."""


class SchemaError(RldataError, ValueError):
    """A write that does not match its table's schema.  Nothing of the write landed."""

    def __init__(self, table: str, row: int | None, field: str | None, reason: str):
        self.table, self.row, self.field, self.reason = table, row, field, reason
        where = [f"table {table!r}"]
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {reason}")


class InputError(RldataError, ValueError):
    """A bad input file: names the file and line (1-based) or row (0-based for tabular files)."""

    def __init__(self, path: str, where: str | None, reason: str, field: str | None = None):
        self.path, self.where, self.reason, self.field = path, where, reason, field
        loc = f"{path}:{where}" if where else str(path)
        fld = f" field {field!r}:" if field else ""
        super().__init__(f"{loc}:{fld} {reason}")


class DuplicateKeyError(ValueError):
    """A JSON object that names a key twice: ``json.loads`` would keep the last value silently, so
    what a user's file says would depend on the reader.  Readers of user files refuse it with the
    file, line and key (:func:`unique_keys`)."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {key!r} in a JSON object")
        self.key = key


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``object_pairs_hook`` for ``json.loads``: the object as a dict; :class:`DuplicateKeyError` when
    a key appears twice in one object (a nested one too)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKeyError(k)
        out[k] = v
    return out
