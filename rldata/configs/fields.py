"""Declare each parameter once: a dataclass field carries its type, default, help, CLI flag and check.

A config is a dataclass whose fields are made by :func:`param` (or :func:`nested` for a shared
sub-config such as :class:`rldata.configs.sampling.SamplingSpec`).  From those fields alone come:

- the checks (:func:`validate`, called by the config's ``__post_init__``): type, then the field's
  ``check``; a bad value is a :class:`rldata.errors.ConfigError` naming the field;
- the CLI options (:func:`rldata.cli._options.command`): one Typer option per leaf field, ``--FIELD-NAME`` unless the
  field names another flag, its default the field's default, plus ``--config FILE`` (YAML or TOML);
  options given on the command line win over the file, the file over the defaults;
- the loading of a mapping or a file (:func:`build`), with deprecated names that still work (a
  field's old names, and the flat ``eval_n`` of a prefixed section's ``eval.n``), and a "did you
  mean" for a misspelt one;
- a config's constructor taking its sections' fields by their flat names too (:func:`config`:
  ``TrainConfig(n=8, max_tokens=32)`` sets ``rollout.n`` and ``rollout.max_tokens``);
- the choices of a "one of these names" field and their help, from its registry (``choices=``);
- the option tables of the docs (``python -m rldata.cli.options_docs --docs`` prints them, ``--check``
  fails when docs/options.md differs).

Checks: a single-field check sits on the field (``check=``, ``choices=``); the rules between fields
sit in one method per config marked :func:`validator`, whose name its errors cite.  A section may
be given its own defaults, old names and a validator where it is nested (:func:`nested`): the
trainer's rollout is a :class:`~rldata.configs.sampling.SamplingSpec` with ``n = 8`` and the
on-policy rule.

Adding a parameter is one edit: the field.  tests/configs/test_config.py ties the commands' options, the
fields and the docs together.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

from rldata.errors import ConfigError, InputError, RldataError
from rldata.names import did_you_mean
from rldata.registry import Registry, import_path
from rldata.sql_guard import check_predicate

__all__ = [
    "REQUIRED",
    "Param",
    "as_flat",
    "at_least",
    "build",
    "choice_names",
    "cli_leaves",
    "config",
    "finite_between",
    "leaves",
    "load",
    "nest",
    "nested",
    "one_of",
    "param",
    "read_file",
    "section_defaults",
    "sql_predicate",
    "validate",
    "validator",
    "warn_deprecated",
]

KEY = "rldata"  # the metadata key a field's Param sits under


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()  # the default of a field that has none


@dataclass(frozen=True)
class Param:
    """What a field declares besides its type and default."""

    help: str
    flag: str | None = None  # long option when it is not --FIELD-NAME (e.g. "--round"; "--async/--sync")
    short: str | None = None  # e.g. "-c"
    deprecated: tuple[
        str, ...
    ] = ()  # old names (YAML keys, Python keywords, --flags) that still work, warning
    check: Callable[[Any], str | None] | None = None  # -> why the value is wrong, None when it is fine
    cli: bool = True  # False: set from a config file or Python only
    # the CLI option's type when it differs from the field's, and how its value becomes the field's
    cli_type: Any = None
    to_field: Callable[[Any], Any] | None = None
    from_field: Callable[[Any], Any] | None = None
    # help built when the CLI loads and the docs are generated (e.g. from a registry's names); `help`
    # is then its short form
    help_fn: Callable[[], str] | None = None
    # on the command line a failed check is a usage error (exit 2), as a misspelt choice is
    usage_check: bool = False
    # a nested section whose leaves keep its name in front on the command line and as flat keys
    # (``--eval-n``, ``eval_n``) so they never clash with the parent's (``--n``); see :func:`nested`
    prefixed: bool = False
    # "one of these names": a Registry, or the "module:attr" path of one (a config below the
    # registry's layer names it by path); the value must resolve there (``strict``; else the help
    # only lists them: an environment may also be one registered in the store), and the help lists
    # its names
    choices: Any = None
    strict: bool = True
    # a sub-config (see :func:`nested`): its class, the defaults and the old names it gives its own
    # fields where it is nested, and the validator that holds there (e.g. the trainer's on-policy rule)
    section: type | None = None
    defaults: tuple[tuple[str, Any], ...] = ()
    renamed: tuple[tuple[str, tuple[str, ...]], ...] = ()
    rule: Callable[[Any], None] | None = None
    only: tuple[str, ...] | None = None  # the section's fields that are settings here (None: all)
    # another section whose values the fields left at their defaults take (the docs say so)
    follows: str | None = None

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not one of the ``choices`` (when strict), or fails the ``check``; None if fine."""
        why = _choice_problem(value, self.choices) if self.choices is not None and self.strict else None
        if not why and self.check is not None:
            why = self.check(value)
        return why

    def text(self) -> str:
        text = self.help_fn() if self.help_fn is not None else self.help
        if self.choices is not None:
            reg = _registry(self.choices)
            names = reg.names(plugins=False)  # the built-in and registered names, not the plugins'
            names = sorted(names) if reg.sort_known else names  # else: the registry's own order
            tail = " (or module:Class)" if reg.paths else ""
            text = f"{text} One of: {', '.join(names)}{tail}."
        return text


