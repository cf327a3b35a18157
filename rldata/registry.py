"""One small registry class behind every "name -> plain function or small class" table of rldata.

Verifiers, environments, export and import formats, advantage estimators, curriculum samplers and
metric trackers are each a :class:`Registry`: a dict (so ``name in REGISTRY``, ``REGISTRY[name]``
and iteration work as before) that also knows

- how to register (``@REGISTRY.register("name")`` over a function or class, or
  ``REGISTRY.register("name", obj)``);
- its built-ins, imported on the first lookup (``builtin``: a module to import, or a dict of
  ``name -> "module:attr"`` imported one by one), so that importing rldata imports none of them;
- the entry points of installed packages (``group``, see :mod:`rldata.plugins`), each loaded the
  first time its name is asked for;
- ``module:Attr`` paths (``paths=True``), imported on use: a user's class needs no registration;
- the "unknown name" error, which lists every known name (entry points from metadata, unimported).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from rldata.errors import RldataError, UnknownNameError
from rldata.names import did_you_mean
from rldata.plugins import entry_point_names, load_entry_point

__all__ = ["Registry", "import_path"]


def import_path(spec: str, *, kind: str = "object") -> Any:
    """The attribute ``attr`` of module ``module`` for ``"module:attr"`` (RldataError if it does not import)."""
    mod, _, attr = spec.partition(":")
    if not mod or not attr:
        raise RldataError(f"{kind} {spec!r} is not a 'module:attr' path")
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        from rldata.causes import import_hint  # start-up: only an error loads rldata.causes

        raise RldataError(f"{kind} {spec!r} does not import: {e}{import_hint(e)}") from None


class Registry(dict):
    """Names of one kind of plugin (see the module docstring).

    ``kind``: what the names name, in messages ("environment", "advantage estimator");
    ``group``: the entry-point group of installed packages (None: none);
    ``builtin``: a module whose import registers the built-ins, or ``{name: "module:attr"}``;
    ``paths``: whether ``module:Attr`` is accepted by :meth:`resolve`;
    ``check(obj, what)``: validates (and returns) an object loaded from a path or an entry point;
    ``error``, ``field``, ``hint``: the unknown-name error's class, its ``field`` and a tail for its
    message (e.g. " (or give one as module:Class)"); ``sort_known``: list the known names sorted
    (else in registration order).
    """

    def __init__(
        self,
        kind: str,
        *,
        group: str | None = None,
        builtin: str | Mapping[str, str] | None = None,
        paths: bool = False,
        check: Callable[[Any, str], Any] | None = None,
        error: type[RldataError] = UnknownNameError,
        field: str | None = None,
        hint: str = "",
        sort_known: bool = True,
    ):
        super().__init__()
        self.kind, self.group, self.paths, self.field, self.hint = kind, group, paths, field, hint
        self.builtin = builtin
        self.check = check or (lambda obj, what: obj)
        self.error = error
        self.sort_known = sort_known
        self._builtin_loaded = False
        # threads resolving at once (episodes opening in a pool) must all wait for the one import;
        # re-entrant because a built-in module may resolve names of its own registry while importing
        self._builtin_lock = threading.RLock()

    # dicts compare by their items; two registries of one kind are still two registries
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self)})"

    def register(self, name: str, obj: Any = None, /):
        """``REGISTRY.register("name", obj)`` registers ``obj`` and returns it; ``@REGISTRY.register("name")``
        does the same to the decorated function or class.  A name registered again is replaced (a
        module re-imported, a test's toy)."""
        if obj is None:

            def deco(o):
                self[name] = o
                return o

            return deco
        self[name] = obj
        return obj

    def load_builtin(self, name: str | None = None) -> None:
        """Import the built-ins: all of them (``name`` None), or the one ``name`` names."""
        b = self.builtin
        if b is None:
            return
        if isinstance(b, str):
            if self._builtin_loaded:
                return
            with self._builtin_lock:
                if not self._builtin_loaded:
                    importlib.import_module(b)
                    self._builtin_loaded = True
            return
        for n in b if name is None else [name]:
            if n in b and n not in self:
                self[n] = import_path(b[n], kind=self.kind)

    def load_plugin(self, name: str) -> Any | None:
        """The entry point ``name`` of ``group``, checked and registered; None if none declares it."""
        if self.group is None:
            return None

        obj = load_entry_point(self.group, name)
        if obj is None:
            return None
        obj = self.check(obj, f"{name} (entry point {self.group})")
        self[name] = obj
        return obj

    def load_path(self, spec: str) -> Any:
        """The object a ``module:Attr`` path names, checked (not registered: the path is its name)."""
        return self.check(import_path(spec, kind=self.kind), spec)

    def resolve(self, name: str) -> Any:
        """What ``name`` names: registered, a built-in, a ``module:Attr`` path (with ``paths``), or an
        installed entry point; else :meth:`unknown`."""
        if self.paths and ":" in name:
            return self.load_path(name)
        if isinstance(self.builtin, str):  # all built-ins first, as a listing would see them
            self.load_builtin()
        if name in self:
            return self[name]
        self.load_builtin(name)
        if name in self:
            return self[name]
        obj = self.load_plugin(name)
        if obj is not None:
            return obj
        raise self.unknown(name)

    def names(self, *, plugins: bool = True) -> list[str]:
        """Every name :meth:`resolve` takes: the registered and built-in ones in registration order,
        then (``plugins``) the entry points' names, read from metadata without importing them."""
        if isinstance(self.builtin, str):  # a dict of built-ins lists their names without importing them
            self.load_builtin()
        out = list(self)
        if isinstance(self.builtin, Mapping):
            out += [n for n in self.builtin if n not in self]
        if plugins and self.group is not None:
            out += [n for n in entry_point_names(self.group) if n not in out]
        return out

    def unknown(self, name: str, *, known: list[str] | None = None) -> RldataError:
        """The error for a name nothing is registered under, listing the known names."""
        known = self.names() if known is None else known
        if self.sort_known:
            known = sorted(known)
        near = did_you_mean(name, known)
        return self.error(
            f"unknown {self.kind} {name!r}{near}; known: {', '.join(known) or '(none)'}{self.hint}",
            field=self.field,
        )
