"""The background writer: batches of steps per commit, in order, flushes, and failures."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from rldata.trainer.writer import Writer


class _Sink:
    def __init__(self, delay: float = 0.0):
        self.batches: list[list] = []
        self.delay = delay
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, items):
        self.gate.wait()
        time.sleep(self.delay)
        self.batches.append(list(items))


def test_items_submitted_within_the_interval_share_one_commit_in_order():
    sink = _Sink()
    w = Writer(sink, interval_s=30.0)
    w.submit(0)  # the first commit happens at once (no commit before it)
    deadline = time.monotonic() + 10
    while not sink.batches and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(1, 6):
        w.submit(i)
    time.sleep(0.2)
    assert sink.batches == [[0]]  # the other five wait out the interval
    w.flush()  # ... unless a checkpoint needs them now
    assert sink.batches == [[0], [1, 2, 3, 4, 5]] and w.commits == 2
    w.close()


def test_interval_zero_commits_as_soon_as_items_arrive_and_close_drains():
    sink = _Sink()
    sink.gate.clear()  # hold the first commit: what arrives meanwhile goes into the next one
    w = Writer(sink, interval_s=0.0)
    w.submit("a")
    time.sleep(0.1)
    w.submit("b")
    w.submit("c")
    sink.gate.set()
    w.close()
    assert sink.batches == [["a"], ["b", "c"]]
    with pytest.raises(RuntimeError, match="closed"):
        w.submit("d")


def test_a_failed_commit_skips_the_rest_and_is_raised():
    calls = []

    def commit(items):
        calls.append(list(items))
        if items[0] == 1:
            raise ValueError("disk full")

    w = Writer(commit, interval_s=0.0)
    w.submit(1)
    with pytest.raises(ValueError, match="disk full"):
        w.flush()
    with pytest.raises(ValueError, match="disk full"):
        w.submit(2)
    with pytest.raises(ValueError, match="disk full"):
        w.close()
    assert calls == [[1]]


def test_the_interval_is_kept_between_commits():
    sink = _Sink()
    w = Writer(sink, interval_s=0.3)
    ends = []
    for i in range(3):
        w.submit(i)
        n = len(sink.batches)
        while len(sink.batches) == n:
            time.sleep(0.005)
        ends.append(time.monotonic())
    w.close()
    assert sink.batches == [[0], [1], [2]]
    assert min(b - a for a, b in itertools.pairwise(ends)) >= 0.28
