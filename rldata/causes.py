"""Root causes of errors that cross a process boundary, as one line, and full traces into a log file.

Ray hands a driver an engine's or learner's error wrapped: a ``RayTaskError`` whose text is the
remote traceback (ANSI colours included) and whose first line names only the actor method, or an
``ActorDiedError`` whose message embeds the constructor's traceback as text.  The one line a user
reads must name what went wrong ("Unsupported CPU attention configuration: head_dim=16"), not
where: :func:`root_cause` unwraps Ray's wrappers and :func:`describe` writes the line.  The whole
trace still matters to whoever debugs it: :func:`write_trace` puts it in a log file.

Ray is never imported here (the CLI imports this on every error): its exceptions are recognised by
their module.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
import traceback
from pathlib import Path

from rldata._remote import one_line, redact
from rldata.errors import RldataError

__all__ = ["describe", "hint", "import_hint", "root_cause", "write_trace"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_WHERE = re.compile(r"ray::([\w.]+)\(\)")
# the last "pkg.Type: message" line of a traceback rendered as text
_LAST = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Z][\w]*(?:Error|Exception|Exit|Interrupt|Warning)?): (.+)$")

# Known causes whose message alone does not say what to do.
_HINTS = (
    (
        "Unsupported CPU attention configuration",
        "vLLM on CPU runs only models whose head_dim (hidden_size / num_attention_heads) is "
        + "one of 32, 64, 80, 96, 112, 128, 256",
    ),
)


def _is_ray(exc: BaseException) -> bool:
    return any(c.__module__.startswith("ray.") for c in type(exc).__mro__)


def root_cause(exc: BaseException) -> BaseException:
    """``exc`` with Ray's task wrappers removed: a remote error's original exception (nested tasks
    included); anything else comes back as it is."""
    seen = 0
    while _is_ray(exc) and getattr(exc, "cause", None) is not None and seen < 16:
        cause = exc.cause
        if not isinstance(cause, BaseException):
            break
        exc, seen = cause, seen + 1
    return exc


def _where(text: str) -> str | None:
    m = _WHERE.search(_ANSI.sub("", text))
    return m.group(1) if m else None


def _last_error_line(text: str) -> str | None:
    """``Type: message`` from the last such line of a traceback kept only as text."""
    for line in reversed(_ANSI.sub("", text).strip().splitlines()):
        m = _LAST.match(line.strip())
        if m:
            return f"{m.group(1)}: {m.group(2)}"
    return None


def hint(message: str) -> str | None:
    """What to do about a known cause, or None."""
    return next((h for key, h in _HINTS if key in message), None)


def describe(exc: BaseException) -> str:
    """One line: the root cause as ``Type: message`` (or the message of one of rldata's own
    errors), prefixed by the Ray actor method it came from, with a hint where one is known."""
    where = _where(str(exc)) if _is_ray(exc) else None
    cause = root_cause(exc)
    if _is_ray(cause):  # no exception object behind it: an actor's constructor failed, or it died
        text = str(cause)
        # a constructor's error, or an error Ray could not unpickle, survives only as its trace's text
        line = _last_error_line(text) if ('  File "' in text or "Traceback" in text) else None
        if line is None:
            line = f"{type(cause).__name__}: {one_line(_ANSI.sub('', text))}"
            line = re.sub(r"\s*\(pid=.*?\)", "", line)  # the actor's pid, ip and repr say nothing here
    else:
        msg = one_line(str(cause)) if str(cause).strip() else ""
        line = (
            msg if isinstance(cause, RldataError) and msg else f"{type(cause).__name__}: {msg}".rstrip(": ")
        )
    if where and where not in line:
        line = f"{where}: {line}"
    more = hint(line)
    return f"{line} ({more})" if more else line


def _log_dir() -> Path:
    return Path(os.environ.get("RLDATA_LOG_DIR") or Path(tempfile.gettempdir()) / "rldata-logs")


def write_trace(exc: BaseException, argv: list[str] | None = None) -> Path | None:
    """Write ``exc``'s full trace (and, for a remote error, the remote traceback Ray kept) to a new
    file under ``$RLDATA_LOG_DIR`` (default: the temp dir's ``rldata-logs``); returns its path, or
    None when no file could be written (the one-line error must not fail on that)."""
    try:
        d = _log_dir()
        d.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
        path = d / f"rldata-{stamp}-{os.getpid()}.log"
        lines = [f"rldata {' '.join(argv or [])}\n\n"]
        lines += traceback.format_exception(exc)
        body = redact(_ANSI.sub("", "".join(lines)))  # an object-store error may quote a credential
        with open(path, "w", encoding="utf-8") as f:
            f.write(body)
        return path
    except OSError:
        return None


def import_hint(exc: BaseException) -> str:
    """For a ``module:Class`` that does not import: how to make it importable ("" when not a missing
    module).  rldata does not add the working directory to the import path itself: Ray's workers
    and the sandbox import the class too, and they see ``PYTHONPATH``, not the driver's ``sys.path``."""
    name = getattr(exc, "name", None)
    if not isinstance(exc, ModuleNotFoundError) or not name:
        return ""
    top = name.split(".")[0]
    here = Path.cwd()
    if (here / f"{top}.py").is_file() or (here / top / "__init__.py").is_file():
        return (
            f" ({top!r} is in the working directory, which is not on Python's import path: run with "
            "PYTHONPATH=. so that rldata and its Ray workers import it)"
        )
    return (
        f" (make {top!r} importable: pip install the package that holds it, or add its parent "
        "directory to PYTHONPATH)"
    )
