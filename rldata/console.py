"""Logs and progress on stderr (stdout is for data): a rich bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

__all__ = ["err", "log", "progress"]

err = Console(stderr=True, highlight=False, soft_wrap=True)


def log(msg: str) -> None:
    """One log line on stderr."""
    err.print(msg, markup=False)


class _Plain:
    """Progress as log lines, at most one every ``every`` seconds (for CI logs and pipes)."""

    def __init__(self, desc: str, total: int | None, unit: str, every: float = 10.0):
        self.desc, self.total, self.unit, self.every = desc, total, unit, every
        self.done, self.t0, self.last = 0, time.monotonic(), 0.0

    def advance(self, n: int = 1, **extra) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every or (self.total is not None and self.done >= self.total):
            self.last = now
            rate = self.done / max(now - self.t0, 1e-9)
            tot = f"/{self.total}" if self.total is not None else ""
            more = "".join(f" {k}={v}" for k, v in extra.items())
            log(f"{self.desc}: {self.done}{tot} {self.unit} ({rate:.1f}/s){more}")


class _Rich:
    def __init__(self, prog: Progress, task, unit: str):
        self.prog, self.task, self.unit = prog, task, unit
        self.done, self.t0 = 0, time.monotonic()

    def advance(self, n: int = 1, **extra) -> None:
        self.done += n
        rate = self.done / max(time.monotonic() - self.t0, 1e-9)
        text = " ".join([f"{rate:.1f} {self.unit}/s"] + [f"{k}={v}" for k, v in extra.items()])
        self.prog.update(self.task, advance=n, extra=text)


@contextmanager
def progress(desc: str, total: int | None = None, unit: str = "items"):
    """``with progress("sampling", total=n, unit="tasks") as p: p.advance(k)``."""
    if sys.stderr.isatty():
        prog = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[progress.percentage]{task.percentage:>3.0f}%"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[extra]}"),
            console=err,
            transient=False,
        )
        with prog:
            yield _Rich(prog, prog.add_task(desc, total=total, extra=""), unit)
    else:
        yield _Plain(desc, total, unit)
