"""The trainer's background writer: steps' rows go to the store in a thread, several steps per commit.

Why batch: one step's write-back is four Delta commits (trajectories, verifications, ledger, metrics),
~0.13 s of CPU on the bundled model whatever the number of rows.  In a thread it is off the step's
path, but on two cores it runs beside the engine and the learner and slows both: with it, the tiny
benchmark's sync step took 0.30 s, without it 0.16 s (weight load 0.11 s against 0.04 s).  The rows of
several steps in one commit cost about what one step's did.

So the writer commits whatever has been submitted, at most once per ``interval_s`` (measured from the
end of the previous commit): items submitted meanwhile wait and go in the next commit, together and
in submission order.  ``flush`` commits at once and waits (a checkpoint promises its steps' rows are in
the store), and so does ``close``.  Rows therefore land up to ``interval_s`` plus one commit later than
their step ends; nothing is lost on a kill that a checkpoint covered, since resume redoes every step
after the checkpoint.  After a failure the remaining items are skipped (the order of commits is what
makes resume safe) and the error is raised by the next ``submit``, ``flush`` or ``close``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rldata.errors import ConfigError

__all__ = ["Writer"]


class Writer:
    """``commit(items)`` in a background thread for the items submitted so far, at most once per
    ``interval_s`` (0: as soon as an item is there, one commit per burst of submissions)."""

    def __init__(self, commit: Callable[[list[Any]], None], *, interval_s: float = 0.0):
        if interval_s < 0:
            raise ConfigError(f"interval_s must be >= 0, got {interval_s}", field="interval_s")
        self._commit, self.interval_s = commit, interval_s
        self._cond = threading.Condition()
        self._pending: list[Any] = []
        self._submitted = self._done = 0
        self._urgent = 0  # flush/close calls waiting: commit now, do not wait out the interval
        self._closed = False
        self._error: BaseException | None = None
        self.commits = 0  # commit calls made (for tests and metrics)
        self._thread = threading.Thread(target=self._run, name="rldata-writeback", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last_end = -float("inf")
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:  # closed and drained
                    return
                deadline = last_end + self.interval_s
                while not self._urgent and not self._closed and (left := deadline - time.monotonic()) > 0:
                    self._cond.wait(left)
                items, self._pending = self._pending, []
            try:
                if self._error is None:
                    self.commits += 1
                    self._commit(items)
            except BaseException as e:  # noqa: BLE001 - handed to the main thread by submit/flush/close
                self._error = e
            last_end = time.monotonic()
            with self._cond:
                self._done += len(items)
                self._cond.notify_all()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def submit(self, item: Any) -> None:
        self._raise()
        with self._cond:
            if self._closed:
                raise RuntimeError("the writer is closed")
            self._pending.append(item)
            self._submitted += 1
            self._cond.notify_all()

    def flush(self) -> None:
        """Commit everything submitted, now, and wait for it; raise the first failure."""
        with self._cond:
            self._urgent += 1
            self._cond.notify_all()
            try:
                while self._done < self._submitted:
                    self._cond.wait()
            finally:
                self._urgent -= 1
        self._raise()

    def close(self) -> None:
        """Commit what is left and stop the thread; raise the first failure."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        self._raise()