def _registry(choices: Any) -> Registry:
    return import_path(choices, kind="registry") if isinstance(choices, str) else choices


def choice_names(choices: Any) -> list[str]:
    """The names a ``choices=`` registry takes (installed plugins' too)."""
    return _registry(choices).names()


def _choice_problem(value: Any, choices: Any) -> str | None:
    """Why ``value`` names nothing in the registry (its unknown-name error, with a "did you mean"),
    or None; a ``module:Class`` path of a registry that takes them is imported and checked."""
    if value is None:
        return None
    try:
        _registry(choices).resolve(value)
    except RldataError as e:
        return str(e)
    return None


def param(default: Any = MISSING, *, default_factory: Any = MISSING, compare: bool = True, **kw) -> Any:
    """A config field: ``param(16, help="Samples per task.", check=at_least(1))``."""
    return dataclasses.field(
        default=default, default_factory=default_factory, compare=compare, metadata={KEY: Param(**kw)}
    )


def nested(
    cls: type,
    *,
    help: str = "",
    prefixed: bool = False,
    defaults: Mapping[str, Any] | None = None,
    deprecated: Mapping[str, tuple[str, ...]] | None = None,
    rule: Callable[[Any], None] | None = None,
    only: tuple[str, ...] | None = None,
    follows: str | None = None,
) -> Any:
    """A sub-config field: its own fields become options of the commands that use the parent.

    ``prefixed``: a shared section whose field names would clash with the parent's (``eval`` has an
    ``n`` and a ``temperature`` of its own).  Its leaves are ``--eval-n`` on the command line and
    ``eval: {n: 8}`` in a file; the flat key ``eval_n`` (a file key or a Python keyword) is a
    deprecated alias of ``eval.n``, as any field's ``deprecated`` names are.

    Where it is nested, a section may give its fields other ``defaults`` (``{"n": 8}``: the
    options, the docs and a config built without them see 8), old names (``deprecated``:
    ``{"n": ("group_size", "--group-size")}``) and a ``rule``: a function of the section, marked
    :func:`validator`, raising a ConfigError naming one of its fields (e.g. the trainer's
    ``on_policy``: a rollout's temperature > 0 and top_p = 1).  ``only``: the section's fields that
    are settings of the parent (``rldata demo`` takes a sampling's ``n`` and ``seed`` and picks the
    rest); the others keep their defaults and are neither options nor keys.  ``follows``: the
    section whose values the fields without a default here take when left at their own (the
    eval's sampling follows the rollout's; the config applies it, the docs show it)."""
    defaults = dict(defaults or {})
    known = {f.name for f in dataclasses.fields(cls)}
    bad = sorted((set(defaults) | set(deprecated or {}) | set(only or ())) - known)
    if bad:  # a definition error of the config: caught when its module is imported
        raise ConfigError(f"{cls.__name__} has no field {bad[0]!r}", field=bad[0])
    meta = Param(
        help=help or cls.__doc__ or "",
        prefixed=prefixed,
        section=cls,
        defaults=tuple(defaults.items()),
        renamed=tuple((k, tuple(v)) for k, v in (deprecated or {}).items()),
        rule=rule,
        only=tuple(only) if only is not None else None,
        follows=follows,
    )
    factory = functools.partial(cls, **defaults) if defaults else cls
    return dataclasses.field(default_factory=factory, metadata={KEY: meta})


