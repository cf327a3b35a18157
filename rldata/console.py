"""Logs and progress on stderr (stdout is for data): the one progress facility every job calls.

Three modes, picked once per process from stderr and ``--quiet`` (:func:`configure`):

- ``rich`` (stderr is a terminal): one live display at the bottom of the terminal.  A :func:`stage`
  ("starting Ray", "loading the model on 2 engines") is a spinner with its elapsed time; a
  :func:`progress` bar shows done/total, rate and ETA.  When one ends it leaves one line behind
  ("✓ starting Ray  7.1 s", "sampling: 3000/3000 tasks in 20.1 s, 149 tasks/s") and the live area
  shrinks; log lines print above it.
- ``plain`` (stderr is a pipe or a file: CI logs, tests): no bar and no spinner.  A stage prints one
  line as it starts, a bar a line at most every 10 s (with rate and ETA) and one final line.
- ``off`` (``rldata --quiet``, or ``RLDATA_QUIET=1``): no progress, no stage and no informational
  line; warnings (lines starting ``warning``) and errors still print.

Nothing here writes to stdout.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn
from rich.text import Text

__all__ = ["configure", "err", "log", "mode", "progress", "quiet", "stage", "warn"]

err = Console(stderr=True, highlight=False, soft_wrap=True)

PLAIN_EVERY_S = 10.0  # plain mode: at most one progress line per bar this often
_LOCK = threading.RLock()
_STATE: dict = {"quiet": None, "live": None, "users": 0}


def configure(*, quiet: bool | None = None) -> None:
    """Set the mode for this process (the CLI's ``--quiet``); None: ``$RLDATA_QUIET``."""
    _STATE["quiet"] = quiet


def quiet() -> bool:
    q = _STATE["quiet"]
    return bool(q) if q is not None else os.environ.get("RLDATA_QUIET", "") not in ("", "0")


def mode() -> str:
    """``off`` (quiet), ``rich`` (stderr is a terminal) or ``plain``."""
    if quiet():
        return "off"
    return "rich" if err.is_terminal and not err.is_dumb_terminal else "plain"


def log(msg: str) -> None:
    """One log line on stderr (silent under ``--quiet`` unless it is a warning)."""
    if quiet() and not msg.lstrip().lower().startswith("warning"):
        return
    err.print(msg, markup=False)


def warn(msg: str) -> None:
    """One ``warning: ...`` line on stderr, printed under ``--quiet`` too."""
    log(f"warning: {msg}")


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(round(s), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def _rate(done: float, elapsed: float, unit: str) -> str:
    r = done / elapsed if elapsed > 0 else 0.0
    return f"{r:.3g} {unit}/s" if r >= 1 or r == 0 else f"{1 / r:.3g} s/{unit.rstrip('s') or unit}"


class _Stats(ProgressColumn):
    """A stage: its elapsed seconds.  A bar: done/total unit, rate, ETA and its extra fields."""

    def render(self, task) -> Text:
        elapsed = task.elapsed or 0.0
        if task.fields.get("kind") == "stage":
            return Text(_seconds(elapsed), style="dim")
        unit = task.fields.get("unit", "")
        tot = "?" if task.total is None else f"{task.total:g}"
        parts = [f"{task.completed:g}/{tot} {unit}", _rate(task.completed, elapsed, unit)]
        if task.total and task.completed and task.completed < task.total:
            eta = elapsed * (task.total - task.completed) / task.completed
            parts.append(f"ETA {_seconds(eta)}")
        if task.fields.get("extra"):
            parts.append(task.fields["extra"])
        return Text("  ".join(parts))


class _Bar(BarColumn):
    def render(self, task):
        return Text("") if task.fields.get("kind") == "stage" else super().render(task)


def _live() -> Progress:
    """The one live display (started by its first user, stopped when its last one ends)."""
    with _LOCK:
        if _STATE["live"] is None:
            prog = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                _Bar(bar_width=30),
                _Stats(),
                console=err,
                transient=True,
                refresh_per_second=4,
                redirect_stdout=False,  # stdout carries data: never touched
            )
            prog.start()
            _STATE["live"] = prog
        _STATE["users"] += 1
        return _STATE["live"]


def _release(task_id, line: str | None) -> None:
    with _LOCK:
        prog = _STATE["live"]
        prog.remove_task(task_id)
        if line:
            prog.console.print(line, markup=False, highlight=False)
        _STATE["users"] -= 1
        if _STATE["users"] == 0:
            prog.stop()
            _STATE["live"] = None


class _NoStage:
    def update(self, text: str) -> None:
        pass


class _PlainStage:
    def __init__(self, name: str):
        self.name = name

    def update(self, text: str) -> None:
        log(f"{self.name}: {text}")


class _RichStage:
    def __init__(self, prog: Progress, task_id, name: str):
        self.prog, self.task_id, self.name = prog, task_id, name

    def update(self, text: str) -> None:
        self.prog.update(self.task_id, description=f"{self.name} ({text})")


@contextmanager
def stage(name: str, *, done: str | None = None):
    """A named start-up stage: ``with stage("starting Ray"): ...``; ``s.update("1/2 ready")`` says
    where it is.  On a terminal a spinner, then ``✓ NAME  7.1 s`` (``done`` replaces NAME in that
    line); in a log one line as it starts; nothing under ``--quiet``."""
    m = mode()
    if m == "off":
        yield _NoStage()
        return
    if m == "plain":
        log(f"{name} ...")
        yield _PlainStage(name)
        return
    prog = _live()
    tid = prog.add_task(name, total=None, kind="stage")
    t0 = time.monotonic()
    ok = False
    try:
        yield _RichStage(prog, tid, name)
        ok = True
    finally:
        mark = "✓" if ok else "✗"
        _release(tid, f"{mark} {done or name}  {_seconds(time.monotonic() - t0)}")


class _Progress:
    """What ``progress()`` yields: ``advance(n, note=..., **extra)``.  ``extra`` key=value pairs are
    shown with the bar and in its final line; ``note`` (what it is at now) only while it runs."""

    def __init__(self, desc: str, total: int | None, unit: str):
        self.desc, self.total, self.unit = desc, total, unit
        self.done, self.t0, self.extra, self.note = 0, time.monotonic(), "", ""

    def advance(self, n: int = 1, *, note: str | None = None, **extra) -> None:
        self.done += n
        if extra:
            self.extra = " ".join(f"{k}={v}" for k, v in extra.items())
        if note is not None:
            self.note = note
        self._show()

    def shown(self) -> str:
        return " ".join(x for x in (self.extra, self.note) if x)

    def _show(self) -> None:
        pass

    def final_line(self) -> str:
        elapsed = time.monotonic() - self.t0
        tot = f"/{self.total}" if self.total is not None else ""
        more = f", {self.extra}" if self.extra else ""
        return (
            f"{self.desc}: {self.done}{tot} {self.unit} in {_seconds(elapsed)}, "
            f"{_rate(self.done, elapsed, self.unit)}{more}"
        )


class _Quiet(_Progress):
    pass


class _Plain(_Progress):
    """Progress as log lines, at most one every ``PLAIN_EVERY_S`` seconds (for CI logs and pipes)."""

    def __init__(self, desc: str, total: int | None, unit: str):
        super().__init__(desc, total, unit)
        self.last = self.t0

    def _show(self) -> None:
        now = time.monotonic()
        if now - self.last < PLAIN_EVERY_S or (self.total is not None and self.done >= self.total):
            return  # the last line is the final one
        self.last = now
        elapsed = now - self.t0
        tot = f"/{self.total}" if self.total is not None else ""
        eta = ""
        if self.total and 0 < self.done < self.total:
            eta = f", ETA {_seconds(elapsed * (self.total - self.done) / self.done)}"
        more = f" {self.shown()}" if self.shown() else ""
        log(f"{self.desc}: {self.done}{tot} {self.unit} ({_rate(self.done, elapsed, self.unit)}{eta}){more}")


class _Rich(_Progress):
    def __init__(self, prog: Progress, desc: str, total: int | None, unit: str):
        super().__init__(desc, total, unit)
        self.prog = prog
        self.task_id = prog.add_task(desc, total=total, kind="bar", unit=unit, extra="")

    def _show(self) -> None:
        self.prog.update(self.task_id, completed=self.done, extra=self.shown())


@contextmanager
def progress(desc: str, total: int | None = None, unit: str = "items"):
    """``with progress("sampling", total=n, unit="tasks") as p: p.advance(k, reward="0.41")``: a bar
    with rate and ETA on a terminal, periodic lines in a log, then one final line; nothing under
    ``--quiet``."""
    m = mode()
    if m == "off":
        yield _Quiet(desc, total, unit)
        return
    if m == "plain":
        p = _Plain(desc, total, unit)
        yield p
        log(p.final_line())
        return
    prog = _live()
    p = _Rich(prog, desc, total, unit)
    line = None
    try:
        yield p
        line = p.final_line()
    finally:
        _release(p.task_id, line or f"✗ {p.final_line()}")
