"""call_with_deadline: the soft timeout, in the main thread (SIGALRM) and in other threads."""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rldata.verify.deadline import REFIRE_S, VerifierTimeout, call_with_deadline


def _spin(seconds):
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        pass
    return "done"


def _timed(limit, seconds):
    t0 = time.monotonic()
    try:
        return call_with_deadline(limit, _spin, seconds), time.monotonic() - t0
    except VerifierTimeout:
        return "timeout", time.monotonic() - t0


def test_main_thread():
    assert threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGALRM)
    assert _timed(2.0, 0.05)[0] == "done"
    out, secs = _timed(0.2, 10)
    assert out == "timeout" and secs < 2.0
    assert signal.getsignal(signal.SIGALRM) is before  # handler restored
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # nothing left armed


def test_other_threads():
    with ThreadPoolExecutor(3) as ex:
        results = list(ex.map(lambda a: _timed(*a), [(2.0, 0.05), (0.2, 10), (0.3, 10)]))
    assert results[0][0] == "done"
    assert [r[0] for r in results[1:]] == ["timeout", "timeout"]
    assert all(r[1] < 3.0 for r in results[1:])


def test_no_limit():
    assert call_with_deadline(None, _spin, 0.01) == "done"
    assert call_with_deadline(0, _spin, 0.01) == "done"


def test_swallowed_timeout_is_raised_again():
    def swallow():
        try:
            _spin(10)
        except BaseException:  # noqa: BLE001, S110 - what a careless library does
            pass
        _spin(10)

    t0 = time.monotonic()
    with pytest.raises(VerifierTimeout):
        call_with_deadline(0.2, swallow)
    assert time.monotonic() - t0 < 0.2 + 4 * REFIRE_S + 1.0


@pytest.mark.parametrize("in_thread", [False, True])
def test_no_stray_timeouts_after_many_tight_deadlines(in_thread):
    """Deadlines that expire just as the call returns must never go off later in unrelated code."""

    def hammer():
        n = 0
        for _ in range(2000):
            try:
                call_with_deadline(0.0005, _spin, 0.0005)
            except VerifierTimeout:
                n += 1
        _spin(3 * REFIRE_S)  # a stray re-fire would raise here
        return n

    if in_thread:
        with ThreadPoolExecutor(1) as ex:
            n = ex.submit(hammer).result()
    else:
        n = hammer()
    assert 0 < n <= 2000


def test_foreign_timer_is_restored():
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        call_with_deadline(5.0, _spin, 0.05)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left < 0.5
        _spin(0.7)
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