def section_defaults(cls: type, name: str) -> dict[str, Any]:
    """The defaults section ``name`` of config ``cls`` gives its fields where nested there."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return dict(_meta(f).defaults)


def validator(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    """Mark a config's one cross-field validator (a method, or a section's ``rule``): :func:`validate`
    runs it after every field's own check, and a ConfigError it raises cites its name
    (``... (rule: on_policy)``), so the message leads to the rule."""

    @functools.wraps(fn)
    def run(obj: Any) -> None:
        try:
            fn(obj)
        except ConfigError as e:
            if getattr(e, "rule", None):
                raise
            err = ConfigError(
                f"{e} (rule: {fn.__name__})", field=e.field, reason=f"{e.reason} (rule: {fn.__name__})"
            )
            err.rule = fn.__name__
            raise err from None

    run.__rldata_validator__ = True
    return run


# --- checks ----------------------------------------------------------------------------------------


def at_least(lo: float) -> Callable[[Any], str | None]:
    def check(v):
        return None if v is None or v >= lo else f"must be >= {lo}, got {v}"

    return check


def finite_between(lo: float, hi: float) -> Callable[[Any], str | None]:
    def check(v):
        ok = v is None or (math.isfinite(v) and lo <= v <= hi)
        return None if ok else f"must be in [{lo:g}, {hi:g}], got {v}"

    return check


def one_of(*names: str) -> Callable[[Any], str | None]:
    def check(v):
        return None if v is None or v in names else f"must be one of {', '.join(names)}, got {v!r}"

    return check


def sql_predicate(name: str) -> Callable[[Any], str | None]:
    """One SQL predicate and nothing else (rldata.sql_guard): the guard runs where the config is
    built, so Python callers meet it as the CLI does."""

    def check(text):
        if text is None:
            return None

        try:
            check_predicate(text, option=name)
        except RldataError as e:
            return str(e).removeprefix(f"{name} ")
        return None

    return check


def _meta(f: dataclasses.Field) -> Param:
    return f.metadata.get(KEY) or Param(help="")


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # each base class resolved in its own module


def _is_config(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _type_ok(value: Any, tp: Any) -> bool:
    if tp is Any:
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in args)
    if tp is type(None):
        return value is None
    if isinstance(value, bool) and tp in (int, float):
        return False  # a YAML `yes` is never a number
    if tp is float:
        return isinstance(value, (int, float))
    if origin in (tuple, list):
        return isinstance(value, (tuple, list))
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True  # an annotation this checker does not know: the field's own check decides


def _type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _error(name: str, reason: str) -> ConfigError:
    return ConfigError.of(name, reason)


def _validators(cls: type) -> list[Callable[[Any], None]]:
    found = {}
    for klass in reversed(cls.__mro__):  # a subclass's own validator replaces its base's
        for name, fn in vars(klass).items():
            if getattr(fn, "__rldata_validator__", False):
                found = {name: fn}
    return list(found.values())


def validate(obj: Any, *, error: Callable[[str, str], Exception] = _error) -> None:
    """Check every field of a config: its type, its ``choices`` and its ``check``, then the rule a
    section has where it is nested, then the config's :func:`validator`; ``error(field, reason)`` (a
    ConfigError naming the field) for the first bad field."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, os.PathLike) and _type_ok("", hints[f.name]):
            value = os.fspath(value)  # a path given for a text field (``out=tmp / "x"``) is its text
            object.__setattr__(obj, f.name, value)
        if not _type_ok(value, hints[f.name]):
            raise error(f.name, f"expected {_type_name(hints[f.name])}, got {type(value).__name__} {value!r}")
        meta = _meta(f)
        why = meta.problem(value)
        if why:
            raise error(f.name, why)
        if meta.rule is not None:
            meta.rule(value)
    for fn in _validators(type(obj)):
        fn(obj)


