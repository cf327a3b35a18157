"""Run verifier work in a child process that can be killed: a hard time limit in any thread.

A soft timeout (:mod:`rldata.verify.deadline`) cannot stop one long C call that holds the GIL,
and math-verify does make such calls: ``\\boxed{9^{9^{9^{9}}}}`` reaches sympy's
``Integer._eval_power``, a CPython big-integer power that runs for hours.  So units are checked
in a persistent child interpreter (started once per process, on first use, ~1-2 s: it imports the
verifiers' libraries) which receives a batch of units and streams back one result per unit.  The
parent waits for each result with a deadline; past it, or if the child dies (segfault,
``os._exit``, out of memory), the parent kills the child, gives that one unit an error verdict,
starts a fresh child and resumes with the next unit.  The child also applies the soft timeout
itself (it runs units on its main thread, where ``SIGALRM`` works), so ordinary slow checks are
cut short without a restart.

The child is started with ``subprocess`` (not ``multiprocessing``: no re-import of the caller's
``__main__``, which in a Ray worker or under pytest is someone else's script) and gets the
caller's ``sys.path``, so verifiers registered at run time from importable modules work in it.
It exits when the parent goes away: end of file on its input when idle, and on Linux a
parent-death signal even while it is stuck (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rldata.heavy import ray
from rldata.verify.base import Verdict
from rldata.verify.run import prepare_verifiers, run_units_here

__all__ = ["START_TIMEOUT_S", "Isolate", "dump_factories", "kill_after_s", "shared_isolate"]

START_TIMEOUT_S = 120.0  # child start + verifier preparation (imports) on a loaded machine
_HEADER = 8


def kill_after_s(timeout_s: float | None) -> float:
    """Hard limit per unit: the child's own soft timeout gets the first chance."""
    t = timeout_s if timeout_s is not None and timeout_s > 0 else 60.0
    return t + max(1.0, 0.5 * t)


