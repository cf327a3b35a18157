"""Time limits for verifier calls, in any thread.

math-verify 0.9.0 bounds its own work with ``signal.alarm`` (whole seconds, main thread only: in
any other thread ``parse``/``verify`` raise ValueError), and with ``raise_on_error=False`` a
timed-out comparison comes back as a plain ``False``: a silent 0.  So rldata calls math-verify
with its timeouts off and bounds the whole verifier call itself, with :func:`call_with_deadline`:

- main thread (a script, a Ray task: Ray runs tasks on the worker's main thread): ``SIGALRM`` via
  ``setitimer`` (sub-second; a timer that was already set is given back what is left of it);
- any other thread: one watchdog thread injects the exception into the late thread with
  ``PyThreadState_SetAsyncExc``.

Both raise :class:`VerifierTimeout` at the next Python bytecode, and again every
:data:`REFIRE_S` until the call returns, in case some library swallows it.  Neither can interrupt
one long C call that holds the GIL (a huge integer power, a catastrophic ``re`` match): the Ray
path (:mod:`rldata.verify.parallel`) adds a hard, process-level limit for that.

Why a function and not a context manager: an asynchronous exception can land anywhere in Python
code, including at the start of a context manager's ``__exit__``, which would then never disarm
the timer.  Here arming and disarming sit in one frame, and the disarm retries until it is done.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import queue
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["REFIRE_S", "VerifierTimeout", "call_with_deadline"]

REFIRE_S = 0.25  # re-raise this often if the first VerifierTimeout was swallowed
T = TypeVar("T")


class VerifierTimeout(BaseException):
    """Raised inside a call that ran past its deadline.

    A BaseException, like math-verify's own TimeoutException, so the ``except Exception`` blocks in
    math-verify and sympy let it through instead of turning it into a "not equal".
    """


def call_with_deadline(seconds: float | None, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, raising :class:`VerifierTimeout` if it runs past ``seconds``."""
    if seconds is None or seconds <= 0:
        return fn(*args, **kwargs)
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return _with_alarm(seconds, fn, args, kwargs)
    watchdog = _watchdog()
    token = watchdog.new_token()
    try:  # arm inside the try: a very short deadline can go off right after arming
        watchdog.arm(token, threading.get_ident(), seconds)
        return fn(*args, **kwargs)
    finally:
        late = None
        while True:  # a timeout may land inside disarm (it went off as fn returned): finish it
            try:
                watchdog.disarm(token)
                break
            except VerifierTimeout as e:
                late = e
        if late is not None:
            raise late


def _on_alarm(signum, frame):
    raise VerifierTimeout("deadline passed")


def _with_alarm(seconds: float, fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
    t0 = time.monotonic()
    old_delay, old_interval = signal.getitimer(signal.ITIMER_REAL)
    old_handler = signal.getsignal(signal.SIGALRM)
    try:  # arm inside the try: a very short deadline can go off right after arming
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds, REFIRE_S)
        return fn(*args, **kwargs)
    finally:
        late = None
        while True:  # same as the watchdog path: the alarm may go off while we disarm it
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old_handler if old_handler is not None else signal.SIG_DFL)
                break
            except VerifierTimeout as e:
                late = e
        if old_delay > 0:  # someone else's timer was running: give it back what is left of it
            left = max(old_delay - (time.monotonic() - t0), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)
        if late is not None:
            raise late


class _Watchdog:
    """One daemon thread serving the deadlines of every non-main thread.

    The caller side (arm, disarm) uses only C-level primitives (a plain lock, heapq, a SimpleQueue):
    an asynchronous exception cannot leave them half-acquired, as it could a Python-level
    ``threading.Condition``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake: queue.SimpleQueue = queue.SimpleQueue()
        self._heap: list[tuple[float, int]] = []  # (when, token)
        self._armed: dict[int, list] = {}  # token -> [thread id, fired]
        self._tokens = itertools.count()
        threading.Thread(target=self._run, name="rldata-verify-watchdog", daemon=True).start()

    def new_token(self) -> int:
        return next(self._tokens)

    def arm(self, token: int, thread_id: int, seconds: float) -> None:
        with self._lock:
            self._armed[token] = [thread_id, False]
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
        self._wake.put(None)

    def disarm(self, token: int) -> None:
        """Idempotent, so it can be retried after a timeout landed inside it."""
        with self._lock:
            entry = self._armed.pop(token, None)
            if entry is not None and entry[1]:
                # Fired: the exception is being unwound now or is still pending; clear a pending one
                # so it cannot go off later in unrelated code.
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(entry[0]), None)

    def _run(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                while self._heap and (self._heap[0][1] not in self._armed or self._heap[0][0] <= now):
                    _, token = heapq.heappop(self._heap)
                    entry = self._armed.get(token)
                    if entry is None:
                        continue  # disarmed in time
                    entry[1] = True
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(entry[0]), ctypes.py_object(VerifierTimeout)
                    )
                    heapq.heappush(self._heap, (now + REFIRE_S, token))
                    break  # the re-pushed entry is now the earliest or later; recompute
                wait = self._heap[0][0] - now if self._heap else None
            try:
                self._wake.get(timeout=max(wait, 0.0) if wait is not None else None)
            except queue.Empty:
                pass


_WATCHDOG: _Watchdog | None = None
_WATCHDOG_LOCK = threading.Lock()


def _watchdog() -> _Watchdog:
    global _WATCHDOG
    if _WATCHDOG is None:
        with _WATCHDOG_LOCK:
            if _WATCHDOG is None:
                _WATCHDOG = _Watchdog()
    return _WATCHDOG