# --- leaves, mappings and files --------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """A field that is not a sub-config, with the path of sub-config names leading to it."""

    path: tuple[str, ...]  # ("sampling", "n")
    field: dataclasses.Field
    type: Any
    meta: Param
    prefix: str = ""  # "eval_" inside a prefixed section (nested(..., prefixed=True))
    top: int = 0  # where in ``path`` the outermost prefixed section is (its nested file form starts)
    # the default its section gives it where nested (nested(..., defaults=)); MISSING: its own
    override: Any = None
    overridden: bool = False
    follows: str | None = None  # its default is another section's value (nested(..., follows=))

    @property
    def name(self) -> str:
        """The leaf's one flat name: its CLI parameter (``--`` + dashes) and its key in ``build``."""
        return self.prefix + self.path[-1]

    @property
    def key(self) -> str:
        """How a file or an error names it: ``eval.n`` inside a prefixed section, else ``name``."""
        if not self.prefix:
            return self.name
        return self.prefix.replace("_", ".") + self.path[-1]

    @property
    def aliases(self) -> tuple[str, ...]:
        """The deprecated flat names that still set this leaf (not the ``--flag`` ones): its old
        names, and inside a prefixed section its flat name (``eval_n``)."""
        old = tuple(self.prefix + o for o in self.meta.deprecated if not o.startswith("-"))
        return old + ((self.name,) if self.prefix else ())

    @property
    def default(self) -> Any:
        """The field's default (its section's, where nested with one); REQUIRED when it has none."""
        if self.overridden:
            return self.override
        f = self.field
        if f.default is MISSING and f.default_factory is MISSING:
            return REQUIRED
        return f.default_factory() if f.default is MISSING else f.default

    @property
    def flag(self) -> str:
        return (self.meta.flag or "--" + self.name.replace("_", "-")).split("/")[0]


def _is_section(f: dataclasses.Field, tp: Any = None) -> bool:
    return _meta(f).section is not None


def leaves(
    cls: type,
    prefix: tuple[str, ...] = (),
    _flat: str = "",
    _top: int | None = None,
    _site: Param | None = None,
) -> list[Leaf]:
    """The leaf fields of a config, sub-configs flattened, in declaration order (each with the
    default and old names its section gives it where nested)."""
    out = []
    hints = _hints(cls)
    defaults = dict(_site.defaults) if _site is not None else {}
    renamed = dict(_site.renamed) if _site is not None else {}
    only = _site.only if _site is not None else None
    for f in dataclasses.fields(cls):
        if not f.init or (only is not None and f.name not in only):
            continue
        meta = _meta(f)
        if meta.section is not None:
            pre = meta.prefixed
            top = len(prefix) if pre and _top is None else _top
            flat = _flat + (f.name + "_" if pre else "")
            out += leaves(hints[f.name], (*prefix, f.name), flat, top, meta)
        else:
            if f.name in renamed:
                meta = dataclasses.replace(meta, deprecated=meta.deprecated + renamed[f.name])
            top = len(prefix) if _top is None else _top
            leaf = Leaf((*prefix, f.name), f, hints[f.name], meta, _flat, top)
            if f.name in defaults:
                leaf = dataclasses.replace(leaf, override=defaults[f.name], overridden=True)
            elif _site is not None and _site.follows:
                leaf = dataclasses.replace(leaf, follows=_site.follows)
            out.append(leaf)
    return out


def _sections(cls: type, flat: str = "") -> dict[str, str]:
    """Every sub-config's name at any depth (``live`` inside ``train``) -> the flat prefix its
    leaves take (``eval`` -> ``eval_``; "" for a plain section)."""
    out: dict[str, str] = {}
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.init and _is_section(f):
            sub = flat + (f.name + "_" if _meta(f).prefixed else "")
            out[f.name] = sub
            out.update(_sections(hints[f.name], sub))
    return out


def nest(cls: type, flat: Mapping[str, Any]) -> dict[str, Any]:
    """Values by leaf name -> the mapping :func:`build` reads without a deprecation warning: a
    prefixed section's leaves go under their section (``eval_n`` -> ``{"eval": {"n": ..}}``)."""
    by_name = {leaf.name: leaf for leaf in leaves(cls)}
    out: dict[str, Any] = {}
    for k, v in flat.items():
        leaf = by_name.get(k)
        if leaf is None or not leaf.prefix:
            out[k] = v
            continue
        # the path from the outermost prefixed section down (a plain section above it may be left out)
        path = leaf.path[leaf.top :]
        node = out
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = v
    return out