def dump_factories(factories: Mapping[str, Callable]) -> bytes:
    """Pickle verifier factories so that a process without the caller's ``sys.path`` can load them.

    rldata's own verifiers go by reference (always importable); others by value (with Ray's
    cloudpickle), because a verifier defined in a script, a notebook or a test module cannot be
    imported by name in a Ray worker or in the verifier process.
    """
    mods = {f.__module__ for f in factories.values()}
    by_value = [
        sys.modules[m] for m in mods if m in sys.modules and m != "__main__" and m.split(".")[0] != "rldata"
    ]
    for m in by_value:
        ray.cloudpickle.register_pickle_by_value(m)
    try:
        return ray.cloudpickle.dumps(dict(factories), protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        for m in by_value:
            ray.cloudpickle.unregister_pickle_by_value(m)


def _send(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(_HEADER, "little") + data)
    while view:
        view = view[os.write(fd, view) :]


class _Reader:
    """Length-prefixed pickles from a pipe, each read bounded by a deadline."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, bytearray()

    def _fill(self, n: int, until: float | None) -> bool:
        """Read until ``n`` bytes are buffered; False on timeout; EOFError when the writer is gone."""
        while len(self.buf) < n:
            wait = None if until is None else until - time.monotonic()
            if wait is not None and wait <= 0:
                return False
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                return False
            chunk = os.read(self.fd, max(65536, n - len(self.buf)))
            if not chunk:
                raise EOFError("pipe closed")
            self.buf += chunk
        return True

    def recv(self, timeout_s: float | None) -> tuple[bool, Any]:
        """(True, message) or (False, None) on timeout."""
        until = None if timeout_s is None else time.monotonic() + timeout_s
        if not self._fill(_HEADER, until):
            return False, None
        size = int.from_bytes(self.buf[:_HEADER], "little")
        # The child writes a message in one go: once its header is here, the rest follows promptly.
        if not self._fill(_HEADER + size, None if until is None else max(until, time.monotonic() + 30)):
            return False, None
        data = bytes(self.buf[_HEADER : _HEADER + size])
        del self.buf[: _HEADER + size]
        return True, pickle.loads(data)


class Isolate:
    """One child interpreter; :meth:`run` verifies units in it, one at a time, in order."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._reader: _Reader | None = None
        self._lock = threading.Lock()  # one batch at a time through the child
        self.restarts = 0  # children killed or lost (for tests and stats)

    def _start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["RLDATA_ISOLATE_PARENT"] = str(os.getpid())
        # Started from one long-lived thread: Linux sends the parent-death signal when the *thread*
        # that forked the child ends, and callers' threads (a pool's) come and go.
        self._proc = (
            _spawner()
            .submit(
                subprocess.Popen,
                [sys.executable, "-m", "rldata.verify.isolate"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                close_fds=True,
            )
            .result()
        )
        self._reader = _Reader(self._proc.stdout.fileno())

    def _kill(self) -> int | None:
        proc, self._proc, self._reader = self._proc, None, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        return proc.wait()

    def close(self) -> None:
        with self._lock:
            self._kill()

    def run(
        self,
        units: Sequence[Any],
        factories: Mapping[str, Callable] | None,
        *,
        timeout_s: float | None,
    ) -> list[list[Verdict]]:
        """Verdicts per unit; a unit that hangs or kills the child gets an error verdict."""
        with self._lock:
            return self._run(list(units), dict(factories or {}), timeout_s)

    def warm(self, factories: Mapping[str, Callable]) -> str | None:
        """Start the child and prepare ``factories``' verifiers (imports) now, not on the first
        batch; the reason when no child could start.  A job calls it while its engines load."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return None
            return self._hand_over([], dict(factories), None)

    def _run(self, units: list, factories: dict, timeout_s: float | None) -> list[list[Verdict]]:
        results: list[list[Verdict]] = []
        hard = kill_after_s(timeout_s)
        while len(results) < len(units):
            rest = units[len(results) :]
            err = self._hand_over(rest, factories, timeout_s)
            if err is not None and self._hand_over(rest, factories, timeout_s) is not None:
                # Twice no child could take these units (it cannot start, or they cannot be sent):
                # every remaining unit gets the error, rather than one restart per unit.
                results.extend([_failure(u, err)] for u in rest)
                break
            for u in rest:
                try:
                    ok, msg = self._reader.recv(hard)
                except EOFError:
                    code = self._kill()
                    self.restarts += 1
                    results.append([_failure(u, f"verifier process died (exit code {code})")])
                    break
                if not ok:
                    self._kill()
                    self.restarts += 1
                    results.append([_failure(u, f"timeout after {hard:g}s (verifier process killed)")])
                    break
                results.append(msg)
        return results

    def _hand_over(self, units: list, factories: dict, timeout_s: float | None) -> str | None:
        """Send a batch to a live child and wait until it is ready; the reason when that failed."""
        try:
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._start()
            _send(self._proc.stdin.fileno(), (dump_factories(factories), units, timeout_s))
            ok, msg = self._reader.recv(START_TIMEOUT_S)
            if not ok:
                raise EOFError("the verifier process did not get ready")
            if msg != "ready":
                raise RuntimeError(msg)
        except (OSError, EOFError, RuntimeError, pickle.PickleError, AttributeError, TypeError) as e:
            self._kill()
            self.restarts += 1
            return f"verifier process unavailable: {type(e).__name__}: {str(e)[:200]}"
        return None


def _failure(unit: Any, error: str) -> Verdict:
    return Verdict.failure(error, extracted=unit.payload if unit.two_phase else None)


_SHARED: Isolate | None = None
_SHARED_LOCK = threading.Lock()
_SPAWNER: ThreadPoolExecutor | None = None


def _spawner() -> ThreadPoolExecutor:
    global _SPAWNER
    with _SHARED_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rldata-verify-spawner")
        return _SPAWNER


def shared_isolate() -> Isolate:
    """The process-wide child (started on first use, reused by every later call)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = Isolate()
            atexit.register(_SHARED.close)
        return _SHARED


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies, even mid-hang (no Python code needed)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass  # elsewhere: end of file on stdin still stops an idle child
    if os.getppid() != int(os.environ.get("RLDATA_ISOLATE_PARENT", os.getppid())):
        os._exit(0)  # the parent died before prctl took effect


def _child_main() -> None:
    _die_with_parent()
    out = os.dup(1)
    os.dup2(2, 1)  # a verifier's print() must not corrupt the result stream
    reader = _Reader(0)
    while True:
        try:
            _, (blob, units, timeout_s) = reader.recv(None)
        except EOFError:
            return  # the parent is gone
        try:
            factories = pickle.loads(blob)
        except Exception as e:  # noqa: BLE001 - reported to the parent, which fails these units
            _send(out, f"cannot load the verifiers: {type(e).__name__}: {str(e)[:200]}")
            continue
        prepare_verifiers(set(factories) | {u.verifier for u in units}, factories)
        _send(out, "ready")
        for u in units:
            _send(out, run_units_here([u], timeout_s=timeout_s, factories=factories)[0])


if __name__ == "__main__":
    _child_main()
