"""The ``rldata`` command: a thin Typer layer over the library, one module per noun.

Conventions every command follows: a global ``--store`` (or ``$RLDATA_STORE``), data on stdout,
logs and progress on stderr, exit code 0 on success and non-zero with a one-line reason on
failure (a traceback only with ``--debug``), ``--format table|csv|json|parquet`` wherever rows are
printed.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer
from typer._click import exceptions as click_exc  # typer >= 0.20 vendors click
from typer.core import TyperGroup

from rldata import console
from rldata._remote import one_line, parse_storage_options, redact
from rldata._version import __version__
from rldata.cli._common import flag_for
from rldata.errors import InputError, RldataError, SchemaError

__all__ = ["app", "main"]

app = typer.Typer(
    name="rldata",
    help="Data engineering for RL post-training: stores, rejection sampling, filtering, curriculum GRPO.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"rldata {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    # named after the library's fields (open_store's root and storage_options): an error naming
    # them gets these flags in front (rldata.cli._common.flag_for)
    root: str = typer.Option(
        None, "--store", envvar="RLDATA_STORE", help="Store root (directory or URI). Default: ./rldata-store."
    ),
    storage_options: list[str] = typer.Option(
        None,
        "--storage-option",
        metavar="KEY=VALUE",
        help="Object-store setting for an s3:// store (repeatable), e.g. AWS_ENDPOINT_URL=http://host:9000. "
        "Default: the AWS_* environment variables. See docs/cluster.md.",
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="No progress bars, start-up stages or informational lines on stderr (warnings and errors "
        "still print). Also RLDATA_QUIET=1. Off a terminal, progress is plain log lines.",
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    console.configure(quiet=True if quiet else None)  # not given: $RLDATA_QUIET decides
    ctx.obj = {"store": root, "debug": debug, "storage_options": parse_storage_options(storage_options)}


# One module per noun; each exposes ``register(app)``.  Add new nouns here.
_COMMANDS = [
    "store_cmds",
    "ingest",
    "sql",
    "sample",
    "interop",
    "select_cmds",
    "stats",
    "cost",
    "judge",
    "rewards",
    "verify",
    "train",
    "runs_cmds",
    "demo",
    "env",
    "quality",
    "predict",
]


_loaded: set[str] = set()


def _load() -> None:
    for mod in _COMMANDS:
        if mod not in _loaded:  # main() may run many times in one process (tests): register once
            importlib.import_module(f"rldata.cli.{mod}").register(app)
            _loaded.add(mod)


_built: list = []  # [(what was registered, the click command built from it)]


def _command() -> TyperGroup:
    """``app`` as the click command that runs it, built once per process.

    Typer builds it from every command function's signature on each ``app(...)`` call (13 ms with
    every noun loaded; 37 s of the CPU of ``make test-fast``, whose tests call :func:`main` in
    their own process): a notebook or a test calling :func:`main` again and again reuses it, and
    it is built again when a command or a group was registered since.  Typer's own ``app(...)``
    adds only its pretty tracebacks, which this app turns off (``pretty_exceptions_enable=False``)."""
    _load()
    registered = (len(app.registered_commands), len(app.registered_groups))
    if not _built or _built[0][0] != registered:
        _built[:] = [(registered, typer.main.get_command(app))]
    return _built[0][1]


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns (and exits with) the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("RLDATA_DEBUG") == "1"
    cli = _command()
    real_stdout, sys.stdout = sys.stdout, _Stdout(sys.stdout)
    try:
        rc = cli(args=argv, prog_name="rldata", standalone_mode=False)
        code = rc if isinstance(rc, int) else 0
    except typer.Exit as e:
        code = e.exit_code
    except click_exc.ClickException as e:  # usage errors: click's message on one line, exit 2
        ctx = getattr(e, "ctx", None)
        msg = " ".join(e.format_message().split())
        if not msg:  # no arguments at all: the help
            e.show()
        else:
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            print(f"rldata: error: {msg}{hint}", file=sys.stderr)
        code = e.exit_code
    except typer.Abort:
        print("rldata: aborted", file=sys.stderr)
        code = 130
    except KeyboardInterrupt:
        print("rldata: interrupted", file=sys.stderr)
        code = 130
    except Exception as e:
        if debug:
            raise
        # a store error may quote its settings: never print a secret
        # start-up: only an error loads rldata.causes (`rldata tables` does not)
        from rldata.causes import describe, root_cause, write_trace

        cause = root_cause(e)  # an engine's or learner's error arrives wrapped by Ray
        if isinstance(cause, RldataError):
            e = cause
        reason = redact(one_line(str(e))) if str(e).strip() else type(e).__name__
        if not isinstance(e, (RldataError, OSError)):
            # not one of ours: the root cause on the line, the whole trace in a log file
            reason = redact(describe(e))
            trace = write_trace(e, argv)
            reason += f" (full trace: {trace})" if trace else ""
        elif isinstance(e, RldataError) and not isinstance(e, (InputError, SchemaError)):
            # the library names its field; here the option that set it is known (InputError and
            # SchemaError name a file's or a table's field, not an option)

            flag = flag_for(cli, argv, e.field)
            reason = f"{flag}: {reason}" if flag and not reason.startswith(flag) else reason
        print(f"rldata: error: {reason}", file=sys.stderr)
        code = getattr(e, "exit_code", 1)
    guard, sys.stdout = sys.stdout, real_stdout
    try:
        guard.flush()
    except Exception as e:  # noqa: BLE001 - the last buffered rows could not be written
        print(f"rldata: error: {e}", file=sys.stderr)
        code = code or 1
    if guard.failed:
        _silence_stdout()

    console.configure(quiet=None)  # main() may run many times in one process (tests): --quiet ends here
    return code


class _Stdout:
    """``sys.stdout`` while a command runs: a write or flush that fails (a reader that closed the pipe,
    a full disk, ``/dev/full``) raises one :class:`~rldata.errors.RldataError` naming stdout, instead
    of click's silent exit 1 on a closed pipe or an OSError that names no output.  After a failure
    further output is dropped, so the command's one error line is the only one."""

    def __init__(self, real):
        self._real = real
        self.failed = False

    def _do(self, fn, *args):
        if self.failed:
            return len(args[0]) if args else None
        try:
            return fn(*args)
        except OSError as e:
            import errno

            self.failed = True
            why = "the reader closed the pipe" if e.errno == errno.EPIPE else (e.strerror or str(e))
            raise RldataError(f"stdout: cannot write: {why}") from None

    def write(self, text):
        return self._do(self._real.write, text)

    def flush(self):
        return self._do(self._real.flush)

    @property
    def buffer(self):
        return _Buffer(self, self._real.buffer)

    def __getattr__(self, name):
        return getattr(self._real, name)


class _Buffer:
    """``sys.stdout.buffer`` under :class:`_Stdout` (binary output: Parquet)."""

    def __init__(self, guard: _Stdout, real):
        self._guard, self._real = guard, real

    def write(self, data):
        return self._guard._do(self._real.write, data)

    def flush(self):
        return self._guard._do(self._real.flush)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null after stdout failed, so the interpreter's final flush of
    what is still buffered prints no second error (the Python docs' advice for SIGPIPE)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests capture it)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _entry() -> None:
    sys.exit(main())