def as_flat(obj: Any) -> dict[str, Any]:
    """A config's leaf values by leaf name, in the mapping :func:`build` takes back (a prefixed
    section's leaves nested under it, see :func:`nest`)."""
    out = {}
    for leaf in leaves(type(obj)):
        value = obj
        for name in leaf.path:
            value = getattr(value, name)
        out[leaf.name] = value
    return nest(type(obj), out)


def warn_deprecated(old: str, new: str) -> None:
    print(
        f"rldata: warning: {old} is deprecated, use {new} (the old name goes in the next release)",
        file=sys.stderr,
    )


def build(cls: type, data: Mapping[str, Any] | None = None, /, **overrides) -> Any:
    """A config from a mapping (nested by sub-config, or flat by leaf name; deprecated names warn)
    and keyword ``overrides`` that win over it.  An unknown key is a ConfigError listing the known
    ones."""
    return _build(cls, dict(data or {}), overrides)


def _build(cls: type, data: dict, overrides: dict) -> Any:
    flat = _flatten(cls, data)
    flat.update(_flatten(cls, overrides))
    return _assemble(cls, flat)


def _flatten(cls: type, source: Mapping[str, Any], *, warn: bool = True) -> dict[str, Any]:
    """``source`` (nested by section or flat; old names warn) -> values by leaf name."""
    ls = leaves(cls)
    by_name = {leaf.name: leaf for leaf in ls}
    old_names = {old: leaf for leaf in ls for old in leaf.aliases}
    # every sub-config's name at any depth (``live`` inside ``train``): a file may nest any of them
    sections = _sections(cls)

    def items(key: str, value: Any, prefix: str):
        if key in sections and _is_config(type(value)):  # a section given as its config
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        if key in sections and isinstance(value, Mapping):
            for k, v in value.items():
                yield from items(k, v, sections[key])
        else:
            yield prefix + key, value, prefix

    flat: dict[str, Any] = {}
    for key, value in source.items():
        for k, v, prefix in items(key, value, ""):
            leaf = by_name.get(k)
            # a prefixed section's leaf is named flat (``eval_n``) only by its deprecated alias
            if leaf is None or (leaf.prefix and not prefix):
                leaf = old_names.get(k)
                if leaf is None:
                    keys = sorted(x.key for x in ls)
                    hint = did_you_mean(k, [*keys, *(x.name for x in ls), *sections])
                    known = hint or f"; known fields: {', '.join(keys)}"
                    raise ConfigError(f"{k}: unknown field{known}", field=k)
                if warn:
                    warn_deprecated(k, leaf.key)
            flat[leaf.name] = v
    return flat


def _assemble(
    cls: type, flat: dict, prefix: str = "", defaults: Mapping[str, Any] | None = None, base: Any = None
) -> Any:
    """``cls`` from leaf values by flat name; a leaf not given takes ``base``'s value (an instance
    being changed), else the ``defaults`` its section has where nested, else its own default."""
    kw = _kwargs(cls, flat, prefix, defaults or {}, base)
    return cls(**kw)


