"""Typer options from config fields (rldata.configs.fields): the one place the CLI meets a config class."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from rldata.configs.fields import REQUIRED, Leaf, cli_leaves, leaves, load, nest, warn_deprecated
from rldata.errors import ConfigError

__all__ = ["command", "config_of", "field_flags", "parse_config"]

CONFIG_HELP = "YAML or TOML file of these options' fields (options given here win over it)."


def _option(leaf: Leaf):
    m = leaf.meta
    decls = [m.flag or "--" + leaf.name.replace("_", "-")]
    if leaf.type is bool and leaf.default is True and "/" not in decls[0]:
        decls[0] += "/--no-" + decls[0][2:]  # an option that is on by default can be turned off
    if m.short:
        decls.append(m.short)
    has_check = m.check is not None or m.choices is not None
    extra = {"callback": _usage_check(leaf)} if m.usage_check and has_check else {}
    if leaf.default is REQUIRED:  # checked when the config is built: a --config file may give it
        return typer.Option(None, *decls, help=m.text() + " [required]", show_default=False, **extra)
    default = leaf.default if m.from_field is None else m.from_field(leaf.default)
    if isinstance(default, tuple):
        default = list(default)
    return typer.Option(default, *decls, help=m.text(), show_default=default is not None, **extra)


def _usage_check(leaf: Leaf) -> Callable[[Any], Any]:
    def callback(value):
        if leaf.meta.to_field is not None and value is not None:
            value_ = leaf.meta.to_field(value)
        else:
            value_ = value
        why = None if value_ is None else leaf.meta.problem(value_)
        if why:
            raise typer.BadParameter(why)
        return value

    return callback


def _cli_type(leaf: Leaf) -> Any:
    if leaf.meta.cli_type is not None:
        return leaf.meta.cli_type
    args = [a for a in typing.get_args(leaf.type) if a is not type(None)]
    return args[0] if len(args) == 1 else leaf.type


def command(cls: type) -> Callable:
    """Decorate a CLI function ``fn(ctx, config: CLS, ...own options)``: its Typer signature gets one
    option per leaf field of ``cls`` (and each deprecated ``--flag``, hidden) and ``--config FILE``
    (``--config-file FILE`` where a field of ``cls`` is ``--config`` itself, as ingest's dataset
    config is); it is called with the built config.  An own parameter named after a file-only field
    (``cli=False``, e.g. ingest's PATH argument) sets that field when given, and is not passed to ``fn``."""
    ls = cli_leaves(cls)
    file_option = "--config-file" if any(leaf.flag == "--config" for leaf in ls) else "--config"
    file_only = {leaf.name for leaf in leaves(cls) if not leaf.meta.cli}
    names = [leaf.name for leaf in ls]
    dup = {n for n in names if names.count(n) > 1}
    if dup:  # a definition error of the config, caught by the tests at import
        raise ConfigError(f"{cls.__name__}: leaf names {sorted(dup)} twice", field=None)

    def decorate(fn: Callable) -> Callable:
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "config"]
        kw = inspect.Parameter.KEYWORD_ONLY
        first = [p.replace(kind=kw) for p in own if p.annotation is typer.Context]
        ctx_name = first[0].name if first else "_ctx"
        if not first:
            first = [inspect.Parameter("_ctx", kw, annotation=typer.Context)]
        params = first + [p.replace(kind=kw) for p in own if p.annotation is not typer.Context]
        params.insert(
            len(first),
            inspect.Parameter(
                "config_file", kw, annotation=Path, default=typer.Option(None, file_option, help=CONFIG_HELP)
            ),
        )
        at = len(first)
        aliases: dict[str, tuple[Leaf, str]] = {}
        for leaf in ls:
            params.insert(
                at, inspect.Parameter(leaf.name, kw, annotation=_cli_type(leaf), default=_option(leaf))
            )
            at += 1
            for i, old in enumerate(o for o in leaf.meta.deprecated if o.startswith("--")):
                key = f"{leaf.name}__deprecated_{i}"
                aliases[key] = (leaf, old)
                opt = typer.Option(None, old, hidden=True, help=f"Deprecated: {leaf.flag}.")
                params.insert(at, inspect.Parameter(key, kw, annotation=_cli_type(leaf) | None, default=opt))
                at += 1

        @functools.wraps(fn)
        def wrapper(**kwargs):
            ctx = kwargs[ctx_name] if ctx_name != "_ctx" else kwargs.pop("_ctx")
            path = kwargs.pop("config_file")
            given = {}
            for leaf in ls:
                value = kwargs.pop(leaf.name)
                source = ctx.get_parameter_source(leaf.name)  # typer vendors click: compared by name
                if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
                    given[leaf.name] = value if leaf.meta.to_field is None else leaf.meta.to_field(value)
            for key, (leaf, old) in aliases.items():
                value = kwargs.pop(key)
                if value is not None:
                    warn_deprecated(old, leaf.flag)
                    if leaf.name in given:
                        raise ConfigError(f"give {leaf.flag} or {old}, not both", field=leaf.name)
                    given[leaf.name] = value if leaf.meta.to_field is None else leaf.meta.to_field(value)
            for name in file_only & set(kwargs):
                value = kwargs.pop(name)
                if value is not None:
                    given[name] = value
            given = {k: (str(v) if isinstance(v, Path) else v) for k, v in given.items()}
            cfg = load(cls, path, **nest(cls, given))  # --eval-n is eval.n, not the old flat eval_n
            return fn(config=cfg, **kwargs)

        wrapper.__signature__ = inspect.Signature(params, return_annotation=None)
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        del wrapper.__wrapped__  # typer must see the wrapper's signature, not fn's
        wrapper.__rldata_config__ = cls  # the docs and the error flags read the command's config
        return wrapper

    return decorate


def config_of(cmd: Any) -> type | None:
    """The config class a (click) command's options come from (:func:`command`), or None."""
    return getattr(getattr(cmd, "callback", None), "__rldata_config__", None)


def field_flags(cls: type) -> dict[str, str]:
    """Every name an error may give a field of ``cls`` (its flat name, its key ``eval.n``, its path
    ``rollout.n``) -> the long option that sets it; file-only fields have none."""
    out: dict[str, str] = {}
    for leaf in cli_leaves(cls):
        for name in (leaf.name, leaf.key, ".".join(leaf.path)):
            out.setdefault(name, leaf.flag)
    return out


def parse_config(cls: type, argv: list[str], defaults: dict[str, Any] | None = None) -> Any:
    """``cls`` from command-line options (``["--lr", "1e-4", "--n", "4"]``), parsed by the very
    options a command of ``cls`` has, over ``defaults`` (fields by name, as a ``--config`` file
    gives them): how a script (a benchmark) takes a command's settings without declaring them again."""
    import tempfile

    import yaml

    got: list = []

    @command(cls)
    def cmd(config: Any) -> None:
        got.append(config)

    app = typer.Typer(add_completion=False)
    app.command()(cmd)
    app.command("_")(lambda: None)  # two commands: the first is addressed by name
    with tempfile.TemporaryDirectory() as tmp:
        head = []
        if defaults:
            path = Path(tmp) / "defaults.yaml"
            path.write_text(yaml.safe_dump(nest(cls, dict(defaults))))
            head = ["--config", str(path)]
        app(["cmd", *head, *argv], standalone_mode=False)
    return got[0]