def _kwargs(cls: type, flat: dict, prefix: str, defaults: Mapping[str, Any], base: Any) -> dict[str, Any]:
    hints = _hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        meta = _meta(f)
        if meta.section is not None:
            sub = getattr(base, f.name) if base is not None else None
            sub = None if sub is MISSING else sub
            tp = hints[f.name] if sub is None else type(sub)
            if not meta.prefixed:
                kw[f.name] = _assemble(tp, flat, prefix, dict(meta.defaults), sub)
                continue
            try:
                kw[f.name] = _assemble(tp, flat, f"{prefix}{f.name}_", dict(meta.defaults), sub)
            except ConfigError as e:  # the section's own check names its field: put the section in front
                if not e.field or e.field.startswith(f"{f.name}."):
                    raise
                field = f"{f.name}.{e.field}"
                raise ConfigError(f"{field}: {e.reason.removeprefix(f'{e.field}: ')}", field=field) from None
        elif prefix + f.name in flat:
            kw[f.name] = flat[prefix + f.name]
        elif base is not None and getattr(base, f.name) is not MISSING:
            kw[f.name] = getattr(base, f.name)
        elif f.name in defaults:
            kw[f.name] = defaults[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ConfigError(f"{f.name}: required; {meta.help}", field=f.name)
    return kw


def config(cls: type | None = None, /, *, kw_only: bool = False) -> Any:
    """A frozen dataclass config whose constructor also takes its sections' fields by their flat
    names (and their deprecated ones, warning): ``TrainConfig(n=8, model="m")`` is
    ``TrainConfig(rollout=SamplingSpec(n=8), engine=EngineConfig(model="m"))``.  A flat name wins
    over the section given beside it (``dataclasses.replace(cfg, n=4)`` changes ``rollout.n``).
    ``@config(kw_only=True)``: every field is a keyword (a base whose fields a subclass extends)."""
    if cls is None:
        return functools.partial(config, kw_only=kw_only)
    cls = dataclass(frozen=True, kw_only=kw_only)(cls)
    init = cls.__init__
    own = {f.name for f in dataclasses.fields(cls) if f.init}
    positional = [f.name for f in dataclasses.fields(cls) if f.init and not f.kw_only]

    @functools.wraps(init)
    def __init__(self, *args, **kw):
        flat = {k: kw.pop(k) for k in list(kw) if k not in own}
        if args:  # positional fields, in declaration order
            if len(args) > len(positional):
                raise ConfigError(
                    f"{cls.__name__} takes at most {len(positional)} fields by position", field=None
                )
            kw.update(zip(positional, args))
        if flat:
            given = _flatten(cls, flat)
            base = types.SimpleNamespace(
                **{
                    f.name: kw[f.name] if f.name in kw else _default_of(f)
                    for f in dataclasses.fields(cls)
                    if f.init
                }
            )
            kw = _kwargs(cls, given, "", {}, base)
        init(self, **kw)

    cls.__init__ = __init__
    if "replace" not in vars(cls):
        cls.replace = _replace
    return cls


def _replace(self, **changes):
    """A copy with ``changes``, by field or by a section's field by its flat name."""
    return dataclasses.replace(self, **changes)


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else MISSING


def load(cls: type, config: Any = None, /, **overrides) -> Any:
    """A config from ``config`` (an instance, a mapping, the path of a YAML/TOML file, or None) with
    ``overrides`` (fields by leaf name) winning over it.  A bad value read from a file is an
    InputError naming the file and field; a bad override is a ConfigError naming the field."""
    if isinstance(config, cls):
        data, where = as_flat(config), None
    elif config is None or isinstance(config, Mapping):
        data, where = config or {}, None
    elif isinstance(config, (str, Path)):
        data, where = read_file(config), str(config)
    else:
        raise ConfigError(
            f"config: expected a {cls.__name__}, a mapping or a file path, got {type(config).__name__}",
            field="config",
        )
    try:
        return build(cls, data, **overrides)
    except ConfigError as e:
        if where is None or (e.field or "").replace(".", "_") in _flatten(cls, overrides, warn=False):
            raise
        raise InputError(where, None, str(e).removeprefix(f"{e.field}: "), field=e.field) from None


def read_file(path: str | Path) -> dict[str, Any]:
    """A YAML (.yaml, .yml, anything else) or TOML (.toml) mapping; InputError naming the file."""
    import yaml

    from rldata.configs import yaml_safe  # start-up: loads yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(str(path), None, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"byte {e.start}", "not a text file (not valid UTF-8)") from None
    if path.suffix == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(str(path), None, f"not valid TOML: {e}") from None
    else:
        try:
            data = yaml_safe.safe_load(text)  # bounded: an alias bomb or deep nesting is refused
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark is not None else None
            raise InputError(str(path), where, f"not valid YAML: {getattr(e, 'problem', e)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(str(path), None, f"expected a mapping of config fields, got {type(data).__name__}")
    return data


# --- the CLI (rldata.cli._options builds the Typer options) ---------------------------------------


def cli_leaves(cls: type) -> list[Leaf]:
    return [leaf for leaf in leaves(cls) if leaf.meta.cli]
